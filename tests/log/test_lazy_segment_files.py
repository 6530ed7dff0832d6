"""Segment ``.log`` descriptors are opened on first use, so idle partitions hold none.

Descriptors are counted in ``/proc/self/fd``: the links that point at ``.log``
files under the test's directory.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest
from logtest_helpers import fill, make_batch, new_log, read_all

from kafkalite.log.log_config import LogConfig
from kafkalite.log.log_manager import LogManager

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")

CFG = LogConfig(segment_bytes=600, index_interval_bytes=100)


def open_log_files(root: Path) -> list[str]:
    """Paths of the ``.log`` files under ``root`` this process holds open."""
    out = []
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith(str(root)) and ".log" in target.rsplit("/", 1)[-1]:
            out.append(target)
    return sorted(out)


def _written(tmp_path: Path, batches: int = 40) -> list[tuple[int, int]]:
    """A log of many segments, closed cleanly; returns its batches."""
    lg = new_log(tmp_path, CFG)
    fill(lg, batches, records=2, value_size=60)
    assert lg.num_segments >= 10
    expected = read_all(lg)
    lg.close()
    return expected


def test_loaded_log_opens_nothing_until_read(tmp_path: Path) -> None:
    expected = _written(tmp_path)
    assert open_log_files(tmp_path) == []
    lg = new_log(tmp_path, CFG)
    assert lg.num_segments >= 10
    assert open_log_files(tmp_path) == []
    assert not any(s.is_open for s in lg.segments)
    # one read opens exactly the segment it reads
    mid = lg.segments[4]
    info = lg.read(mid.base_offset, 1 << 20)
    assert info.read_bytes()
    assert open_log_files(tmp_path) == [str(mid.log_path)]
    assert read_all(lg) == expected
    lg.append_as_leader(make_batch(1), 0)
    assert str(lg.active_segment.log_path) in open_log_files(tmp_path)
    assert read_all(lg)[-1] == (80, 80)
    lg.close()
    assert open_log_files(tmp_path) == []


def test_roll_releases_the_old_segment(tmp_path: Path) -> None:
    lg = new_log(tmp_path, CFG)
    fill(lg, 40, records=2, value_size=60)
    assert lg.num_segments >= 10
    # only the active segment is held while appending; rolled ones were let go
    assert open_log_files(tmp_path) == [str(lg.active_segment.log_path)]
    lg.flush()  # fsyncs rolled segments through private descriptors
    assert open_log_files(tmp_path) == [str(lg.active_segment.log_path)]
    lg.close()


def test_slice_outlives_a_released_handle(tmp_path: Path) -> None:
    """A fetch response still being sent keeps the file open after the segment lets go."""
    _written(tmp_path)
    lg = new_log(tmp_path, CFG)
    seg = lg.segments[2]
    info = lg.read(seg.base_offset, 1 << 20)
    data = info.read_bytes()
    seg.release_handle()
    assert not seg.is_open
    assert open_log_files(tmp_path) == [str(seg.log_path)]  # held by the slice
    assert info.records.read_bytes() == data
    del info
    gc.collect()
    assert open_log_files(tmp_path) == []
    assert lg.read(seg.base_offset, 1 << 20).read_bytes() == data
    lg.close()


def test_truncate_on_never_opened_segments(tmp_path: Path) -> None:
    expected = _written(tmp_path)
    lg = new_log(tmp_path, CFG)
    cut = expected[len(expected) // 2][0]
    lg.truncate_to(cut)
    assert lg.log_end_offset == cut
    assert read_all(lg) == [b for b in expected if b[0] < cut]
    lg.append_as_leader(make_batch(2), 1)
    assert read_all(lg)[-1] == (cut, cut + 1)
    lg.close()
    lg = new_log(tmp_path, CFG)
    assert read_all(lg)[-1] == (cut, cut + 1)
    lg.close()


def test_retention_and_delete_on_never_opened_segments(tmp_path: Path) -> None:
    expected = _written(tmp_path)
    cfg = LogConfig(
        segment_bytes=600, index_interval_bytes=100, file_delete_delay_ms=0, retention_ms=-1
    )
    lg = new_log(tmp_path, cfg)
    lg.update_high_watermark(lg.log_end_offset)
    n = lg.num_segments
    start = lg.segments[5].base_offset
    lg.delete_records(start)
    assert lg.delete_old_segments() == 5
    assert lg.num_segments == n - 5
    assert read_all(lg) == [b for b in expected if b[0] >= start]
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log*"))[0] == f"{start:020d}.log"
    lg.close()
    assert open_log_files(tmp_path) == []
    # closing and deleting a log none of whose segments was ever opened
    lg = new_log(tmp_path, cfg)
    lg.delete()
    assert not (tmp_path / "t-0").exists()
    assert open_log_files(tmp_path) == []


def test_crash_recovery_then_no_descriptors(tmp_path: Path) -> None:
    lg = new_log(tmp_path, CFG)
    fill(lg, 30, records=2, value_size=60)
    expected = read_all(lg)
    lg.close_handlers()  # as after kill -9: no trim, no clean marker
    last = sorted((tmp_path / "t-0").glob("*.log"))[-1]
    with open(last, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x63garbage")  # a torn tail
    lg = new_log(tmp_path, CFG, needs_recovery=True, recovery_point=0)
    assert lg.recovery_truncated_bytes == 15
    assert open_log_files(tmp_path) == []
    assert read_all(lg) == expected
    lg.append_as_leader(make_batch(1), 0)
    assert read_all(lg)[-1][0] == expected[-1][1] + 1
    lg.close()


def test_many_idle_partitions_hold_no_descriptors(tmp_path: Path) -> None:
    """10x the partitions of a test broker: created, restarted, none holds a .log open."""
    lm = LogManager([tmp_path / "d"], LogConfig())
    lm.startup()
    for p in range(300):
        lm.get_or_create_log("idle", p)
    assert open_log_files(tmp_path) == []
    lm.get_log("idle", 7).append_as_leader(make_batch(1), 0)  # type: ignore[union-attr]
    assert len(open_log_files(tmp_path)) == 1
    lm.shutdown()
    assert open_log_files(tmp_path) == []
    lm = LogManager([tmp_path / "d"], LogConfig())
    lm.startup()
    assert len(lm.all_logs()) == 300
    assert open_log_files(tmp_path) == []
    assert read_all(lm.get_log("idle", 7)) == [(0, 0)]  # type: ignore[arg-type]
    lm.shutdown()
