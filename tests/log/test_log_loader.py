"""LogLoader: what loading a log directory settles, checked on the loader itself."""

from __future__ import annotations

from pathlib import Path

from logtest_helpers import fill, new_log

from kafkalite.log.log_config import LogConfig
from kafkalite.log.log_loader import LoadedLog, LogLoader
from kafkalite.log.log_segments import LogSegments

CFG = LogConfig(segment_bytes=1500)


def _load(
    d: Path,
    *,
    log_start_offset: int = 0,
    recovery_point: int = 0,
    needs_recovery: bool = False,
) -> tuple[LoadedLog, LogSegments]:
    segments = LogSegments()
    loaded = LogLoader(
        d,
        CFG,
        segments,
        name="t-0",
        log_start_offset=log_start_offset,
        recovery_point=recovery_point,
        needs_recovery=needs_recovery,
        clock_ms=lambda: 0,
    ).load()
    return loaded, segments


def _epochs(loaded: LoadedLog) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in loaded.leader_epoch_cache.entries()]


def test_empty_dir_loads_as_one_empty_segment_at_the_log_start_offset(tmp_path: Path) -> None:
    loaded, segments = _load(tmp_path, log_start_offset=7, recovery_point=7)
    assert (loaded.log_start_offset, loaded.log_end_offset, loaded.recovery_point) == (7, 7, 7)
    assert loaded.truncated_bytes == 0
    assert segments.base_offsets() == [7]
    assert sorted(p.name for p in tmp_path.glob("*.log")) == ["00000000000000000007.log"]


def test_clean_load_puts_the_recovery_point_at_the_log_end(tmp_path: Path) -> None:
    lg = new_log(tmp_path, CFG)
    fill(lg, 5, epoch=2)
    lg.close()
    loaded, segments = _load(tmp_path / "t-0", recovery_point=0)
    assert (loaded.log_end_offset, loaded.recovery_point) == (5, 5)
    assert _epochs(loaded) == [(2, 0)]
    assert len(segments) == lg.num_segments


def test_crash_recovery_reports_the_bytes_it_cut_and_keeps_the_recovery_point(
    tmp_path: Path,
) -> None:
    lg = new_log(tmp_path, CFG)
    fill(lg, 3)
    lg.close_handlers()  # a crash: no clean close
    seg = tmp_path / "t-0" / "00000000000000000000.log"
    with seg.open("ab") as f:
        f.write(b"\x00" * 13)  # a torn write
    loaded, _ = _load(tmp_path / "t-0", recovery_point=1, needs_recovery=True)
    assert (loaded.log_end_offset, loaded.recovery_point, loaded.truncated_bytes) == (3, 1, 13)


def test_corrupt_leader_epoch_checkpoint_is_rebuilt_by_recovering_the_whole_log(
    tmp_path: Path,
) -> None:
    lg = new_log(tmp_path, CFG)
    fill(lg, 2, epoch=1)
    fill(lg, 2, epoch=3)
    lg.close()
    (tmp_path / "t-0" / "leader-epoch-checkpoint").write_text("zz")
    # a clean shutdown, yet the epochs can only come back from the batches
    loaded, _ = _load(tmp_path / "t-0", recovery_point=4)
    assert _epochs(loaded) == [(1, 0), (3, 2)]
    assert (loaded.log_end_offset, loaded.recovery_point) == (4, 0)


def test_log_start_offset_is_at_least_the_first_segment_base_offset(tmp_path: Path) -> None:
    lg = new_log(tmp_path, CFG)
    lg.truncate_fully_and_start_at(10)
    fill(lg, 2)
    lg.close()
    loaded, _ = _load(tmp_path / "t-0", log_start_offset=0)
    assert (loaded.log_start_offset, loaded.log_end_offset) == (10, 12)


def test_log_end_below_the_checkpointed_log_start_starts_the_log_afresh_there(
    tmp_path: Path,
) -> None:
    lg = new_log(tmp_path, CFG)
    fill(lg, 3)
    lg.close()
    loaded, segments = _load(tmp_path / "t-0", log_start_offset=50, recovery_point=50)
    assert (loaded.log_start_offset, loaded.log_end_offset) == (50, 50)
    assert segments.base_offsets() == [50]
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log")) == ["00000000000000000050.log"]
