"""Rolling and offset lookup across segments (behaviour 54)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from logtest_helpers import fill, make_batch, new_log, offsets_of, read_all

from kafkalite.log.log import Log
from kafkalite.log.log_config import LogConfig


def test_roll_on_segment_bytes(tmp_path: Path) -> None:
    one = len(make_batch(1))
    lg = new_log(tmp_path, LogConfig(segment_bytes=3 * one))
    fill(lg, 7)
    assert [s.base_offset for s in lg.segments] == [0, 3, 6]
    assert all(s.size <= 3 * one for s in lg.segments)
    assert read_all(lg) == [(i, i) for i in range(7)]


def test_roll_on_segment_ms_uses_first_batch_timestamp(tmp_path: Path) -> None:
    lg = new_log(tmp_path, LogConfig(segment_ms=1000))
    lg.append_as_leader(make_batch(1, timestamp=10_000), 0)
    lg.append_as_leader(make_batch(1, timestamp=11_000), 0)  # exactly segment.ms: no roll
    assert lg.num_segments == 1
    lg.append_as_leader(make_batch(1, timestamp=11_001), 0)
    assert [s.base_offset for s in lg.segments] == [0, 2]


def test_roll_on_segment_ms_by_clock_without_timestamps(tmp_path: Path) -> None:
    clock = [50_000]
    lg = new_log(tmp_path, LogConfig(segment_ms=1000), clock=clock)
    lg.append_as_leader(make_batch(1, timestamp=-1), 0)
    clock[0] += 1001
    lg.append_as_leader(make_batch(1, timestamp=-1), 0)
    assert lg.num_segments == 2


def test_segment_jitter_is_bounded(tmp_path: Path) -> None:
    cfg = LogConfig(segment_ms=1000, segment_jitter_ms=10_000)
    for _ in range(50):
        assert 0 <= cfg.random_segment_jitter() < 1000
    assert LogConfig().random_segment_jitter() == 0


def test_roll_on_full_offset_index(tmp_path: Path) -> None:
    # 6 offset entries; every batch but a segment's first is indexed -> full after 7 batches.
    # Same timestamps, so the time index holds a single entry and never fills.
    lg = new_log(tmp_path, LogConfig(segment_index_bytes=48, index_interval_bytes=0))
    fill(lg, 16)
    assert [s.base_offset for s in lg.segments] == [0, 7, 14]
    assert read_all(lg) == [(i, i) for i in range(16)]


def test_roll_on_full_time_index(tmp_path: Path) -> None:
    # 24 bytes: time index has 2 slots, one kept for the final entry -> full at 1 entry
    lg = new_log(tmp_path, LogConfig(segment_index_bytes=24, index_interval_bytes=0))
    for i in range(6):
        lg.append_as_leader(make_batch(1, timestamp=1000 + i), 0)
    assert [s.base_offset for s in lg.segments] == [0, 2, 4]
    assert tuple(lg.segments[0].time_index.last_entry) == (1001, 1)


def test_roll_on_relative_offset_overflow(tmp_path: Path) -> None:
    lead = new_log(tmp_path / "l")
    fill(lead, 1)
    lead.update_high_watermark(1)
    first = bytearray(lead.read(0, 100).read_bytes())
    follower = new_log(tmp_path / "f")
    follower.append_as_follower(first)
    far = bytearray(first)
    far[0:8] = (2**31 + 5).to_bytes(8, "big")
    follower.append_as_follower(far)
    assert [s.base_offset for s in follower.segments] == [0, 2**31 + 5]
    assert offsets_of(follower.read(2**31 + 5, 100).read_bytes()) == [(2**31 + 5, 2**31 + 5)]
    assert offsets_of(follower.read(1, 100).read_bytes()) == [(2**31 + 5, 2**31 + 5)]


def test_explicit_roll_of_empty_active_is_a_noop(tmp_path: Path) -> None:
    lg = new_log(tmp_path)
    seg = lg.roll()
    assert seg is lg.active_segment and lg.num_segments == 1


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 6), st.integers(0, 250)), min_size=1, max_size=60),
    seg_bytes=st.integers(2000, 6000),
    interval=st.sampled_from([0, 64, 500, 4096]),
)
def test_any_offset_maps_to_its_batch(
    sizes: list[tuple[int, int]], seg_bytes: int, interval: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = LogConfig(segment_bytes=seg_bytes, index_interval_bytes=interval)
        lg = Log(Path(tmp) / "t-0", cfg, topic="t", partition=0)
        batches = []
        for n, vs in sizes:
            info = lg.append_as_leader(make_batch(n, value_size=vs), 0)
            batches.append((info.first_offset, info.last_offset))
        lg.update_high_watermark(lg.log_end_offset)

        def check(log: Log) -> None:
            for base, last in batches:
                for off in {base, last, (base + last) // 2}:
                    got = offsets_of(log.read(off, 1).read_bytes())
                    assert got[0] == (base, last)

        check(lg)
        lg.close()
        reopened = Log(Path(tmp) / "t-0", cfg, topic="t", partition=0)
        reopened.update_high_watermark(reopened.log_end_offset)
        assert reopened.log_end_offset == batches[-1][1] + 1
        check(reopened)
        reopened.close()
        # and again after a full index rebuild
        recovered = Log(Path(tmp) / "t-0", cfg, topic="t", partition=0, needs_recovery=True)
        recovered.update_high_watermark(recovered.log_end_offset)
        check(recovered)
        recovered.close()


def test_segment_jitter_shortens_the_roll_age(tmp_path: Path) -> None:
    """should_roll rolls at segment.ms - jitter, with the jitter drawn for each segment."""
    import random

    random.seed(7)
    lg = new_log(tmp_path, LogConfig(segment_ms=1000, segment_jitter_ms=1000))
    lg.append_as_leader(make_batch(1, timestamp=10_000), 0)
    jitter = lg.active_segment.roll_jitter_ms
    assert 0 < jitter < 1000
    lg.append_as_leader(make_batch(1, timestamp=10_000 + 1000 - jitter), 0)
    assert lg.num_segments == 1  # not older than segment.ms - jitter yet
    lg.append_as_leader(make_batch(1, timestamp=10_000 + 1000 - jitter + 1), 0)
    assert [s.base_offset for s in lg.segments] == [0, 2]  # well before segment.ms itself
    # each segment draws its own jitter
    jitters = set()
    for i in range(8):
        lg.roll()
        jitters.add(lg.active_segment.roll_jitter_ms)
        lg.append_as_leader(make_batch(1, timestamp=20_000 + i), 0)
    assert len(jitters) > 1


def test_indexes_are_trimmed_as_soon_as_the_segment_rolls(tmp_path: Path) -> None:
    """A rolled segment's preallocated indexes shrink to their entries at once, not at close."""
    one = len(make_batch(1))
    lg = new_log(
        tmp_path,
        LogConfig(segment_bytes=5 * one, index_interval_bytes=0, segment_index_bytes=4096),
    )
    fill(lg, 4)
    active = lg.active_segment
    assert active.offset_index.path.stat().st_size == 4096  # preallocated while active
    assert active.time_index.path.stat().st_size == 4092  # rounded down to 12-byte entries
    fill(lg, 3)  # the 6th batch rolls
    old, new = lg.segments
    assert old.offset_index.path.stat().st_size == 8 * old.offset_index.entries == 8 * 4
    assert old.time_index.path.stat().st_size == 12 * old.time_index.entries
    assert old.time_index.entries >= 1
    assert new.offset_index.path.stat().st_size == 4096
    # and the trimmed index still answers lookups
    assert read_all(lg) == [(i, i) for i in range(7)]
