"""ListOffsets lookups: by timestamp, earliest, latest, max timestamp."""

from __future__ import annotations

from pathlib import Path

from logtest_helpers import make_batch, new_log

from kafkalite.log.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from kafkalite.log.log_config import LogConfig


def _log(tmp_path: Path):
    lg = new_log(tmp_path, LogConfig(segment_bytes=700, index_interval_bytes=100))
    # batch i holds 3 records with timestamps 1000+10i, +1, +2
    for i in range(20):
        ts = 1000 + 10 * i
        lg.append_as_leader(make_batch(3, timestamps=[ts, ts + 1, ts + 2]), 0)
    assert lg.num_segments > 2
    lg.update_high_watermark(lg.log_end_offset)
    return lg


def test_lookup_is_record_accurate(tmp_path: Path) -> None:
    lg = _log(tmp_path)
    assert lg.fetch_offset_by_timestamp(0) == (0, 1000)
    assert lg.fetch_offset_by_timestamp(1000) == (0, 1000)
    assert lg.fetch_offset_by_timestamp(1001) == (1, 1001)
    assert lg.fetch_offset_by_timestamp(1003) == (3, 1010)
    for i in range(20):
        for d in range(3):
            assert lg.fetch_offset_by_timestamp(1000 + 10 * i + d) == (3 * i + d, 1000 + 10 * i + d)
    assert lg.fetch_offset_by_timestamp(1193) is None


def test_lookup_respects_log_start_offset(tmp_path: Path) -> None:
    lg = _log(tmp_path)
    lg.maybe_increment_log_start_offset(10)
    assert lg.fetch_offset_by_timestamp(1000) == (10, 1031)


def test_special_timestamps(tmp_path: Path) -> None:
    lg = _log(tmp_path)
    assert lg.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == (0, -1)
    assert lg.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == (60, -1)
    assert lg.fetch_offset_by_timestamp(MAX_TIMESTAMP) == (59, 1192)
    lg.maybe_increment_log_start_offset(7)
    assert lg.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == (7, -1)
    full = lg.fetch_timestamp_and_offset(MAX_TIMESTAMP)
    assert full is not None and full.leader_epoch == 0


def test_max_timestamp_not_in_last_batch(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    lg.append_as_leader(make_batch(3, timestamps=[5, 99, 7]), 0)
    lg.append_as_leader(make_batch(2, timestamps=[50, 60]), 0)
    assert lg.fetch_offset_by_timestamp(MAX_TIMESTAMP) == (1, 99)
    assert lg.fetch_offset_by_timestamp(8) == (1, 99)


def test_empty_log(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    assert lg.fetch_offset_by_timestamp(0) is None
    assert lg.fetch_offset_by_timestamp(MAX_TIMESTAMP) is None
    assert lg.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == (0, -1)


def test_lookup_after_reload(tmp_path: Path) -> None:
    lg = _log(tmp_path)
    lg.close()
    lg = new_log(tmp_path, LogConfig(segment_bytes=700, index_interval_bytes=100))
    assert lg.fetch_offset_by_timestamp(1105) == (33, 1110)
    assert lg.fetch_offset_by_timestamp(MAX_TIMESTAMP) == (59, 1192)
