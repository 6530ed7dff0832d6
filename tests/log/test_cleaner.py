"""LogCleaner on real logs in a temp dir: what a pass keeps, drops and leaves alone."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from cleaner_helpers import (
    NOW,
    Clock,
    append,
    append_each,
    batches,
    compact_config,
    latest,
    new_manager,
    records,
)

from kafkalite.log.checkpoint import CLEANER_CHECKPOINT_FILE, OffsetCheckpointFile
from kafkalite.log.cleaner import CleanerConfig, Throttler
from kafkalite.log.errors import InvalidRecord
from kafkalite.log.fetch_data import AbortedTxn
from kafkalite.log.log_config import LogConfig
from kafkalite.protocol.records import build_batch, build_control_batch

KEYS = [b"k%d" % i for i in range(5)]


def _fill(lg, n: int, *, ts: int = NOW) -> list[tuple[int, bytes, bytes]]:
    out = []
    for i in range(n):
        k, v = KEYS[i % len(KEYS)], b"v%03d" % i
        append(lg, [(k, v)], ts=ts)
        out.append((lg.log_end_offset - 1, k, v))
    return out


def test_keeps_the_latest_value_of_every_key_at_its_original_offset(tmp_path: Path) -> None:
    lm = new_manager(tmp_path)
    lg = lm.get_or_create_log("t", 0)
    written = _fill(lg, 80)
    assert lg.num_segments > 3
    active_base = lg.active_segment.base_offset
    before = records(lg)
    stats = lm.cleaner.clean_once_sync()
    assert stats is not None and stats.end_offset == active_base
    after = records(lg)
    # every key's latest value survives, at the offset it was written at
    assert latest(after) == latest(before)
    # offsets only ever disappear, never change or move; order is preserved
    assert set(after) <= set(written)
    assert [o for o, _k, _v in after] == sorted(o for o, _k, _v in after)
    # below the active segment at most one record per key is left
    cleaned = [r for r in after if r[0] < active_base]
    assert len(cleaned) <= len(KEYS)
    # the active segment is untouched
    assert [r for r in after if r[0] >= active_base] == [r for r in written if r[0] >= active_base]
    assert lg.log_end_offset == 80
    ckpt = OffsetCheckpointFile(tmp_path / "logs" / CLEANER_CHECKPOINT_FILE).read()
    assert ckpt == {("t", 0): active_base}
    lm.shutdown()


def test_fetch_at_a_removed_offset_returns_the_next_surviving_one(tmp_path: Path) -> None:
    lm = new_manager(tmp_path)
    lg = lm.get_or_create_log("t", 0)
    _fill(lg, 60)
    lm.cleaner.clean_once_sync()
    kept = [o for o, _k, _v in records(lg)]
    removed = [o for o in range(60) if o not in kept]
    assert removed
    for o in removed:
        nxt = min(k for k in kept if k > o)
        assert records(lg, o)[0][0] == nxt
    lm.shutdown()


def test_active_segment_is_never_cleaned_until_it_rolls(tmp_path: Path) -> None:
    lm = new_manager(tmp_path, compact_config(**{"segment.bytes": 1 << 20}))
    lg = lm.get_or_create_log("t", 0)
    _fill(lg, 50)
    assert lg.num_segments == 1
    assert lm.cleaner.clean_once_sync() is None
    assert len(records(lg)) == 50
    lg.roll()
    assert lm.cleaner.clean_once_sync() is not None
    assert len(records(lg)) == len(KEYS)
    lm.shutdown()


def test_a_second_pass_only_maps_the_new_dirty_section(tmp_path: Path) -> None:
    lm = new_manager(tmp_path)
    lg = lm.get_or_create_log("t", 0)
    _fill(lg, 60)
    first = lm.cleaner.clean_once_sync()
    assert first is not None
    assert lm.cleaner.clean_once_sync() is None  # nothing dirty
    append_each(lg, [(b"k0", b"new")] * 30)
    second = lm.cleaner.clean_once_sync()
    assert second is not None and second.first_dirty_offset == first.end_offset
    assert latest(records(lg))[b"k0"][1] == b"new"
    lm.shutdown()


def test_tombstone_kept_until_delete_retention_after_the_cleaning_that_saw_it(
    tmp_path: Path,
) -> None:
    clock = Clock()
    lm = new_manager(tmp_path, compact_config(**{"delete.retention.ms": 10_000}), clock=clock)
    lg = lm.get_or_create_log("t", 0)
    append_each(lg, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")] * 20)
    append(lg, [(b"a", None)])
    lg.roll()
    lm.cleaner.clean_once_sync()
    recs = records(lg)
    assert (b"a", None) in [(k, v) for _o, k, v in recs]
    assert [v for _o, k, v in recs if k == b"a"] == [None]  # earlier values are gone
    [tomb] = [h for h, rs in batches(lg) if any(r.value is None for r in rs)]
    assert tomb.has_delete_horizon and tomb.base_timestamp == NOW + 10_000
    # not yet: the log is clean and the horizon has not passed
    clock.now = NOW + 9_999
    assert lm.cleaner.clean_once_sync() is None
    clock.now = NOW + 10_000
    assert lm.cleaner.clean_once_sync() is not None
    assert [k for _o, k, _v in records(lg)] == [b"b"]
    lm.shutdown()


def test_tombstone_record_timestamps_survive_the_delete_horizon(tmp_path: Path) -> None:
    lm = new_manager(tmp_path)
    lg = lm.get_or_create_log("t", 0)
    append(lg, [(b"a", b"1"), (b"b", None)], ts=NOW - 5)
    append_each(lg, [(b"c", b"x")] * 30)
    lm.cleaner.clean_once_sync()
    [(h, recs)] = [(h, rs) for h, rs in batches(lg) if h.base_offset == 0]
    assert h.has_delete_horizon
    assert [(r.key, r.timestamp) for r in recs] == [(b"a", NOW - 5), (b"b", NOW - 5)]
    lm.shutdown()


def test_dirty_ratio_below_threshold_is_not_cleaned_unless_max_compaction_lag(
    tmp_path: Path,
) -> None:
    clock = Clock()
    cfg = compact_config(**{"min.cleanable.dirty.ratio": 0.9})
    lm = new_manager(tmp_path, cfg, clock=clock)
    lg = lm.get_or_create_log("t", 0)
    _fill(lg, 60)
    first = lm.cleaner.clean_once_sync()  # everything is dirty: ratio 1.0
    assert first is not None
    append_each(lg, [(b"k1", b"x")] * 12, ts=NOW)  # a little dirt on top of the clean part
    lg.roll()
    n = len(records(lg))
    assert lm.cleaner.clean_once_sync() is None
    assert len(records(lg)) == n
    # max.compaction.lag.ms makes the overdue log eligible whatever its ratio
    lm.update_config("t", LogConfig.from_properties({"max.compaction.lag.ms": 1000}, cfg))
    clock.now = NOW + 500
    assert lm.cleaner.clean_once_sync() is None
    clock.now = NOW + 5000
    assert lm.cleaner.max_compaction_delay_secs == 0  # recomputed by the next pass
    assert lm.cleaner.clean_once_sync() is not None
    assert len(records(lg)) < n
    lm.shutdown()


def test_records_younger_than_min_compaction_lag_are_not_cleaned(tmp_path: Path) -> None:
    clock = Clock()
    lm = new_manager(tmp_path, compact_config(**{"min.compaction.lag.ms": 60_000}), clock=clock)
    lg = lm.get_or_create_log("t", 0)
    append_each(lg, [(b"a", b"old%d" % i) for i in range(30)], ts=NOW - 120_000)
    old_end = lg.log_end_offset
    lg.roll()
    append_each(lg, [(b"a", b"new%d" % i) for i in range(30)], ts=NOW - 1_000)
    lg.roll()
    assert lm.cleaner.clean_once_sync() is not None
    recs = records(lg)
    # the old segments were compacted against the old section only; the young ones are intact
    young = [r for r in recs if r[0] >= old_end]
    assert len(young) == 30
    assert [r for r in recs if r[0] < old_end] == [(old_end - 1, b"a", b"old29")]
    clock.now = NOW + 60_000
    lm.cleaner.clean_all_sync()
    assert [v for _o, _k, v in records(lg)] == [b"new29"]
    lm.shutdown()


def test_only_compacted_logs_are_cleaned(tmp_path: Path) -> None:
    lm = new_manager(tmp_path, LogConfig.from_properties({"segment.bytes": 1024}))
    plain = lm.get_or_create_log("plain", 0)
    both = lm.get_or_create_log(
        "both",
        0,
        compact_config(**{"cleanup.policy": "compact,delete"}),
    )
    _fill(plain, 60)
    _fill(both, 60)
    cleaned = lm.cleaner.clean_all_sync()
    assert [s.topic_partition for s in cleaned] == [("both", 0)]
    assert len(records(plain)) == 60
    assert len(records(both)) < 60
    lm.shutdown()


def test_null_keys_are_rejected_at_produce_and_dropped_by_the_cleaner(tmp_path: Path) -> None:
    lm = new_manager(tmp_path, LogConfig.from_properties({"segment.bytes": 1024}))
    lg = lm.get_or_create_log("t", 0)
    append_each(lg, [(None, b"nokey"), (b"a", b"1")] * 20)
    cfg = compact_config()
    lm.update_config("t", cfg)
    with pytest.raises(InvalidRecord) as e:
        append(lg, [(b"a", b"2"), (None, b"x")])
    assert e.value.error_code == 87
    end = lg.log_end_offset
    append(lg, [(b"a", b"2")])  # keyed records still go in
    assert lg.log_end_offset == end + 1
    lg.roll()
    stats = lm.cleaner.clean_once_sync()
    assert stats is not None and stats.invalid_messages == 20
    assert [(k, v) for _o, k, v in records(lg)] == [(b"a", b"2")]
    lm.shutdown()


def test_control_batches_skip_the_key_check(tmp_path: Path) -> None:
    lm = new_manager(tmp_path)
    lg = lm.get_or_create_log("t", 0)
    marker = build_control_batch(1, 0, producer_id=7, producer_epoch=0, timestamp=NOW)
    lg.append_as_leader(bytearray(marker), 0)
    assert lg.log_end_offset == 1
    lm.shutdown()


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_recompresses_with_the_original_codec(tmp_path: Path, codec: int) -> None:
    lm = new_manager(tmp_path)
    lg = lm.get_or_create_log("t", 0)
    for i in range(20):
        append(lg, [(b"a", b"x%d" % i), (b"b%d" % i, b"y" * 50)], compression=codec)
    lg.roll()
    lm.cleaner.clean_once_sync()
    hs = [h for h, _ in batches(lg)]
    assert {h.compression for h in hs if h.records_count} == {codec}
    recs = records(lg)
    assert latest(recs)[b"a"] == (38, b"x19")
    assert len(recs) == 21  # one a + twenty distinct b keys
    lm.shutdown()


def test_idempotent_producer_state_survives_cleaning(tmp_path: Path) -> None:
    lm = new_manager(tmp_path)
    lg = lm.get_or_create_log("t", 0)
    for i in range(20):
        append(lg, [(b"a", b"p%d" % i)], producer_id=42, base_sequence=i)
    append_each(lg, [(b"a", b"other")] * 10)  # supersedes every record of producer 42
    lg.roll()
    lm.cleaner.clean_once_sync()
    own = [h for h, _ in batches(lg) if h.producer_id == 42]
    # the producer's last batch stays (empty) so its sequence is rebuilt from the log
    assert all(h.records_count == 0 for h in own)
    assert (own[-1].base_offset, own[-1].base_sequence, own[-1].last_sequence) == (19, 19, 19)
    assert [v for _o, _k, v in records(lg)] == [b"other"]
    lm.shutdown()


def test_aborted_transactional_records_are_removed_and_not_mapped(tmp_path: Path) -> None:
    lm = new_manager(tmp_path)
    lg = lm.get_or_create_log("t", 0)
    append(lg, [(b"a", b"committed")])
    txn = build_batch(
        [(b"a", b"aborted")],
        producer_id=9,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
        timestamp_ms=NOW,
    )
    lg.append_as_leader(bytearray(txn), 0)
    marker = build_control_batch(0, 0, producer_id=9, producer_epoch=0, timestamp=NOW)
    lg.append_as_leader(bytearray(marker), 0)
    lg.active_segment.txn_index.append(AbortedTxn(9, 1, 2, 3))
    append_each(lg, [(b"z", b"pad")] * 20)
    lg.update_high_watermark(lg.log_end_offset)
    lg.roll()
    lm.cleaner.clean_once_sync()
    vals = {k: v for _o, k, v in records(lg)}
    assert vals[b"a"] == b"committed"
    assert any(h.is_control for h, _ in batches(lg))  # markers are kept
    lm.shutdown()


def _txn(lg, pid: int, seq: int, recs: list[tuple[bytes, bytes]], *, commit: bool) -> None:
    """One transaction of ``pid``: its data batch, then its marker, as the log receives them."""
    data = build_batch(
        [(k, v, [], NOW) for k, v in recs],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=True,
    )
    first = lg.log_end_offset
    lg.append_as_leader(bytearray(data), 0)
    marker = build_control_batch(
        1 if commit else 0, 0, producer_id=pid, producer_epoch=0, timestamp=NOW
    )
    lg.append_as_leader(bytearray(marker), 0)
    if not commit:
        lg.active_segment.txn_index.append(AbortedTxn(pid, first, lg.log_end_offset - 1, 0))
    lg.update_high_watermark(lg.log_end_offset)


def _markers(lg) -> list[tuple[int, int, bool]]:
    return [
        (h.producer_id, h.base_offset, h.has_delete_horizon) for h, _ in batches(lg) if h.is_control
    ]


def test_a_marker_goes_once_its_transaction_has_no_data_left_and_delete_retention_passed(
    tmp_path: Path,
) -> None:
    clock = Clock()
    lm = new_manager(tmp_path, compact_config(**{"delete.retention.ms": 10_000}), clock=clock)
    lg = lm.get_or_create_log("t", 0)
    _txn(lg, 7, 0, [(b"a", b"aborted")], commit=False)  # offsets 0, 1
    _txn(lg, 8, 0, [(b"b", b"old")], commit=True)  # 2, 3
    # the producers go on, so neither marker is its producer's last batch
    _txn(lg, 7, 1, [(b"c", b"7-later")], commit=True)
    _txn(lg, 8, 1, [(b"d", b"8-later")], commit=True)
    append_each(lg, [(b"b", b"new")] + [(b"pad", b"x")] * 20)  # supersedes 8's first record
    lg.roll()
    # pass 1 removes the aborted data and the superseded committed record; both markers stay
    # (their transactions had data in this pass) with no horizon yet
    lm.cleaner.clean_once_sync()
    vals = latest(records(lg))
    assert b"a" not in vals and vals[b"b"][1] == b"new"
    assert (7, 1, False) in _markers(lg) and (8, 3, False) in _markers(lg)
    # pass 2: no data of either transaction left: the markers get a delete horizon
    append_each(lg, [(b"pad", b"y")] * 20)
    lg.roll()
    lm.cleaner.clean_once_sync()
    assert (7, 1, True) in _markers(lg) and (8, 3, True) in _markers(lg)
    [h7] = [h for h, _ in batches(lg) if h.is_control and h.base_offset == 1]
    assert h7.base_timestamp == NOW + 10_000
    # the later transactions' markers keep their data, so they stay as they were
    assert all(not hz for pid, off, hz in _markers(lg) if off > 3)
    clock.now = NOW + 9_999
    lm.cleaner.clean_once_sync()
    assert {off for _pid, off, _hz in _markers(lg)} >= {1, 3}
    # past the horizon the cleaner comes back by itself and the two markers go
    clock.now = NOW + 10_000
    assert lm.cleaner.clean_once_sync() is not None
    offs = {off for _pid, off, _hz in _markers(lg)}
    assert 1 not in offs and 3 not in offs and len(offs) == 2
    # the abort marker's index entry went with it (readers would skip producer 7 for good)
    assert [t for s in lg.segments for t in s.txn_index.all_aborted_txns()] == []
    assert latest(records(lg))[b"c"][1] == b"7-later"
    lm.shutdown()


def test_a_marker_that_is_its_producers_last_batch_stays(tmp_path: Path) -> None:
    lm = new_manager(tmp_path, compact_config(**{"delete.retention.ms": 0}))
    lg = lm.get_or_create_log("t", 0)
    _txn(lg, 9, 0, [(b"a", b"aborted")], commit=False)
    append_each(lg, [(b"pad", b"x")] * 20)
    lg.roll()
    for _ in range(3):
        append_each(lg, [(b"pad", b"y")] * 5)
        lg.roll()
        lm.cleaner.clean_once_sync()
    assert [(pid, off) for pid, off, _hz in _markers(lg)] == [(9, 1)]
    assert b"a" not in latest(records(lg))
    lm.shutdown()


def test_a_full_offset_map_stops_at_a_segment_boundary(tmp_path: Path) -> None:
    cleaner = CleanerConfig(enable_cleaner=False, dedupe_buffer_size=24 * 40)  # 36 keys
    lm = new_manager(tmp_path, compact_config(), cleaner=cleaner)
    lg = lm.get_or_create_log("t", 0)
    for i in range(100):
        append(lg, [(b"k%03d" % i, b"v")])
    lg.roll()
    segs = [s.base_offset for s in lg.segments]
    first = lm.cleaner.clean_once_sync()
    assert first is not None and first.end_offset in segs and first.end_offset < 100
    stats = lm.cleaner.clean_all_sync()
    assert stats[-1].end_offset == lg.active_segment.base_offset
    assert len(records(lg)) == 100  # all keys distinct: nothing to remove
    lm.shutdown()


def test_a_segment_too_big_for_the_map_makes_the_partition_uncleanable(tmp_path: Path) -> None:
    cleaner = CleanerConfig(enable_cleaner=False, dedupe_buffer_size=24 * 3)
    lm = new_manager(tmp_path, compact_config(), cleaner=cleaner)
    lg = lm.get_or_create_log("t", 0)
    for i in range(40):
        append(lg, [(b"k%03d" % i, b"v")])
    lg.roll()
    assert lm.cleaner.clean_once_sync() is None
    assert lm.cleaner.uncleanable_partitions_count == 1
    assert lm.cleaner.clean_once_sync() is None
    assert not list((tmp_path / "logs" / "t-0").glob("*.cleaned"))
    assert len(records(lg)) == 40
    lm.shutdown()


def test_checkpoint_survives_restart_and_deleted_logs_leave_it(tmp_path: Path) -> None:
    lm = new_manager(tmp_path)
    for t in ("a", "b"):
        _fill(lm.get_or_create_log(t, 0), 60)
    lm.cleaner.clean_all_sync()
    ckpt = OffsetCheckpointFile(tmp_path / "logs" / CLEANER_CHECKPOINT_FILE)
    assert set(ckpt.read()) == {("a", 0), ("b", 0)}
    lm.shutdown()
    lm = new_manager(tmp_path)
    for lg in lm.all_logs():
        lg.update_high_watermark(lg.log_end_offset)
    assert lm.cleaner.clean_once_sync() is None  # nothing new is dirty
    lm.delete_log("a", 0)
    assert set(ckpt.read()) == {("b", 0)}
    lm.shutdown()


def test_a_log_changed_during_the_pass_is_not_swapped(tmp_path: Path) -> None:
    lm = new_manager(tmp_path)
    lg = lm.get_or_create_log("t", 0)
    _fill(lg, 60)
    cleaner = lm.cleaner
    ltc = cleaner.manager.grab_filthiest_compacted_log(NOW)
    assert ltc is not None
    job = cleaner._prepare(ltc, NOW)
    plan = cleaner.cleaner.build_plan(job)
    result = cleaner.cleaner.clean_group(job, plan, plan.groups[0])
    assert list((tmp_path / "logs" / "t-0").glob("*.log.cleaned"))
    lg.truncate_to(5)  # a follower truncation removed what was read
    assert not cleaner._swap_group(job, plan, result)
    job.close_fds()
    cleaner.manager.done_cleaning(ltc.topic_partition)
    assert not list((tmp_path / "logs" / "t-0").glob("*.cleaned"))
    assert [o for o, _k, _v in records(lg)] == [0, 1, 2, 3, 4]
    lm.shutdown()


def test_truncated_below_the_checkpoint_cleans_from_the_start(tmp_path: Path) -> None:
    lm = new_manager(tmp_path)
    lg = lm.get_or_create_log("t", 0)
    _fill(lg, 60)
    lm.cleaner.clean_once_sync()
    lg.truncate_to(3)
    _fill(lg, 60)
    stats = lm.cleaner.clean_once_sync()
    assert stats is not None and stats.first_dirty_offset == 0
    lm.shutdown()


def test_throttler_sleeps_off_the_excess() -> None:
    t = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        t[0] += s

    th = Throttler(1000.0, check_interval_s=0.1, clock=lambda: t[0], sleep=sleep)
    th.maybe_throttle(500)  # within the interval: no check yet
    t[0] = 0.1
    th.maybe_throttle(500)  # 1000 bytes in 0.1 s = 10x the rate: sleep 0.9 s
    assert slept == [pytest.approx(0.9)]
    t[0] += 2.0
    th.maybe_throttle(100)  # under the rate
    assert len(slept) == 1
    assert th.throttled_s == pytest.approx(0.9)


def test_cleaner_config_from_broker_properties() -> None:
    cfg = CleanerConfig.from_properties(
        {
            "log.cleaner.enable": "false",
            "log.cleaner.backoff.ms": 50,
            "log.cleaner.dedupe.buffer.size": 1024,
            "log.cleaner.io.max.bytes.per.second": 1e6,
        }
    )
    assert not cfg.enable_cleaner
    assert cfg.backoff_ms == 50 and cfg.dedupe_buffer_size == 1024
    assert cfg.max_io_bytes_per_second == 1e6
    assert CleanerConfig.from_properties({}) == CleanerConfig()


async def test_cleaning_runs_off_the_event_loop(tmp_path: Path) -> None:
    """The work happens on a worker thread: the loop keeps ticking while it runs."""
    cleaner = CleanerConfig(enable_cleaner=False, max_io_bytes_per_second=200_000)
    lm = new_manager(tmp_path, compact_config(**{"segment.bytes": 16384}), cleaner=cleaner)
    # measure every millisecond: the throttler's first period began when the
    # manager was built, so its first check only resets the period, and a pass
    # whose remaining reads all fell within one longer interval would never be
    # measured (CI saw this with 20 ms)
    lm.cleaner.throttler.check_interval_s = 0.001
    lg = lm.get_or_create_log("t", 0)
    for i in range(100):
        append(lg, [(b"k%d" % (j % 7), b"x" * 100) for j in range(i, i + 10)])
    lg.roll()
    ticks = 0
    done = False

    async def heartbeat() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await asyncio.sleep(0.005)

    hb = asyncio.create_task(heartbeat())
    t0 = time.monotonic()
    stats = await lm.cleaner.clean_once()
    elapsed = time.monotonic() - t0
    done = True
    await hb
    assert stats is not None and stats.bytes_read > 100_000
    assert lm.cleaner.throttler.throttled_s > 0
    # the loop ran throughout (a blocked loop would have ticked once or twice)
    assert ticks >= elapsed / 0.005 / 4
    assert len(records(lg)) == 7
    lm.shutdown()


async def test_background_loop_cleans_when_enabled(tmp_path: Path) -> None:
    lm = new_manager(tmp_path, cleaner=CleanerConfig(enable_cleaner=True, backoff_ms=20))
    lg = lm.get_or_create_log("t", 0)
    _fill(lg, 60)
    task = asyncio.create_task(lm.run(interval_ms=20))
    try:
        for _ in range(200):
            if lm.cleaner.passes:
                break
            await asyncio.sleep(0.01)
        assert lm.cleaner.passes >= 1
        assert len(records(lg)) < 60
    finally:
        lm.shutdown()
        await asyncio.wait_for(task, 5)


async def test_background_loop_idles_when_disabled(tmp_path: Path) -> None:
    lm = new_manager(tmp_path, cleaner=CleanerConfig(enable_cleaner=False, backoff_ms=10))
    lg = lm.get_or_create_log("t", 0)
    _fill(lg, 60)
    task = asyncio.create_task(lm.run(interval_ms=10))
    await asyncio.sleep(0.2)
    assert lm.cleaner.passes == 0 and len(records(lg)) == 60
    lm.shutdown()
    await asyncio.wait_for(task, 5)


def test_tick_runs_the_cleaner_after_the_backoff(tmp_path: Path) -> None:
    clock = Clock()
    lm = new_manager(tmp_path, clock=clock, cleaner=CleanerConfig(backoff_ms=1000))
    lg = lm.get_or_create_log("t", 0)
    _fill(lg, 60)
    lm.tick(NOW + 10)
    assert lm.cleaner.passes == 0
    clock.now = NOW + 1000
    lm.tick(NOW + 1000)
    assert lm.cleaner.passes == 1
    lm.shutdown()


def test_extra_disk_during_a_pass_is_about_one_segment(tmp_path: Path) -> None:
    """Groups are swapped in one at a time: at most one cleaned segment exists at once."""
    lm = new_manager(tmp_path, compact_config(**{"segment.bytes": 2048}))
    lg = lm.get_or_create_log("t", 0)
    for i in range(400):
        append(lg, [(b"k%03d" % (i % 150), b"x" * 20)])
    lg.roll()
    d = tmp_path / "logs" / "t-0"
    seen: list[tuple[int, int]] = []

    def hook(step: str) -> None:
        if step == "cleaned":
            cleaned = list(d.glob("*.log.cleaned"))
            seen.append((len(cleaned), sum(p.stat().st_size for p in cleaned)))

    lm.cleaner.crash_hook = hook
    assert lm.cleaner.clean_once_sync() is not None
    assert len(seen) > 3  # several groups
    assert all(n == 1 and size <= 2048 for n, size in seen)
    assert len(records(lg)) == 150
    lm.shutdown()


def test_the_dirtiest_log_is_cleaned_first(tmp_path: Path) -> None:
    """Kafka's grabFilthiestCompactedLog: the highest cleanable ratio wins, not log order."""
    lm = new_manager(tmp_path)
    a = lm.get_or_create_log("a", 0)  # first in every iteration order
    _fill(a, 60)
    assert [s.topic_partition for s in lm.cleaner.clean_all_sync()] == [("a", 0)]
    _fill(a, 25)  # some new dirty data over a clean head: a lower ratio
    b = lm.get_or_create_log("b", 0)
    _fill(b, 60)  # never cleaned: everything below its active segment is dirty
    ratios = {}
    ltc = lm.cleaner.manager.grab_filthiest_compacted_log(NOW)
    assert ltc is not None
    ratios[ltc.topic_partition] = ltc.cleanable_ratio
    lm.cleaner.manager.done_cleaning(ltc.topic_partition)
    first = lm.cleaner.clean_once_sync()
    second = lm.cleaner.clean_once_sync()
    assert first is not None and second is not None
    assert (first.topic_partition, second.topic_partition) == (("b", 0), ("a", 0))
    assert ratios[("b", 0)] == 1.0
    assert lm.cleaner.clean_once_sync() is None
    lm.shutdown()
