"""Deleting many logs at once (a topic's StopReplica with delete): LogManager.delete_logs.

The batch must leave exactly what deleting the logs one by one leaves (renamed
dirs, then nothing; each checkpoint without the deleted partitions), while
writing each checkpoint once per dir instead of once per log, and letting the
event loop run between logs.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from pathlib import Path

import pytest
from cleaner_helpers import Clock, append, compact_config

from kafkalite.log import checkpoint as checkpoint_module
from kafkalite.log import log_manager as log_manager_module
from kafkalite.log.checkpoint import (
    CLEANER_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from kafkalite.log.cleaner import CleanerConfig
from kafkalite.log.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from kafkalite.timer import loop_slices

GONE = [("gone", p) for p in range(8)]
KEPT = [("kept", p) for p in range(4)]
CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT_FILE, LOG_START_OFFSET_CHECKPOINT_FILE)


def _manager(root: Path, clock: Clock) -> LogManager:
    """Two dirs, compacted logs (cleaner checkpoint entries), moved log start offsets and
    flushed recovery points, so every checkpoint file has entries of both topics."""
    lm = LogManager(
        [root / "a", root / "b"],
        compact_config(**{"file.delete.delay.ms": 60_000}),
        clock_ms=clock,
        cleaner_config=CleanerConfig(enable_cleaner=False),
    )
    lm.startup()
    for t, p in [*GONE, *KEPT]:
        lg = lm.get_or_create_log(t, p)
        for i in range(6 + p):
            append(lg, [(b"k%d" % (i % 3), b"v%d" % i)])
        lg.roll()
        lg.flush()
        lg.maybe_increment_log_start_offset(1 + p % 2)
    lm.cleaner.clean_all_sync(clock.now)
    lm.checkpoint_recovery_points()
    lm.checkpoint_log_start_offsets()
    return lm


def _snapshot(root: Path) -> dict[str, object]:
    """Every dir's entries (renamed dirs without their random uuid) and checkpoints."""
    out: dict[str, object] = {}
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        names = []
        for e in sorted(d.iterdir()):
            name = re.sub(r"\.[0-9a-f]{32}-delete$", ".<uuid>-delete", e.name)
            if e.is_dir():
                names.append((name, sorted(f.name for f in e.iterdir())))
            else:
                names.append((name, None))
        out[d.name] = names
        for f in (*CHECKPOINTS, CLEANER_CHECKPOINT_FILE):
            path = d / f
            out[f"{d.name}/{f}"] = path.read_bytes() if path.exists() else None
    return out


def _delete_one_by_one(lm: LogManager) -> None:
    for t, p in GONE:
        assert lm.delete_log(t, p) is not None


def _delete_in_one_batch(lm: LogManager) -> None:
    assert asyncio.run(lm.delete_logs(GONE)) == {}


def test_deleting_logs_in_one_batch_leaves_what_deleting_them_one_by_one_leaves(
    tmp_path: Path,
) -> None:
    states = []
    for name, delete in (("single", _delete_one_by_one), ("batch", _delete_in_one_batch)):
        root = tmp_path / name
        clock = Clock()
        lm = _manager(root, clock)
        delete(lm)
        renamed = _snapshot(root)
        clock.now += 60_000  # file.delete.delay.ms
        lm.tick()
        lm.wait_for_deletions()
        reaped = _snapshot(root)
        lm.shutdown()
        states.append((renamed, reaped, _snapshot(root)))
        for d in ("a", "b"):
            assert (root / d / CLEAN_SHUTDOWN_FILE).exists()
            for f in (*CHECKPOINTS, CLEANER_CHECKPOINT_FILE):
                entries = OffsetCheckpointFile(root / d / f).read()
                assert entries and {tp[0] for tp in entries} == {"kept"}, (d, f, entries)
    assert states[0] == states[1]
    renamed, reaped, _ = states[1]
    deleted_dirs = [n for d in ("a", "b") for n, _ in renamed[d] if n.endswith("-delete")]  # type: ignore[attr-defined]
    assert sorted(deleted_dirs) == sorted(f"gone-{p}.<uuid>-delete" for p in range(8))
    assert not [n for d in ("a", "b") for n, _ in reaped[d] if n.startswith("gone")]  # type: ignore[attr-defined]


def test_deleting_a_batch_of_logs_writes_each_checkpoint_once_per_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One delete_log per partition rewrote every checkpoint of the dir per partition:
    deleting N partitions was O(N^2) (4,000 partitions: a minute on the loop)."""
    lm = _manager(tmp_path, Clock())
    writes: Counter[str] = Counter()
    real = checkpoint_module.atomic_write

    def counting(path: Path, data: bytes, **kw: object) -> None:
        writes[f"{path.parent.name}/{path.name}"] += 1
        real(path, data, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(checkpoint_module, "atomic_write", counting)
    monkeypatch.setattr(log_manager_module, "atomic_write", counting)
    assert asyncio.run(lm.delete_logs(GONE)) == {}
    assert writes == {
        f"{d}/{f}": 1 for d in ("a", "b") for f in (*CHECKPOINTS, CLEANER_CHECKPOINT_FILE)
    }
    lm.shutdown()


def test_a_batch_deletion_lets_the_loop_run_between_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop_slices, "SLICE_S", 0.0)  # yield at every step
    lm = _manager(tmp_path, Clock())
    hosted_while_deleting: list[int] = []

    async def main() -> None:
        deleting = asyncio.get_running_loop().create_task(lm.delete_logs(GONE))
        while not deleting.done():
            hosted_while_deleting.append(sum(1 for lg in lm.all_logs() if lg.topic == "gone"))
            await asyncio.sleep(0)
        assert deleting.result() == {}

    asyncio.run(main())
    # the other task ran between logs, and saw them go one after another
    assert len(set(hosted_while_deleting)) > 2
    assert hosted_while_deleting == sorted(hosted_while_deleting, reverse=True)
    assert not [lg for lg in lm.all_logs() if lg.topic == "gone"]
    lm.shutdown()
