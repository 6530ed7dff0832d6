"""Arrow columns straight from the records of a Fetch response (the executors' direct reads).

Why not confluent-kafka here: it turns each record into a librdkafka message, a Python
``Message`` and a ``bytes`` object before pyarrow copies the value again into its column:
about 1.5 us of CPU per 1 KiB record in a Python worker that shares two cores with Spark's
JVM and the broker (docs/spark.md, "round 4"). Here one Python pass per record follows only
the record lengths (``_walk``); every other field is decoded for all the records of a
response at once by pyarrow compute kernels (``_varints``), and each key and value is copied
once, from the response into its column (``_binary``).

A v2 record is::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    keyLength varint | key | valueLength varint | value | headerCount varint | headers

Batches the direct path does not read (message format v0/v1, a record that does not parse)
end the decode at that batch with a reason: the caller reads on from there with
confluent-kafka, which has its own handling of them.
"""

from __future__ import annotations

import gc
import struct
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BATCH_HEADER",
    "BATCH_OVERHEAD",
    "LOG_OVERHEAD",
    "BatchColumns",
    "CorruptRecords",
    "Decoded",
    "gc_paused",
]

#: baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
#: baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount
BATCH_HEADER = struct.Struct(">qiiBIhiqqqhii")
BATCH_OVERHEAD = BATCH_HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset and batchLength precede what batchLength counts
_COMPRESSION = 0x07
_LOG_APPEND_TIME = 0x08
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_ABORT = 0  # a control record's type (its key: version int16, type int16)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic GC off while a batch is built (never across a ``yield``): building one
    allocates thousands of GC-tracked objects (pyarrow arrays and scalars; with
    confluent-kafka, its messages and timestamp tuples), none in a cycle, which set off
    collections that walk the worker's live objects: 5% of a direct read's time in a Spark
    worker (py-spy), 60% of the consumer path's column building (docs/spark.md)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class CorruptRecords(Exception):
    """A batch or record that does not parse."""


@dataclass
class Decoded:
    """What one records section gave: an Arrow batch of the records in ``[start, stop)``
    (None when there were none), the offset to fetch next (past every complete batch read,
    markers and skipped batches included), and why the decode stopped early, if it did
    (``next_offset`` is then the first offset it did not read)."""

    batch: Any
    next_offset: int
    stopped: str | None = None


@dataclass
class _Records:
    """The records to decode: where each starts in one buffer, and per batch (as run ends,
    decoded into per-record columns by Arrow) the fields its records share."""

    starts: list[int] = field(default_factory=list)  # each record's length varint
    run_ends: list[int] = field(default_factory=list)  # records up to each batch's end
    batch_ends: list[int] = field(default_factory=list)  # where each batch's records end
    base_offsets: list[int] = field(default_factory=list)
    base_ts: list[int] = field(default_factory=list)  # maxTimestamp with LogAppendTime
    append_time: list[int] = field(default_factory=list)  # 1: LogAppendTime


class BatchColumns:
    """Builds ``pyarrow.RecordBatch`` es of the kafkalite schema for one topic partition."""

    def __init__(self, topic: str, partition: int, include_headers: bool, schema: Any) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        self.pa, self.pc = pa, pc
        self.schema = schema
        self.include_headers = include_headers
        self.topic = pa.scalar(topic, pa.string())
        self.partition = pa.scalar(partition, pa.int32())
        # compute kernels given Python ints look for numpy on every call (a failed import,
        # never cached: a third of the decode's time without numpy installed), so every
        # constant is an Arrow scalar
        self.i64 = {k: pa.scalar(k, pa.int64()) for k in (-1, 0, 1, 2, 7, 32)}
        self.u64 = {k: pa.scalar(k, pa.uint64()) for k in (1, 127)}
        self.u8_7 = pa.scalar(7, pa.uint8())
        self.u8_0 = pa.scalar(0, pa.uint8())
        self.null_i64 = pa.scalar(None, pa.int64())
        self._even = pa.array([], pa.int64())
        self.ree_type = pa.run_end_encoded(pa.int32(), pa.int64())

    def decode(
        self,
        buf: bytes | bytearray | memoryview,
        pos: int,
        end: int,
        *,
        start: int,
        stop: int,
        aborted: list[tuple[int, int]] | None,
    ) -> Decoded:
        """The records of ``buf[pos:end]`` (a Fetch response's records) with offsets in
        ``[start, stop)``. ``aborted`` is the response's aborted transactions, (producer id,
        first offset), under read_committed; None under read_uncommitted."""
        with gc_paused():
            recs, src, next_offset, stopped = _walk(buf, pos, end, start, stop, aborted)
            if not recs.starts:
                return Decoded(None, next_offset, stopped)
            return Decoded(self._columns(src, recs, start, stop), next_offset, stopped)

    # --- vectorized decode -------------------------------------------------------------------

    def _u8(self, src: bytes | bytearray | memoryview) -> Any:
        pa = self.pa
        return pa.Array.from_buffers(pa.uint8(), len(src), [None, pa.py_buffer(src)])

    def _varints(self, u8: Any, pos: Any, last: Any) -> tuple[Any, Any]:
        """The zigzag varints at ``pos`` (int64 positions): (values as int64, positions after
        them). One round of kernels when none is longer than two bytes (every length under
        8 KiB, offset deltas under 8,192), else one per byte of the longest. Every read is
        clamped to the buffer (a corrupt length can point past it): the callers check the
        positions."""
        pc, i64, u64 = self.pc, self.i64, self.u64
        b = pc.take(u8, pc.min_element_wise(pos, last))
        if pc.max(b).as_py() < 0x80:  # one byte each: most deltas and key lengths
            return self._unzigzag(b.cast(self.pa.int64())), pc.add(pos, i64[1])
        b0 = b.cast(self.pa.int64())
        cont = pc.shift_right(b0, i64[7])  # 1 where a second byte follows
        at = pc.add(pos, cont)  # each varint's last byte, if none is longer than two
        b1 = pc.take(u8, pc.min_element_wise(at, last)).cast(self.pa.int64())
        if pc.max(b1).as_py() < 0x80:
            # one byte: b1 is b0 and cont 0; two: (b0 - 0x80) + (b1 << 7)
            raw = pc.add(b0, pc.multiply(pc.shift_left(pc.subtract(b1, i64[1]), i64[7]), cont))
            return self._unzigzag(raw), pc.add(at, i64[1])
        raw = pc.bit_wise_and(b.cast(self.pa.uint64()), u64[127])
        more = pc.shift_right(b, self.u8_7).cast(self.pa.int64())
        p = pc.add(pos, i64[1])
        for k in range(1, 10):
            if not pc.max(more).as_py():
                break
            b = pc.take(u8, pc.min_element_wise(p, last))
            part = pc.shift_left(
                pc.bit_wise_and(b.cast(self.pa.uint64()), u64[127]),
                self.pa.scalar(7 * k, self.pa.uint64()),
            )
            raw = pc.bit_wise_or(raw, pc.multiply(part, more.cast(self.pa.uint64())))
            p = pc.add(p, more)
            more = pc.multiply(more, pc.shift_right(b, self.u8_7).cast(self.pa.int64()))
        else:
            if pc.max(more).as_py():
                raise CorruptRecords("varint too long")
        half = pc.shift_right(raw, u64[1]).cast(self.pa.int64())
        sign = pc.negate(pc.bit_wise_and(raw, u64[1]).cast(self.pa.int64()))
        return pc.bit_wise_xor(half, sign), p

    def _unzigzag(self, raw: Any) -> Any:
        """Zigzag-decoded int64 values of ``raw`` (int64, under 2^63: varints of up to 8 bytes)."""
        pc, i64 = self.pc, self.i64
        return pc.bit_wise_xor(pc.shift_right(raw, i64[1]), pc.negate(pc.bit_wise_and(raw, i64[1])))

    def _binary(self, data: Any, begins: Any, ends: Any, lengths: Any) -> Any:
        """A binary column of ``data[begins[i]:ends[i]]`` (null where ``lengths`` is -1): the
        extents, interleaved with the gaps between them, are the offsets of one binary array
        over ``data``; taking its even elements copies the keys (values) into a column.
        (Positions are under 2 GiB: :meth:`_columns` checks.)"""
        pa, pc, i64 = self.pa, self.pc, self.i64
        n = len(begins)
        # each extent as one int64 whose two int32 halves are, in memory order, its begin and
        # end: the n int64s are the 2n int32 offsets [b0, e0, b1, e1, ...]
        if _LITTLE_ENDIAN:
            pairs = pc.bit_wise_or(begins, pc.shift_left(ends, i64[32]))
        else:
            pairs = pc.bit_wise_or(pc.shift_left(begins, i64[32]), ends)
        offsets = pairs.buffers()[1].slice(pairs.offset * 8, n * 8)
        spans = pa.Array.from_buffers(pa.binary(), 2 * n - 1, [None, offsets, data])
        even = self._evens(n)
        if pc.min(lengths).as_py() < 0:
            even = pc.if_else(pc.less(lengths, i64[0]), self.null_i64, even)
        return pc.take(spans, even)

    def _evens(self, n: int) -> Any:
        """0, 2, .. 2n-2 as int64 (a slice of one cached array)."""
        if len(self._even) < n:
            self._even = self.pa.array(
                range(0, 2 * max(n, 2 * len(self._even)), 2), self.pa.int64()
            )
        return self._even[:n]

    def _length_sizes(self, total: Any, shortest: int, longest: int) -> Any:
        """How many bytes each record's length varint takes, from the record's ``total``
        size: a shortest-form varint of a size s takes k bytes for 2s < 128^k, so the total
        (s + k) is at most 64 with one byte, 8193 with two, and so on."""
        pa, pc, i64 = self.pa, self.pc, self.i64
        if longest <= _TOTAL_UNDER[1]:
            return i64[1]
        if shortest > _TOTAL_UNDER[1] and longest <= _TOTAL_UNDER[2]:
            return i64[2]
        sizes = i64[1]
        for bound in _TOTAL_UNDER[1:]:
            if longest <= bound:
                break
            over = pc.greater(total, pa.scalar(bound, pa.int64())).cast(pa.int64())
            sizes = pc.add(over, sizes)
        return sizes

    def _per_record(self, run_ends: Any, values: list[int]) -> Any:
        """A per-batch field as a per-record int64 column (``run_ends``: the records up to
        each batch's end, as an int32 array)."""
        pa = self.pa
        # (not RunEndEncodedArray.from_arrays, which looks for pandas on every call)
        ree = pa.Array.from_buffers(
            self.ree_type,
            run_ends[-1].as_py(),
            [None],
            children=[run_ends, pa.array(values, pa.int64())],
        )
        return self.pc.run_end_decode(ree)

    def _columns(self, src: Any, recs: _Records, start: int, stop: int) -> Any:
        pa, pc, i64 = self.pa, self.pc, self.i64
        if len(src) > 0x7FFFFFFF:  # (binary columns' offsets are int32)
            raise CorruptRecords("records over 2 GiB")
        u8 = self._u8(src)
        last = pa.scalar(len(src) - 1, pa.int64())
        starts = pa.array(recs.starts, pa.int64())
        run_ends = pa.array(recs.run_ends, pa.int32())
        # a record ends where the next begins, or its batch's records end (the walk checked
        # that each batch's records fill it exactly, from lengths that are not negative and
        # in their shortest form: a record's size says how many bytes its length took)
        following = pa.concat_arrays([starts[1:], pa.array([len(src)], pa.int64())])
        ends = pc.min_element_wise(following, self._per_record(run_ends, recs.batch_ends))
        total = pc.subtract(ends, starts)
        shortest, longest = (v.as_py() for v in pc.min_max(total).values())
        if shortest < 7:  # a length byte, then 6 one-byte fields at least
            raise CorruptRecords("a record shorter than the smallest record")
        attrs = pc.add(starts, self._length_sizes(total, shortest, longest))
        ts_delta, p = self._varints(u8, pc.add(attrs, i64[1]), last)
        off_delta, p = self._varints(u8, p, last)
        if not pc.all(pc.less(p, ends)).as_py():  # before the offsets decide what is kept
            raise CorruptRecords("a record's timestamp or offset delta overruns it")
        offsets = pc.add(self._per_record(run_ends, recs.base_offsets), off_delta)
        # the trimming to [start, stop) below counts records: it needs increasing offsets
        if pc.min(off_delta).as_py() < 0 or (
            len(offsets) > 1 and not pc.all(pc.greater(offsets[1:], offsets[:-1])).as_py()
        ):
            raise CorruptRecords("record offsets do not increase")
        # records of the first and last batches outside [start, stop) (counted only when
        # there are some: the offsets increase)
        lo = hi = 0
        if offsets[0].as_py() < start:
            lo = pc.sum(pc.less(offsets, pa.scalar(start, pa.int64()))).as_py()
        if offsets[-1].as_py() >= stop:
            hi = pc.sum(pc.greater_equal(offsets, pa.scalar(stop, pa.int64()))).as_py()
        hi = len(offsets) - hi
        if hi <= lo:
            return None
        n = hi - lo
        offsets, ts_delta, p, ends = offsets[lo:hi], ts_delta[lo:hi], p[lo:hi], ends[lo:hi]
        key_len, key_at = self._varints(u8, p, last)
        key_end = pc.add(key_at, pc.max_element_wise(key_len, i64[0]))
        value_len, value_at = self._varints(u8, key_end, last)
        value_end = pc.add(value_at, pc.max_element_wise(value_len, i64[0]))
        if (
            pc.min(key_len).as_py() < -1
            or pc.min(value_len).as_py() < -1
            or not pc.all(pc.less(value_end, ends)).as_py()  # the header count follows
        ):
            raise CorruptRecords("a record's fields overrun it")
        data = pa.py_buffer(src)
        base_ts = self._per_record(run_ends, recs.base_ts)[lo:hi]
        if any(recs.append_time):
            create = pc.equal(self._per_record(run_ends, recs.append_time)[lo:hi], i64[0])
            stamps = pc.if_else(create, pc.add(base_ts, ts_delta), base_ts)
            ts_type = pc.if_else(create, pa.scalar(0, pa.int32()), pa.scalar(1, pa.int32()))
        else:
            stamps = pc.add(base_ts, ts_delta)
            ts_type = pa.repeat(pa.scalar(0, pa.int32()), n)
        cols = [
            self._binary(data, key_at, key_end, key_len),
            self._binary(data, value_at, value_end, value_len),
            pa.repeat(self.topic, n),
            pa.repeat(self.partition, n),
            offsets,
            stamps.cast(pa.timestamp("ms", tz="UTC")).cast(self.schema.field("timestamp").type),
            ts_type,
        ]
        if self.include_headers:
            cols.append(self._headers(src, u8, value_end, ends, n))
        else:
            self._check_headers(src, u8, value_end, ends, last)
        return pa.RecordBatch.from_arrays(cols, schema=self.schema)

    def _bare(self, u8: Any, at: Any, ends: Any) -> Any:
        """Per record: a one-byte 0 header count at ``at`` that ends the record."""
        pc = self.pc
        return pc.and_(
            pc.equal(pc.take(u8, at), self.u8_0), pc.equal(pc.add(at, self.i64[1]), ends)
        )

    def _check_headers(self, src: Any, u8: Any, at: Any, ends: Any, last: Any) -> None:
        """Without a headers column, the headers are still walked to the record's end: as in
        Kafka's reader, a record whose fields do not end at its length is corrupt (a wrong
        value length would otherwise give a wrong value). Vectorized, one round of kernels
        per header of the record with the most; past a few, in Python."""
        pc, i64 = self.pc, self.i64
        if pc.all(self._bare(u8, at, ends)).as_py():
            return
        left, p = self._varints(u8, at, last)
        most = pc.max(left).as_py()
        if pc.min(left).as_py() < 0 or most > _HEADER_ROUNDS:
            view = memoryview(src)
            for a, e in zip(at.to_pylist(), ends.to_pylist(), strict=True):
                _parse_headers(view, a, e)
            return
        zero = i64[0]
        # one round per header: the records with headers left, each round fewer (a record
        # done reads nothing more: the bytes after it may be anything)
        while True:
            done = pc.equal(left, zero)
            if pc.any(pc.not_equal(pc.filter(p, done), pc.filter(ends, done))).as_py():
                raise CorruptRecords("a record's fields do not end at its length")
            more = pc.invert(done)
            p, left, ends = pc.filter(p, more), pc.filter(left, more), pc.filter(ends, more)
            if not len(p):
                return
            key_len, q = self._varints(u8, p, last)
            value_len, r = self._varints(u8, pc.add(q, pc.max_element_wise(key_len, zero)), last)
            if pc.min(key_len).as_py() < 0 or pc.min(value_len).as_py() < -1:
                raise CorruptRecords("a header's length is negative")
            p = pc.add(r, pc.max_element_wise(value_len, zero))
            left = pc.subtract(left, i64[1])

    def _headers(self, src: Any, u8: Any, at: Any, ends: Any, n: int) -> Any:
        pa, pc = self.pa, self.pc
        htype = self.schema.field("headers").type
        if pc.all(self._bare(u8, at, ends)).as_py():  # no record has headers
            return pa.array([[]] * n, htype)
        view = memoryview(src)
        rows = [
            _parse_headers(view, a, e)
            for a, e in zip(at.to_pylist(), ends.to_pylist(), strict=True)
        ]
        return pa.array(rows, htype)


#: the largest record (its length varint included) whose length takes k bytes, by k
_TOTAL_UNDER = [0] + [64 * 128 ** (k - 1) - 1 + k for k in range(1, 6)]
_LITTLE_ENDIAN = sys.byteorder == "little"

#: headers per record the check without a headers column walks in kernels (more: in Python)
_HEADER_ROUNDS = 8


def _uvarint(buf: Any, p: int, end: int) -> tuple[int, int]:
    raw = shift = 0
    while True:
        if p >= end or shift > 63:
            raise CorruptRecords("varint overruns its record")
        b = buf[p]
        p += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return raw, p
        shift += 7


def _zigzag(buf: Any, p: int, end: int) -> tuple[int, int]:
    raw, p = _uvarint(buf, p, end)
    return (raw >> 1) ^ -(raw & 1), p


def _parse_headers(view: memoryview, p: int, end: int) -> list[dict[str, Any]]:
    count, p = _zigzag(view, p, end)
    if count < 0 or count > end - p:
        raise CorruptRecords(f"header count {count}")
    out = []
    for _ in range(count):
        n, p = _zigzag(view, p, end)
        if n < 0 or p + n > end:
            raise CorruptRecords("header key overruns its record")
        key = str(view[p : p + n], "utf-8", "replace")
        p += n
        n, p = _zigzag(view, p, end)
        if n < -1 or p + n > end:
            raise CorruptRecords("header value overruns its record")
        value = None if n < 0 else bytes(view[p : p + n])
        p += max(n, 0)
        out.append({"key": key, "value": value})
    if p != end:  # Kafka: "Invalid record size"
        raise CorruptRecords("a record's fields do not end at its length")
    return out


def _is_abort_marker(body: Any, p: int, end: int) -> bool:
    """A control batch's record is an ABORT marker (its key: version, type)."""
    _, p = _zigzag(body, p, end)  # length
    p += 1  # attributes
    _, p = _zigzag(body, p, end)  # timestamp delta
    _, p = _zigzag(body, p, end)  # offset delta
    key_len, p = _zigzag(body, p, end)
    if key_len < 4 or p + 4 > end:
        raise CorruptRecords("control record without a key")
    return bool(struct.unpack_from(">h", body, p + 2)[0] == _ABORT)


def _decompress(codec: int, data: Any) -> bytes:
    try:
        return _decompress_with(codec, data)
    except CorruptRecords:
        raise
    except Exception as e:  # cramjam's DecompressionError, a short xerial frame
        raise CorruptRecords(f"compressed batch: {e}") from None


def _decompress_with(codec: int, data: Any) -> bytes:
    import cramjam

    if codec == 1:
        return bytes(cramjam.gzip.decompress(data))
    if codec == 2:
        raw = bytes(data)
        if raw.startswith(b"\x82SNAPPY\x00"):  # the Java clients' xerial framing
            out, p = bytearray(), 16
            while p + 4 <= len(raw):
                (size,) = struct.unpack_from(">i", raw, p)
                out += bytes(cramjam.snappy.decompress_raw(raw[p + 4 : p + 4 + size]))
                p += 4 + size
            return bytes(out)
        return bytes(cramjam.snappy.decompress_raw(raw))
    if codec == 3:
        return bytes(cramjam.lz4.decompress(data))
    if codec == 4:
        return bytes(cramjam.zstd.decompress(data))
    raise CorruptRecords(f"compression codec {codec}")


def _walk(
    buf: Any,
    pos: int,
    end: int,
    start: int,
    stop: int,
    aborted: list[tuple[int, int]] | None,
) -> tuple[_Records, Any, int, str | None]:
    """The one pass per record: each record's position from the lengths, and its batch's
    fields. Returns the records, the buffer their positions are in (``buf``, or a copy with
    the batches' records decompressed when any batch is compressed), the offset after the
    last complete batch, and why the walk stopped early, if it did."""
    recs = _Records()
    next_offset = start
    aborting: set[int] = set()
    pending = sorted(aborted or (), key=lambda a: a[1])
    ai = 0
    side: bytearray | None = None  # the records of every batch, once one is compressed
    pieces: list[tuple[int, int]] = []  # each batch's records in ``buf``, until then
    stopped = None
    while pos + BATCH_OVERHEAD <= end:
        (base, length, _, magic, _, attrs, last_delta, base_ts, max_ts, pid, _, _, count) = (
            BATCH_HEADER.unpack_from(buf, pos)
        )
        batch_end = pos + LOG_OVERHEAD + length
        if batch_end > end:
            break  # the response's last batch, cut at its size limit
        if magic != 2:
            stopped = f"message format v{magic}"
            break
        if length < BATCH_OVERHEAD - LOG_OVERHEAD:
            # (a length of -12 would read the same batch forever, a smaller one go back)
            raise CorruptRecords(f"batch length {length} is below a batch header's")
        if count < 0:  # (not a batch to skip: its offsets would be counted as read)
            raise CorruptRecords(f"record count {count}")
        last = base + last_delta
        body_at, pos = pos + BATCH_OVERHEAD, batch_end
        if last < start:
            continue
        if base >= stop:
            next_offset = max(next_offset, base)  # nothing is left in [next_offset, stop)
            break
        next_offset = last + 1
        if aborted is not None and pid >= 0:
            while ai < len(pending) and pending[ai][1] <= last:
                aborting.add(pending[ai][0])
                ai += 1
            if attrs & _CONTROL:
                if count and _is_abort_marker(buf, body_at, batch_end):
                    aborting.discard(pid)
                continue
            if attrs & _TRANSACTIONAL and pid in aborting:
                continue
        if attrs & _CONTROL or count <= 0:
            continue
        codec = attrs & _COMPRESSION
        body, b_from, b_to = buf, body_at, batch_end
        if codec:
            if side is None:
                side = bytearray()
                for f, t in pieces:
                    side += buf[f:t]
            body = _decompress(codec, memoryview(buf)[body_at:batch_end])
            b_from, b_to = 0, len(body)
        first = len(recs.starts)
        try:
            p = _lengths(body, b_from, count, recs.starts)
        except IndexError:
            raise CorruptRecords("a record overruns its batch") from None
        if p != b_to:
            # Kafka: "Incorrect declared batch size, records still remaining"
            raise CorruptRecords("the records do not fill their batch")
        if side is not None:
            shift = len(side) - b_from
            side += body[b_from:b_to] if body is buf else body
            if shift:
                recs.starts[first:] = [x + shift for x in recs.starts[first:]]
            b_to += shift
        else:
            pieces.append((b_from, b_to))
        recs.run_ends.append(len(recs.starts))
        recs.batch_ends.append(b_to)
        recs.base_offsets.append(base)
        if attrs & _LOG_APPEND_TIME:
            recs.base_ts.append(max_ts)
            recs.append_time.append(1)
        else:
            recs.base_ts.append(base_ts)
            recs.append_time.append(0)
    if side is not None:
        _rebase(recs, pieces)
        return recs, side, next_offset, stopped
    return recs, buf, next_offset, stopped


#: records read one by one after a run of equal lengths that was too short to pay
_PLAIN_STRETCH = 32
#: the shortest run of equal record lengths worth the look-ahead's two slices
_MIN_RUN = 8
#: the most records one look-ahead covers (its slices cost a byte per record it covers)
_MAX_RUN = 4096


def _lengths(body: Any, p: int, count: int, starts: list[int]) -> int:
    """The per-record loop: where each record starts, from the lengths alone.

    Runs of records of one length (fixed-size values; keys of one width) are taken whole: if
    the record at ``p`` is ``stride`` bytes long, the records at ``p + k * stride`` have the
    same length bytes for as long as the byte columns ``body[p::stride]`` (one per length
    byte) repeat the first record's, which ``lstrip`` counts in C. Where lengths vary, the
    records are read one by one (one- and two-byte lengths inline: every record under
    8 KiB).

    A length that is negative or not in its shortest form (Kafka's writers never write one)
    raises: with both ruled out, a record's size alone says how long its length varint is,
    which is how :meth:`BatchColumns._columns` finds each record's fields."""
    left = count
    end = len(body)
    speculate = hasattr(body, "lstrip")  # bytes, bytearray (a memoryview: one by one)
    plain = 0 if speculate else count
    add = starts.append
    while left > 0:
        if plain:
            n = min(plain, left)
            plain -= n
            left -= n
            for _ in range(n):
                add(p)
                b = body[p]
                if b < 0x80:
                    if b & 1:
                        raise CorruptRecords("negative record length")
                    p += 1 + (b >> 1)
                else:
                    b2 = body[p + 1]
                    if 0 < b2 < 0x80 and not b & 1:
                        p += 2 + (((b & 0x7F) | (b2 << 7)) >> 1)
                    else:
                        p = _record_end(body, p, end)
            continue
        raw, q = _uvarint(body, p, end)
        _check_length(raw, q - p)
        stride = q - p + (raw >> 1)
        run = 1
        if left >= _MIN_RUN:
            run = min(left, _MAX_RUN)
            limit = min(p + stride * run, end)
            for k in range(p, q):  # each length byte, as a column over the run
                column = body[k:limit:stride]
                run = min(run, len(column) - len(column.lstrip(column[:1])))
        starts.extend(range(p, p + stride * run, stride))
        p += stride * run
        left -= run
        if run < _MIN_RUN:
            plain = _PLAIN_STRETCH
    return p


def _record_end(body: Any, p: int, end: int) -> int:
    """Where the record at ``p`` ends, from its length varint (checked as :func:`_lengths`
    says)."""
    raw, q = _uvarint(body, p, end)
    _check_length(raw, q - p)
    return q + (raw >> 1)


def _check_length(raw: int, size: int) -> None:
    """A record length's zigzag ``raw`` value, read from ``size`` bytes."""
    if raw & 1:
        raise CorruptRecords("negative record length")
    if size != max(1, (raw.bit_length() + 6) // 7):
        raise CorruptRecords("a record length not in its shortest form")


def _rebase(recs: _Records, pieces: list[tuple[int, int]]) -> None:
    """Move the positions of the records walked before the side buffer began (one piece per
    batch, copied to its front in order) from ``buf`` to the side buffer."""
    i = at = 0
    for b, (f, t) in enumerate(pieces):
        j = recs.run_ends[b]
        recs.starts[i:j] = [x + at - f for x in recs.starts[i:j]]
        recs.batch_ends[b] = at + t - f
        i = j
        at += t - f
