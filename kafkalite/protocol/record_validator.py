"""What Kafka checks in a produced ``records`` field before it reaches the log.

Three layers, in Kafka's order:

1. ``ProduceRequest.validateRecords`` (v3+): at least one complete batch, magic 2,
   no zstd before Produce v7, exactly one batch. Trailing bytes that do not make
   a complete batch are dropped, as Kafka's log trims them.
2. ``UnifiedLog.analyzeAndValidateRecords``: a client batch starts at offset 0,
   is no larger than ``max.message.bytes``, and its CRC holds.
3. ``LogValidator``: the batch's count, offset range, control flag and sequence
   agree; its records (decompressed when compressed) are exactly ``count``
   records, and on CreateTime topics every record's timestamp lies within
   [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms].

Records are only walked, never decoded: two varints per record (length and
timestamp delta). Every error is an :class:`InvalidRecordBatch` carrying the
Kafka error code; invalid timestamps also list the offending records, which
Kafka returns as the response's ``record_errors``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkalite.protocol import record_batch as rb
from kafkalite.protocol.compression import decompress
from kafkalite.protocol.record_batch import (
    BatchHeader,
    CorruptRecordBatch,
    InvalidRecord,
    InvalidRecordBatch,
    UnsupportedCompression,
    UnsupportedMagic,
)

_I32 = struct.Struct(">i")
_LONG_MAX = 2**63 - 1
#: Kafka's LegacyRecord.RECORD_OVERHEAD_V0, the smallest size a batch may claim
_MIN_RECORD_OVERHEAD = 14
#: bytes up to and including the magic byte
_HEADER_SIZE_UP_TO_MAGIC = 17
ZSTD = 4


class MessageTooLarge(InvalidRecordBatch):
    error_code = 10  # MESSAGE_TOO_LARGE


class InvalidTimestamp(InvalidRecordBatch):
    """One or more records' timestamps are out of range; ``record_errors`` says which."""

    error_code = 32  # INVALID_TIMESTAMP

    def __init__(self, record_errors: list[tuple[int, str]]) -> None:
        super().__init__("One or more records have been rejected due to invalid timestamp")
        self.record_errors = record_errors


@dataclass(frozen=True, slots=True)
class TopicLimits:
    """The topic configs record validation needs."""

    max_message_bytes: int
    log_append_time: bool
    timestamp_before_max_ms: int
    timestamp_after_max_ms: int


def validate_produce_records(
    buf: bytes | bytearray | memoryview, api_version: int, limits: TopicLimits, now_ms: int
) -> int:
    """Validate one partition's produced records; return how many bytes to append.

    Raises an InvalidRecordBatch subclass with Kafka's error code.
    """
    size = check_request_records(buf, api_version)
    check_client_batch(buf, size, limits, now_ms)
    return size


def check_request_records(buf: bytes | bytearray | memoryview, api_version: int) -> int:
    """Kafka's ProduceRequest.validateRecords; returns the size of the one batch."""
    first = _next_batch_size(buf, 0)
    if first is None:
        raise InvalidRecord(
            f"Produce requests with version {api_version} must have at least one record "
            "batch per partition"
        )
    if buf[rb.MAGIC_OFFSET] != rb.CURRENT_MAGIC:
        # Kafka 4 answers INVALID_RECORD here; kafkalite keeps UNSUPPORTED_VERSION, which
        # the broker-core spec asks for (docs/status.md, "Deviations from Kafka").
        raise UnsupportedMagic(
            f"Produce requests with version {api_version} are only allowed to contain record "
            "batches with magic version 2"
        )
    attributes = (buf[rb.ATTRIBUTES_OFFSET] << 8) | buf[rb.ATTRIBUTES_OFFSET + 1]
    if api_version < 7 and attributes & rb.COMPRESSION_CODEC_MASK == ZSTD:
        raise UnsupportedCompression(
            f"Produce requests with version {api_version} are not allowed to use ZStandard "
            "compression"
        )
    if _next_batch_size(buf, first) is not None:
        raise InvalidRecord(
            f"Produce requests with version {api_version} are only allowed to contain exactly "
            "one record batch per partition"
        )
    return first


def _next_batch_size(buf: bytes | bytearray | memoryview, pos: int) -> int | None:
    """Kafka's ByteBufferLogInputStream: the next complete batch's size, or None."""
    remaining = len(buf) - pos
    if remaining < rb.LOG_OVERHEAD:
        return None
    length = _I32.unpack_from(buf, pos + rb.LENGTH_OFFSET)[0]
    if length < _MIN_RECORD_OVERHEAD:
        raise CorruptRecordBatch(
            f"Record size {length} is less than the minimum record overhead "
            f"({_MIN_RECORD_OVERHEAD})"
        )
    if remaining < _HEADER_SIZE_UP_TO_MAGIC:
        return None
    magic = buf[pos + rb.MAGIC_OFFSET]
    if magic > rb.CURRENT_MAGIC:  # also negative magics, read unsigned
        raise CorruptRecordBatch(f"Invalid magic found in record: {(magic ^ 0x80) - 0x80}")
    size = length + rb.LOG_OVERHEAD
    return size if remaining >= size else None


def check_client_batch(
    buf: bytes | bytearray | memoryview, size: int, limits: TopicLimits, now_ms: int
) -> BatchHeader:
    """The log's checks on a batch a client produced (the one at position 0)."""
    base_offset = struct.unpack_from(">q", buf, 0)[0]
    if base_offset != 0:
        raise InvalidRecord(
            f"The baseOffset of the record batch in the append should be 0, but it is {base_offset}"
        )
    if size > limits.max_message_bytes:
        raise MessageTooLarge(
            f"The record batch size in the append is {size} bytes which exceeds the maximum "
            f"configured value of {limits.max_message_bytes}."
        )
    if size < rb.HEADER_SIZE:
        raise CorruptRecordBatch(f"batch of {size} bytes is smaller than its header")
    h = rb.parse_header(buf, 0)
    if rb.compute_crc(buf, 0, size) != h.crc:
        raise CorruptRecordBatch(f"Record is corrupt (stored crc = {h.crc})")
    last = h.base_offset + h.last_offset_delta
    count_from_offsets = h.last_offset_delta + 1
    if count_from_offsets <= 0:
        raise InvalidRecord(f"Batch has an invalid offset range: [{h.base_offset}, {last}]")
    if h.records_count <= 0:
        raise InvalidRecord(f"Invalid reported count for record batch: {h.records_count}")
    if count_from_offsets != h.records_count:
        raise InvalidRecord(
            f"Inconsistent batch offset range [{h.base_offset}, {last}] and count of records "
            f"{h.records_count}"
        )
    if h.producer_id >= 0 and h.base_sequence < 0:
        raise InvalidRecord(
            f"Invalid sequence number {h.base_sequence} in record batch with producerId "
            f"{h.producer_id}"
        )
    if h.is_control:
        raise InvalidRecord("Clients are not allowed to write control records")
    if h.compression > ZSTD:
        raise UnsupportedCompression(f"unknown compression codec id {h.compression}")
    if h.compression:
        data: bytes | bytearray | memoryview = decompress(
            h.compression, memoryview(buf)[rb.RECORDS_OFFSET : size]
        )
        start, end = 0, len(data)
    else:
        data, start, end = buf, rb.RECORDS_OFFSET, size
    min_delta, max_delta = _walk_records(data, start, end, h.records_count)
    _check_timestamps(h, data, start, end, min_delta, max_delta, limits, now_ms)
    return h


def _varint(data: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """A zigzag varint/varlong at ``pos``: (value, next position)."""
    raw = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise InvalidRecord("Found invalid record structure: varint too long")


def _walk_records(
    data: bytes | bytearray | memoryview, pos: int, end: int, count: int
) -> tuple[int, int]:
    """Step over exactly ``count`` records filling [pos, end); return the smallest and
    largest timestamp delta. Raises InvalidRecord when the count does not match."""
    lo = _LONG_MAX
    hi = -_LONG_MAX
    varint = _varint
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:  # one-byte length (records under 64 bytes)
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:  # two bytes (under 8 KiB): the common case
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                length = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                length, pos = varint(data, pos)
            rec_end = pos + length
            if length < 6 or rec_end > end:
                raise InvalidRecord(
                    "Incorrect declared batch size, premature EOF reached"
                    if rec_end > end
                    else f"Invalid record size {length}"
                )
            b = data[pos + 1]  # after the attributes byte: timestampDelta
            delta = (b >> 1) ^ -(b & 1) if b < 0x80 else varint(data, pos + 1)[0]
            if delta < lo:
                lo = delta
            if delta > hi:
                hi = delta
            pos = rec_end
    except IndexError:
        raise InvalidRecord("Incorrect declared batch size, premature EOF reached") from None
    if pos != end:
        raise InvalidRecord("Incorrect declared batch size, records still remaining in file")
    return lo, hi


def _check_timestamps(
    h: BatchHeader,
    data: bytes | bytearray | memoryview,
    start: int,
    end: int,
    min_delta: int,
    max_delta: int,
    limits: TopicLimits,
    now_ms: int,
) -> None:
    """Kafka's LogValidator.validateTimestamp over every record of the batch."""
    if not limits.log_append_time:
        if h.is_log_append_time:
            # every record carries the batch's max timestamp
            lowest = highest = h.max_timestamp
        else:
            lowest, highest = h.base_timestamp + min_delta, h.base_timestamp + max_delta
        before, after = limits.timestamp_before_max_ms, limits.timestamp_after_max_ms
        if h.base_timestamp == rb.NO_TIMESTAMP and not h.is_log_append_time:
            return  # records without a timestamp are not checked
        if now_ms - lowest <= before and highest - now_ms <= after:
            return
        errors = []
        for i, ts in enumerate(_record_timestamps(h, data, start, end)):
            if ts != rb.NO_TIMESTAMP and (now_ms - ts > before or ts - now_ms > after):
                errors.append(
                    (
                        i,
                        f"Timestamp {ts} of message with offset {i} is out of range. The "
                        f"timestamp should be within [{now_ms - before}, {now_ms + after}]",
                    )
                )
        if errors:
            raise InvalidTimestamp(errors)
    elif h.is_log_append_time:
        raise InvalidTimestamp(
            [
                (
                    i,
                    "Invalid timestamp type in message. Producer should not set timestamp "
                    "type to LogAppendTime.",
                )
                for i in range(h.records_count)
            ]
        )


def _record_timestamps(
    h: BatchHeader, data: bytes | bytearray | memoryview, pos: int, end: int
) -> list[int]:
    out = []
    while pos < end:
        length, pos = _varint(data, pos)
        delta, _ = _varint(data, pos + 1)
        out.append(h.max_timestamp if h.is_log_append_time else h.base_timestamp + delta)
        pos += length
    return out
