"""A crash after each step of the cleaner's swap: the next load completes or rolls it back.

The crash is simulated in process: the cleaner's ``crash_hook`` raises right
after a step, the LogManager is abandoned without closing anything (no clean
shutdown marker, indexes untrimmed, pending ``.deleted`` files left), and a
new LogManager loads the same dir.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from cleaner_helpers import append, compact_config, latest, new_manager, records

from kafkalite.cli.dump_log import dump_index, dump_time_index
from kafkalite.log.checkpoint import CLEANER_CHECKPOINT_FILE, OffsetCheckpointFile
from kafkalite.log.log_manager import LogManager

STEPS = ["cleaned", "swap", "deleted", "replaced", "checkpointed"]


class Crash(BaseException):
    """Not an Exception: the cleaner must not swallow it as a failed pass."""


def _populate(lm: LogManager, n: int = 90, roll_every: int = 0) -> None:
    lg = lm.get_or_create_log("t", 0)
    for i in range(n):
        append(lg, [(b"k%d" % (i % 7), b"v%03d" % i)])
        if roll_every and i % roll_every == roll_every - 1:
            lg.roll()
    append(lg, [(b"k3", None)])  # a tombstone too
    lg.roll()


def _abandon(lm: LogManager) -> None:
    """What kill -9 leaves: files as they are, descriptors released by the OS, and no
    background deletion running on (a queued one never happens; a running one ends
    before the next process starts, as the OS kills the thread with the process)."""
    if lm._deleter is not None:
        lm._deleter.shutdown(wait=True, cancel_futures=True)
        lm._deleter = None
    for lg in lm.all_logs():
        lg.close_handlers()
        for _due, seg in lg.pending_deletes:
            seg.close_handlers()
    lm._unlock_dirs()


def _config(delay: int, segment_bytes: int = 1 << 20):  # noqa: ANN202
    return compact_config(**{"file.delete.delay.ms": delay, "segment.bytes": segment_bytes})


def _reopen(tmp_path: Path, delay: int, segment_bytes: int = 1 << 20) -> LogManager:
    lm = new_manager(tmp_path, _config(delay, segment_bytes))
    for lg in lm.all_logs():
        lg.update_high_watermark(lg.log_end_offset)
    return lm


def _leftovers(tmp_path: Path) -> list[str]:
    d = tmp_path / "logs" / "t-0"
    return sorted(p.name for p in d.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted")))


def _indexes_valid(tmp_path: Path) -> None:
    d = tmp_path / "logs" / "t-0"
    for idx in d.glob("*.index"):
        out = io.StringIO()
        assert dump_index(idx, verify_only=True, out=out) == 0, out.getvalue()
    for idx in d.glob("*.timeindex"):
        out = io.StringIO()
        assert dump_time_index(idx, verify_only=True, out=out) == 0, out.getvalue()


def _expected_after_clean(
    tmp_path: Path, delay: int
) -> list[tuple[int, bytes | None, bytes | None]]:
    ref = tmp_path / "reference"
    ref.mkdir()
    lm = new_manager(ref, _config(delay))
    _populate(lm, roll_every=15)
    assert lm.cleaner.clean_once_sync() is not None
    out = records(lm.get_log("t", 0))
    lm.shutdown()
    return out


@pytest.mark.parametrize("delay", [0, 60_000], ids=["delete-now", "delete-delayed"])
@pytest.mark.parametrize("step", STEPS)
def test_crash_after_each_swap_step_is_recovered(tmp_path: Path, step: str, delay: int) -> None:
    expected = _expected_after_clean(tmp_path, delay)
    work = tmp_path / "work"
    work.mkdir()
    lm = new_manager(work, _config(delay))
    _populate(lm, roll_every=15)
    lg = lm.get_or_create_log("t", 0)
    assert lg.num_segments > 4  # several old segments, cleaned into one group
    before = records(lg)
    end = lg.log_end_offset
    assert expected != before

    def hook(name: str) -> None:
        if name == step:
            raise Crash(name)

    lm.cleaner.crash_hook = hook
    with pytest.raises(Crash):
        lm.cleaner.clean_once_sync()
    _abandon(lm)

    lm = _reopen(work, delay)
    lg = lm.get_log("t", 0)
    assert lg is not None and lg.log_end_offset == end
    assert _leftovers(work) == []
    got = records(lg)
    if step == "cleaned":
        assert got == before  # rolled back: the .cleaned files were discarded
    else:
        assert got == expected  # completed from the .swap files
    assert latest(got) == latest(before)
    _indexes_valid(work)
    ckpt = OffsetCheckpointFile(work / "logs" / CLEANER_CHECKPOINT_FILE).read()
    assert (("t", 0) in ckpt) == (step == "checkpointed")
    # the log keeps working: appends continue at the old end, and cleaning again converges
    append(lg, [(b"k0", b"after")])
    assert lg.log_end_offset == end + 1
    lg.roll()
    lm.cleaner.clean_all_sync()
    final = latest(records(lg))
    assert final[b"k0"] == (end, b"after")
    assert {k: v for k, (_o, v) in final.items()} == {
        k: v for k, (_o, v) in latest(expected).items()
    } | {b"k0": b"after"}
    lm.shutdown()


def test_crash_between_two_groups_keeps_every_latest_value(tmp_path: Path) -> None:
    lm = new_manager(tmp_path, compact_config(**{"segment.bytes": 700}))
    _populate(lm, 120)
    lg = lm.get_log("t", 0)
    lm.cleaner.clean_once_sync()
    # many small cleaned segments now group; add dirt so the next pass rewrites several groups
    for i in range(120):
        append(lg, [(b"k%d" % (i % 7), b"w%03d" % i)])
    lg.roll()
    before = records(lg)
    seen: list[str] = []

    def hook(name: str) -> None:
        seen.append(name)
        if name == "replaced":
            raise Crash(name)

    lm.cleaner.crash_hook = hook
    with pytest.raises(Crash):
        lm.cleaner.clean_once_sync()
    _abandon(lm)
    lm = _reopen(tmp_path, 0, 700)
    lg = lm.get_log("t", 0)
    got = records(lg)
    assert _leftovers(tmp_path) == []
    assert set(got) <= set(before)
    assert latest(got) == latest(before)
    _indexes_valid(tmp_path)
    lm.shutdown()


def test_partial_cleaned_and_orphan_swap_index_files_are_discarded(tmp_path: Path) -> None:
    lm = new_manager(tmp_path)
    _populate(lm)
    lg = lm.get_log("t", 0)
    before = records(lg)

    def hook(name: str) -> None:
        if name == "cleaned":
            raise Crash(name)

    lm.cleaner.crash_hook = hook
    with pytest.raises(Crash):
        lm.cleaner.clean_once_sync()
    _abandon(lm)
    d = tmp_path / "logs" / "t-0"
    cleaned = sorted(d.glob("*.log.cleaned"))
    assert cleaned
    with open(cleaned[0], "r+b") as f:  # the worker died mid-write
        f.truncate(cleaned[0].stat().st_size // 2)
    (d / "00000000000000000000.index.swap").write_bytes(b"\0" * 64)  # an orphan swap index
    lm = _reopen(tmp_path, 0)
    assert records(lm.get_log("t", 0)) == before
    assert _leftovers(tmp_path) == []
    lm.shutdown()
