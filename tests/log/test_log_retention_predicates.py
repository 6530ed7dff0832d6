"""log_retention and segment_deleter on their own: which segments retention selects,
and how the files of removed segments go (unit tests; Log-level retention is in
test_log_retention.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kafkalite.log.log_config import LogConfig
from kafkalite.log.log_retention import (
    deletable_segments,
    log_start_offset_breached,
    retention_breaches,
    retention_ms_breached,
    retention_size_breached,
)
from kafkalite.log.log_segment import LogSegment
from kafkalite.log.log_segments import LogSegments
from kafkalite.log.segment_deleter import SegmentDeleter


def _segments(d: Path, sizes: dict[int, int]) -> LogSegments:
    """Segments at these base offsets holding this many (opaque) bytes each."""
    segments = LogSegments()
    for base, size in sizes.items():
        (d / f"{base:020d}.log").write_bytes(b"x" * size)
        segments.add(LogSegment.open(d, base, LogConfig()))
    return segments


def _bases(segs: list[LogSegment]) -> list[int]:
    return [s.base_offset for s in segs]


def _all(_seg: LogSegment, _nxt: LogSegment | None) -> bool:
    return True


def test_deletable_segments_stop_at_the_first_one_the_predicate_spares(tmp_path: Path) -> None:
    segments = _segments(tmp_path, {0: 10, 10: 10, 20: 10, 30: 10})

    def spare_20(seg: LogSegment, _nxt: LogSegment | None) -> bool:
        return seg.base_offset != 20

    got = deletable_segments(segments, spare_20, high_watermark=40, log_end_offset=40)
    assert _bases(got) == [0, 10]  # 30 qualifies too, but only a prefix goes


def test_deletable_segments_keep_data_above_the_high_watermark(tmp_path: Path) -> None:
    segments = _segments(tmp_path, {0: 10, 10: 10, 20: 10})
    assert _bases(deletable_segments(segments, _all, high_watermark=19, log_end_offset=25)) == [0]
    assert _bases(deletable_segments(segments, _all, high_watermark=24, log_end_offset=25)) == [
        0,
        10,
    ]
    # the active segment only when the HW is at the log end
    got = deletable_segments(segments, _all, high_watermark=25, log_end_offset=25)
    assert _bases(got) == [0, 10, 20]


def test_an_empty_active_segment_is_never_deletable(tmp_path: Path) -> None:
    segments = _segments(tmp_path, {0: 10, 10: 0})
    got = deletable_segments(segments, _all, high_watermark=10, log_end_offset=10)
    assert _bases(got) == [0]


def test_breach_predicates(tmp_path: Path) -> None:
    segments = _segments(tmp_path, {0: 10, 10: 10, 20: 10})
    a, b, c = segments.values()
    below_15 = log_start_offset_breached(15)
    assert (below_15(a, b), below_15(b, c), below_15(c, None)) == (True, False, False)
    by_size = retention_size_breached(25)  # two 10-byte segments fit in 25, not three
    assert [by_size(s, None) for s in (a, b, c)] == [True, True, False]


def test_retention_ms_compares_the_largest_timestamp(tmp_path: Path) -> None:
    segments = _segments(tmp_path, {0: 0, 10: 0})  # no batches: the files' mtimes count
    a, b = segments.values()
    a.set_last_modified_ms(1_000)
    b.set_last_modified_ms(1_901)
    older_than_100 = retention_ms_breached(now_ms=2_000, retention_ms=100)
    assert (older_than_100(a, b), older_than_100(b, None)) == (True, False)


def test_retention_bytes_counts_the_size_retention_ms_left(tmp_path: Path) -> None:
    segments = _segments(tmp_path, {0: 10, 10: 10, 20: 10})
    config = LogConfig(retention_ms=1, retention_bytes=20)
    breaches = retention_breaches(config, segments, 0, lambda: 0)
    next(breaches)  # the log start offset
    next(breaches)  # retention.ms
    segments.remove([segments.first])  # what retention.ms deleted
    assert list(breaches) == []  # 20 bytes left: retention.bytes has nothing to do


def test_only_the_log_start_offset_applies_without_the_delete_policy(tmp_path: Path) -> None:
    segments = _segments(tmp_path, {0: 10, 10: 10})
    config = LogConfig(cleanup_policy="compact", retention_ms=1, retention_bytes=1)
    assert len(list(retention_breaches(config, segments, 0, lambda: 0))) == 1


def test_segment_files_are_renamed_at_once_and_unlinked_after_the_delay(tmp_path: Path) -> None:
    now = [1_000]
    deleter = SegmentDeleter("t-0", lambda: now[0])
    segments = _segments(tmp_path, {0: 10})
    deleter.delete(list(segments), "retention", delay_ms=500)
    assert sorted(p.name for p in tmp_path.iterdir() if ".log" in p.name) == [
        "00000000000000000000.log.deleted"
    ]
    assert [due for due, _seg in deleter.pending] == [1_500]
    assert deleter.run_pending(1_499) == 0
    assert deleter.run_pending(1_500) == 1
    assert not list(tmp_path.glob("*.log*")) and deleter.pending == []


def test_unlinks_run_on_the_file_deleter_unless_forced(tmp_path: Path) -> None:
    deleter = SegmentDeleter("t-0", lambda: 0)
    queued: list[Callable[[], None]] = []
    deleter.file_deleter = queued.append
    segments = _segments(tmp_path, {0: 10, 10: 10})
    first, second = segments.values()
    deleter.delete([first], "retention", delay_ms=0)
    assert len(queued) == 1 and (tmp_path / "00000000000000000000.log.deleted").exists()
    queued.pop()()
    assert not (tmp_path / "00000000000000000000.log.deleted").exists()
    deleter.delete([second], "retention", delay_ms=60_000)
    assert deleter.run_pending(force=True) == 1  # shutdown: inline, not queued
    assert queued == [] and not list(tmp_path.glob("*.log*"))
