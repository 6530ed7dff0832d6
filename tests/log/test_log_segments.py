"""LogSegments: the ordered segment collection Log looks offsets up in (unit tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.log.log_config import LogConfig
from kafkalite.log.log_segment import LogSegment
from kafkalite.log.log_segments import LogSegments


@pytest.fixture
def open_segment(tmp_path: Path):
    config = LogConfig()

    def open_at(base: int) -> LogSegment:
        return LogSegment.open(tmp_path, base, config)

    yield open_at


def _bases(segments: LogSegments) -> list[int]:
    return [s.base_offset for s in segments]


def test_segments_added_out_of_order_are_kept_in_base_offset_order(open_segment) -> None:
    segments = LogSegments()
    for base in (10, 30, 0, 20):
        segments.add(open_segment(base))
    assert _bases(segments) == [0, 10, 20, 30]
    assert segments.base_offsets() == [0, 10, 20, 30]
    assert (segments.first.base_offset, segments.active.base_offset) == (0, 30)


def test_floor_index_finds_the_segment_holding_an_offset(open_segment) -> None:
    segments = LogSegments()
    for base in (5, 10, 20):
        segments.add(open_segment(base))
    assert segments.floor_index(4) == -1  # below the first segment
    assert [segments.floor_index(o) for o in (5, 9, 10, 19, 20, 1000)] == [0, 0, 1, 1, 2, 2]
    assert [segments.next_base_offset(i) for i in range(3)] == [10, 20, None]


def test_between_yields_the_segments_that_may_hold_the_range(open_segment) -> None:
    segments = LogSegments()
    for base in (0, 10, 20, 30):
        segments.add(open_segment(base))
    got = [(s.base_offset, nxt) for s, nxt in segments.between(12, 30)]
    assert got == [(10, 20), (20, 30)]
    # a start below the first segment starts at the first one
    assert [s.base_offset for s, _ in segments.between(-5, 1)] == [0]
    assert [s.base_offset for s, _ in segments.between(31, 99)] == [30]


def test_remove_by_identity_keeps_the_base_offsets_in_step(open_segment) -> None:
    segments = LogSegments()
    segs = [open_segment(b) for b in (0, 10, 20)]
    for s in segs:
        segments.add(s)
    segments.remove([segs[1]])
    assert _bases(segments) == [0, 20]
    assert segments.floor_index(15) == 0  # the lookup list moved with the segments
    dropped = segments.remove_from(1)
    assert [s.base_offset for s in dropped] == [20]
    assert _bases(segments) == [0] and segments.floor_index(99) == 0
    assert segments.active is segs[0]  # the active segment follows the last one
    segments.clear()
    assert len(segments) == 0 and segments.floor_index(0) == -1
    assert not hasattr(segments, "active")


def test_size_in_bytes_sums_every_segment(tmp_path: Path) -> None:
    segments = LogSegments()
    for base, size in ((0, 7), (10, 5)):
        (tmp_path / f"{base:020d}.log").write_bytes(b"x" * size)
        segments.add(LogSegment.open(tmp_path, base, LogConfig()))
    assert segments.size_in_bytes == 12
