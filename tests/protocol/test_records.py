"""Record-level codec: varints, decode_batch/build_batch, control records.

Cross-checked against two independent stock implementations of the format:
kafka-python's and aiokafka's record builders and readers. kafka-python finds
no python-snappy/lz4/zstandard here, so its codec hooks get thin cramjam shims
(raw snappy blocks only: kafka-python's own xerial framing stays in the loop).
"""

from __future__ import annotations

import struct

import aiokafka.codec
import cramjam
import crc32c
import hypothesis.strategies as st
import kafka.codec
import kafka.record.default_records as kp_default
import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from hypothesis import HealthCheck, given, settings
from kafka.record._crc32c import crc as pure_python_crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka.record.util import decode_varint as kp_decode_varint
from kafka.record.util import encode_varint as kp_encode_varint

from kafkalite.protocol import record_batch as rb
from kafkalite.protocol.compression import CompressionType, DecompressedSizeExceeded
from kafkalite.protocol.record_batch import CorruptRecordBatch, UnsupportedCompression
from kafkalite.protocol.records import (
    ControlRecordType,
    Record,
    build_batch,
    build_control_batch,
    control_record,
    decode_batch,
    iter_batches,
    iter_records,
    parse_control_record,
)
from kafkalite.protocol.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    UINT32_MAX,
    VarintError,
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
    size_of_unsigned_varint,
    size_of_varint,
    size_of_varlong,
)

CODECS = list(CompressionType)
COMPRESSED = [c for c in CompressionType if c]
HEADER = struct.Struct(">qiibIhiqqqhii")


class _RawSnappy:
    """python-snappy's block API, which kafka-python frames itself."""

    @staticmethod
    def compress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.compress_raw(data))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.decompress_raw(data))


@pytest.fixture
def kafka_python_codecs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka.codec, "snappy", _RawSnappy)
    monkeypatch.setattr(kafka.codec, "lz4", object())
    monkeypatch.setattr(kafka.codec, "zstd", object())
    monkeypatch.setattr(kp_default, "lz4_encode", aiokafka.codec.lz4_encode)
    monkeypatch.setattr(kp_default, "lz4_decode", aiokafka.codec.lz4_decode)
    monkeypatch.setattr(kp_default, "zstd_encode", aiokafka.codec.zstd_encode)
    monkeypatch.setattr(kp_default, "zstd_decode", aiokafka.codec.zstd_decode)


def sample_records(n: int = 50, base_ts: int = 1_700_000_000_000) -> list[Record]:
    """Compressible records covering null/empty keys and values, headers, odd timestamps."""
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else (b"" if i % 11 == 5 else f"key-{i % 9}".encode())
        value = None if i % 13 == 4 else (b"" if i % 17 == 6 else b"value %d " % i * (i % 5 + 1))
        headers: list[tuple[str, bytes | None]] = []
        if i % 3 == 0:
            headers = [("trace-id", b"abc%d" % i), ("empty", b""), ("null", None), ("ünï", b"\x00")]
        ts = base_ts + (i * 37) % 500 - 100  # not monotonic; some before the first
        out.append(Record(i, ts, key, value, headers))
    return out


def as_tuples(records: list) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records]


def resign(batch: bytearray) -> bytearray:
    struct.pack_into(
        ">I", batch, rb.CRC_OFFSET, crc32c.crc32c(bytes(batch[rb.ATTRIBUTES_OFFSET :]))
    )
    return batch


def raw_batch(body: bytes, count: int, *, attributes: int = 0, last_offset_delta: int = 0) -> bytes:
    """A header with a valid CRC around an arbitrary records section."""
    out = bytearray(rb.HEADER_SIZE) + body
    HEADER.pack_into(
        out, 0, 0, len(out) - 12, -1, 2, 0, attributes, last_offset_delta, 0, 0, -1, -1, -1, count
    )
    return bytes(resign(out))


# --- varints ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-2, b"\x03"), (63, b"\x7e"), (-64, b"\x7f"),
     (64, b"\x80\x01"), (300, b"\xd8\x04"), (INT32_MAX, b"\xfe\xff\xff\xff\x0f"),
     (INT32_MIN, b"\xff\xff\xff\xff\x0f")],
)  # fmt: skip
def test_varint_known_encodings(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert encode_varlong(value) == encoded
    assert decode_varint(encoded) == (value, len(encoded))
    assert decode_varlong(b"xx" + encoded, 2) == (value, 2 + len(encoded))
    assert size_of_varint(value) == len(encoded)


def test_varlong_int64_boundaries() -> None:
    assert encode_varlong(INT64_MAX) == b"\xfe" + b"\xff" * 8 + b"\x01"
    assert encode_varlong(INT64_MIN) == b"\xff" * 9 + b"\x01"
    for v in (INT64_MAX, INT64_MIN, INT32_MAX + 1, INT32_MIN - 1):
        assert decode_varlong(encode_varlong(v)) == (v, 10 if abs(v) > 1 << 62 else 5)
        assert size_of_varlong(v) == len(encode_varlong(v))


def test_varint_out_of_range_or_malformed_is_rejected() -> None:
    for bad in (INT32_MAX + 1, INT32_MIN - 1):
        with pytest.raises(VarintError):
            encode_varint(bad)
    for bad in (INT64_MAX + 1, INT64_MIN - 1):
        with pytest.raises(VarintError):
            encode_varlong(bad)
    with pytest.raises(VarintError, match="truncated"):
        decode_varint(b"\x80\x80")
    with pytest.raises(VarintError, match="truncated"):
        decode_varint(b"")
    with pytest.raises(VarintError, match="longer"):
        decode_varint(b"\x80\x80\x80\x80\x80\x01")
    with pytest.raises(VarintError, match="32 bits"):
        decode_varint(b"\xff\xff\xff\xff\x7f")
    with pytest.raises(VarintError, match="longer"):
        decode_varlong(b"\x80" * 10 + b"\x01")
    with pytest.raises(VarintError, match="64 bits"):
        decode_varlong(b"\xff" * 9 + b"\x7f")


def test_unsigned_varint() -> None:
    assert encode_unsigned_varint(0) == b"\x00"
    assert encode_unsigned_varint(127) == b"\x7f"
    assert encode_unsigned_varint(128) == b"\x80\x01"
    assert encode_unsigned_varint(300) == b"\xac\x02"
    assert encode_unsigned_varint(UINT32_MAX) == b"\xff\xff\xff\xff\x0f"
    assert decode_unsigned_varint(b"\xff\xff\xff\xff\x0f") == (UINT32_MAX, 5)
    assert size_of_unsigned_varint(UINT32_MAX) == 5
    with pytest.raises(VarintError):
        encode_unsigned_varint(-1)
    with pytest.raises(VarintError):
        encode_unsigned_varint(UINT32_MAX + 1)
    with pytest.raises(VarintError):
        decode_unsigned_varint(b"\xff\xff\xff\xff\x1f")


@given(st.integers(INT32_MIN, INT32_MAX))
def test_varint_round_trip_matches_kafka_python(value: int) -> None:
    encoded = encode_varint(value)
    assert decode_varint(encoded) == (value, len(encoded))
    assert (
        decode_unsigned_varint(encode_unsigned_varint(value & UINT32_MAX))[0] == value & UINT32_MAX
    )
    theirs = bytearray()
    kp_encode_varint(value, theirs.append)
    assert bytes(theirs) == encoded


@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_round_trip_matches_kafka_python(value: int) -> None:
    encoded = encode_varlong(value)
    assert decode_varlong(encoded) == (value, len(encoded))
    assert size_of_varlong(value) == len(encoded)
    assert kp_decode_varint(encoded, 0) == (value, len(encoded))


# --- cross-checks with stock implementations --------------------------------------


def _kafka_python_batch(records: list[Record], codec: int, **producer: int) -> bytes:
    builder = KpBuilder(
        magic=2, compression_type=codec, is_transactional=producer.get("txn", 0),
        producer_id=producer.get("pid", -1), producer_epoch=producer.get("epoch", -1),
        base_sequence=producer.get("seq", -1), batch_size=1 << 30,
    )  # fmt: skip
    for r in records:
        builder.append(r.offset, r.timestamp, r.key, r.value, r.headers)
    return bytes(builder.build())


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.kafka_name)
def test_decodes_batches_built_by_kafka_python(codec: CompressionType) -> None:
    records = sample_records()
    data = _kafka_python_batch(records, codec, pid=77, epoch=3, seq=1000, txn=1)
    header, decoded = decode_batch(data)
    assert header.compression == codec  # the data compresses, so kafka-python kept the codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 1000)
    assert header.is_transactional and not header.is_control
    assert header.records_count == len(records) and header.last_offset_delta == len(records) - 1
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert as_tuples(decoded) == as_tuples(records)


@pytest.mark.usefixtures("kafka_python_codecs")
def test_decodes_kafka_python_memory_records_with_skipped_offsets() -> None:
    builder = MemoryRecordsBuilder(magic=2, compression_type=1, batch_size=1 << 20, offset=500)
    expected = []
    for i in range(20):
        if i % 4 == 2:
            builder.skip(3)  # kafka-python's hook for compacted batches
        meta = builder.append(1000 + i, b"k%d" % i, b"v" * 50, [("h", b"%d" % i)])
        expected.append((meta.offset, 1000 + i, b"k%d" % i, b"v" * 50, [("h", b"%d" % i)]))
    builder.close()
    (header, decoded), = iter_batches(bytes(builder.buffer()))  # fmt: skip
    # kafka-python leaves baseOffset 0 (the broker assigns it) and puts 500+ in the deltas
    assert header.base_offset == 0
    assert header.last_offset == expected[-1][0] > 500 + 20
    assert as_tuples(decoded) == expected


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.kafka_name)
def test_decodes_batches_built_by_aiokafka(codec: CompressionType) -> None:
    records = sample_records(80)
    builder = AioBuilder(2, codec, 0, -1, -1, -1, 1 << 30)
    for r in records:
        builder.append(r.offset, r.timestamp, r.key, r.value, r.headers)
    header, decoded = decode_batch(bytes(builder.build()))
    assert header.compression == codec
    assert as_tuples(decoded) == as_tuples(records)


def _read_with_kafka_python(data: bytes) -> list[tuple]:
    out = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        out.extend((r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch)
    return out


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.kafka_name)
def test_kafka_python_reads_batches_we_build(codec: CompressionType) -> None:
    records = sample_records()
    data = build_batch(records, compression=codec, producer_id=9, producer_epoch=1, base_sequence=5)
    assert pure_python_crc32c(data[rb.ATTRIBUTES_OFFSET :]) == rb.parse_header(data).crc
    batch = MemoryRecords(data).next_batch()
    assert batch.compression_type == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 1, 5)
    assert batch.first_timestamp == records[0].timestamp
    assert batch.max_timestamp == max(r.timestamp for r in records)
    assert batch.last_offset_delta == len(records) - 1
    assert _read_with_kafka_python(data) == as_tuples(records)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.kafka_name)
def test_aiokafka_reads_batches_we_build(codec: CompressionType) -> None:
    records = sample_records(80)
    batch = AioBatch(build_batch(records, base_offset=0, compression=codec))
    assert batch.validate_crc()
    assert batch.compression_type == codec
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == as_tuples(records)


@pytest.mark.usefixtures("kafka_python_codecs")
def test_consecutive_batches_with_base_offsets_read_by_kafka_python() -> None:
    first = sample_records(10)
    second = [Record(r.offset + 10, r.timestamp, r.key, r.value, r.headers) for r in first]
    data = build_batch(first, compression=2) + build_batch(second, base_offset=10, compression=3)
    assert _read_with_kafka_python(data) == as_tuples(first + second)
    assert [(h.base_offset, r.offset) for h, r in iter_records(data)][9:11] == [(0, 9), (10, 10)]


# --- semantics --------------------------------------------------------------------


def test_log_append_time_gives_every_record_the_batch_max_timestamp() -> None:
    records = sample_records(5)
    data = build_batch(records, timestamp_type=1, max_timestamp=42_000)
    header, decoded = decode_batch(data)
    assert header.is_log_append_time and header.max_timestamp == 42_000
    assert {r.timestamp for r in decoded} == {42_000}
    # the header codec's in-place rewrite gives the same answer
    buf = bytearray(build_batch(records))
    rb.set_log_append_time(buf, 0, len(buf), 99_000)
    assert {r.timestamp for r in decode_batch(buf)[1]} == {99_000}
    assert [r.timestamp for r in MemoryRecords(bytes(buf)).next_batch()] == [99_000] * 5


def test_offset_gaps_round_trip_like_a_compacted_batch() -> None:
    records = [Record(off, 1000 + off, b"k%d" % off, b"v", []) for off in (100, 103, 104, 110)]
    data = build_batch(records, base_offset=100)
    header, decoded = decode_batch(data)
    assert header.last_offset_delta == 10 and header.records_count == 4
    assert [r.offset for r in decoded] == [100, 103, 104, 110]
    assert [r[0] for r in _read_with_kafka_python(data)] == [100, 103, 104, 110]
    # and after the broker moves the batch, offsets follow the new base
    buf = bytearray(data)
    rb.set_base_offset(buf, 0, 5000)
    assert [r.offset for r in decode_batch(buf)[1]] == [5000, 5003, 5004, 5010]


def test_delete_horizon_is_stored_as_base_timestamp_with_deltas_from_it() -> None:
    records = [Record(i, 1_000 + i, b"k", None if i else b"v", []) for i in range(3)]
    data = build_batch(records, delete_horizon_ms=500_000)
    header, decoded = decode_batch(data)
    assert header.has_delete_horizon and header.base_timestamp == 500_000
    assert header.max_timestamp == 1_002
    assert [r.timestamp for r in decoded] == [1_000, 1_001, 1_002]
    assert [r[1] for r in _read_with_kafka_python(data)] == [1_000, 1_001, 1_002]


def test_empty_batch_keeps_offsets_and_is_written_uncompressed() -> None:
    data = build_batch(
        [], base_offset=40, last_offset_delta=9, max_timestamp=7, compression=1,
        producer_id=5, producer_epoch=0, base_sequence=12,
    )  # fmt: skip
    header, decoded = decode_batch(data)
    assert decoded == []
    assert (header.base_offset, header.last_offset, header.next_offset) == (40, 49, 50)
    assert header.compression == 0 and header.records_count == 0
    assert (header.base_timestamp, header.max_timestamp) == (7, 7)
    assert header.last_sequence == 21
    assert rb.validate_batch(data, 0, len(data), check_crc=True).records_count == 0


def test_every_varint_width_in_every_field_round_trips() -> None:
    # one-, two- and longer varints take different decode paths
    sizes = [0, 63, 64, 8191, 8192, 70_000]
    base = 1 << 40
    records = [
        Record(
            base + gap,
            ts,
            b"k" * size,
            b"v" * sizes[-1 - i],
            [("h" * size, b"x" * sizes[i % 3])] * (i * 30),
        )
        for i, (size, gap, ts) in enumerate(
            zip(sizes, [0, 63, 64, 8191, 2**20, 2**31 - 1],
                [0, -(1 << 62), 1 << 62, -64, 8191, 1], strict=True)
        )
    ]  # fmt: skip
    data = build_batch(records, base_offset=base)
    assert as_tuples(decode_batch(data)[1]) == as_tuples(records)
    assert _read_with_kafka_python(data) == as_tuples(records)


def test_tuples_take_dense_offsets_and_the_given_timestamp() -> None:
    data = build_batch(
        [(b"a", b"1"), (None, b"2", [("h", None)]), (b"c", None, [], 5)],
        base_offset=7, timestamp_ms=1234,
    )  # fmt: skip
    assert as_tuples(decode_batch(data)[1]) == [
        (7, 1234, b"a", b"1", []),
        (8, 1234, None, b"2", [("h", None)]),
        (9, 5, b"c", None, []),
    ]


def test_build_rejects_offsets_that_do_not_increase() -> None:
    with pytest.raises(ValueError, match="increase"):
        build_batch([Record(5, 0, None, b"x", []), Record(5, 0, None, b"y", [])], base_offset=5)
    with pytest.raises(ValueError, match="increase"):
        build_batch([Record(4, 0, None, b"x", [])], base_offset=5)
    with pytest.raises(UnsupportedCompression):
        build_batch([(None, b"x")], compression=6)


def test_non_utf8_header_key_survives_decode_and_reencode() -> None:
    body = bytearray()
    rec = b"\x00\x00\x00" + b"\x01" + b"\x02v" + b"\x02" + b"\x04\xff\xfe" + b"\x01"
    body += bytes([len(rec) << 1]) + rec
    data = raw_batch(bytes(body), 1)
    _, (record,) = decode_batch(data)
    assert record.headers[0][1] is None
    assert record.headers[0][0].encode("utf-8", "surrogateescape") == b"\xff\xfe"
    assert build_batch([record], timestamp_ms=0)[rb.RECORDS_OFFSET :] == bytes(body)


def test_decode_accepts_bytearray_memoryview_and_a_position() -> None:
    data = build_batch(sample_records(4))
    expected = as_tuples(decode_batch(data)[1])
    buf = bytearray(b"\xaa" * 13) + data
    assert as_tuples(decode_batch(buf, 13)[1]) == expected
    assert as_tuples(decode_batch(memoryview(buf), 13)[1]) == expected


def test_iter_records_ignores_a_partial_trailing_batch() -> None:
    a = build_batch([(b"a", b"1")], timestamp_ms=1)
    b = build_batch([(b"b", b"2"), (b"c", b"3")], base_offset=1, timestamp_ms=1)
    for cut in (1, 12, 30, len(b) - 1):
        got = [(r.offset, r.key) for _, r in iter_records(a + b + b[:cut])]
        assert got == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert list(iter_records(b"")) == []


# --- malformed input ------------------------------------------------------------


def test_crc_mismatch_is_corrupt_unless_unchecked() -> None:
    data = bytearray(build_batch([(b"k", b"value")], timestamp_ms=0))
    data[-2] ^= 0x01  # last byte of the value (the very last is the header count)
    with pytest.raises(CorruptRecordBatch, match="CRC") as exc:
        decode_batch(data)
    assert exc.value.error_code == 2
    assert decode_batch(data, check_crc=False)[1][0].value == b"valud"


@pytest.mark.parametrize("delta", [1, -1])
def test_record_count_mismatch_is_corrupt(delta: int) -> None:
    data = bytearray(build_batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], timestamp_ms=0))
    struct.pack_into(">i", data, rb.RECORDS_COUNT_OFFSET, 3 + delta)
    with pytest.raises(CorruptRecordBatch, match="records"):
        decode_batch(resign(data))


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.kafka_name)
def test_record_count_mismatch_in_compressed_batch_is_corrupt(codec: CompressionType) -> None:
    data = bytearray(build_batch(sample_records(10), compression=codec))
    struct.pack_into(">i", data, rb.RECORDS_COUNT_OFFSET, 11)
    with pytest.raises(CorruptRecordBatch):
        decode_batch(resign(data))


RECORD = b"\x00" + b"\x00" + b"\x00" + b"\x02k" + b"\x02v" + b"\x00"  # attrs ts off key value hdrs


@pytest.mark.parametrize(
    ("body", "count", "match"),
    [
        (bytes([len(RECORD) << 1]) + RECORD + b"\x00", 1, "left after"),
        (bytes([(len(RECORD) + 1) << 1]) + RECORD, 1, "does not fit"),
        (bytes([(len(RECORD) + 1) << 1]) + RECORD + b"\x00", 1, "does not match"),
        (bytes([(len(RECORD) - 1) << 1]) + RECORD, 1, "overruns|does not match"),
        (b"\x0c\x00\x00\x00\x03\x01\x00", 1, "key length"),  # key length -2
        (b"\x0c\x00\x00\x00\x01\x03\x00", 1, "value length"),  # value length -2
        (b"\x0c\x00\x00\x00\x01\x01\x03", 1, "header count"),  # -2 headers
        (b"\x0c\x00\x00\x00\x01\x01\x14", 1, "header count"),  # 10 headers in 0 bytes
        (b"\x10\x00\x00\x00\x01\x01\x02\x03\x01", 1, "header key length"),  # -2
        (b"\x10\x00\x00\x00\x01\x01\x02\x00\x05", 1, "header value length"),  # -3
        (b"\x12\x00\x00\x00\x01\x01\x02\x00\x04x", 1, "header value overruns"),
        (b"\x0c\x00\x00\x01\x01\x01\x00", 1, "offset delta"),  # offset delta -1
        (b"\x1a\x00\x00" + b"\xff" * 11, 1, "varint"),
        (b"\x01" + RECORD, 1, "record length"),
        (b"", 1, "ends after 0 of 1"),
    ],
)
def test_malformed_records_are_corrupt(body: bytes, count: int, match: str) -> None:
    with pytest.raises(CorruptRecordBatch, match=match):
        decode_batch(raw_batch(body, count))


def test_well_formed_hand_built_record_decodes() -> None:
    _, (record,) = decode_batch(raw_batch(bytes([len(RECORD) << 1]) + RECORD, 1))
    assert (record.offset, record.key, record.value, record.headers) == (0, b"k", b"v", [])


def test_truncated_or_legacy_batches_are_rejected() -> None:
    data = build_batch([(b"k", b"v")], timestamp_ms=0)
    for cut in (0, 10, rb.HEADER_SIZE - 1, rb.HEADER_SIZE, len(data) - 1):
        with pytest.raises(CorruptRecordBatch, match="truncated"):
            decode_batch(data[:cut])
    legacy = bytearray(data)
    legacy[rb.MAGIC_OFFSET] = 1
    with pytest.raises(rb.UnsupportedMagic) as exc:
        decode_batch(legacy)
    assert exc.value.error_code == 35
    legacy[rb.MAGIC_OFFSET] = 3
    with pytest.raises(CorruptRecordBatch, match="magic"):
        decode_batch(legacy)
    short = bytearray(data)
    struct.pack_into(">i", short, rb.LENGTH_OFFSET, 10)
    with pytest.raises(CorruptRecordBatch, match="smaller"):
        decode_batch(short)


def test_corrupt_compressed_section_is_corrupt() -> None:
    data = bytearray(build_batch(sample_records(20), compression=CompressionType.ZSTD))
    data[rb.RECORDS_OFFSET + 20 : rb.RECORDS_OFFSET + 30] = b"\x00" * 10
    with pytest.raises(CorruptRecordBatch):
        decode_batch(resign(data))


def test_unknown_codec_in_batch_is_unsupported() -> None:
    data = bytearray(build_batch([(b"k", b"v")], timestamp_ms=0))
    struct.pack_into(">h", data, rb.ATTRIBUTES_OFFSET, 5)
    with pytest.raises(UnsupportedCompression) as exc:
        decode_batch(resign(data))
    assert exc.value.error_code == 76


def test_compression_bomb_in_a_batch_is_refused() -> None:
    data = build_batch([(None, bytes(10_000_000))], compression=CompressionType.ZSTD)
    assert len(data) < 2000
    with pytest.raises(DecompressedSizeExceeded):
        decode_batch(data, max_decompressed_size=1 << 20)
    assert len(decode_batch(data)[1][0].value) == 10_000_000


# --- control records ---------------------------------------------------------------


@pytest.mark.parametrize("marker", list(ControlRecordType))
def test_control_batch_is_a_transaction_marker_kafka_python_understands(
    marker: ControlRecordType,
) -> None:
    data = build_control_batch(
        marker, 17, producer_id=3000, producer_epoch=4, base_offset=88, timestamp=55
    )
    header, (record,) = decode_batch(data)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_offset) == (3000, 4, 88)
    assert record.key == struct.pack(">hh", 0, marker)
    assert record.value == struct.pack(">hi", 0, 17)
    assert parse_control_record(record) == (marker, 17)
    batch = MemoryRecords(data).next_batch()
    assert batch.is_control_batch and batch.validate_crc()
    (theirs,) = list(batch)
    assert (theirs.offset, theirs.version, theirs.type, theirs.commit) == (
        88, 0, int(marker), marker == ControlRecordType.COMMIT,
    )  # fmt: skip


def test_control_record_helpers() -> None:
    rec = control_record(1, 2, offset=3, timestamp=4)
    assert (rec.offset, rec.timestamp, rec.headers) == (3, 4, [])
    assert parse_control_record(Record(0, 0, b"\x00\x00\x00\x00", None, [])) == (0, -1)
    with pytest.raises(CorruptRecordBatch):
        parse_control_record(Record(0, 0, b"\x00", None, []))
    with pytest.raises(ValueError):
        control_record(7, 0)


# --- property test --------------------------------------------------------------

_bytes_or_none = st.none() | st.binary(max_size=300)
_record = st.tuples(
    _bytes_or_none,
    _bytes_or_none,
    st.lists(st.tuples(st.text(max_size=20), _bytes_or_none), max_size=12),
    st.integers(0, 1 << 45),
    st.integers(1, 1000),  # gap to the next offset
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_record, min_size=1, max_size=40),
    st.sampled_from(CODECS),
    st.integers(0, 1 << 40),
    st.booleans(),
)
def test_random_records_round_trip_through_every_codec(
    raw: list[tuple], codec: CompressionType, base_offset: int, log_append_time: bool
) -> None:
    records = []
    offset = base_offset
    for key, value, headers, ts, gap in raw:
        records.append(Record(offset, ts, key, value, headers))
        offset += gap
    data = build_batch(
        records, base_offset=base_offset, compression=codec, timestamp_type=int(log_append_time)
    )
    header, decoded = decode_batch(data)
    assert header.compression == codec
    assert header.last_offset == records[-1].offset
    expected = as_tuples(records)
    if log_append_time:
        expected = [(o, header.max_timestamp, k, v, h) for o, _, k, v, h in expected]
    assert as_tuples(decoded) == expected
    # a stock reader agrees with the bytes (it needs no codec shim for aiokafka)
    theirs = AioBatch(data)
    assert theirs.validate_crc()
    assert [(r.offset, r.key, r.value, list(r.headers)) for r in theirs] == [
        (o, k, v, h) for o, _, k, v, h in expected
    ]
