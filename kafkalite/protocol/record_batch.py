"""RecordBatch v2 (magic 2) header codec: parse, validate, assign offsets.

The broker never decodes individual records on the produce path; it works on
the 61-byte batch header only. Record-level encode/decode and compression live
in :mod:`kafkalite.protocol.records`.

Layout (all big-endian)::

    0  baseOffset int64        27 baseTimestamp int64
    8  batchLength int32       35 maxTimestamp int64
    12 partitionLeaderEpoch    43 producerId int64
    16 magic int8              51 producerEpoch int16
    17 crc uint32 (CRC-32C)    53 baseSequence int32
    21 attributes int16        57 recordsCount int32
    23 lastOffsetDelta int32   61 records...

The CRC covers attributes..end, so baseOffset and partitionLeaderEpoch can be
rewritten by the broker without recomputing it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

from kafkalite.common import structs
from kafkalite.protocol.errors import ErrorCode

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61
HEADER_SIZE = RECORDS_OFFSET
LOG_OVERHEAD = 12  # baseOffset + batchLength: what batchLength does not count

CURRENT_MAGIC = 2

# attributes bits
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

#: the v2 batch header up to the records count (HEADER_SIZE bytes), as on disk and wire
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")


class InvalidRecordBatch(Exception):
    """Base class; ``error_code`` is the Kafka error code a produce should get."""

    error_code = ErrorCode.corrupt_message


class CorruptRecordBatch(InvalidRecordBatch):
    """Bad CRC, bad lengths, truncated data."""

    error_code = ErrorCode.corrupt_message


class UnsupportedMagic(InvalidRecordBatch):
    """Legacy message formats v0/v1 are not accepted (Kafka 4 dropped them too)."""

    error_code = ErrorCode.unsupported_version


class InvalidRecord(InvalidRecordBatch):
    """Structurally valid but semantically wrong (e.g. record count mismatch)."""

    error_code = ErrorCode.invalid_record


class UnsupportedCompression(InvalidRecordBatch):
    error_code = ErrorCode.unsupported_compression_type


@dataclass(slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch on the wire and on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the batch header at ``pos``. The caller guarantees HEADER_SIZE bytes."""
    return BatchHeader(*BATCH_HEADER.unpack_from(buf, pos))


def peek_magic(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """Magic is at byte 16 in every message format (v0, v1 and v2)."""
    return buf[pos + MAGIC_OFFSET]


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    mv = memoryview(buf)
    return crc32c.crc32c(mv[pos + ATTRIBUTES_OFFSET : pos + size])


def iter_batch_positions(
    buf: bytes | bytearray | memoryview, start: int = 0, end: int | None = None
) -> Iterator[tuple[int, int]]:
    """Yield ``(position, size)`` of each complete batch; stop at a partial tail."""
    if end is None:
        end = len(buf)
    pos = start
    while pos + LOG_OVERHEAD <= end:
        length = structs.I32.unpack_from(buf, pos + LENGTH_OFFSET)[0]
        size = length + LOG_OVERHEAD
        if length < HEADER_SIZE - LOG_OVERHEAD or pos + size > end:
            return
        yield pos, size
        pos += size


def iter_headers(
    buf: bytes | bytearray | memoryview, start: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    for pos, _size in iter_batch_positions(buf, start, end):
        yield pos, parse_header(buf, pos)


def validate_batch(
    buf: bytes | bytearray | memoryview, pos: int, size: int, *, check_crc: bool = True
) -> BatchHeader:
    """Validate one batch header (and CRC) in place; raise an InvalidRecordBatch."""
    if size < HEADER_SIZE:
        raise CorruptRecordBatch(
            f"batch of {size} bytes is smaller than the {HEADER_SIZE}-byte header"
        )
    magic = buf[pos + MAGIC_OFFSET]
    if magic != CURRENT_MAGIC:
        if magic in (0, 1):
            raise UnsupportedMagic(f"message format v{magic} is not supported; use RecordBatch v2")
        raise CorruptRecordBatch(f"invalid magic {magic}")
    h = parse_header(buf, pos)
    if h.batch_length + LOG_OVERHEAD != size:
        raise CorruptRecordBatch("batch length does not match the data")
    if check_crc and compute_crc(buf, pos, size) != h.crc:
        raise CorruptRecordBatch("CRC-32C mismatch")
    if h.records_count < 0 or h.last_offset_delta < 0:
        raise InvalidRecord("negative record count or last offset delta")
    if h.compression > 4:
        raise UnsupportedCompression(f"unknown compression codec id {h.compression}")
    if h.compression == 0 and h.records_count > 0 and h.last_offset_delta != h.records_count - 1:
        # For uncompressed batches produced by clients the deltas are dense.
        raise InvalidRecord("lastOffsetDelta does not match the record count")
    return h


@dataclass(slots=True)
class ValidatedRecords:
    """What the produce path learns from a set of batches without decoding records."""

    batches: list[tuple[int, int]]  # (position, size)
    headers: list[BatchHeader]
    record_count: int  # offsets the batches will take (sum of lastOffsetDelta+1)
    max_timestamp: int
    size: int
    #: every record was parsed and checked against the topic (the produce path's
    #: LogValidator), so the log need not decode them again for compacted topics
    records_checked: bool = False


def validate_records(buf: bytes | bytearray | memoryview) -> ValidatedRecords:
    """Validate a produce ``records`` field: whole batches only, magic 2, CRC, lengths."""
    total = len(buf)
    if total < LOG_OVERHEAD + 5:
        raise CorruptRecordBatch("records are shorter than a batch header")
    batches: list[tuple[int, int]] = []
    headers: list[BatchHeader] = []
    count = 0
    max_ts = NO_TIMESTAMP
    pos = 0
    while pos < total:
        if pos + LOG_OVERHEAD + 5 > total:
            raise CorruptRecordBatch("trailing partial batch")
        if buf[pos + MAGIC_OFFSET] in (0, 1):
            raise UnsupportedMagic(f"message format v{buf[pos + MAGIC_OFFSET]} is not supported")
        length = structs.I32.unpack_from(buf, pos + LENGTH_OFFSET)[0]
        size = length + LOG_OVERHEAD
        if length < HEADER_SIZE - LOG_OVERHEAD or pos + size > total:
            raise CorruptRecordBatch("batch length exceeds the records data")
        h = validate_batch(buf, pos, size)
        batches.append((pos, size))
        headers.append(h)
        count += h.last_offset_delta + 1
        if h.max_timestamp > max_ts:
            max_ts = h.max_timestamp
        pos += size
    return ValidatedRecords(batches, headers, count, max_ts, total)


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    structs.I64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    structs.I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, now_ms: int) -> None:
    """Mark the batch LogAppendTime with maxTimestamp=now and re-sign the CRC."""
    attrs = structs.I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    structs.I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attrs | TIMESTAMP_TYPE_MASK)
    structs.I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, now_ms)
    structs.U32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))


def assign_offsets(
    buf: bytearray | memoryview,
    validated: ValidatedRecords,
    first_offset: int,
    *,
    leader_epoch: int | None = None,
    log_append_time_ms: int | None = None,
) -> int:
    """Overwrite baseOffset (and optionally epoch/LogAppendTime) of every batch in place.

    Returns the next offset after the last assigned one.
    """
    offset = first_offset
    for (pos, size), h in zip(validated.batches, validated.headers, strict=True):
        structs.I64.pack_into(buf, pos, offset)
        h.base_offset = offset
        if leader_epoch is not None:
            structs.I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
            h.partition_leader_epoch = leader_epoch
        if log_append_time_ms is not None:
            set_log_append_time(buf, pos, size, log_append_time_ms)
            h.max_timestamp = log_append_time_ms
            h.attributes |= TIMESTAMP_TYPE_MASK
        offset += h.last_offset_delta + 1
    return offset
