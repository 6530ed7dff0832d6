"""LogManager: load, placement, deletion, checkpoints, clean shutdown, offline dirs (behaviour 45)."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from logtest_helpers import fill, make_batch, read_all

from kafkalite.log import log_manager as log_manager_module
from kafkalite.log.checkpoint import OffsetCheckpointFile
from kafkalite.log.errors import KafkaStorageError
from kafkalite.log.log import parse_topic_partition_name
from kafkalite.log.log_config import LogConfig
from kafkalite.log.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from kafkalite.log.log_segment import LogSegment


def _mgr(dirs: list[Path], clock: list[int] | None = None, **kw: object) -> LogManager:
    cfg = kw.pop("config", LogConfig(segment_bytes=400))
    if clock is not None:
        kw["clock_ms"] = lambda: clock[0]
    lm = LogManager(dirs, cfg, **kw)  # type: ignore[arg-type]
    lm.startup()
    return lm


def test_parse_dir_names() -> None:
    assert parse_topic_partition_name("my-topic-with-dashes-12") == ("my-topic-with-dashes", 12)
    assert parse_topic_partition_name("__consumer_offsets-0") == ("__consumer_offsets", 0)
    for bad in ("nodash", "topic-", "-3", "topic-x"):
        with pytest.raises(ValueError):
            parse_topic_partition_name(bad)


def test_reload_keeps_everything(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = _mgr(dirs)
    expected = {}
    for t, p in (("x-y", 0), ("x-y", 1), ("z", 0)):
        lg = lm.get_or_create_log(t, p)
        fill(lg, 10 + p, records=2, epoch=4)
        lg.update_high_watermark(lg.log_end_offset)
        lg.delete_records(3)
        expected[(t, p)] = (
            lg.log_start_offset,
            lg.log_end_offset,
            lg.read(3, 1 << 30).read_bytes(),
        )
    lm.checkpoint_high_watermarks()
    lm.shutdown()
    assert all((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)

    lm = _mgr(dirs)
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)  # removed once loaded
    assert sorted(lg.topic_partition for lg in lm.all_logs()) == sorted(expected)
    hws = lm.read_high_watermarks()
    for tp, (start, end, data) in expected.items():
        lg = lm.get_log(*tp)
        assert lg is not None
        assert (lg.log_start_offset, lg.log_end_offset) == (start, end)
        assert lg.recovery_point == end
        assert hws[tp] == end
        lg.update_high_watermark(hws[tp])
        assert lg.read(3, 1 << 30).read_bytes() == data
        assert lg.latest_epoch == 4
    lm.shutdown()


def test_unclean_restart_recovers_and_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lm = _mgr([tmp_path])
    lg = lm.get_or_create_log("t", 0)
    fill(lg, 20, records=2)
    lm.checkpoint_recovery_points()
    seg = sorted((tmp_path / "t-0").glob("*.log"))[-1]
    for log_ in lm.all_logs():
        log_.close_handlers()  # crash: no shutdown
    lm._unlock_dirs()  # the dead process's locks go with it
    os.truncate(seg, seg.stat().st_size - 3)
    lm = _mgr([tmp_path])
    lg = lm.get_log("t", 0)
    assert lg is not None and lg.log_end_offset == 38
    assert "recovery truncated" in caplog.text
    lm.shutdown()


def test_new_logs_go_to_the_dir_with_fewest_partitions(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    lm = _mgr(dirs)
    for p in range(6):
        lm.get_or_create_log("t", p)
    counts = {d: len(v) for d, v in lm.logs_by_dir().items()}
    assert set(counts.values()) == {2}
    assert lm.get_or_create_log("t", 0) is lm.get_or_create_log("t", 0)
    lm.shutdown()


def test_delete_log_renames_then_deletes(tmp_path: Path) -> None:
    now = [1_000_000]
    lm = _mgr([tmp_path], now)
    lg = lm.get_or_create_log("gone-topic", 2)
    fill(lg, 3)
    lm.get_or_create_log("kept", 0)
    assert lm.delete_log("gone-topic", 2) is lg
    assert lm.get_log("gone-topic", 2) is None
    renamed = [p.name for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert len(renamed) == 1 and renamed[0].startswith("gone-topic-2.")
    assert len(renamed[0]) == len("gone-topic-2.") + 32 + len("-delete")
    with pytest.raises(KafkaStorageError):
        lg.read(0, 10)
    now[0] += 60_000
    lm.tick()
    lm.wait_for_deletions()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    # a leftover -delete dir from a crash is removed at startup
    (tmp_path / "old-0.0123456789abcdef0123456789abcdef-delete").mkdir()
    lm.shutdown()
    lm = _mgr([tmp_path])
    lm.wait_for_deletions()  # in the background: start-up does not wait for it
    assert not [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert [lg.name for lg in lm.all_logs()] == ["kept-0"]
    lm.shutdown()


def test_checkpoints(tmp_path: Path) -> None:
    lm = _mgr([tmp_path])
    a = lm.get_or_create_log("a", 0)
    b = lm.get_or_create_log("b", 1)
    fill(a, 4)
    fill(b, 2)
    a.update_high_watermark(4)
    a.delete_records(3)
    a.flush()
    lm.checkpoint_recovery_points()
    lm.checkpoint_log_start_offsets()
    lm.checkpoint_high_watermarks({("a", 0): 4, ("b", 1): 1})
    assert OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read() == {
        ("a", 0): 4,
        ("b", 1): 0,
    }
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\na 0 3\n"
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n2\na 0 4\nb 1 1\n"
    lm.shutdown()


def test_tick_runs_retention_and_flushes_rolled_segments(tmp_path: Path) -> None:
    now = [10 * 86_400_000]
    lm = _mgr(
        [tmp_path],
        now,
        config=LogConfig(segment_bytes=300, retention_ms=1000, file_delete_delay_ms=0),
    )
    lg = lm.get_or_create_log("t", 0)
    for _ in range(6):
        lg.append_as_leader(make_batch(1, timestamp=1), 0)
    lg.append_as_leader(make_batch(1, timestamp=now[0]), 0)
    lg.update_high_watermark(lg.log_end_offset)
    assert lg.num_segments > 1
    now[0] += 1000
    lm.tick()
    assert lg.recovery_point == lg.active_segment.base_offset  # rolled segments were flushed
    assert lg.log_start_offset == 0  # retention check not due yet
    now[0] += 300_000
    lm.tick()
    assert lg.log_start_offset == lg.active_segment.base_offset
    lm.shutdown()


def test_deleted_partition_dirs_are_removed_on_the_delete_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unlinking a big segment blocks for tens of ms: never on the caller's (event loop) thread."""
    threads: list[str] = []
    real_rmtree = shutil.rmtree

    def rmtree(path: Any, **kw: Any) -> None:
        threads.append(threading.current_thread().name)
        real_rmtree(path, **kw)

    monkeypatch.setattr(log_manager_module.shutil, "rmtree", rmtree)
    now = [1_000_000]
    lm = _mgr([tmp_path], now)
    fill(lm.get_or_create_log("gone", 0), 3)
    lm.delete_log("gone", 0)
    now[0] += 60_000
    lm.tick()
    lm.wait_for_deletions()
    assert threads and all(t.startswith("kafka-delete-logs") for t in threads)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    lm.shutdown()


@pytest.mark.parametrize("delay_ms", [0, 60_000])
def test_expired_segments_are_renamed_then_deleted_on_the_delete_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, delay_ms: int
) -> None:
    threads: list[str] = []
    real_delete = LogSegment.delete

    def delete(seg: LogSegment) -> None:
        threads.append(threading.current_thread().name)
        real_delete(seg)

    monkeypatch.setattr(LogSegment, "delete", delete)
    now = [10 * 86_400_000]
    lm = _mgr(
        [tmp_path],
        now,
        config=LogConfig(segment_bytes=300, retention_ms=1000, file_delete_delay_ms=delay_ms),
    )
    lg = lm.get_or_create_log("t", 0)
    for _ in range(6):
        lg.append_as_leader(make_batch(1, timestamp=1), 0)
    lg.update_high_watermark(lg.log_end_offset)
    doomed = lm.cleanup_logs()
    assert doomed > 0
    # renamed at once, so a later deletion never meets a new file of the same name
    assert len(list(lg.dir.glob("*.log.deleted"))) + len(threads) >= doomed
    now[0] += delay_ms
    lm.tick()
    lm.wait_for_deletions()
    assert len(threads) == doomed
    assert all(t.startswith("kafka-delete-logs") for t in threads)
    assert not list(lg.dir.glob("*.deleted"))
    lm.shutdown()


def test_run_loop_flushes_in_a_thread(tmp_path: Path) -> None:
    lm = _mgr([tmp_path], config=LogConfig(segment_bytes=300))
    lm.flush_check_interval_ms = 0
    lg = lm.get_or_create_log("t", 0)
    fill(lg, 10)
    assert lg.recovery_point == 0

    async def go() -> None:
        task = asyncio.create_task(lm.run(interval_ms=10))
        for _ in range(100):
            await asyncio.sleep(0.01)
            if lg.recovery_point == lg.active_segment.base_offset:
                break
        lm.shutdown()
        await asyncio.wait_for(task, 2)

    asyncio.run(go())
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_flush_ms_policy(tmp_path: Path) -> None:
    now = [1_000_000]
    lm = _mgr([tmp_path], now)
    lg = lm.get_or_create_log("t", 0, LogConfig(flush_ms=5000))
    fill(lg, 3)
    lm.tick()
    assert lg.recovery_point == 0
    now[0] += 5000
    lm.tick()
    assert lg.recovery_point == 3
    lm.shutdown()


def test_update_config(tmp_path: Path) -> None:
    lm = _mgr([tmp_path])
    lg = lm.get_or_create_log("t", 0)
    lm.update_config("t", LogConfig(retention_ms=5))
    assert lg.config.retention_ms == 5
    lm.shutdown()
    lm = LogManager([tmp_path], LogConfig(), topic_configs={"t": LogConfig(retention_ms=7)})
    lm.startup()
    assert lm.get_log("t", 0).config.retention_ms == 7  # type: ignore[union-attr]
    lm.shutdown()


def test_io_error_takes_the_dir_offline(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = _mgr(dirs)
    la = lm.get_or_create_log("t", 0)
    lb = lm.get_or_create_log("t", 1)
    assert lm.log_dir_of("t", 0) != lm.log_dir_of("t", 1)
    fill(la, 2)
    offline = []
    lm.on_dir_offline.append(offline.append)
    os.close(la.active_segment.fileno())  # simulate a dead disk under log t-0
    with pytest.raises(KafkaStorageError) as e:
        la.append_as_leader(make_batch(1), 0)
    assert e.value.error_code == 56
    assert offline == [lm.log_dir_of("t", 0)]
    with pytest.raises(KafkaStorageError):
        la.read(0, 100)
    fill(lb, 2)  # the other dir keeps working
    lb.update_high_watermark(2)
    assert read_all(lb) == [(0, 0), (1, 1)]
    new = lm.get_or_create_log("u", 0)
    assert lm.log_dir_of("u", 0) == lm.log_dir_of("t", 1)
    assert new.log_end_offset == 0
    bad, good = lm.log_dir_of("t", 0), lm.log_dir_of("t", 1)
    lm.shutdown()
    assert not (bad / CLEAN_SHUTDOWN_FILE).exists()  # t-0 will be recovered at the next start
    assert (good / CLEAN_SHUTDOWN_FILE).exists()


def test_a_dir_in_use_is_refused(tmp_path: Path) -> None:
    lm = _mgr([tmp_path / "a", tmp_path / "b"])
    with pytest.raises(Exception, match="lock"):
        _mgr([tmp_path / "c", tmp_path / "b"])
    lm.shutdown()
    _mgr([tmp_path / "c", tmp_path / "b"]).shutdown()


def test_duplicate_partition_across_dirs_fails(tmp_path: Path) -> None:
    for d in ("a", "b"):
        (tmp_path / d / "t-0").mkdir(parents=True)
    with pytest.raises(Exception, match="duplicate"):
        _mgr([tmp_path / "a", tmp_path / "b"])


def test_placement_counts_follow_deletes(tmp_path: Path) -> None:
    """Placement uses per-dir counts: they must drop when a log is deleted."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = _mgr(dirs, config=LogConfig(segment_bytes=400, file_delete_delay_ms=0))
    for p in range(4):
        lm.get_or_create_log("t", p)
    in_a = [p for p in range(4) if lm.log_dir_of("t", p) == dirs[0]]
    for p in in_a:
        lm.delete_log("t", p)
    # "a" now holds nothing, "b" two: the next two logs go to "a"
    assert lm.log_dir_of(*lm.get_or_create_log("u", 0).topic_partition) == dirs[0]
    assert lm.log_dir_of(*lm.get_or_create_log("u", 1).topic_partition) == dirs[0]
    lm.shutdown()
    lm = _mgr(dirs)  # counts rebuilt at load
    assert lm.log_dir_of(*lm.get_or_create_log("v", 0).topic_partition) in dirs
    assert sorted(len(v) for v in lm.logs_by_dir().values()) == [2, 3]
    lm.shutdown()


def test_high_watermarks_restored_at_load(tmp_path: Path) -> None:
    """replication-offset-checkpoint -> each log's HW at load, clamped to [start, end]."""
    lm = _mgr([tmp_path])
    a, b = lm.get_or_create_log("a", 0), lm.get_or_create_log("b", 0)
    fill(a, 6)
    fill(b, 3)
    a.update_high_watermark(4)
    b.update_high_watermark(3)
    lm.shutdown()  # writes the HWs
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n2\na 0 4\nb 0 3\n"
    OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint").write(
        {("a", 0): 4, ("b", 0): 99}
    )
    lm = _mgr([tmp_path])
    assert lm.get_log("a", 0).high_watermark == 4  # type: ignore[union-attr]
    assert lm.get_log("b", 0).high_watermark == 3  # clamped to the log end  # type: ignore[union-attr]
    lm.shutdown()


def test_tick_writes_due_checkpoints(tmp_path: Path) -> None:
    """recovery points, log start offsets and HWs are written by tick when each is due."""
    now = [1_000_000]
    lm = _mgr(
        [tmp_path],
        now,
        recovery_point_checkpoint_interval_ms=60_000,
        log_start_offset_checkpoint_interval_ms=30_000,
        high_watermark_checkpoint_interval_ms=5_000,
        config=LogConfig(segment_bytes=100_000),
    )
    lg = lm.get_or_create_log("t", 0)
    fill(lg, 5)
    lg.update_high_watermark(5)
    lg.delete_records(2)
    lg.flush()
    rp = tmp_path / "recovery-point-offset-checkpoint"
    ls = tmp_path / "log-start-offset-checkpoint"
    hw = tmp_path / "replication-offset-checkpoint"
    lm.tick()
    assert not rp.exists() and not ls.exists() and not hw.exists()
    now[0] += 5_000
    lm.tick()
    assert hw.read_text() == "0\n1\nt 0 5\n"
    assert not rp.exists() and not ls.exists()
    now[0] += 25_000
    lm.tick()
    assert ls.read_text() == "0\n1\nt 0 2\n"
    assert not rp.exists()
    now[0] += 30_000
    lm.tick()
    assert rp.read_text() == "0\n1\nt 0 5\n"
    fill(lg, 2)
    lg.update_high_watermark(7)
    now[0] += 5_000
    lm.tick()
    assert hw.read_text() == "0\n1\nt 0 7\n"
    lm.shutdown()


def test_run_loop_writes_high_watermarks_on_a_worker(tmp_path: Path) -> None:
    lm = _mgr([tmp_path], high_watermark_checkpoint_interval_ms=10)
    lg = lm.get_or_create_log("t", 0)
    fill(lg, 3)
    lg.update_high_watermark(3)
    hw = tmp_path / "replication-offset-checkpoint"

    async def go() -> None:
        task = asyncio.create_task(lm.run(interval_ms=10))
        for _ in range(200):
            await asyncio.sleep(0.01)
            if hw.exists() and hw.read_text() == "0\n1\nt 0 3\n":
                break
        assert hw.read_text() == "0\n1\nt 0 3\n"
        lm.shutdown()
        await asyncio.wait_for(task, 2)

    asyncio.run(go())


def _stat(p: Path) -> tuple[int, int]:
    st = p.stat()
    return st.st_ino, st.st_mtime_ns


def test_restart_rewrites_no_leader_epoch_checkpoint(tmp_path: Path) -> None:
    """Load + becoming leader again at the same epoch writes nothing (10k partitions start fast)."""
    lm = _mgr([tmp_path])
    empty = lm.get_or_create_log("empty", 0)
    full = lm.get_or_create_log("full", 0)
    empty.leader_epoch_cache.assign(3, 0)
    fill(full, 4, epoch=3)
    lm.shutdown()
    files = [tmp_path / n / "leader-epoch-checkpoint" for n in ("empty-0", "full-0")]
    assert [f.read_text() for f in files] == ["0\n1\n3 0\n"] * 2
    before = [_stat(f) for f in files]
    lm = _mgr([tmp_path])
    for name in ("empty", "full"):
        lg = lm.get_log(name, 0)
        assert lg is not None
        lg.leader_epoch_cache.assign(3, lg.log_end_offset)  # what make_leader does
    lm.shutdown()
    assert [_stat(f) for f in files] == before


def test_leader_epoch_checkpoint_is_fsynced_before_the_recovery_point_moves(
    tmp_path: Path,
) -> None:
    """A new epoch is written at once but fsynced in the background flush; the rolled
    segments' recovery point only moves once the epoch file is durable."""
    lm = _mgr([tmp_path], config=LogConfig(segment_bytes=300))
    lg = lm.get_or_create_log("t", 0)
    fill(lg, 10, epoch=7)
    cache = lg.leader_epoch_cache
    assert (lg.dir / "leader-epoch-checkpoint").read_text() == "0\n1\n7 0\n"
    assert cache.needs_fsync
    assert lg.num_segments > 1 and lg.recovery_point == 0

    async def go() -> None:
        task = asyncio.create_task(lm.run(interval_ms=10))
        for _ in range(200):
            await asyncio.sleep(0.01)
            if lg.recovery_point == lg.active_segment.base_offset:
                break
        lm.shutdown()
        await asyncio.wait_for(task, 2)

    asyncio.run(go())
    assert lg.recovery_point > 0 and not cache.needs_fsync


def _epoch_file_after_crash_at_leader_change(
    tmp_path: Path, partitions: int = 1
) -> tuple[LogManager, Path]:
    """Logs with epoch 1 at offsets 0-1 and a file that also claims epoch 5 from 2
    (a leader change whose data never came), reloaded; the first log's file."""
    lm = _mgr([tmp_path])
    for p in range(partitions):
        lg = lm.get_or_create_log("t", p)
        fill(lg, 2, epoch=1)
        lg.leader_epoch_cache.assign(5, 2)  # a leader change with no data yet
    lm.shutdown()
    f = tmp_path / "t-0" / "leader-epoch-checkpoint"
    assert f.read_text() == "0\n2\n1 0\n5 2\n"
    return _mgr([tmp_path]), f


@pytest.mark.parametrize("partitions", [1, 70])  # 70: the bulk (syncfs) shutdown path
def test_load_truncation_of_epochs_is_applied_at_every_load_until_an_append(
    tmp_path: Path, partitions: int
) -> None:
    """Entries past the log end are dropped at load in memory only: the background
    flush and a clean shutdown leave the files alone (10,000 partitions rewrote 10,000
    files for nothing), and the next load drops them again."""
    from kafkalite.log.log_manager import BULK_SYNC_MIN_LOGS

    assert (partitions >= BULK_SYNC_MIN_LOGS) == (partitions > 1)
    lm, _ = _epoch_file_after_crash_at_leader_change(tmp_path, partitions)
    files = [tmp_path / f"t-{p}" / "leader-epoch-checkpoint" for p in range(partitions)]
    before = [_stat(f) for f in files]
    logs = [lm.get_log("t", p) for p in range(partitions)]
    assert all(lg is not None and lg.leader_epoch_cache.load_truncation_pending for lg in logs)
    assert [(e.epoch, e.start_offset) for e in logs[0].leader_epoch_cache.entries()] == [(1, 0)]

    async def go() -> None:
        task = asyncio.create_task(lm.run(interval_ms=10))
        await asyncio.sleep(0.2)  # several background flush passes
        lm.shutdown()
        await asyncio.wait_for(task, 5)

    asyncio.run(go())
    assert [_stat(f) for f in files] == before
    assert all(f.read_text() == "0\n2\n1 0\n5 2\n" for f in files)
    lm = _mgr([tmp_path])
    lg = lm.get_log("t", 0)
    assert lg is not None
    assert [(e.epoch, e.start_offset) for e in lg.leader_epoch_cache.entries()] == [(1, 0)]
    assert lg.end_offset_for_epoch(1) == (1, 2)
    lm.shutdown()


def test_load_truncation_of_epochs_is_written_before_a_leader_append(tmp_path: Path) -> None:
    """An append under the epoch the file wrongly extends (epoch 1 again past offset 2)
    assigns nothing; the truncation is written first, or the file would give its data
    to epoch 5."""
    lm, f = _epoch_file_after_crash_at_leader_change(tmp_path)
    lg = lm.get_log("t", 0)
    assert lg is not None
    fill(lg, 3, epoch=1)
    assert f.read_text() == "0\n1\n1 0\n"
    assert not lg.leader_epoch_cache.load_truncation_pending
    lm.shutdown()


def test_load_truncation_of_epochs_is_written_before_a_follower_append(tmp_path: Path) -> None:
    lm, f = _epoch_file_after_crash_at_leader_change(tmp_path)
    lg = lm.get_log("t", 0)
    assert lg is not None
    src = lm.get_or_create_log("src", 0)
    fill(src, 5, epoch=1)
    src.update_high_watermark(src.log_end_offset)
    lg.append_as_follower(src.read(2, 1 << 20).read_bytes())  # offsets 2-4, epoch 1
    assert lg.log_end_offset == 5
    assert f.read_text() == "0\n1\n1 0\n"
    lm.shutdown()


@pytest.mark.parametrize("threads", [1, 3])
def test_unclean_load_with_recovery_threads(tmp_path: Path, threads: int) -> None:
    lm = _mgr([tmp_path])
    expected = {}
    for p in range(6):
        lg = lm.get_or_create_log("t", p)
        fill(lg, 5 + p)
        expected[("t", p)] = read_all(lg)
    lm.shutdown()
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    (tmp_path / "recovery-point-offset-checkpoint").unlink()
    seg = max((tmp_path / "t-4").glob("*.log"))  # the active segment
    os.truncate(seg, seg.stat().st_size - 3)  # a torn tail in one of them
    lm = _mgr([tmp_path], recovery_threads_per_data_dir=threads)
    got = {lg.topic_partition: read_all(lg) for lg in lm.all_logs()}
    assert got == {**expected, ("t", 4): expected[("t", 4)][:-1]}
    lm.shutdown()


def test_dirs_that_failed_before_startup_start_offline(tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    lm = _mgr([good, bad], initial_offline_dirs=[bad])
    assert lm.offline_dirs == {bad.absolute()}
    assert not bad.exists()  # never touched
    assert lm.log_dir_of(*lm.get_or_create_log("t", 0).topic_partition) == good.absolute()
    lm.shutdown()
    with pytest.raises(KafkaStorageError, match="every log dir is offline"):
        _mgr([bad], initial_offline_dirs=[bad])


def test_many_logs_are_made_durable_in_bulk(tmp_path: Path) -> None:
    """>= BULK_SYNC_MIN_LOGS logs: the background flush and the shutdown use one syncfs
    per dir; recovery points and epoch files end up exactly as with per-file fsyncs."""
    from kafkalite.log.checkpoint import syncfs_available
    from kafkalite.log.log_manager import BULK_SYNC_MIN_LOGS

    assert syncfs_available()  # Linux: the bulk path is what runs here
    lm = _mgr([tmp_path], config=LogConfig(segment_bytes=300))
    logs = [lm.get_or_create_log("t", p) for p in range(BULK_SYNC_MIN_LOGS + 6)]
    for lg in logs:
        fill(lg, 8, epoch=2)
    assert all(lg.leader_epoch_cache.needs_fsync and lg.recovery_point == 0 for lg in logs)

    async def go() -> None:
        task = asyncio.create_task(lm.run(interval_ms=10))
        for _ in range(300):
            await asyncio.sleep(0.01)
            if all(lg.recovery_point == lg.active_segment.base_offset for lg in logs):
                break
        assert all(not lg.leader_epoch_cache.needs_fsync for lg in logs)
        assert all(lg.recovery_point == lg.active_segment.base_offset > 0 for lg in logs)
        for lg in logs:
            fill(lg, 1, epoch=3)  # unflushed tails and new epochs for the shutdown
        lm.shutdown()
        await asyncio.wait_for(task, 5)

    asyncio.run(go())
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read() == {
        ("t", p): 9 for p in range(len(logs))
    }
    lm = _mgr([tmp_path])
    for p in range(len(logs)):
        lg = lm.get_log("t", p)
        assert lg is not None and lg.log_end_offset == 9 and lg.latest_epoch == 3
        assert (lg.dir / "leader-epoch-checkpoint").read_text() == "0\n2\n2 0\n3 8\n"
    lm.shutdown()


def test_shutdown_leaves_undue_partition_deletions_to_the_next_start(tmp_path: Path) -> None:
    """Shutdown does not wait for a deleted partition's files to be unlinked: the dir
    stays renamed, is never loaded again, and the next start-up deletes it in the
    background."""
    lm = _mgr([tmp_path])
    fill(lm.get_or_create_log("gone", 0), 3)
    fill(lm.get_or_create_log("kept", 0), 3)
    lm.delete_log("gone", 0)  # file.delete.delay.ms (60 s) not yet passed
    lm.shutdown()
    assert [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    lm = _mgr([tmp_path])
    assert lm.get_log("gone", 0) is None
    kept = lm.get_log("kept", 0)
    assert kept is not None and len(read_all(kept)) == 3
    lm.wait_for_deletions()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    lm.shutdown()
