"""Retention, DeleteRecords and truncation (behaviour 44)."""

from __future__ import annotations

from pathlib import Path

import pytest
from logtest_helpers import fill, make_batch, new_log, read_all

from kafkalite.log.errors import OffsetOutOfRange, PolicyViolation
from kafkalite.log.log_config import LogConfig

DAY = 86_400_000


def _segmented(tmp_path: Path, clock: list[int], **cfg: object):
    one = len(make_batch(1))
    config = LogConfig(segment_bytes=3 * one, file_delete_delay_ms=0, **cfg)  # type: ignore[arg-type]
    lg = new_log(tmp_path, config, clock=clock)
    return lg, one


def test_retention_ms_deletes_old_non_active_segments(tmp_path: Path) -> None:
    now = [100 * DAY]
    lg, _ = _segmented(tmp_path, now, retention_ms=DAY)
    for ts in (now[0] - 3 * DAY, now[0] - 2 * DAY, now[0]):  # one segment per age
        for _ in range(3):
            lg.append_as_leader(make_batch(1, timestamp=ts), 0)
    assert lg.num_segments == 3
    assert lg.delete_old_segments() == 0  # HW still 0: nothing is deletable
    lg.update_high_watermark(lg.log_end_offset)
    assert lg.delete_old_segments() == 2
    assert lg.log_start_offset == 6 and lg.num_segments == 1
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log")) == ["00000000000000000006.log"]
    with pytest.raises(OffsetOutOfRange):
        lg.read(5, 100)
    assert read_all(lg) == [(6, 6), (7, 7), (8, 8)]


def test_retention_ms_rolls_when_the_active_segment_expires(tmp_path: Path) -> None:
    now = [100 * DAY]
    lg, _ = _segmented(tmp_path, now, retention_ms=DAY)
    fill(lg, 2, ts=now[0] - 2 * DAY)
    lg.update_high_watermark(2)
    assert lg.delete_old_segments() == 1
    assert lg.num_segments == 1 and lg.active_segment.base_offset == 2
    assert lg.log_start_offset == 2 and lg.log_end_offset == 2
    assert lg.delete_old_segments() == 0  # an empty active segment stays


def test_retention_ms_not_applied_when_disabled_or_compact(tmp_path: Path) -> None:
    now = [100 * DAY]
    lg, _ = _segmented(tmp_path / "a", now, retention_ms=-1)
    fill(lg, 9, ts=1)
    lg.update_high_watermark(9)
    assert lg.delete_old_segments() == 0
    lg, _ = _segmented(tmp_path / "b", now, retention_ms=DAY, cleanup_policy="compact")
    fill(lg, 9, ts=1)
    lg.update_high_watermark(9)
    assert lg.delete_old_segments() == 0


def test_retention_bytes(tmp_path: Path) -> None:
    now = [DAY]
    lg, one = _segmented(tmp_path, now, retention_bytes=0)
    lg.config.retention_bytes = 4 * one
    fill(lg, 10, ts=now[0])  # segments of 3,3,3,1 batches
    lg.update_high_watermark(10)
    assert lg.size_in_bytes == 10 * one
    assert lg.delete_old_segments() == 2  # 10 - 3 - 3 = 4 <= 4: a third would undershoot
    assert lg.size_in_bytes == 4 * one
    assert lg.log_start_offset == 6
    assert lg.delete_old_segments() == 0


def test_delete_records_moves_log_start_offset(tmp_path: Path) -> None:
    lg, _ = _segmented(tmp_path, [DAY])
    fill(lg, 9)
    with pytest.raises(OffsetOutOfRange):
        lg.delete_records(4)  # above the HW
    lg.update_high_watermark(9)
    assert lg.delete_records(4) == 4
    assert lg.delete_records(2) == 4  # never moves back
    with pytest.raises(OffsetOutOfRange):
        lg.read(3, 100)
    assert read_all(lg)[0] == (4, 4)
    assert lg.fetch_offset_by_timestamp(-2) == (4, -1)
    # whole segments below the start offset go at the next retention pass
    assert lg.delete_old_segments() == 1
    assert lg.segments[0].base_offset == 3 and lg.log_start_offset == 4
    assert lg.delete_records(-1) == 9  # -1 = high watermark
    compact, _ = _segmented(tmp_path / "c", [DAY], cleanup_policy="compact")
    with pytest.raises(PolicyViolation) as e:
        compact.delete_records(0)
    assert e.value.error_code == 44


def test_delete_records_trims_leader_epoch_cache(tmp_path: Path) -> None:
    lg, _ = _segmented(tmp_path, [DAY])
    fill(lg, 3, epoch=0)
    fill(lg, 3, epoch=1)
    lg.update_high_watermark(6)
    lg.delete_records(4)
    assert [(e.epoch, e.start_offset) for e in lg.leader_epoch_cache.entries()] == [(1, 4)]


def test_deleted_segments_wait_for_file_delete_delay(tmp_path: Path) -> None:
    now = [100 * DAY]
    one = len(make_batch(1))
    lg = new_log(
        tmp_path,
        LogConfig(segment_bytes=3 * one, retention_ms=DAY, file_delete_delay_ms=60_000),
        clock=now,
    )
    fill(lg, 3, ts=1)
    fill(lg, 3, ts=now[0])
    lg.update_high_watermark(6)
    slice_before = lg.read(0, 1 << 20).records  # an in-flight fetch of the doomed segment
    assert lg.delete_old_segments() == 1
    d = tmp_path / "t-0"
    assert (d / "00000000000000000000.log.deleted").exists()
    assert (d / "00000000000000000000.index.deleted").exists()
    assert len(slice_before.read_bytes()) == 3 * one  # still readable via its open file
    assert lg.run_pending_deletes() == 0
    now[0] += 60_000
    assert lg.run_pending_deletes() == 1
    assert not list(d.glob("*.deleted"))


def test_truncate_to(tmp_path: Path) -> None:
    lg, _ = _segmented(tmp_path, [DAY])
    fill(lg, 4, epoch=0)
    fill(lg, 5, epoch=3)
    lg.update_high_watermark(9)
    assert lg.num_segments == 3
    assert not lg.truncate_to(9)
    assert lg.truncate_to(5)
    assert lg.log_end_offset == 5 and lg.high_watermark == 5
    assert lg.num_segments == 2
    assert [(e.epoch, e.start_offset) for e in lg.leader_epoch_cache.entries()] == [(0, 0), (3, 4)]
    assert read_all(lg) == [(i, i) for i in range(5)]
    assert lg.append_as_leader(make_batch(1), 4).first_offset == 5
    assert lg.truncate_to(3)
    assert lg.num_segments == 2 and lg.log_end_offset == 3
    assert lg.append_as_leader(make_batch(2), 5).first_offset == 3


def test_truncate_mid_batch_drops_the_whole_batch(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    lg.append_as_leader(make_batch(5), 0)
    lg.append_as_leader(make_batch(5), 0)
    lg.truncate_to(7)
    assert lg.log_end_offset == 5


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    lg, _ = _segmented(tmp_path, [DAY])
    fill(lg, 7)
    lg.truncate_fully_and_start_at(100)
    assert (lg.log_start_offset, lg.log_end_offset, lg.high_watermark, lg.num_segments) == (
        100,
        100,
        100,
        1,
    )
    assert lg.leader_epoch_cache.is_empty()
    assert lg.append_as_leader(make_batch(1), 2).first_offset == 100
    d = tmp_path / "t-0"
    assert sorted(p.name for p in d.glob("*.log")) == ["00000000000000000100.log"]
    lg.truncate_to(50)  # below the first segment: same as a full truncation
    assert lg.log_end_offset == 50 and lg.num_segments == 1
