"""What Kafka checks in a produced ``records`` field before it reaches the log.

Three layers, in Kafka's order:

1. ``ProduceRequest.validateRecords`` (v3+): at least one complete batch, magic 2,
   no zstd before Produce v7, exactly one batch. Trailing bytes that do not make
   a complete batch are dropped, as Kafka's log trims them.
2. ``UnifiedLog.analyzeAndValidateRecords``: a client batch starts at offset 0,
   is no larger than ``max.message.bytes``, and its CRC holds.
3. ``LogValidator``: the batch's count, offset range, control flag and sequence
   agree; every record parses (:mod:`kafkalite.protocol.record_scan`), there are
   exactly ``count`` of them, and each passes the per-record checks: on
   CreateTime topics its timestamp lies within [now - message.timestamp.before.max.ms,
   now + message.timestamp.after.max.ms], on compacted topics it has a key.
   A topic whose ``compression.type`` names another codec gets the batch
   re-encoded; otherwise the batch is stored as produced (compressed batches
   too: Kafka re-encodes only when the codec changes). The batch's
   maxTimestamp becomes its records' largest, as Kafka sets it.

A compressed section is decompressed as a stream, a window at a time
(:mod:`kafkalite.protocol.decompression`), so a batch that inflates to a
gigabyte is checked in constant memory. :func:`check_client_batch` is a
generator: the first step does the header checks and the first window (up to
:data:`FIRST_WINDOW` bytes and :data:`SLICE_RECORDS` records, which is every
batch a producer sends with default settings); a larger batch yields between
windows so that its caller can let other work run (the produce handler
continues it on the event loop in slices).

Errors are InvalidRecordBatch subclasses carrying Kafka's error code; record
errors (timestamps, missing keys) also list the records, which Kafka returns as
the response's ``record_errors``.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from kafkalite.common import structs
from kafkalite.protocol import record_batch as rb
from kafkalite.protocol.decompression import CHUNK, DecompressStream, open_stream
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.recompression import Recompressor, rebuild_batch
from kafkalite.protocol.record_batch import (
    BatchHeader,
    CorruptRecordBatch,
    InvalidRecord,
    InvalidRecordBatch,
    UnsupportedCompression,
    UnsupportedMagic,
)
from kafkalite.protocol.record_scan import (
    INT32_VARINT_BYTES,
    INT64_VARINT_BYTES,
    MAX_RECORD_ERRORS,
    NO_LOWER_BOUND,
    RecordChecks,
    check_header_key,
    read_uvarint,
    record_extent,
    scan,
)

Buffer = bytes | bytearray | memoryview
#: a batch the check may patch and the log assigns offsets in: our own copy, or a
#: writable view of a request buffer handed over by the connection
WritableBuffer = bytearray | memoryview

#: Kafka's LegacyRecord.RECORD_OVERHEAD_V0, the smallest size a batch may claim
_MIN_RECORD_OVERHEAD = 14
#: bytes up to and including the magic byte
_HEADER_SIZE_UP_TO_MAGIC = 17
ZSTD = 4

#: Decompressed bytes the first step reads: librdkafka's batches (1,000,000 bytes
#: before compression by default) fit, so they are checked without a second step.
FIRST_WINDOW = 4 << 20
#: Records parsed per step: bounds the time one step holds the event loop (~15 ms).
SLICE_RECORDS = 32768
#: A record larger than this is not buffered whole: its key, value and headers are
#: skipped through the stream.
BIG_RECORD = CHUNK


class MessageTooLarge(InvalidRecordBatch):
    error_code = ErrorCode.message_too_large


class InvalidTimestamp(InvalidRecordBatch):
    """One or more records' timestamps are out of range; ``record_errors`` says which."""

    error_code = ErrorCode.invalid_timestamp

    def __init__(self, record_errors: list[tuple[int, str]]) -> None:
        super().__init__("One or more records have been rejected due to invalid timestamp")
        self.record_errors = record_errors


class RecordErrors(InvalidRecord):
    """Records that parse but may not be stored (no key on a compacted topic):
    INVALID_RECORD with ``record_errors``, in Kafka's words."""

    def __init__(self, record_errors: list[tuple[int, str]], total: int) -> None:
        shown = ", ".join(
            f"RecordError(batchIndex={i}, message='{m}')" for i, m in record_errors[:3]
        )
        super().__init__(
            f"One or more records have been rejected due to {total} record errors in total, "
            f"and only showing the first three errors at most: [{shown}]"
        )
        self.record_errors = record_errors


@dataclass(frozen=True, slots=True)
class TopicLimits:
    """The topic configs record validation needs."""

    max_message_bytes: int
    log_append_time: bool
    timestamp_before_max_ms: int
    timestamp_after_max_ms: int
    compact: bool = False
    #: the codec ``compression.type`` stores batches with; None keeps the producer's
    target_codec: int | None = None
    compression_level: int | None = None
    #: ``topic-partition``, for the compacted-topic record error
    topic_partition: str = ""


@dataclass(slots=True)
class CheckedBatch:
    """A client batch that passed every check: what to append and its header."""

    header: BatchHeader
    records: WritableBuffer  # the batch to append (offsets are assigned in it)
    size: int


BatchCheck = Generator[None, None, CheckedBatch]


def validate_produce_records(
    buf: Buffer, api_version: int, limits: TopicLimits, now_ms: int
) -> CheckedBatch:
    """Validate one partition's produced records in one go (every step of
    :func:`check_client_batch`); raises an InvalidRecordBatch with Kafka's code."""
    size = check_request_records(buf, api_version)
    return run_to_end(check_client_batch(bytearray(buf[:size]), size, limits, now_ms))


def run_to_end(check: CheckedBatch | BatchCheck) -> CheckedBatch:
    """Every remaining step of a batch check, now."""
    if isinstance(check, CheckedBatch):
        return check
    while True:
        try:
            next(check)
        except StopIteration as done:
            result: CheckedBatch = done.value
            return result


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
    length = structs.I32.unpack_from(buf, pos + rb.LENGTH_OFFSET)[0]
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
    buf: WritableBuffer, size: int, limits: TopicLimits, now_ms: int
) -> CheckedBatch | BatchCheck:
    """The log's checks on the batch a client produced (``buf``, ``size`` bytes).

    ``buf`` is the caller's own copy of the batch (a request's bytes may be gone
    when a later step runs); it is what the result holds unless the batch is
    re-encoded, with maxTimestamp patched in place.

    Returns the :class:`CheckedBatch` when one step checked the whole batch (an
    uncompressed batch of up to :data:`SLICE_RECORDS` records is scanned in
    place; any other batch whose records fit the first window), else a generator
    whose steps do the rest, its ``StopIteration`` value the CheckedBatch.
    Raises (here or from a step) an InvalidRecordBatch with Kafka's code.
    """
    if len(buf) != size:
        buf = buf[:size]
    h = _check_header(buf, size, limits)
    checks = _record_checks(h, limits, now_ms)
    codec = h.compression
    target = limits.target_codec
    sink = None
    if target is not None and target != codec:
        sink = Recompressor(target, limits.compression_level, limits.max_message_bytes)
    count = h.records_count
    if not codec and sink is None and count <= SLICE_RECORDS:
        pos, index, max_delta = scan(buf, rb.RECORDS_OFFSET, 0, count, checks, NO_LOWER_BOUND)
        if index < count:
            raise _premature_eof()
        if pos != size:
            raise _records_remaining()
        return _finish(buf, h, checks, max_delta, None, limits, now_ms)
    job = _check_records(buf, h, checks, sink, limits, now_ms)
    try:
        next(job)
    except StopIteration as done:
        checked: CheckedBatch = done.value
        return checked
    return job


def _check_header(buf: WritableBuffer, size: int, limits: TopicLimits) -> BatchHeader:
    """UnifiedLog.analyzeAndValidateRecords and LogValidator.validateBatch."""
    base_offset = structs.I64.unpack_from(buf, 0)[0]
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
    return h


def _record_checks(h: BatchHeader, limits: TopicLimits, now_ms: int) -> RecordChecks:
    window = None
    if not limits.log_append_time and not h.is_log_append_time:
        # Kafka checks each record's own timestamp (base + delta) against the window
        window = (now_ms - limits.timestamp_before_max_ms, now_ms + limits.timestamp_after_max_ms)
    return RecordChecks(
        base_timestamp=h.base_timestamp,
        ts_window=window,
        need_key=limits.compact,
        key_error=(
            "Compacted topic cannot accept message without key in topic partition "
            f"{limits.topic_partition}."
        )
        if limits.compact
        else "",
    )


def _check_records(
    buf: WritableBuffer,
    h: BatchHeader,
    checks: RecordChecks,
    sink: Recompressor | None,
    limits: TopicLimits,
    now_ms: int,
) -> BatchCheck:
    """The records of a batch read through its decompression stream, a window per step."""
    stream = open_stream(h.compression, memoryview(buf)[rb.RECORDS_OFFSET :])
    max_delta = yield from _scan_section(stream, h.records_count, checks, sink)
    return _finish(buf, h, checks, max_delta, sink, limits, now_ms)


def _finish(
    buf: WritableBuffer,
    h: BatchHeader,
    checks: RecordChecks,
    max_delta: int,
    sink: Recompressor | None,
    limits: TopicLimits,
    now_ms: int,
) -> CheckedBatch:
    """Record errors, the re-encoded batch, maxTimestamp from the records (as Kafka)."""
    _raise_record_errors(h, checks, limits, now_ms)
    out = buf
    if sink is not None:
        out = rebuild_batch(buf, sink.finish(), sink.target)
        h = rb.parse_header(out, 0)
    if not limits.log_append_time and not h.is_log_append_time:
        # Kafka sets maxTimestamp from the records (a producer's header is not believed)
        max_ts = max(rb.NO_TIMESTAMP, h.base_timestamp + max_delta)
        if max_ts != h.max_timestamp:
            structs.I64.pack_into(out, rb.MAX_TIMESTAMP_OFFSET, max_ts)
            h.max_timestamp = max_ts
            h.crc = rb.compute_crc(out, 0, len(out))
            structs.U32.pack_into(out, rb.CRC_OFFSET, h.crc)
    return CheckedBatch(h, out, len(out))


def _raise_record_errors(
    h: BatchHeader, checks: RecordChecks, limits: TopicLimits, now_ms: int
) -> None:
    """Kafka's processRecordErrors: INVALID_TIMESTAMP if any record's timestamp is
    out of range, else INVALID_RECORD; both list the records."""
    if h.is_log_append_time:
        # every record's timestamp is the batch's maxTimestamp
        if limits.log_append_time:
            message = (
                "Invalid timestamp type in message. Producer should not set timestamp type "
                "to LogAppendTime."
            )
        else:
            lo, hi = now_ms - limits.timestamp_before_max_ms, now_ms + limits.timestamp_after_max_ms
            ts = h.max_timestamp
            message = (
                f"Timestamp {ts} of message with offset {{}} is out of range. The timestamp "
                f"should be within [{lo}, {hi}]"
            )
            if ts == rb.NO_TIMESTAMP or lo <= ts <= hi:
                message = ""
        if message:
            keyless = dict(checks.errors)  # a key error comes first, as in Kafka
            raise InvalidTimestamp(
                [
                    (i, keyless.get(i) or message.format(i))
                    for i in range(min(h.records_count, MAX_RECORD_ERRORS))
                ]
            )
    if not checks.error_count:
        return
    if checks.timestamp_errors:
        raise InvalidTimestamp(checks.errors)
    raise RecordErrors(checks.errors, checks.error_count)


def _pull(stream: DecompressStream, n: int, sink: Recompressor | None) -> Buffer:
    piece = stream.read(n)
    if sink is not None and piece:
        sink.write(piece)
    return piece


def _fill(stream: DecompressStream, n: int, sink: Recompressor | None) -> Buffer:
    """At least ``n`` bytes from the stream, or all that is left."""
    first = _pull(stream, n, sink)
    if len(first) >= n or not first:
        return first
    parts = [first]
    total = len(first)
    while total < n:
        piece = _pull(stream, n - total, sink)
        if not piece:
            break
        parts.append(piece)
        total += len(piece)
    return b"".join(parts)


def _premature_eof() -> InvalidRecord:
    return InvalidRecord("Incorrect declared batch size, premature EOF reached")


def _records_remaining() -> InvalidRecord:
    return InvalidRecord("Incorrect declared batch size, records still remaining in file")


def _scan_section(
    stream: DecompressStream, count: int, checks: RecordChecks, sink: Recompressor | None
) -> Generator[None, None, int]:
    """Parse exactly ``count`` records from the stream, a window at a time; nothing may
    follow them. Returns the largest timestamp delta."""
    window = _fill(stream, FIRST_WINDOW, sink)
    pos = 0
    index = 0
    max_delta = NO_LOWER_BOUND
    slice_end = SLICE_RECORDS
    while True:
        pos, index, max_delta = scan(window, pos, index, min(count, slice_end), checks, max_delta)
        if index == count:
            break
        if index == slice_end:
            slice_end += SLICE_RECORDS
            yield
            continue
        # the record at `pos` is not wholly in the window
        extent = record_extent(window, pos, len(window))
        if extent is not None and extent > BIG_RECORD:
            cursor = _Cursor(stream, window, pos, sink)
            max_delta = yield from cursor.big_record(index, checks, max_delta)
            window, pos = cursor.window, cursor.pos
            index += 1
            slice_end = index + SLICE_RECORDS
            continue
        more = _fill(stream, CHUNK, sink)
        if not more:
            raise _premature_eof()
        window = b"".join((window[pos:], more))
        pos = 0
        yield
    if pos < len(window) or _pull(stream, 1, sink):
        raise _records_remaining()
    return max_delta


class _Cursor:
    """Reads one record too large to buffer: small fields from a window that is
    refilled from the stream, keys/values/headers skipped through it."""

    __slots__ = ("stream", "window", "pos", "base", "sink")

    def __init__(
        self, stream: DecompressStream, window: Buffer, pos: int, sink: Recompressor | None
    ) -> None:
        self.stream = stream
        self.window = window
        self.pos = pos
        self.base = 0  # stream offset of window[0], relative to where the record starts
        self.sink = sink

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def _more(self) -> bool:
        piece = _pull(self.stream, CHUNK, self.sink)
        if not piece:
            return False
        self.base += self.pos
        self.window = b"".join((self.window[self.pos :], piece))
        self.pos = 0
        return True

    def varint(self, max_bytes: int) -> Generator[None, None, int]:
        """The zigzag-decoded varint at the cursor."""
        while len(self.window) - self.pos < max_bytes and self._more():
            yield
        try:
            raw, self.pos = read_uvarint(self.window, self.pos, max_bytes)
        except IndexError:
            raise _premature_eof() from None
        return (raw >> 1) ^ -(raw & 1)

    def take(self, n: int) -> Generator[None, None, Buffer]:
        """The next ``n`` bytes (a header key: the caller bounds ``n`` by the record)."""
        parts = []
        while n > len(self.window) - self.pos:
            parts.append(self.window[self.pos :])
            n -= len(self.window) - self.pos
            self.base += len(self.window)
            piece = _pull(self.stream, CHUNK, self.sink)
            if not piece:
                raise _premature_eof()
            self.window, self.pos = piece, 0
            yield
        parts.append(self.window[self.pos : self.pos + n])
        self.pos += n
        return b"".join(parts)

    def byte(self) -> Generator[None, None, int]:
        while self.pos >= len(self.window):
            if not self._more():
                raise _premature_eof()
            yield
        self.pos += 1
        return self.window[self.pos - 1]

    def skip(self, n: int) -> Generator[None, None, None]:
        unyielded = 0
        while n > len(self.window) - self.pos:
            n -= len(self.window) - self.pos
            self.base += len(self.window)
            piece = _pull(self.stream, CHUNK, self.sink)
            if not piece:
                raise _premature_eof()
            self.window, self.pos = piece, 0  # skipped bytes are dropped, never copied
            unyielded += len(piece)
            if unyielded >= CHUNK:  # snappy streams come a 32 KiB block at a time
                unyielded = 0
                yield
        self.pos += n

    def big_record(
        self, index: int, checks: RecordChecks, max_delta: int
    ) -> Generator[None, None, int]:
        """The record at the cursor, with :func:`record_scan.scan`'s checks."""
        length = yield from self.varint(INT32_VARINT_BYTES)
        body_end = self.offset + length
        attributes = yield from self.byte()
        if attributes & 0x80:
            raise InvalidRecord(f"Invalid record attributes {attributes - 256}")
        delta = yield from self.varint(INT64_VARINT_BYTES)
        if delta > max_delta:
            max_delta = delta
        offset_delta = yield from self.varint(INT32_VARINT_BYTES)
        if offset_delta != index:
            raise InvalidRecord(
                f"Record {index} has offset delta {offset_delta}; "
                "the offset delta of a produced record must be its index in the batch"
            )
        key = yield from self.varint(INT32_VARINT_BYTES)
        if key < -1:
            raise InvalidRecord(f"Invalid key size {key}")
        if key == -1 and checks.need_key:
            checks.missing_key(index)
        elif delta < checks.ts_lo or delta > checks.ts_hi:
            checks.bad_timestamp(index, delta)
        yield from self._field(key, body_end, "key")
        value = yield from self.varint(INT32_VARINT_BYTES)
        if value < -1:
            raise InvalidRecord(f"Invalid value size {value}")
        yield from self._field(value, body_end, "value")
        headers = yield from self.varint(INT32_VARINT_BYTES)
        if headers < 0:
            raise InvalidRecord(f"Found invalid number of record headers {headers}")
        if headers > body_end - self.offset:
            raise InvalidRecord(
                f"Found invalid number of record headers. {headers} is larger than the "
                "remaining size of the buffer"
            )
        for _ in range(headers):
            n = yield from self.varint(INT32_VARINT_BYTES)
            if n < 0:
                raise InvalidRecord(f"Invalid negative header key size {n}")
            if self.offset + n > body_end:
                raise InvalidRecord(
                    "Found invalid record structure: header key overruns the record"
                )
            header_key = yield from self.take(n)
            check_header_key(header_key)
            n = yield from self.varint(INT32_VARINT_BYTES)
            if n < -1:
                raise InvalidRecord(f"Invalid header value size {n}")
            yield from self._field(n, body_end, "header value")
        if self.offset != body_end:
            raise InvalidRecord(
                f"Invalid record size: expected to read {length} bytes in record payload, "
                f"but instead read {length + self.offset - body_end}"
            )
        return max_delta

    def _field(self, n: int, body_end: int, what: str) -> Generator[None, None, None]:
        if n > 0:
            if self.offset + n > body_end:
                raise InvalidRecord(f"Found invalid record structure: {what} overruns the record")
            yield from self.skip(n)
