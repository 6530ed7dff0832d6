"""The batch-header codec (record_batch.py) on batches written by stock clients."""

from __future__ import annotations

import struct
import zlib

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from kafka.record._crc32c import crc as pure_python_crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kafkalite.protocol import record_batch as rb
from kafkalite.protocol.record_batch import (
    CorruptRecordBatch,
    InvalidRecord,
    InvalidRecordBatch,
    UnsupportedCompression,
    UnsupportedMagic,
)


def kafka_python_batch(n: int = 5, *, codec: int = 0, ts: int = 1_000, **producer: int) -> bytes:
    builder = KpBuilder(
        magic=2, compression_type=codec, is_transactional=producer.get("txn", 0),
        producer_id=producer.get("pid", -1), producer_epoch=producer.get("epoch", -1),
        base_sequence=producer.get("seq", -1), batch_size=1 << 20,
    )  # fmt: skip
    for i in range(n):
        builder.append(i, ts + i * 10, b"key%d" % i, b"value-%d " % i * 20, [("h", b"%d" % i)])
    return bytes(builder.build())


def aiokafka_batch(n: int = 3) -> bytes:
    builder = AioBuilder(2, 0, 0, -1, -1, -1, 1 << 20)
    for i in range(n):
        builder.append(i, 5_000 + i, None, b"v%d" % i, [])
    return bytes(builder.build())


def resign(batch: bytearray, pos: int = 0) -> bytearray:
    size = struct.unpack_from(">i", batch, pos + rb.LENGTH_OFFSET)[0] + rb.LOG_OVERHEAD
    crc = rb.compute_crc(batch, pos, size)
    struct.pack_into(">I", batch, pos + rb.CRC_OFFSET, crc)
    return batch


def legacy_message(magic: int, key: bytes | None, value: bytes | None, ts: int = 1234) -> bytes:
    """A v0/v1 message set entry, by hand: offset, size, CRC-32 (zlib), magic, attrs[, ts], k, v."""
    body = struct.pack(">bb", magic, 0)
    if magic == 1:
        body += struct.pack(">q", ts)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


def kafka_python_reads(data: bytes | bytearray) -> list[tuple[int, int, int]]:
    """(offset, timestamp, timestamp_type) per record, checking each batch's CRC."""
    out = []
    records = MemoryRecords(bytes(data))
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        out.extend((r.offset, r.timestamp, r.timestamp_type) for r in batch)
    return out


# --- acceptance ---------------------------------------------------------------------


def test_validate_records_accepts_batches_from_stock_clients() -> None:
    a = kafka_python_batch(5, ts=1_000)
    b = kafka_python_batch(7, codec=1, ts=9_000, pid=11, epoch=2, seq=40)
    c = aiokafka_batch(3)
    v = rb.validate_records(a + b + c)
    assert v.batches == [(0, len(a)), (len(a), len(b)), (len(a) + len(b), len(c))]
    assert v.record_count == 15
    assert v.max_timestamp == 9_060
    assert v.size == len(a + b + c)
    first, second, third = v.headers
    assert (first.records_count, first.compression, first.magic) == (5, 0, 2)
    assert (second.compression, second.producer_id, second.producer_epoch) == (1, 11, 2)
    assert (second.base_sequence, second.last_sequence) == (40, 46)
    assert (third.base_timestamp, third.max_timestamp) == (5_000, 5_002)
    assert first.size == len(a) and first.next_offset == 5


def test_header_fields_match_what_kafka_python_reads() -> None:
    data = kafka_python_batch(4, codec=1, ts=77, pid=5, epoch=6, seq=7, txn=1)
    h = rb.parse_header(data)
    theirs = MemoryRecords(data).next_batch()
    assert (h.base_offset, h.magic, h.crc, h.attributes) == (
        theirs.base_offset, theirs.magic, theirs.crc, theirs.attributes,
    )  # fmt: skip
    assert (h.last_offset_delta, h.base_timestamp, h.max_timestamp) == (
        theirs.last_offset_delta, theirs.first_timestamp, theirs.max_timestamp,
    )  # fmt: skip
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (5, 6, 7)
    assert h.is_transactional and not h.is_control and not h.is_log_append_time
    assert not h.has_delete_horizon
    assert rb.peek_magic(data) == 2


def test_last_sequence_wraps_at_int32() -> None:
    h = rb.parse_header(kafka_python_batch(3, pid=1, epoch=0, seq=2**31 - 2))
    assert h.last_sequence == 0
    assert rb.parse_header(kafka_python_batch(3)).last_sequence == rb.NO_SEQUENCE


# --- rejection ----------------------------------------------------------------------


def test_every_flipped_byte_under_the_crc_is_a_corrupt_message() -> None:
    data = kafka_python_batch(2)
    for pos in [*range(rb.LENGTH_OFFSET, rb.PARTITION_LEADER_EPOCH_OFFSET),
                *range(rb.MAGIC_OFFSET, len(data))]:  # fmt: skip
        for bit in (0x01, 0x80):
            bad = bytearray(data)
            bad[pos] ^= bit
            with pytest.raises(InvalidRecordBatch) as exc:
                rb.validate_records(bad)
            assert exc.value.error_code in (2, 35), pos  # 35 only when magic became 0/1


def test_flipped_byte_in_a_compressed_batch_is_corrupt_message_2() -> None:
    bad = bytearray(kafka_python_batch(20, codec=1))
    bad[len(bad) // 2] ^= 0x04
    with pytest.raises(CorruptRecordBatch, match="CRC") as exc:
        rb.validate_records(bad)
    assert exc.value.error_code == 2


def test_base_offset_and_leader_epoch_are_outside_the_crc() -> None:
    data = bytearray(kafka_python_batch(3))
    rb.set_base_offset(data, 0, 123_456)
    rb.set_partition_leader_epoch(data, 0, 9)
    h = rb.validate_batch(data, 0, len(data))
    assert (h.base_offset, h.partition_leader_epoch) == (123_456, 9)
    assert pure_python_crc32c(bytes(data[rb.ATTRIBUTES_OFFSET :])) == h.crc


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_formats_are_unsupported_version_35(magic: int) -> None:
    message = legacy_message(magic, b"key", b"value")
    theirs = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    theirs.append(0, 1234, b"key", b"value")
    assert message == bytes(theirs.build())  # the hand-built message is the real format
    assert rb.peek_magic(message) == magic
    for data in (message, message * 3, kafka_python_batch(2) + message):
        with pytest.raises(UnsupportedMagic) as exc:
            rb.validate_records(data)
        assert exc.value.error_code == 35
    with pytest.raises(UnsupportedMagic):
        rb.validate_batch(message + bytes(64), 0, len(message) + 64)


def test_unknown_magic_is_corrupt() -> None:
    bad = bytearray(kafka_python_batch(1))
    bad[rb.MAGIC_OFFSET] = 3
    with pytest.raises(CorruptRecordBatch, match="magic"):
        rb.validate_records(bad)


def test_truncated_records_are_corrupt() -> None:
    data = kafka_python_batch(3)
    two = data + data
    for cut in (0, 1, 16, rb.LOG_OVERHEAD + 5, rb.HEADER_SIZE - 1, rb.HEADER_SIZE, len(data) - 1,
                len(data) + 1, len(data) + 20, len(two) - 1):  # fmt: skip
        with pytest.raises(CorruptRecordBatch) as exc:
            rb.validate_records(two[:cut])
        assert exc.value.error_code == 2
    with pytest.raises(CorruptRecordBatch, match="smaller"):
        rb.validate_batch(data, 0, rb.HEADER_SIZE - 1)
    with pytest.raises(CorruptRecordBatch, match="length"):
        rb.validate_batch(data, 0, len(data) - 1)


def test_batch_length_below_a_header_is_corrupt() -> None:
    bad = bytearray(kafka_python_batch(1))
    struct.pack_into(">i", bad, rb.LENGTH_OFFSET, 20)
    with pytest.raises(CorruptRecordBatch):
        rb.validate_records(bad)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_is_unsupported_compression_76(codec: int) -> None:
    bad = bytearray(kafka_python_batch(2))
    struct.pack_into(">h", bad, rb.ATTRIBUTES_OFFSET, codec)
    with pytest.raises(UnsupportedCompression) as exc:
        rb.validate_records(resign(bad))
    assert exc.value.error_code == 76


def test_uncompressed_batch_with_sparse_offsets_or_negative_count_is_invalid_record() -> None:
    bad = bytearray(kafka_python_batch(3))
    struct.pack_into(">i", bad, rb.LAST_OFFSET_DELTA_OFFSET, 5)
    with pytest.raises(InvalidRecord) as exc:
        rb.validate_records(resign(bad))
    assert exc.value.error_code == 87
    bad = bytearray(kafka_python_batch(3))
    struct.pack_into(">i", bad, rb.RECORDS_COUNT_OFFSET, -1)
    with pytest.raises(InvalidRecord):
        rb.validate_records(resign(bad))


# --- rewriting ------------------------------------------------------------------------


def test_assign_offsets_keeps_every_crc_valid() -> None:
    data = bytearray(kafka_python_batch(3) + kafka_python_batch(4, codec=1) + aiokafka_batch(2))
    v = rb.validate_records(data)
    assert rb.assign_offsets(data, v, 1_000, leader_epoch=7) == 1_009
    assert [h.base_offset for h in v.headers] == [1_000, 1_003, 1_007]
    for (pos, size), h in zip(v.batches, v.headers, strict=True):
        again = rb.validate_batch(data, pos, size)
        assert (again.base_offset, again.partition_leader_epoch) == (h.base_offset, 7)
        assert pure_python_crc32c(bytes(data[pos + rb.ATTRIBUTES_OFFSET : pos + size])) == again.crc
    assert [o for o, _, _ in kafka_python_reads(data)] == list(range(1_000, 1_009))
    assert rb.validate_records(data).record_count == 9


def test_log_append_time_rewrite_re_signs_the_crc() -> None:
    data = bytearray(kafka_python_batch(3, ts=100) + kafka_python_batch(2, codec=1, ts=200))
    v = rb.validate_records(data)
    old_crcs = [h.crc for h in v.headers]
    rb.assign_offsets(data, v, 50, log_append_time_ms=1_700_000_000_000)
    again = rb.validate_records(data)  # raises on a stale CRC
    assert [h.crc for h in again.headers] != old_crcs
    for h in again.headers:
        assert h.is_log_append_time and h.max_timestamp == 1_700_000_000_000
    assert again.max_timestamp == 1_700_000_000_000
    assert kafka_python_reads(data) == [(o, 1_700_000_000_000, 1) for o in range(50, 55)]


def test_set_log_append_time_on_a_single_batch() -> None:
    data = bytearray(aiokafka_batch(2))
    rb.set_log_append_time(data, 0, len(data), 42)
    h = rb.validate_batch(data, 0, len(data))
    assert h.is_log_append_time and h.max_timestamp == 42 and h.base_timestamp == 5_000
    assert kafka_python_reads(data) == [(0, 42, 1), (1, 42, 1)]


# --- iteration ------------------------------------------------------------------------


def test_iteration_stops_at_a_partial_trailing_batch() -> None:
    a, b = kafka_python_batch(2), kafka_python_batch(3)
    data = a + b + b[:40]
    assert list(rb.iter_batch_positions(data)) == [(0, len(a)), (len(a), len(b))]
    assert [(pos, h.records_count) for pos, h in rb.iter_headers(data)] == [(0, 2), (len(a), 3)]
    assert list(rb.iter_batch_positions(data, len(a), len(a) + len(b))) == [(len(a), len(b))]
    assert list(rb.iter_batch_positions(b"\x00" * 11)) == []
    garbage = bytearray(a)
    struct.pack_into(">i", garbage, rb.LENGTH_OFFSET, 3)
    assert list(rb.iter_batch_positions(bytes(garbage) + b)) == []
