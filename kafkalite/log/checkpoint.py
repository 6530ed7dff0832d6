"""Kafka's checkpoint text files, written atomically.

Format (every checkpoint file Kafka writes)::

    <version>\\n<count>\\n<entry>\\n...

``OffsetCheckpointFile`` entries are ``<topic> <partition> <offset>`` (used for
``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint``,
``log-start-offset-checkpoint`` and ``cleaner-offset-checkpoint``). Writes go
to ``<file>.tmp``, are fsynced, renamed over the file and the directory is
fsynced, so a crash leaves either the old or the new file, never a mix.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Generic, TypeVar

from kafkalite.common.types import TopicPartition

__all__ = [
    "LOG_START_OFFSET_CHECKPOINT_FILE",
    "RECOVERY_POINT_CHECKPOINT_FILE",
    "REPLICATION_CHECKPOINT_FILE",
    "CheckpointFile",
    "CorruptCheckpointError",
    "OffsetCheckpointFile",
    "atomic_write",
]

RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_CHECKPOINT_FILE = "replication-offset-checkpoint"
CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"

T = TypeVar("T")


class CorruptCheckpointError(ValueError):
    """The file does not parse as a checkpoint of the expected version."""


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Write ``data`` to ``path`` via ``path.tmp`` + fsync + rename (+ dir fsync)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def _load_syncfs() -> Callable[[int], int] | None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


_SYNCFS = _load_syncfs()


def syncfs_available() -> bool:
    return _SYNCFS is not None


def syncfs(path: Path) -> bool:
    """Flush every dirty page and inode of the filesystem holding ``path`` (Linux
    syncfs(2)): one call instead of thousands of fsyncs. False when unavailable;
    OSError when the filesystem reports a write error."""
    if _SYNCFS is None:
        return False
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _SYNCFS(fd) != 0:
            import ctypes

            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(path))
    finally:
        os.close(fd)
    return True


def fsync_file(path: Path) -> None:
    """fsync an existing file by path (raises OSError, except when it is gone)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    try:
        dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


class CheckpointFile(Generic[T]):
    """A versioned list of entries, one per line."""

    __slots__ = ("path", "version", "_format", "_parse", "sync")

    def __init__(
        self,
        path: Path,
        version: int,
        format_entry: Callable[[T], str],
        parse_entry: Callable[[list[str]], T],
        *,
        sync: bool = True,
    ) -> None:
        self.path = path
        self.version = version
        self._format = format_entry
        self._parse = parse_entry
        self.sync = sync

    def render(self, entries: Iterable[T]) -> bytes:
        lines = [self._format(e) for e in entries]
        return (f"{self.version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)).encode()

    def write(self, entries: Iterable[T]) -> None:
        atomic_write(self.path, self.render(entries), sync=self.sync)

    def read(self) -> list[T]:
        """Entries in file order; [] when the file does not exist."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        try:
            version = int(lines[0])
        except (IndexError, ValueError):
            raise CorruptCheckpointError(
                f"{self.path}: missing or malformed version line"
            ) from None
        if version != self.version:
            raise CorruptCheckpointError(f"{self.path}: unrecognised version {version}")
        try:
            count = int(lines[1])
        except (IndexError, ValueError):
            raise CorruptCheckpointError(f"{self.path}: missing or malformed entry count") from None
        body = lines[2:]
        if len(body) != count:
            raise CorruptCheckpointError(
                f"{self.path}: expected {count} entries but found {len(body)}"
            )
        out = []
        for line in body:
            try:
                out.append(self._parse(line.split(" ")))
            except (ValueError, IndexError):
                raise CorruptCheckpointError(f"{self.path}: malformed line {line!r}") from None
        return out


def _fmt_offset(e: tuple[TopicPartition, int]) -> str:
    (topic, partition), offset = e
    return f"{topic} {partition} {offset}"


def _parse_offset(parts: list[str]) -> tuple[TopicPartition, int]:
    if len(parts) != 3:
        raise ValueError("expected 3 fields")
    return (parts[0], int(parts[1])), int(parts[2])


class OffsetCheckpointFile:
    """``topic partition offset`` checkpoint (version 0)."""

    __slots__ = ("_file",)

    VERSION = 0

    def __init__(self, path: Path, *, sync: bool = True) -> None:
        self._file: CheckpointFile[tuple[TopicPartition, int]] = CheckpointFile(
            path, self.VERSION, _fmt_offset, _parse_offset, sync=sync
        )

    @property
    def path(self) -> Path:
        return self._file.path

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Entries sorted by topic then partition (Kafka writes map order; any order reads)."""
        self._file.write(sorted(offsets.items()))

    def render(self, offsets: Mapping[TopicPartition, int]) -> bytes:
        return self._file.render(sorted(offsets.items()))

    def read(self) -> dict[TopicPartition, int]:
        return dict(self._file.read())
