"""Record-level codec for RecordBatch v2: decode records, build batches, control markers.

The produce and fetch paths never come here (they work on batch headers, see
:mod:`kafkalite.protocol.record_batch`). This is for the places that need the
records themselves: the log cleaner, ``__consumer_offsets`` and
``__transaction_state``, transaction markers, ``dump-log`` and tests.

Record layout (inside the possibly compressed records section)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    keyLength varint (-1 = null) | key | valueLength varint | value
    headerCount varint | [keyLength varint | key utf-8 | valueLength varint | value]...

Header keys are decoded with ``surrogateescape`` so that a record with a
non-UTF-8 header key survives decode and re-encode byte for byte (the cleaner
must not alter records it keeps).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import crc32c

from kafkalite.common import structs
from kafkalite.protocol import record_batch as rb
from kafkalite.protocol.compression import DEFAULT_MAX_OUTPUT, compress, decompress
from kafkalite.protocol.record_batch import BatchHeader, CorruptRecordBatch
from kafkalite.protocol.varint import INT32_MAX, write_varint, write_varlong

Buffer = bytes | bytearray | memoryview
Header = tuple[str, bytes | None]

_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


@dataclass(slots=True)
class Record:
    """One record with absolute offset and timestamp (as a consumer sees it)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)
    attributes: int = 0


# --- decoding -------------------------------------------------------------------


def decode_batch(
    buf: Buffer,
    pos: int = 0,
    *,
    check_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_OUTPUT,
) -> tuple[BatchHeader, list[Record]]:
    """Decode the v2 batch at ``pos`` into its header and records.

    Offsets are ``baseOffset + offsetDelta`` (gaps allowed: compacted batches
    have them). Timestamps are ``baseTimestamp + timestampDelta``, or the batch
    ``maxTimestamp`` for every record of a LogAppendTime batch. Raises
    CorruptRecordBatch on anything malformed, UnsupportedMagic for v0/v1,
    UnsupportedCompression / DecompressedSizeExceeded from decompression.
    """
    available = len(buf) - pos
    if available < rb.HEADER_SIZE:
        raise CorruptRecordBatch(
            f"truncated batch: {available} bytes, header needs {rb.HEADER_SIZE}"
        )
    magic = buf[pos + rb.MAGIC_OFFSET]
    if magic != rb.CURRENT_MAGIC:
        if magic in (0, 1):
            raise rb.UnsupportedMagic(f"message format v{magic} is not supported")
        raise CorruptRecordBatch(f"invalid magic {magic}")
    h = rb.parse_header(buf, pos)
    size = h.batch_length + rb.LOG_OVERHEAD
    if size < rb.HEADER_SIZE:
        raise CorruptRecordBatch(f"batch length {h.batch_length} is smaller than a header")
    if size > available:
        raise CorruptRecordBatch(f"truncated batch: {available} of {size} bytes")
    if check_crc and rb.compute_crc(buf, pos, size) != h.crc:
        raise CorruptRecordBatch("CRC-32C mismatch")
    if h.records_count < 0:
        raise CorruptRecordBatch(f"negative record count {h.records_count}")
    body: Any = buf[pos + rb.RECORDS_OFFSET : pos + size]
    codec = h.attributes & rb.COMPRESSION_CODEC_MASK
    if codec and (body or h.records_count):
        body = decompress(codec, body, max_output=max_decompressed_size)
    elif not isinstance(body, bytes):
        body = bytes(body)  # indexing and slicing bytes is the fastest path below
    log_append = h.max_timestamp if h.attributes & rb.TIMESTAMP_TYPE_MASK else None
    records = _decode_records(body, h.records_count, h.base_offset, h.base_timestamp, log_append)
    return h, records


def _varlong_slow(data: bytes, pos: int) -> tuple[int, int]:
    """Multi-byte zigzag varlong; flat on purpose (it runs several times per record)."""
    b = data[pos]
    raw = b & 0x7F
    shift = 7
    pos += 1
    while b >= 0x80:
        if shift > 63:
            raise CorruptRecordBatch("bad varint in record: longer than 10 bytes")
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        shift += 7
    if raw >> 64:
        raise CorruptRecordBatch("bad varint in record: exceeds 64 bits")
    return (raw >> 1) ^ -(raw & 1), pos


def _decode_records(
    data: bytes, count: int, base_offset: int, base_ts: int, log_append_ts: int | None
) -> list[Record]:
    # One- and two-byte varints are decoded inline: they are nearly every varint in a real
    # batch, and a call per varint would double the decode time.
    records: list[Record] = []
    append = records.append
    end = len(data)
    pos = 0
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    raw = (b & 0x7F) | (b2 << 7)
                    length = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    length, pos = _varlong_slow(data, pos)
            rec_end = pos + length
            if length < 6 or rec_end > end:  # 6 = smallest possible record body
                raise CorruptRecordBatch(f"record length {length} does not fit the batch")
            attributes = data[pos]
            b = data[pos + 1]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                b2 = data[pos + 2]
                if b2 < 0x80:
                    raw = (b & 0x7F) | (b2 << 7)
                    ts_delta = (raw >> 1) ^ -(raw & 1)
                    pos += 3
                else:
                    ts_delta, pos = _varlong_slow(data, pos + 1)
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    raw = (b & 0x7F) | (b2 << 7)
                    offset_delta = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    offset_delta, pos = _varlong_slow(data, pos)
            if offset_delta < 0 or offset_delta > INT32_MAX:
                raise CorruptRecordBatch(f"invalid offset delta {offset_delta}")
            b = data[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    raw = (b & 0x7F) | (b2 << 7)
                    n = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    n, pos = _varlong_slow(data, pos)
            if n >= 0:
                if pos + n > rec_end:
                    raise CorruptRecordBatch("record key overruns the record")
                key: bytes | None = data[pos : pos + n]
                pos += n
            elif n == -1:
                key = None
            else:
                raise CorruptRecordBatch(f"invalid key length {n}")
            b = data[pos]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    raw = (b & 0x7F) | (b2 << 7)
                    n = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    n, pos = _varlong_slow(data, pos)
            if n >= 0:
                if pos + n > rec_end:
                    raise CorruptRecordBatch("record value overruns the record")
                value: bytes | None = data[pos : pos + n]
                pos += n
            elif n == -1:
                value = None
            else:
                raise CorruptRecordBatch(f"invalid value length {n}")
            b = data[pos]
            if b < 0x80:
                n_headers = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    raw = (b & 0x7F) | (b2 << 7)
                    n_headers = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    n_headers, pos = _varlong_slow(data, pos)
            headers: list[Header] = []
            if n_headers:
                if n_headers < 0 or n_headers > rec_end - pos:
                    raise CorruptRecordBatch(f"invalid header count {n_headers}")
                pos = _decode_headers(data, pos, rec_end, n_headers, headers)
            if pos != rec_end:
                raise CorruptRecordBatch(
                    f"record length {length} does not match its content ({length + pos - rec_end} bytes)"
                )
            append(
                Record(
                    base_offset + offset_delta,
                    base_ts + ts_delta if log_append_ts is None else log_append_ts,
                    key,
                    value,
                    headers,
                    attributes,
                )
            )
    except IndexError:
        raise CorruptRecordBatch(
            f"records section ends after {len(records)} of {count} records"
        ) from None
    if pos != end:
        raise CorruptRecordBatch(f"{end - pos} bytes left after {count} records")
    return records


def _decode_headers(data: bytes, pos: int, rec_end: int, count: int, out: list[Header]) -> int:
    for _ in range(count):
        n, pos = _varlong_slow(data, pos)
        if n < 0 or pos + n > rec_end:
            raise CorruptRecordBatch(f"invalid header key length {n}")
        hkey = data[pos : pos + n].decode("utf-8", "surrogateescape")
        pos += n
        n, pos = _varlong_slow(data, pos)
        if n >= 0:
            if pos + n > rec_end:
                raise CorruptRecordBatch("header value overruns the record")
            hval: bytes | None = data[pos : pos + n]
            pos += n
        elif n == -1:
            hval = None
        else:
            raise CorruptRecordBatch(f"invalid header value length {n}")
        out.append((hkey, hval))
    return pos


def iter_batches(
    buf: Buffer, *, check_crc: bool = True, max_decompressed_size: int = DEFAULT_MAX_OUTPUT
) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Decode consecutive batches; a partial trailing batch (as in a Fetch response) is skipped."""
    for pos, _size in rb.iter_batch_positions(buf):
        yield decode_batch(
            buf, pos, check_crc=check_crc, max_decompressed_size=max_decompressed_size
        )


def iter_records(
    buf: Buffer, *, check_crc: bool = True, max_decompressed_size: int = DEFAULT_MAX_OUTPUT
) -> Iterator[tuple[BatchHeader, Record]]:
    """Every record of consecutive batches, with the header of the batch holding it."""
    for header, records in iter_batches(
        buf, check_crc=check_crc, max_decompressed_size=max_decompressed_size
    ):
        for record in records:
            yield header, record


# --- encoding -------------------------------------------------------------------

RecordLike = (
    Record
    | tuple[bytes | None, bytes | None]
    | tuple[bytes | None, bytes | None, Sequence[Header]]
    | tuple[bytes | None, bytes | None, Sequence[Header], int]
)


def _encode_record(
    out: bytearray,
    offset_delta: int,
    ts_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header],
    attributes: int,
) -> None:
    body = bytearray((attributes & 0xFF,))
    write_varlong(body, ts_delta)
    write_varint(body, offset_delta)
    if key is None:
        body.append(1)  # zigzag(-1)
    else:
        write_varint(body, len(key))
        body += key
    if value is None:
        body.append(1)
    else:
        write_varint(body, len(value))
        body += value
    write_varint(body, len(headers))
    for hkey, hval in headers:
        kb = hkey.encode("utf-8", "surrogateescape")
        write_varint(body, len(kb))
        body += kb
        if hval is None:
            body.append(1)
        else:
            write_varint(body, len(hval))
            body += hval
    write_varint(out, len(body))
    out += body


def _normalize(
    records: Sequence[RecordLike], base_offset: int, timestamp_ms: int | None
) -> list[Record]:
    result: list[Record] = []
    now: int | None = timestamp_ms
    for i, r in enumerate(records):
        if isinstance(r, Record):
            result.append(r)
            continue
        if now is None:
            now = int(time.time() * 1000)
        key, value = r[0], r[1]
        headers = list(r[2] or ()) if len(r) > 2 else []
        ts = r[3] if len(r) > 3 else now
        result.append(Record(base_offset + i, ts, key, value, headers))
    return result


def build_batch(
    records: Sequence[RecordLike],
    *,
    base_offset: int = 0,
    compression: int = 0,
    timestamp_type: int = 0,
    producer_id: int = rb.NO_PRODUCER_ID,
    producer_epoch: int = rb.NO_PRODUCER_EPOCH,
    base_sequence: int = rb.NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = rb.NO_PARTITION_LEADER_EPOCH,
    delete_horizon_ms: int | None = None,
    timestamp_ms: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """Build one v2 record batch with a valid CRC-32C.

    ``records`` are Record objects (their offsets may have gaps; deltas are
    ``offset - base_offset``) or ``(key, value[, headers[, timestamp]])``
    tuples, which take dense offsets from ``base_offset`` and ``timestamp_ms``
    (default: now).

    ``delete_horizon_ms`` sets attribute bit 6 and stores the horizon as
    baseTimestamp, record timestamps becoming deltas from it (KIP-534).
    ``max_timestamp`` overrides maxTimestamp (the append time of a
    LogAppendTime batch). ``last_offset_delta`` overrides the computed one; it
    is how an empty batch keeps the offsets of the records compaction removed.
    An empty batch is written uncompressed, like Kafka's ``writeEmptyHeader``.
    """
    recs = _normalize(records, base_offset, timestamp_ms)
    if recs:
        base_ts = recs[0].timestamp if delete_horizon_ms is None else delete_horizon_ms
        max_ts = max(r.timestamp for r in recs)
    else:
        compression = 0
        max_ts = rb.NO_TIMESTAMP
        base_ts = max_ts if delete_horizon_ms is None else delete_horizon_ms
    if max_timestamp is not None:
        max_ts = max_timestamp
        if not recs and delete_horizon_ms is None:
            base_ts = max_timestamp

    body = bytearray()
    prev_delta = -1
    for r in recs:
        delta = r.offset - base_offset
        if delta <= prev_delta:
            raise ValueError(f"record offsets must increase from base_offset; got {r.offset}")
        if delta > INT32_MAX:
            raise ValueError(f"offset {r.offset} is too far from base offset {base_offset}")
        prev_delta = delta
        _encode_record(body, delta, r.timestamp - base_ts, r.key, r.value, r.headers, r.attributes)
    if last_offset_delta is None:
        last_offset_delta = max(prev_delta, 0)
    elif last_offset_delta < prev_delta:
        raise ValueError("last_offset_delta is below the last record's offset delta")

    attributes = compression & rb.COMPRESSION_CODEC_MASK
    if timestamp_type:
        attributes |= rb.TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= rb.TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= rb.CONTROL_FLAG_MASK
    if delete_horizon_ms is not None:
        attributes |= rb.DELETE_HORIZON_FLAG_MASK

    payload = compress(compression, body, level=compression_level) if compression else body
    out = bytearray(rb.HEADER_SIZE)
    out += payload
    rb.BATCH_HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - rb.LOG_OVERHEAD,
        partition_leader_epoch,
        rb.CURRENT_MAGIC,
        0,
        attributes,
        last_offset_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        len(recs),
    )
    structs.U32.pack_into(
        out, rb.CRC_OFFSET, crc32c.crc32c(memoryview(out)[rb.ATTRIBUTES_OFFSET :])
    )
    return bytes(out)


# --- control records (transaction markers) --------------------------------------


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1


CONTROL_RECORD_VERSION = 0


def control_record(
    type: int, coordinator_epoch: int, *, offset: int = 0, timestamp: int | None = None
) -> Record:
    """A transaction marker record: key = (version, type), value = (version, coordinator epoch)."""
    if timestamp is None:
        timestamp = int(time.time() * 1000)
    return Record(
        offset,
        timestamp,
        _CONTROL_KEY.pack(CONTROL_RECORD_VERSION, ControlRecordType(type)),
        _CONTROL_VALUE.pack(CONTROL_RECORD_VERSION, coordinator_epoch),
        [],
    )


def parse_control_record(record: Record) -> tuple[int, int]:
    """Return ``(type, coordinator_epoch)`` of a marker; the epoch is -1 if the value is absent."""
    if record.key is None or len(record.key) < 4:
        raise CorruptRecordBatch("control record key is shorter than 4 bytes")
    _version, ctype = _CONTROL_KEY.unpack_from(record.key)
    epoch = -1
    if record.value is not None and len(record.value) >= 6:
        epoch = _CONTROL_VALUE.unpack_from(record.value)[1]
    return ctype, epoch


def build_control_batch(
    type: int,
    coordinator_epoch: int,
    *,
    producer_id: int,
    producer_epoch: int,
    base_offset: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = rb.NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A one-record transactional control batch, as the broker appends for WriteTxnMarkers."""
    marker = control_record(type, coordinator_epoch, offset=base_offset, timestamp=timestamp)
    return build_batch(
        [marker],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
