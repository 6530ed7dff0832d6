"""Moving a replica between log dirs of a live broker (AlterReplicaLogDirs, JBOD).

Kafka's way, observably: the move creates a *future* log,
``<dest>/<topic>-<partition>.<uuid>-future``, which DescribeLogDirs reports with
``is_future_key``; it catches up with the current log (Kafka's
ReplicaAlterLogDirsThread fetches it; here the closed segments' files are copied on a
worker thread, throttled by ``replica.alter.log.dirs.io.max.bytes.per.second``), then
replaces it: the rest is copied with the log flushed and no await in between, the
future dir takes the partition's name, the old dir is renamed ``-delete`` and goes
after ``file.delete.delay.ms``, and the partition serves from the new log. A move of
a partition whose log changes under the copy (retention, compaction) copies those
segments again in the final step. The copy needs no rename across filesystems.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kafkalite.common.types import TopicPartition

FUTURE_DIR_SUFFIX = "-future"
#: bytes read and written per step of the throttled copy
CHUNK = 256 * 1024


def future_dir_name(topic: str, partition: int) -> str:
    suffix = f"-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"
    return topic[: min(len(topic), 255 - len(suffix))] + suffix


@dataclass(slots=True)
class FutureLog:
    """A move in progress: where it goes and how far the copy got."""

    tp: TopicPartition
    dest: Path
    dir: Path
    copied_bytes: int = 0
    #: the offset the copied segments reach (the next one's base offset)
    copied_end_offset: int = 0
    #: file name -> (size, mtime_ns) of the source when it was copied
    copied: dict[str, tuple[int, int]] = field(default_factory=dict)
    cancelled: bool = False


def _copy_file(src: Path, dst: Path, rate: Callable[[], float], fut: FutureLog) -> int:
    """Copy ``src`` to ``dst`` in chunks at most ``rate()`` bytes a second; returns the
    bytes copied. Runs on a worker thread: the throttle sleeps in slices of at most 0.1 s
    and stops when the move is cancelled (a broker stop does not wait for it)."""
    n = 0
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        while not fut.cancelled:
            r = rate()
            chunk = fi.read(CHUNK if r <= 0 else max(1024, min(CHUNK, int(r / 10))))
            if not chunk:
                break
            fo.write(chunk)
            n += len(chunk)
            if r > 0:
                until = time.monotonic() + len(chunk) / r
                while not fut.cancelled and (left := until - time.monotonic()) > 0:
                    time.sleep(min(left, 0.1))
        fo.flush()
        os.fsync(fo.fileno())
    return n


async def copy_closed_segments(
    fut: FutureLog,
    src_dir: Path,
    closed: list[tuple[int, list[str]]],
    rate: Callable[[], float],
) -> None:
    """Copy ``closed`` segments ([(base offset, file names)], in offset order) on a worker
    thread; a file that vanished (retention) is skipped, the final step settles it."""
    try:
        await _copy_segments(fut, src_dir, closed, rate)
    except asyncio.CancelledError:
        fut.cancelled = True  # the worker thread stops at its next slice
        raise


async def _copy_segments(
    fut: FutureLog,
    src_dir: Path,
    closed: list[tuple[int, list[str]]],
    rate: Callable[[], float],
) -> None:
    for i, (_base, names) in enumerate(closed):
        if fut.cancelled:
            return
        for name in names:
            src = src_dir / name
            try:
                st = os.stat(src)
                copied = await asyncio.to_thread(_copy_file, src, fut.dir / name, rate, fut)
            except FileNotFoundError:
                continue
            if fut.cancelled:
                return
            fut.copied[name] = (st.st_size, st.st_mtime_ns)
            if name.endswith(".log"):
                fut.copied_bytes += copied
        nxt = closed[i + 1][0] if i + 1 < len(closed) else None
        if nxt is not None:
            fut.copied_end_offset = nxt


def copy_rest(fut: FutureLog, src_dir: Path) -> None:
    """The final, synchronous step: every file of the (flushed) source not copied yet or
    changed since, and nothing the source no longer has."""
    names = {e.name for e in os.scandir(src_dir) if e.is_file()}
    for stale in set(os.listdir(fut.dir)) - names:
        os.unlink(fut.dir / stale)
    for name in sorted(names):
        st = os.stat(src_dir / name)
        if fut.copied.get(name) == (st.st_size, st.st_mtime_ns):
            continue
        shutil.copy2(src_dir / name, fut.dir / name)
    fd = os.open(fut.dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
