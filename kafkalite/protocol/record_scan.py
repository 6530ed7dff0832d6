"""Parse every record of a v2 records section without building anything (LogValidator).

Kafka's LogValidator reads each record of a produced batch before the batch
reaches the log; a record that does not parse is never stored, because a
consumer would choke on it (kafka-python raises CorruptRecordError, librdkafka
retries for ever or jumps to a made-up offset). :func:`scan` is that read for a
contiguous window of the records section: one tight loop over the bytes, no
per-record object, one- and two-byte varints decoded inline (nearly every varint
of a real batch), and it stops at the first record that is not wholly in the
window so a caller can stream a large section through a bounded window.

Each record is::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    keyLength varint | key | valueLength varint | value
    headerCount varint | [headerKeyLength varint | key | headerValueLength varint | value]...

What is checked, and how it compares with Kafka 4 (``DefaultRecord.readFrom``):

* the attributes byte (unused in v2) is not negative: Kafka stores any value, but
  kafka-python reads the byte as a varint and a set high bit shifts every later
  field of the record (INVALID_RECORD, docs/status.md);
* the length is at least 6 (the smallest body) and is exactly what the fields use
  (Kafka: "Invalid record size", INVALID_RECORD);
* int32 varints are at most 5 bytes and varlongs at most 10 (Kafka: "Varint is too
  long" / "Found invalid record structure", INVALID_RECORD); an int32 varint whose
  5th byte carries bits above 32 is rejected too, where Java drops them;
* the offset delta is the record's index in the batch. Kafka stores an
  uncompressed batch's deltas as they come and renumbers a compressed batch;
  every v2 client writes the index, and a stored gap sends consumers to offsets
  that do not exist, so kafkalite answers INVALID_RECORD (docs/status.md);
* header keys are UTF-8 (they are strings); Kafka does not check, but kafka-python
  fails on them (INVALID_RECORD, docs/status.md);
* key and value lengths are -1 (null) or fit the record; header counts are >= 0
  and at most the bytes left; header keys are >= 0 and header values >= -1
  bytes. Kafka reads any negative key, value or header value length as null;
  kafkalite answers INVALID_RECORD for lengths below -1 (docs/status.md);
* per record, the timestamp against the topic's window and, on compacted
  topics, the key: these are *record errors* (Kafka's ``record_errors``) that
  do not stop the scan, collected in ``errors`` up to :data:`MAX_RECORD_ERRORS`.
"""

from __future__ import annotations

from kafkalite.protocol.record_batch import InvalidRecord

Buffer = bytes | bytearray | memoryview

#: Record errors kept per batch: Kafka lists every one; a batch of a million bad
#: timestamps would make a response (and a list) of a hundred megabytes.
MAX_RECORD_ERRORS = 10_000
#: Smallest record body: attributes, timestampDelta, offsetDelta, key and value
#: lengths and the header count, one byte each.
MIN_RECORD_BODY = 6
#: Sentinels for "no timestamp bound"; deltas are int64.
NO_LOWER_BOUND = -(1 << 65)
NO_UPPER_BOUND = 1 << 65


class RecordChecks:
    """The per-record checks of one batch, and the record errors they found.

    ``ts_lo``/``ts_hi`` bound the timestamp *delta* (the window shifted by the
    batch's base timestamp), so the loop compares deltas and never adds. A
    record has at most one error, its key's first, as in Kafka's validateRecord.
    """

    __slots__ = (
        "ts_lo",
        "ts_hi",
        "need_key",
        "base_timestamp",
        "window",
        "key_error",
        "errors",
        "error_count",
        "timestamp_errors",
    )

    def __init__(
        self,
        *,
        base_timestamp: int,
        ts_window: tuple[int, int] | None,
        need_key: bool,
        key_error: str = "",
    ) -> None:
        self.base_timestamp = base_timestamp
        self.window = ts_window
        if ts_window is None:
            self.ts_lo, self.ts_hi = NO_LOWER_BOUND, NO_UPPER_BOUND
        else:
            self.ts_lo, self.ts_hi = ts_window[0] - base_timestamp, ts_window[1] - base_timestamp
        self.need_key = need_key
        self.key_error = key_error
        self.errors: list[tuple[int, str]] = []
        self.error_count = 0
        self.timestamp_errors = False

    def bad_timestamp(self, index: int, delta: int) -> None:
        ts = self.base_timestamp + delta
        if ts == -1 or self.window is None:
            return  # Kafka checks only records that carry a timestamp
        self.timestamp_errors = True
        lo, hi = self.window
        self._add(
            index,
            f"Timestamp {ts} of message with offset {index} is out of range. The timestamp "
            f"should be within [{lo}, {hi}]",
        )

    def missing_key(self, index: int) -> None:
        self._add(index, self.key_error)

    def _add(self, index: int, message: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_RECORD_ERRORS:
            self.errors.append((index, message))


INT32_VARINT_BYTES = 5
INT64_VARINT_BYTES = 10


def read_uvarint(data: Buffer, pos: int, max_bytes: int) -> tuple[int, int]:
    """An unsigned base-128 varint of at most ``max_bytes`` bytes (5: int32, 10:
    int64): (raw value, next pos).

    IndexError when the data ends inside it (the caller decides whether that is
    a short window or a malformed record); InvalidRecord when it is too long or
    does not fit 32 (64) bits.
    """
    raw = 0
    shift = 0
    for _ in range(max_bytes):
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            if raw >> (32 if max_bytes == INT32_VARINT_BYTES else 64):
                raise InvalidRecord("Found invalid record structure: varint out of range")
            return raw, pos
        shift += 7
    raise InvalidRecord("Found invalid record structure: varint too long")


def record_extent(data: Buffer, pos: int, end: int) -> int | None:
    """Bytes the record at ``pos`` takes (its length varint included), or None when
    ``data[pos:end]`` ends inside the length varint. Raises on an invalid length."""
    raw = 0
    p = pos
    for shift in range(0, 7 * INT32_VARINT_BYTES, 7):
        if p >= end:
            return None
        b = data[p]
        p += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            break
    else:
        raise InvalidRecord("Found invalid record structure: varint too long")
    if raw >> 32:
        raise InvalidRecord("Found invalid record structure: varint out of range")
    length = (raw >> 1) ^ -(raw & 1)
    if length < MIN_RECORD_BODY:
        raise InvalidRecord(f"Invalid record size {length}")
    return p - pos + length


def check_header_key(key: Buffer) -> None:
    """Header keys are strings: UTF-8. Kafka does not check (Java replaces bad
    sequences), but kafka-python's consumer fails on them."""
    try:
        str(key, "utf-8")
    except UnicodeDecodeError:
        raise InvalidRecord("Invalid record header key: not UTF-8") from None


def _headers(data: Buffer, p: int, rec_end: int) -> int:
    """Step over the header count and headers at ``p``; the position after them."""
    raw, p = read_uvarint(data, p, INT32_VARINT_BYTES)
    count = (raw >> 1) ^ -(raw & 1)
    if count < 0:
        raise InvalidRecord(f"Found invalid number of record headers {count}")
    if count > rec_end - p:
        raise InvalidRecord(
            f"Found invalid number of record headers. {count} is larger than the remaining "
            "size of the buffer"
        )
    for _ in range(count):
        raw, p = read_uvarint(data, p, INT32_VARINT_BYTES)
        n = (raw >> 1) ^ -(raw & 1)
        if n < 0:
            raise InvalidRecord(f"Invalid negative header key size {n}")
        if p + n > rec_end:
            raise InvalidRecord("Found invalid record structure: header key overruns the record")
        check_header_key(data[p : p + n])
        p += n
        raw, p = read_uvarint(data, p, INT32_VARINT_BYTES)
        n = (raw >> 1) ^ -(raw & 1)
        if n < -1:
            raise InvalidRecord(f"Invalid header value size {n}")
        if n > 0:
            p += n
            if p > rec_end:
                raise InvalidRecord(
                    "Found invalid record structure: header value overruns the record"
                )
    return p


def scan(
    data: Buffer,
    pos: int,
    index: int,
    stop: int,
    checks: RecordChecks,
    max_delta: int,
) -> tuple[int, int, int]:
    """Parse records ``index``, ``index + 1`` ... from ``data[pos:]``.

    Stops after record ``stop - 1``, or before the first record that does not lie
    wholly in ``data``. Returns ``(pos, index, max_delta)``: where it stopped,
    the next record's index, and the largest timestamp delta seen (``max_delta``
    carries it across calls). Raises InvalidRecord on a malformed record; record
    errors go to ``checks``.

    Lengths are compared in their zigzag form where that saves the decode: an odd
    raw value is negative (only 1, i.e. -1, is allowed for nullable fields), an
    even one is twice the length.
    """
    ts_lo = checks.ts_lo
    ts_hi = checks.ts_hi
    need_key = checks.need_key
    end = len(data)
    # the loop runs over zigzag(index) == 2 * index, the value each offsetDelta must hold
    exp = index << 1
    try:
        for exp in range(exp, stop << 1, 2):  # noqa: B020 - the loop variable is the result
            # length: one byte (records under 64 bytes), two (under 8 KiB), or more
            b = data[pos]
            if b < 0x80:
                if b & 1 or b < 2 * MIN_RECORD_BODY:
                    raise _bad_length(b)
                p = pos + 1
                rec_end = p + (b >> 1)
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    if b & 1:
                        raise _bad_length((b & 0x7F) | (b2 << 7))
                    p = pos + 2
                    rec_end = p + (((b & 0x7F) | (b2 << 7)) >> 1)
                else:
                    raw, p = read_uvarint(data, pos, INT32_VARINT_BYTES)
                    if raw & 1 or raw < 2 * MIN_RECORD_BODY:
                        raise _bad_length(raw)
                    rec_end = p + (raw >> 1)
            if rec_end > end:
                break  # not wholly in this window
            # attributes: unused in v2, but kafka-python reads them as a varint
            if data[p] & 0x80:
                raise InvalidRecord(f"Invalid record attributes {data[p] - 256}")
            b = data[p + 1]
            if b < 0x80:
                delta = (b >> 1) ^ -(b & 1)
                p += 2
            else:
                raw, p = read_uvarint(data, p + 1, INT64_VARINT_BYTES)
                delta = (raw >> 1) ^ -(raw & 1)
            if delta > max_delta:
                max_delta = delta
            # offsetDelta
            b = data[p]
            if exp < 0x80:
                if b != exp:
                    raise _bad_offset_delta(exp, data, p)
                p += 1
            elif b >= 0x80 and data[p + 1] < 0x80 and (b & 0x7F) | (data[p + 1] << 7) == exp:
                p += 2
            else:
                raw, p2 = read_uvarint(data, p, INT32_VARINT_BYTES)
                if raw != exp:
                    raise _bad_offset_delta(exp, data, p)
                p = p2
            # key (then the timestamp: Kafka reports a record's missing key first)
            b = data[p]
            if b < 0x80:
                raw = b
                p += 1
            else:
                raw, p = read_uvarint(data, p, INT32_VARINT_BYTES)
            if raw == 1:  # null
                if need_key:
                    checks.missing_key(exp >> 1)
                elif delta < ts_lo or delta > ts_hi:
                    checks.bad_timestamp(exp >> 1, delta)
            elif raw & 1:
                raise InvalidRecord(f"Invalid key size {(raw >> 1) ^ -1}")
            else:
                p += raw >> 1
                if delta < ts_lo or delta > ts_hi:
                    checks.bad_timestamp(exp >> 1, delta)
            # value
            b = data[p]
            if b < 0x80:
                if b & 1:
                    if b != 1:
                        raise InvalidRecord(f"Invalid value size {(b >> 1) ^ -1}")
                    p += 1
                else:
                    p += 1 + (b >> 1)
            else:
                b2 = data[p + 1]
                if b2 < 0x80 and not b & 1:
                    p += 2 + (((b & 0x7F) | (b2 << 7)) >> 1)
                else:
                    raw, p = read_uvarint(data, p, INT32_VARINT_BYTES)
                    if raw & 1:
                        if raw != 1:
                            raise InvalidRecord(f"Invalid value size {(raw >> 1) ^ -1}")
                    else:
                        p += raw >> 1
            # headers: almost always none
            if p + 1 != rec_end or data[p]:
                p = _headers(data, p, rec_end)
                if p != rec_end:
                    raise InvalidRecord(
                        f"Invalid record size: expected to read {rec_end - pos} bytes in record "
                        f"payload, but instead read {p - pos}"
                    )
            pos = rec_end
        else:
            exp = stop << 1
    except IndexError:
        # the window ends inside this record's length varint (more data may come), or a
        # field ran past a record that lies wholly in the window (malformed)
        extent = record_extent(data, pos, end)
        if extent is not None and pos + extent <= end:
            raise InvalidRecord(
                "Found invalid record structure: a field overruns the record"
            ) from None
    return pos, exp >> 1, max_delta


def _bad_length(raw: int) -> InvalidRecord:
    return InvalidRecord(f"Invalid record size {(raw >> 1) ^ -(raw & 1)}")


def _bad_offset_delta(exp: int, data: Buffer, p: int) -> InvalidRecord:
    try:
        raw = read_uvarint(data, p, INT32_VARINT_BYTES)[0]
        found = str((raw >> 1) ^ -(raw & 1))
    except (IndexError, InvalidRecord):
        found = "unreadable"
    return InvalidRecord(
        f"Record {exp >> 1} has offset delta {found}; the offset delta of a produced record "
        "must be its index in the batch"
    )
