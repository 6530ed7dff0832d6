"""Append and read semantics (behaviours 1-6, 11, 45)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from logtest_helpers import fill, make_batch, new_log, offsets_of, read_all

from kafkalite.log.errors import (
    CorruptRecordBatch,
    InvalidTimestamp,
    OffsetOutOfRange,
    OffsetsOutOfOrder,
    RecordBatchTooLarge,
    RecordTooLarge,
    UnexpectedAppendOffset,
    UnsupportedMagic,
)
from kafkalite.log.fetch_data import FileSlice
from kafkalite.log.log_config import LogConfig
from kafkalite.protocol.record_batch import compute_crc, parse_header


def test_dense_offsets_from_zero(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    firsts = []
    for n in (1, 5, 2, 7):
        info = lg.append_as_leader(make_batch(n), 0)
        assert info.last_offset - info.first_offset + 1 == n == info.num_messages
        firsts.append(info.first_offset)
    assert firsts == [0, 1, 6, 8]
    assert lg.log_end_offset == 15
    lg.update_high_watermark(15)
    assert read_all(lg) == [(0, 0), (1, 5), (6, 7), (8, 14)]


def test_multiple_batches_in_one_append(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    records = make_batch(2) + make_batch(3) + make_batch(1)
    info = lg.append_as_leader(records, 0)
    assert (info.first_offset, info.last_offset, info.shallow_count) == (0, 5, 3)
    assert offsets_of(lg.read(0, 1 << 20).read_bytes()) == [(0, 1), (2, 4), (5, 5)]


def test_stored_bytes_equal_produced_apart_from_offset_and_epoch(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    fill(lg, 3)
    produced = make_batch(4, value_size=50, timestamp=1234)
    original = bytes(produced)
    lg.append_as_leader(produced, 7)
    data = lg.read(3, 1 << 20).read_bytes()
    assert data[:8] == struct.pack(">q", 3)
    assert data[12:16] == struct.pack(">i", 7)
    assert data[8:12] == original[8:12] and data[16:] == original[16:]
    h = parse_header(data)
    assert compute_crc(data, 0, len(data)) == h.crc


def test_fetch_from_middle_returns_the_batch_containing_it(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    fill(lg, 10, records=5)
    for off in range(50):
        info = lg.read(off, 1)
        assert offsets_of(info.read_bytes())[0] == (off - off % 5, off - off % 5 + 4)
        assert info.fetch_offset_metadata.message_offset == off


def test_read_out_of_range_and_at_end(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    fill(lg, 3)
    with pytest.raises(OffsetOutOfRange) as e:
        lg.read(4, 100)
    assert e.value.error_code == 1
    info = lg.read(3, 100)
    assert info.records == b"" and info.fetch_offset_metadata.message_offset == 3
    lg.update_high_watermark(3)
    lg.maybe_increment_log_start_offset(2)
    with pytest.raises(OffsetOutOfRange):
        lg.read(1, 100)
    assert offsets_of(lg.read(2, 100).read_bytes()) == [(2, 2)]


def test_empty_log_reads_empty(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    assert lg.read(0, 100).records == b""
    with pytest.raises(OffsetOutOfRange):
        lg.read(1, 100)


def test_max_offset_bounds_the_read(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    fill(lg, 5, records=2)  # batches [0,1] [2,3] [4,5] [6,7] [8,9]
    assert offsets_of(lg.read(0, 1 << 20, max_offset=6).read_bytes()) == [(0, 1), (2, 3), (4, 5)]
    # A batch straddling the bound is not returned.
    assert offsets_of(lg.read(0, 1 << 20, max_offset=5).read_bytes()) == [(0, 1), (2, 3)]
    assert lg.read(4, 1 << 20, max_offset=5).records == b""
    assert lg.read(6, 1 << 20, max_offset=6).records == b""
    assert lg.read(8, 1 << 20, max_offset=6).records == b""  # above the bound: empty, not an error
    assert offsets_of(lg.read(0, 1 << 20, max_offset=10).read_bytes())[-1] == (8, 9)


def test_max_offset_on_earlier_segment(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    fill(lg, 3)
    lg.roll()
    fill(lg, 3)
    assert read_all(lg, 0, max_offset=2) == [(0, 0), (1, 1)]
    assert lg.read(3, 1 << 20, max_offset=2).records == b""
    assert read_all(lg, 0, max_offset=4) == [(0, 0), (1, 1), (2, 2), (3, 3)]


def test_at_least_one_batch_even_if_larger_than_max_length(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    lg.append_as_leader(make_batch(1, value_size=5000), 0)
    fill(lg, 2)
    info = lg.read(0, 10)
    assert isinstance(info.records, FileSlice)
    assert info.records.size > 5000
    assert offsets_of(info.read_bytes()) == [(0, 0)]
    assert not info.first_entry_incomplete
    partial = lg.read(0, 10, min_one_message=False)
    assert partial.first_entry_incomplete and partial.records.size == 10


def test_max_length_limits_bytes(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    fill(lg, 10)
    one = len(lg.read(0, 1).read_bytes())
    info = lg.read(0, 3 * one + 5)
    assert info.records.size == 3 * one + 5  # Kafka returns a partial trailing batch
    assert offsets_of(info.read_bytes()) == [(0, 0), (1, 1), (2, 2)]


def test_read_spanning_segment_end_returns_one_segment(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    fill(lg, 3)
    lg.roll()
    fill(lg, 3)
    assert offsets_of(lg.read(1, 1 << 20).read_bytes()) == [(1, 1), (2, 2)]
    assert offsets_of(lg.read(3, 1 << 20).read_bytes()) == [(3, 3), (4, 4), (5, 5)]


def test_file_slice_is_sendfile_ready(tmp_path: Path) -> None:
    import os

    lg = new_log(tmp_path)
    fill(lg, 4)
    info = lg.read(1, 1 << 20)
    sl = info.records
    assert isinstance(sl, FileSlice)
    assert os.pread(sl.fileno(), sl.size, sl.position) == sl.read_bytes()
    r, w = os.pipe()
    sent = os.sendfile(w, sl.fileno(), sl.position, sl.size)
    assert os.read(r, sent) == sl.read_bytes()


def test_log_append_time(tmp_path: Path) -> None:
    lg = new_log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"), clock=[777_000])
    info = lg.append_as_leader(make_batch(3, timestamp=5), 0)
    assert info.log_append_time == 777_000 and info.max_timestamp == 777_000
    data = lg.read(0, 1 << 20).read_bytes()
    h = parse_header(data)
    assert h.is_log_append_time and h.max_timestamp == 777_000
    assert compute_crc(data, 0, len(data)) == h.crc
    create = new_log(tmp_path / "c")
    assert create.append_as_leader(make_batch(1), 0).log_append_time == -1


def test_errors_carry_kafka_codes(tmp_path: Path) -> None:
    lg = new_log(tmp_path, LogConfig(max_message_bytes=500, segment_bytes=3000))
    with pytest.raises(RecordTooLarge) as e1:
        lg.append_as_leader(make_batch(1, value_size=600), 0)
    assert e1.value.error_code == 10
    with pytest.raises(RecordBatchTooLarge) as e2:
        lg.append_as_leader(b"".join(make_batch(1, value_size=300) for _ in range(12)), 0)
    assert e2.value.error_code == 18
    bad = make_batch(2)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordBatch) as e3:
        lg.append_as_leader(bad, 0)
    assert e3.value.error_code == 2
    v1 = make_batch(1)
    v1[16] = 1
    with pytest.raises(UnsupportedMagic):
        lg.append_as_leader(v1, 0)
    with pytest.raises(CorruptRecordBatch):
        lg.append_as_leader(make_batch(2)[:-3], 0)
    assert lg.log_end_offset == 0 and lg.size_in_bytes == 0


def test_timestamp_bounds(tmp_path: Path) -> None:
    now = 10_000_000
    lg = new_log(tmp_path, LogConfig(message_timestamp_before_max_ms=1000), clock=[now])
    with pytest.raises(InvalidTimestamp) as e:
        lg.append_as_leader(make_batch(1, timestamp=now + 3_600_001), 0)
    assert e.value.error_code == 32
    with pytest.raises(InvalidTimestamp):
        lg.append_as_leader(make_batch(1, timestamp=now - 1001), 0)
    lg.append_as_leader(make_batch(1, timestamp=now + 3_600_000), 0)
    lg.append_as_leader(make_batch(1, timestamp=now - 1000), 0)


def test_leader_epoch_cache_follows_appends(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    fill(lg, 2, epoch=0)
    fill(lg, 3, epoch=1)
    fill(lg, 1, epoch=5)
    assert [(e.epoch, e.start_offset) for e in lg.leader_epoch_cache.entries()] == [
        (0, 0),
        (1, 2),
        (5, 5),
    ]
    assert lg.latest_epoch == 5
    assert lg.end_offset_for_epoch(0) == (0, 2)
    assert lg.end_offset_for_epoch(3) == (1, 5)
    assert lg.end_offset_for_epoch(5) == (5, 6)
    assert lg.end_offset_for_epoch(9) == (-1, -1)


def test_follower_append_keeps_offsets(tmp_path: Path) -> None:
    leader = new_log(tmp_path / "l")
    fill(leader, 4, records=3, epoch=2)
    leader.update_high_watermark(leader.log_end_offset)
    data = leader.read(0, 1 << 20).read_bytes()
    follower = new_log(tmp_path / "f")
    info = follower.append_as_follower(data + data[:30])  # trailing partial batch is dropped
    assert (info.first_offset, info.last_offset, info.valid_bytes) == (0, 11, len(data))
    assert follower.log_end_offset == 12
    assert follower.read(0, 1 << 20).read_bytes() == data
    assert follower.latest_epoch == 2
    with pytest.raises(UnexpectedAppendOffset):
        follower.append_as_follower(data)
    swapped = data[len(data) // 2 :] + data[: len(data) // 2]
    with pytest.raises(OffsetsOutOfOrder):
        new_log(tmp_path / "g").append_as_follower(swapped)


def test_acknowledged_data_readable_without_flush(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    fill(lg, 3)
    assert lg.recovery_point == 0
    assert read_all(lg) == [(0, 0), (1, 1), (2, 2)]
    lg.flush()
    assert lg.recovery_point == 3


def test_flush_messages_policy(tmp_path: Path) -> None:
    lg = new_log(tmp_path, LogConfig(flush_messages=5))
    fill(lg, 4)
    assert lg.recovery_point == 0
    fill(lg, 1)
    assert lg.recovery_point == 5 and lg.unflushed_messages == 0


def test_high_watermark_is_clamped(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    fill(lg, 3)
    assert lg.high_watermark == 0
    assert lg.update_high_watermark(10) == 3
    assert lg.last_stable_offset == 3
    assert not lg.maybe_increment_high_watermark(2)
    assert lg.high_watermark_metadata.message_offset == 3


def test_empty_records_append_is_a_noop(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    info = lg.append_as_leader(bytearray(), 0)
    assert info.first_offset == -1 and lg.log_end_offset == 0
