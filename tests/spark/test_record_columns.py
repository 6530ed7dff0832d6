"""BatchColumns.decode (the executors' direct reads) against record batches built by
kafkalite.protocol.records: each Arrow column compared with the values the batches were
built from. Pure decode: no SparkSession, no broker."""

from __future__ import annotations

import functools
import signal
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import cramjam
import crc32c
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from kafkalite.protocol.record_batch import InvalidRecordBatch
from kafkalite.protocol.records import (
    ControlRecordType,
    Record,
    build_batch,
    build_control_batch,
    iter_batches,
)
from kafkalite.spark.datasource import kafka_schema
from kafkalite.spark.record_columns import BatchColumns, CorruptRecords, Decoded

TOPIC, PARTITION = "clicks", 3
BASE_TS = 1_700_000_000_000
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@functools.cache
def columns(include_headers: bool = True) -> BatchColumns:
    """As the connector builds it (kafkalite.spark.client.read_range)."""
    schema = to_arrow_schema(kafka_schema(include_headers), timezone="UTC")
    return BatchColumns(TOPIC, PARTITION, include_headers, schema)


@dataclass
class Row:
    """One expected row, in plain Python."""

    offset: int
    timestamp: int  # ms
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp_type: int = 0


def rows_of(records: Sequence[Record], *, log_append_time: int | None = None) -> list[Row]:
    if log_append_time is not None:
        return [Row(r.offset, log_append_time, r.key, r.value, list(r.headers), 1) for r in records]
    return [Row(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records]


def decode(
    buf: bytes | bytearray | memoryview,
    *,
    start: int = 0,
    stop: int = 1 << 62,
    aborted: list[tuple[int, int]] | None = None,
    include_headers: bool = True,
    pos: int = 0,
    end: int | None = None,
) -> Decoded:
    return columns(include_headers).decode(
        buf, pos, len(buf) if end is None else end, start=start, stop=stop, aborted=aborted
    )


def assert_rows(got: Decoded, expected: list[Row], *, include_headers: bool = True) -> None:
    """Column by column, against the rows built in Python."""
    if not expected:
        assert got.batch is None
        return
    b = got.batch
    assert b is not None
    b.validate(full=True)
    assert b.schema == columns(include_headers).schema
    assert b.num_rows == len(expected)
    assert b.column("key").to_pylist() == [r.key for r in expected]
    assert b.column("value").to_pylist() == [r.value for r in expected]
    assert b.column("topic").to_pylist() == [TOPIC] * len(expected)
    assert b.column("partition").to_pylist() == [PARTITION] * len(expected)
    assert b.column("offset").to_pylist() == [r.offset for r in expected]
    micros = b.column("timestamp").cast(pa.int64()).to_pylist()
    assert micros == [r.timestamp * 1000 for r in expected]
    assert b.column("timestampType").to_pylist() == [r.timestamp_type for r in expected]
    if include_headers:
        assert b.column("headers").to_pylist() == [
            [{"key": k, "value": v} for k, v in r.headers] for r in expected
        ]
    else:
        assert "headers" not in b.schema.names


def records(
    values: Sequence[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    ts: int = BASE_TS,
) -> list[Record]:
    return [Record(base_offset + i, ts + i, k, v) for i, (k, v) in enumerate(values)]


def raw_batch(
    body: bytes,
    count: int,
    *,
    base_offset: int = 0,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    batch_length: int | None = None,
    magic: int = 2,
) -> bytes:
    """A batch header around a hand-made (possibly corrupt) records section."""
    last = count - 1 if last_offset_delta is None else last_offset_delta
    length = 49 + len(body) if batch_length is None else batch_length
    head = struct.pack(
        ">qiiBIhiqqqhii",
        base_offset,
        length,
        -1,
        magic,
        0,
        attributes,
        last,
        BASE_TS,
        BASE_TS,
        -1,
        -1,
        -1,
        count,
    )
    out = bytearray(head + body)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def varint(n: int) -> bytes:
    raw = (n << 1) ^ (n >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def record_bytes(key: bytes, value: bytes, *, offset_delta: int = 0) -> bytes:
    body = b"\x00" + varint(0) + varint(offset_delta)
    body += varint(len(key)) + key + varint(len(value)) + value + varint(0)
    return varint(len(body)) + body


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """A decode that loops forever fails the test instead of hanging the suite."""

    def hang(*_: Any) -> None:
        raise TimeoutError("decode did not finish")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# --- strategies --------------------------------------------------------------------------

large = st.builds(lambda n, b: bytes([b]) * n, st.integers(8193, 20_000), st.integers(0, 255))
payloads = st.one_of(st.none(), st.just(b""), st.binary(max_size=300), large)
header_lists = st.lists(
    st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=40))), max_size=4
)


@st.composite
def record_lists(
    draw: st.DrawFn, *, base_offset: int = 0, gaps: bool = False, headers: bool = False
) -> list[Record]:
    n = draw(st.integers(1, 12))
    deltas = (
        sorted(draw(st.sets(st.integers(0, 1000), min_size=n, max_size=n)))
        if gaps
        else list(range(n))
    )
    base_ts = draw(st.integers(0, 1 << 41))
    out = []
    for d in deltas:
        ts = base_ts + draw(st.integers(-(1 << 40), 1 << 40))
        hs = draw(header_lists) if headers else []
        out.append(Record(base_offset + d, ts, draw(payloads), draw(payloads), hs))
    return out


# --- keys, values, headers -----------------------------------------------------------------


@PROPERTY
@given(record_lists())
def test_keys_and_values_of_any_size_null_and_empty(recs: list[Record]) -> None:
    buf = build_batch(recs)
    got = decode(buf)
    assert_rows(got, rows_of(recs))
    assert got.next_offset == recs[-1].offset + 1
    assert got.stopped is None


def test_null_key_tombstone_and_empty_bytes() -> None:
    recs = records([(None, b"v"), (b"k", None), (b"", b""), (None, None), (b"", None)])
    assert_rows(decode(build_batch(recs)), rows_of(recs))


def test_values_over_8_kib_have_three_byte_length_varints() -> None:
    big = bytes(range(256)) * 40  # 10 KiB: a three-byte record length
    recs = records([(b"a", big), (big[:9000], b"b"), (None, big * 7), (b"z", b"")])
    assert_rows(decode(build_batch(recs)), rows_of(recs))


def test_records_on_both_sides_of_each_length_varint_size_in_one_response() -> None:
    """A record's length varint takes 1 byte up to 64 bytes in all, 2 up to 8,193, then 3:
    the decode finds each record's fields from that rule, so records just under and over
    each bound, mixed in one response, keep their own values."""
    sizes = [*range(40, 72), *range(8160, 8200), 5, 9000]
    recs = records([(b"k", bytes([n % 251]) * n) for n in sizes])
    totals = {len(record_bytes(b"k", bytes(n))) for n in sizes}
    assert {64, 66, 8193, 8195} <= totals  # the bounds themselves are in the response
    assert_rows(
        decode(build_batch(recs[:40]) + build_batch(recs[40:], base_offset=40)), rows_of(recs)
    )


def test_many_records_in_one_batch() -> None:
    recs = records(
        [
            (None if i % 7 == 0 else f"k{i}".encode(), f"value-{i}".encode() * (i % 5))
            for i in range(5000)
        ],
        base_offset=1_000_000,
    )
    got = decode(build_batch(recs, base_offset=1_000_000), start=1_000_000)
    assert_rows(got, rows_of(recs))
    assert got.next_offset == 1_005_000


@PROPERTY
@given(
    st.lists(
        st.tuples(st.integers(1, 40), st.sampled_from([0, 1, 5, 60, 200, 9000]), st.booleans()),
        min_size=1,
        max_size=8,
    ),
    st.integers(1, 3),
    st.sampled_from([0, 4]),
    st.booleans(),
)
def test_runs_of_records_of_one_length(
    runs: list[tuple[int, int, bool]], batches: int, codec: int, as_view: bool
) -> None:
    """Stretches of records with equal length bytes (fixed-size values, keys of one width),
    long and short, across batch boundaries: the walk takes such runs whole."""
    recs = []
    for count, size, keyed in runs:
        for _ in range(count):
            i = len(recs)
            key = f"k{i % 10}".encode() if keyed else None
            recs.append(Record(i, BASE_TS + i, key, bytes([i % 251]) * size))
    cut = [len(recs) * b // batches for b in range(batches + 1)]
    parts = [recs[a:b] for a, b in zip(cut, cut[1:], strict=False) if b > a]
    buf = b"".join(build_batch(p, base_offset=p[0].offset, compression=codec) for p in parts)
    got = decode(memoryview(buf) if as_view else buf)
    assert_rows(got, rows_of(recs))
    assert got.next_offset == len(recs)


def test_headers_none_several_null_value_non_ascii_keys() -> None:
    recs = [
        Record(0, BASE_TS, b"k0", b"v0", []),
        Record(1, BASE_TS, b"k1", b"v1", [("a", b"1"), ("b", b""), ("a", b"2")]),
        Record(2, BASE_TS, None, b"v2", [("null", None)]),
        Record(3, BASE_TS, b"k3", None, [("clé", b"\xff\x00"), ("键🔑", b"x" * 200)]),
        Record(4, BASE_TS, b"k4", b"v4", [("", b"empty key")]),
    ]
    assert_rows(decode(build_batch(recs)), rows_of(recs))


@PROPERTY
@given(record_lists(headers=True), st.booleans())
def test_headers_of_any_shape(recs: list[Record], include_headers: bool) -> None:
    got = decode(build_batch(recs), include_headers=include_headers)
    assert_rows(got, rows_of(recs), include_headers=include_headers)


def test_include_headers_false_ignores_headers() -> None:
    recs = [
        Record(0, BASE_TS, b"k", b"v", [("h", b"x"), ("n", None)]),
        Record(1, BASE_TS, b"k", b"v", []),
    ]
    got = decode(build_batch(recs), include_headers=False)
    assert got.batch is not None and got.batch.schema.names[-1] == "timestampType"
    assert_rows(got, rows_of(recs), include_headers=False)


# --- timestamps --------------------------------------------------------------------------


@PROPERTY
@given(
    st.integers(0, 1 << 42),
    st.lists(st.integers(-(1 << 41), 1 << 41), min_size=1, max_size=20),
)
def test_create_time_deltas_large_and_negative(base: int, deltas: list[int]) -> None:
    recs = [Record(i, base + d, b"k", b"v") for i, d in enumerate(deltas)]
    got = decode(build_batch(recs))
    assert_rows(got, rows_of(recs))


def test_create_time_deltas_of_every_varlong_size() -> None:
    deltas = [0, 63, -64, 64, 8191, -8192, 1 << 20, -(1 << 27), 1 << 34, -(1 << 40), 1 << 41]
    recs = [Record(i, BASE_TS + d, b"k", b"v") for i, d in enumerate(deltas)]
    assert_rows(decode(build_batch(recs)), rows_of(recs))


def test_log_append_time_batch_gives_every_record_the_max_timestamp() -> None:
    append = BASE_TS + 12_345
    recs = records([(b"a", b"1"), (b"b", b"2"), (None, b"3")], ts=BASE_TS - 99_999)
    got = decode(build_batch(recs, timestamp_type=1, max_timestamp=append))
    assert_rows(got, rows_of(recs, log_append_time=append))


def test_log_append_time_and_create_time_batches_mixed() -> None:
    append = BASE_TS + 777
    first = records([(b"a", b"1"), (b"b", b"2")], ts=BASE_TS + 5)
    second = records([(b"c", b"3")], base_offset=2, ts=BASE_TS - 5)
    third = records([(b"d", b"4"), (b"e", b"5")], base_offset=3, ts=BASE_TS + 1_000_000)
    buf = (
        build_batch(first)
        + build_batch(second, base_offset=2, timestamp_type=1, max_timestamp=append)
        + build_batch(third, base_offset=3)
    )
    expected = rows_of(first) + rows_of(second, log_append_time=append) + rows_of(third)
    assert_rows(decode(buf), expected)


# --- offsets, ranges, truncation ---------------------------------------------------------


def expected_next_offset(batches: list[tuple[int, int]], start: int, stop: int) -> int:
    """The spec of ``Decoded.next_offset`` over complete batches (base, last offset)."""
    nxt = start
    for base, last in batches:
        if last < start:
            continue
        if base >= stop:
            return max(nxt, base)
        nxt = last + 1
    return nxt


@st.composite
def batch_runs(draw: st.DrawFn, *, gaps: bool = True, headers: bool = False) -> list[list[Record]]:
    """Consecutive batches (offsets increasing, with gaps inside and between them)."""
    out: list[list[Record]] = []
    base = draw(st.integers(0, 1000))
    for _ in range(draw(st.integers(1, 5))):
        recs = draw(record_lists(base_offset=base, gaps=gaps, headers=headers))
        out.append(recs)
        base = recs[-1].offset + 1 + draw(st.integers(0, 3))
    return out


def test_offset_gaps_inside_a_batch_as_after_compaction() -> None:
    recs = [Record(o, BASE_TS + o, f"k{o}".encode(), b"v") for o in (100, 101, 104, 130, 131)]
    buf = build_batch(recs, base_offset=100, last_offset_delta=40)
    got = decode(buf, start=100)
    assert_rows(got, rows_of(recs))
    assert got.next_offset == 141  # past the batch's last offset, not its last record


@PROPERTY
@given(batch_runs(), st.data())
def test_only_offsets_in_start_stop_appear(runs: list[list[Record]], data: st.DataObject) -> None:
    first, last = runs[0][0].offset, runs[-1][-1].offset
    start = data.draw(st.integers(first - 2, last + 2), label="start")
    stop = data.draw(st.integers(start, last + 3), label="stop")
    buf = b"".join(build_batch(recs, base_offset=recs[0].offset) for recs in runs)
    got = decode(buf, start=start, stop=stop)
    expected = [r for recs in runs for r in rows_of(recs) if start <= r.offset < stop]
    assert_rows(got, expected)
    spans = [(recs[0].offset, recs[-1].offset) for recs in runs]
    assert got.next_offset == expected_next_offset(spans, start, stop)
    assert got.stopped is None


def test_stop_inside_a_batch_keeps_next_offset_past_it() -> None:
    recs = records([(b"k", str(i).encode()) for i in range(10)], base_offset=50)
    got = decode(build_batch(recs, base_offset=50), start=53, stop=56)
    assert_rows(got, [r for r in rows_of(recs) if 53 <= r.offset < 56])
    assert got.next_offset == 60


@PROPERTY
@given(batch_runs(gaps=False), st.data())
def test_truncated_last_batch_is_ignored(runs: list[list[Record]], data: st.DataObject) -> None:
    batches = [build_batch(recs, base_offset=recs[0].offset) for recs in runs]
    cut = data.draw(st.integers(0, len(batches[-1]) - 1), label="cut")
    buf = b"".join(batches[:-1]) + batches[-1][:cut]
    start = runs[0][0].offset
    got = decode(buf, start=start)
    assert_rows(got, [r for recs in runs[:-1] for r in rows_of(recs)])
    assert got.next_offset == (runs[-2][-1].offset + 1 if len(runs) > 1 else start)
    assert got.stopped is None


def test_records_section_inside_a_larger_buffer() -> None:
    """As in a Fetch response: the records between ``pos`` and ``end`` of a reused buffer,
    whatever bytes surround them."""
    recs = records([(b"k1", b"v1"), (None, b"v2"), (b"k3", None)], base_offset=7)
    batch = build_batch(recs, base_offset=7)
    following = build_batch(records([(b"x", b"y")], base_offset=10), base_offset=10)
    buf = bytearray(b"\xff" * 37 + batch + following + b"\x00" * 100)
    end = 37 + len(batch) + 20  # the following batch is cut by ``end``
    for view in (buf, memoryview(buf), bytes(buf)):
        got = decode(view, start=7, pos=37, end=end)
        assert_rows(got, rows_of(recs))
        assert got.next_offset == 10


# --- compression -------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batch_gives_the_uncompressed_rows(codec: int) -> None:
    recs = [
        Record(i, BASE_TS + i * 3, f"k{i}".encode() if i % 4 else None, b"v" * i, [("h", b"x")])
        for i in range(200)
    ]
    plain = decode(build_batch(recs))
    compressed = build_batch(recs, compression=codec)
    assert len(compressed) < len(build_batch(recs))
    got = decode(compressed)
    assert_rows(got, rows_of(recs))
    assert got.batch.equals(plain.batch)
    assert got.next_offset == plain.next_offset == 200


def test_raw_snappy_batch_as_librdkafka_writes() -> None:
    recs = records([(b"k", b"value" * 30), (None, b"v2")])
    plain = build_batch(recs)
    body = bytes(cramjam.snappy.compress_raw(plain[61:]))
    assert_rows(decode(raw_batch(body, 2, attributes=2)), rows_of(recs))


@PROPERTY
@given(batch_runs(), st.lists(st.sampled_from([0, 1, 2, 3, 4]), min_size=5, max_size=5))
def test_compressed_and_uncompressed_batches_mixed(
    runs: list[list[Record]], codecs: list[int]
) -> None:
    buf = b"".join(
        build_batch(recs, base_offset=recs[0].offset, compression=c)
        for recs, c in zip(runs, codecs, strict=False)
    )
    start = runs[0][0].offset
    got = decode(buf, start=start)
    assert_rows(got, [r for recs in runs for r in rows_of(recs)])
    assert got.next_offset == runs[-1][-1].offset + 1


def test_uncompressed_then_compressed_then_uncompressed_with_trimming() -> None:
    a = records([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    b = records([(b"d", b"4"), (None, b"5")], base_offset=3)
    c = records([(b"f", None), (b"g", b"7"), (b"h", b"8")], base_offset=5)
    buf = (
        build_batch(a)
        + build_batch(b, base_offset=3, compression=4)
        + build_batch(c, base_offset=5)
    )
    got = decode(buf, start=1, stop=7)
    assert_rows(got, [r for r in rows_of(a + b + c) if 1 <= r.offset < 7])
    assert got.next_offset == 8


# --- control batches and transactions ----------------------------------------------------


def test_control_batches_are_skipped_and_counted_in_next_offset() -> None:
    txn = records([(b"k0", b"v0"), (b"k1", b"v1")])
    buf = build_batch(
        txn, producer_id=5, producer_epoch=0, is_transactional=True
    ) + build_control_batch(
        ControlRecordType.COMMIT, 0, producer_id=5, producer_epoch=0, base_offset=2
    )
    for aborted in (None, []):
        got = decode(buf, aborted=aborted)
        assert_rows(got, rows_of(txn))
        assert got.next_offset == 3
    only_marker = decode(buf, start=2)
    assert only_marker.batch is None and only_marker.next_offset == 3


def test_empty_batch_left_by_compaction_counts_in_next_offset() -> None:
    recs = records([(b"k", b"v")], base_offset=20)
    buf = build_batch([], base_offset=10, last_offset_delta=9) + build_batch(recs, base_offset=20)
    got = decode(buf, start=10)
    assert_rows(got, rows_of(recs))
    assert got.next_offset == 21
    assert decode(buf[:-1], start=10).next_offset == 20


def transactions() -> tuple[bytes, dict[str, list[Row]]]:
    """Offsets: 0-1 plain, 2-3 txn of producer 7 (aborted), 4-5 txn of producer 8
    (committed), 6 ABORT marker of 7, 7 COMMIT marker of 8, 8-9 txn of 7 again (committed),
    10 COMMIT of 7, 11 an idempotent (not transactional) batch of producer 7."""
    plain = records([(b"p0", b"0"), (b"p1", b"1")])
    aborted = records([(b"a2", b"2"), (b"a3", b"3")], base_offset=2)
    committed = records([(b"c4", b"4"), (b"c5", b"5")], base_offset=4)
    again = records([(b"c8", b"8"), (None, b"9")], base_offset=8)
    idempotent = records([(b"i11", b"11")], base_offset=11)
    buf = b"".join(
        [
            build_batch(plain),
            build_batch(
                aborted, base_offset=2, producer_id=7, producer_epoch=0, is_transactional=True
            ),
            build_batch(
                committed, base_offset=4, producer_id=8, producer_epoch=0, is_transactional=True
            ),
            build_control_batch(
                ControlRecordType.ABORT, 0, producer_id=7, producer_epoch=0, base_offset=6
            ),
            build_control_batch(
                ControlRecordType.COMMIT, 0, producer_id=8, producer_epoch=0, base_offset=7
            ),
            build_batch(
                again, base_offset=8, producer_id=7, producer_epoch=1, is_transactional=True
            ),
            build_control_batch(
                ControlRecordType.COMMIT, 0, producer_id=7, producer_epoch=1, base_offset=10
            ),
            build_batch(idempotent, base_offset=11, producer_id=7, producer_epoch=1),
        ]
    )
    return buf, {
        "committed": rows_of(plain + committed + again + idempotent),
        "all": rows_of(plain + aborted + committed + again + idempotent),
    }


def test_read_committed_hides_aborted_transactions_keeps_committed() -> None:
    buf, rows = transactions()
    got = decode(buf, aborted=[(7, 2)])
    assert_rows(got, rows["committed"])
    assert got.next_offset == 12


def test_read_committed_from_inside_an_aborted_transaction() -> None:
    buf, rows = transactions()
    got = decode(buf, start=3, aborted=[(7, 2)])
    assert_rows(got, [r for r in rows["committed"] if r.offset >= 3])
    assert got.next_offset == 12


def test_read_committed_with_compressed_aborted_batch() -> None:
    kept = records([(b"k", b"kept")])
    gone = records([(b"k", b"gone")] * 3, base_offset=1)
    buf = (
        build_batch(kept, compression=3)
        + build_batch(
            gone,
            base_offset=1,
            compression=4,
            producer_id=3,
            producer_epoch=0,
            is_transactional=True,
        )
        + build_control_batch(
            ControlRecordType.ABORT, 0, producer_id=3, producer_epoch=0, base_offset=4
        )
    )
    got = decode(buf, aborted=[(3, 1)])
    assert_rows(got, rows_of(kept))
    assert got.next_offset == 5


def test_read_uncommitted_shows_every_transactional_record() -> None:
    buf, rows = transactions()
    got = decode(buf, aborted=None)
    assert_rows(got, rows["all"])
    assert got.next_offset == 12


# --- corrupt input -----------------------------------------------------------------------


def test_negative_record_length_raises() -> None:
    body = varint(-1) + record_bytes(b"k", b"v", offset_delta=1)
    with pytest.raises(CorruptRecords):
        decode(raw_batch(body, 2))


@pytest.mark.parametrize("runs", [1, 12])  # read one by one, and as a run of one length
def test_record_length_not_in_its_shortest_form_raises(runs: int) -> None:
    """Kafka's writers never pad a varint; the decode takes a record's length-varint size
    from its total size, so a padded length (0x90 0x00 for 8) is not read as if it were
    short: it raises, and the direct read hands the range to confluent-kafka."""
    recs = [record_bytes(b"k", b"v", offset_delta=i) for i in range(runs)]
    assert all(r[0] == varint(8)[0] for r in recs)  # one byte
    padded = b"".join(bytes([r[0] | 0x80, 0x00]) + r[1:] for r in recs)
    with pytest.raises(CorruptRecords, match="shortest form"):
        decode(raw_batch(padded, runs))
    assert_rows(
        decode(raw_batch(b"".join(recs), runs)),
        [Row(i, BASE_TS, b"k", b"v") for i in range(runs)],
    )


def test_record_length_shorter_than_its_fields_raises() -> None:
    good = record_bytes(b"key", b"value")
    short = varint(len(good) - 2) + good[1:-1]  # the header count cut off
    assert len(varint(len(good) - 1)) == 1
    with pytest.raises(CorruptRecords):
        decode(raw_batch(short, 1))


def test_record_length_below_the_smallest_record_raises() -> None:
    body = varint(3) + b"\x00\x00\x00"
    with pytest.raises(CorruptRecords):
        decode(raw_batch(body, 1))


def test_records_that_do_not_fill_their_batch_raise() -> None:
    two = record_bytes(b"a", b"1") + record_bytes(b"b", b"2", offset_delta=1)
    with pytest.raises(CorruptRecords):
        decode(raw_batch(two, 1))  # a record left over
    with pytest.raises(CorruptRecords):
        decode(raw_batch(two, 3))  # a record missing


def test_key_length_past_the_end_of_the_buffer_raises_corrupt_records() -> None:
    """The last record of the buffer claiming a key longer than the rest of it."""
    body = (
        varint(8) + b"\x00" + varint(0) + varint(0) + varint(63) + b"k" + varint(1) + b"v" + b"\x00"
    )
    with pytest.raises(CorruptRecords):
        decode(raw_batch(body, 1))


def test_timestamp_varint_running_past_the_record_raises() -> None:
    body = varint(6) + b"\x00" + b"\xff" * 5
    for buf in (
        raw_batch(body, 1),
        raw_batch(body, 1) + build_batch(records([(b"k", b"v")], base_offset=1), base_offset=1),
    ):
        with pytest.raises(CorruptRecords):
            decode(buf, start=0, stop=1)


def test_batch_length_below_a_batch_header_raises() -> None:
    batch = bytearray(build_batch(records([(b"k", b"v")])))
    for length in (-12, -1, 0, 48):
        bad = bytearray(batch)
        struct.pack_into(">i", bad, 8, length)
        with time_limit(5), pytest.raises(CorruptRecords):
            decode(bytes(bad) + batch, start=5)  # (the batch is before ``start``)


def test_bad_compressed_data_raises() -> None:
    recs = records([(b"k", b"v" * 100)])
    batch = bytearray(build_batch(recs, compression=1))
    batch[70:80] = b"\x00" * 10
    with pytest.raises(CorruptRecords):
        decode(bytes(batch))
    with pytest.raises(CorruptRecords):
        decode(raw_batch(b"\x01\x02\x03", 1, attributes=5))  # no codec 5


def magic_1_message(offset: int, value: bytes) -> bytes:
    body = struct.pack(">BBqi", 1, 0, BASE_TS, -1) + struct.pack(">i", len(value)) + value
    crc = 0  # never read: the decode stops at the magic byte
    return struct.pack(">qiI", offset, 4 + len(body), crc) + body


def test_magic_1_batch_stops_the_decode() -> None:
    recs = records([(b"k0", b"v0"), (b"k1", b"v1")], base_offset=40)
    buf = build_batch(recs, base_offset=40) + magic_1_message(42, b"x" * 64)
    got = decode(buf, start=40)
    assert got.stopped == "message format v1"
    assert_rows(got, rows_of(recs))
    assert got.next_offset == 42
    alone = decode(magic_1_message(42, b"x" * 64), start=42)
    assert alone.batch is None and alone.stopped == "message format v1"
    assert alone.next_offset == 42


def reference_rows(buf: bytes, include_headers: bool) -> list[Row] | None:
    """The rows kafkalite.protocol.records decodes from ``buf`` (no CRC check), under
    read_uncommitted; None if it rejects the bytes."""
    out: list[Row] = []
    try:
        for header, recs in iter_batches(buf, check_crc=False):
            if header.attributes & 0x20:
                continue
            append_time = header.max_timestamp if header.attributes & 0x08 else None
            for r in rows_of(recs, log_append_time=append_time):
                # a header key that is not UTF-8: U+FFFD as in Java's new String(bytes, UTF_8)
                r.headers = [
                    (k.encode("utf-8", "surrogateescape").decode("utf-8", "replace"), v)
                    for k, v in r.headers
                    if include_headers
                ]
                out.append(r)
    except (InvalidRecordBatch, ValueError, IndexError, struct.error):
        return None
    return out


#: timestamps (ms) Spark's TimestampType (us) holds
SPARK_TS = range(-(1 << 63) // 1000, ((1 << 63) - 1) // 1000 + 1)


@PROPERTY
@given(
    batch_runs(gaps=False, headers=True),
    st.lists(st.tuples(st.integers(0), st.integers(0, 255)), min_size=1, max_size=4),
    st.booleans(),
)
def test_flipped_bytes_never_give_wrong_rows(
    runs: list[list[Record]], flips: list[tuple[int, int]], include_headers: bool
) -> None:
    """Random corruption (no CRC is checked on this path): the decode raises CorruptRecords,
    stops, or gives exactly the rows the reference decoder reads from the same bytes; it
    never hangs nor fails otherwise. (What the reference rejects, the direct path may still
    read: a control batch's codec, say, which it never decompresses.)"""
    buf = bytearray(b"".join(build_batch(recs, base_offset=recs[0].offset) for recs in runs))
    for at, byte in flips:
        buf[at % len(buf)] = byte
    ref = reference_rows(bytes(buf), include_headers)
    try:
        with time_limit(5):
            got = decode(
                bytes(buf), start=-(1 << 63), stop=(1 << 63) - 1, include_headers=include_headers
            )
    except CorruptRecords:
        return
    except pa.ArrowInvalid as e:
        # a timestamp beyond Spark's range: the confluent-kafka path's cast fails alike
        assert "out of bounds timestamp" in str(e)
        assert ref is None or any(r.timestamp not in SPARK_TS for r in ref)
        return
    if got.stopped is not None or ref is None:
        return
    assert_rows(got, ref, include_headers=include_headers)


def test_negative_record_count_raises() -> None:
    batch = bytearray(build_batch(records([(b"k", b"v")], base_offset=1), base_offset=1))
    struct.pack_into(">i", batch, 57, -5)
    buf = build_batch(records([(b"k", b"v")])) + bytes(batch)
    with pytest.raises(CorruptRecords):
        decode(buf)  # not skipped as an empty batch: its offset would count as read


def test_offsets_that_do_not_increase_raise() -> None:
    body = record_bytes(b"a", b"1", offset_delta=2) + record_bytes(b"b", b"2", offset_delta=1)
    body += record_bytes(b"c", b"3", offset_delta=3)
    for start in (0, 2):  # (the trimming to [start, stop) counts records)
        with pytest.raises(CorruptRecords):
            decode(raw_batch(body, 3, last_offset_delta=3), start=start)
    with pytest.raises(CorruptRecords):
        decode(raw_batch(record_bytes(b"a", b"1", offset_delta=-1), 1))
    later = build_batch(records([(b"x", b"y")], base_offset=5), base_offset=5)
    earlier = build_batch(records([(b"x", b"y")], base_offset=3), base_offset=3)
    with pytest.raises(CorruptRecords):
        decode(later + earlier)


@pytest.mark.parametrize("include_headers", [True, False])
def test_value_length_too_short_raises_with_or_without_headers(include_headers: bool) -> None:
    """A value length one short leaves the value's last byte where the header count is:
    the record's fields no longer end at its length."""
    good = record_bytes(b"k", b"value\x05")
    assert good[6:7] == varint(6)
    bad = good[:6] + varint(5) + good[7:]
    assert_rows(decode(raw_batch(good, 1)), [Row(0, BASE_TS, b"k", b"value\x05")])
    with pytest.raises(CorruptRecords):
        decode(raw_batch(bad, 1), include_headers=include_headers)


@pytest.mark.parametrize("include_headers", [True, False])
def test_bytes_after_a_records_headers_raise(include_headers: bool) -> None:
    good = record_bytes(b"k", b"v")
    padded = varint(len(good)) + good[1:] + b"\x00"  # one byte more than its fields
    with pytest.raises(CorruptRecords):
        decode(raw_batch(padded, 1), include_headers=include_headers)
    with_header = Record(0, BASE_TS, b"k", b"v", [("h", b"x")])
    batch = build_batch([with_header])
    body = varint(batch[61] // 2 + 1) + batch[62:] + b"\x00"
    with pytest.raises(CorruptRecords):
        decode(raw_batch(body, 1), include_headers=include_headers)


def record_body(record: Record) -> bytes:
    """A record's bytes after its length varint, as build_batch encodes it."""
    section = build_batch([record])[61:]
    p = 0
    while section[p] & 0x80:
        p += 1
    return section[p + 1 :]


@pytest.mark.parametrize("headers", [1, 3, 8, 9, 20])
def test_headers_checked_to_the_record_end_without_a_headers_column(headers: int) -> None:
    """Records with headers read with includeHeaders=false: valid ones give their rows, a
    record a byte longer or shorter than its headers raises (with up to 8 headers checked in
    kernels, more in Python)."""
    hs = [(f"h{i}", None if i % 3 else b"x" * i) for i in range(headers)]
    recs = [Record(0, BASE_TS, b"k", b"v", hs), Record(1, BASE_TS, b"k", b"v", [])]
    assert_rows(
        decode(build_batch(recs), include_headers=False), rows_of(recs), include_headers=False
    )
    second = record_body(Record(1, BASE_TS, b"k", b"v"))
    second = second[:2] + varint(1) + second[3:]  # offset delta 1 (at index 2, 0 before)
    first = record_body(recs[0])
    for bad in (first + b"\x00", first[:-1]):  # a byte more / less than its fields
        section = varint(len(bad)) + bad + varint(len(second)) + second
        with pytest.raises(CorruptRecords):
            decode(raw_batch(section, 2), include_headers=False)
    good = varint(len(first)) + first + varint(len(second)) + second
    assert_rows(decode(raw_batch(good, 2)), rows_of(recs))
