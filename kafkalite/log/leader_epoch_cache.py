"""Leader epoch -> start offset map, persisted as ``leader-epoch-checkpoint``.

Followers truncate with it (OffsetForLeaderEpoch) instead of trusting the
high watermark, which is what keeps replicas identical after a leader change.
File format: ``0\\n<count>\\n<epoch> <startOffset>\\n...`` (Kafka's).

Durability (``sync=False``, what Log uses): every change is written to the
file at once (tmp + rename) but not fsynced; the owner fsyncs it
(:meth:`sync_to_disk`, or the LogManager's background flush) before it moves
the log's recovery point past data written under the new entries. After a
power loss the file is therefore only stale for offsets the recovery pass
re-validates, and that pass re-learns their epochs from the batch headers
(dropping entries the batches contradict, see LogSegment.recover);
entries past the log end are truncated again at load (Kafka's reasoning in
KAFKA-15046). Writes that would not change the file are skipped, so loading
thousands of logs and making them leaders again writes nothing.

The load's own truncation (entries past the log end, or before the log start)
is not written by itself: the next load applies it again. It reaches the file
with the next write of the cache, or at the latest just before the next append
(:attr:`load_truncation_pending`), since an append under an epoch no newer than
the stale entries assigns nothing and the file would credit its data to them.
Rewriting 10,000 files at start-up only to write them back when each partition
became leader at the same epoch cost about 2 s of event-loop time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from kafkalite.log.checkpoint import CheckpointFile, fsync_dir, fsync_file

__all__ = [
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "LeaderEpochFileCache",
]

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(slots=True, frozen=True)
class EpochEntry:
    epoch: int
    start_offset: int


def _fmt(e: EpochEntry) -> str:
    return f"{e.epoch} {e.start_offset}"


def _parse(parts: list[str]) -> EpochEntry:
    if len(parts) != 2:
        raise ValueError("expected 2 fields")
    return EpochEntry(int(parts[0]), int(parts[1]))


class LeaderEpochFileCache:
    """Epochs with strictly increasing epoch and start offset, oldest first."""

    __slots__ = (
        "_file",
        "_entries",
        "_persisted",
        "_unsynced",
        "write_generation",
        "load_truncation_pending",
    )

    def __init__(self, path: Path | None, *, sync: bool = True) -> None:
        self._file = CheckpointFile(path, 0, _fmt, _parse, sync=sync) if path is not None else None
        self._entries: list[EpochEntry] = self._file.read() if self._file is not None else []
        #: what the file holds (as read or last written)
        self._persisted: tuple[EpochEntry, ...] = tuple(self._entries)
        #: written without fsync since the last sync_to_disk
        self._unsynced = False
        #: bumped by every write (a background fsync clears only what it saw)
        self.write_generation = 0
        #: a load-time truncation is in memory only; write it before appending
        self.load_truncation_pending = False

    @property
    def path(self) -> Path | None:
        return self._file.path if self._file is not None else None

    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def is_empty(self) -> bool:
        return not self._entries

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def previous_epoch(self) -> int | None:
        return self._entries[-2].epoch if len(self._entries) >= 2 else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; drop entries it contradicts.

        Returns True (and persists) when the cache changed.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid epoch entry ({epoch}, {start_offset})")
        last = self._entries[-1] if self._entries else None
        if last is not None and epoch == last.epoch and start_offset >= last.start_offset:
            return False
        removed = []
        while self._entries and (
            self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset
        ):
            removed.append(self._entries.pop())
        if removed:
            log.info(
                "leader epoch %d at %d replaces entries %s", epoch, start_offset, removed[::-1]
            )
        self._entries.append(EpochEntry(epoch, start_offset))
        self.flush()
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= requested, end offset of that epoch).

        The end offset is the start of the next larger epoch, or the log end
        offset when the requested epoch is the latest; (-1, -1) when unknown.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        higher = next((e for e in self._entries if e.epoch > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = None
        for e in self._entries:
            if e.epoch > requested_epoch:
                break
            floor = e
        if floor is None:
            return requested_epoch, higher.start_offset
        return floor.epoch, higher.start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """Epoch of the leader that wrote ``offset``."""
        previous = None
        for e in self._entries:
            if e.start_offset == offset:
                return e.epoch
            if e.start_offset > offset:
                return previous
            previous = e.epoch
        return previous

    def truncate_from_end(self, end_offset: int, *, flush: bool = True) -> None:
        """Drop epochs starting at or after ``end_offset`` (log truncated there).

        ``flush=False`` (log load) changes only the cache and sets
        :attr:`load_truncation_pending`.
        """
        if end_offset >= 0 and self._entries and self._entries[-1].start_offset >= end_offset:
            while self._entries and self._entries[-1].start_offset >= end_offset:
                self._entries.pop()
            if flush:
                self.flush()
            else:
                self.load_truncation_pending = self.is_dirty

    def truncate_from_start(self, start_offset: int, *, flush: bool = True) -> None:
        """Drop epochs wholly before ``start_offset``; the one holding it now starts there."""
        if start_offset < 0 or not self._entries or self._entries[0].start_offset >= start_offset:
            return
        last_removed = None
        while self._entries and self._entries[0].start_offset <= start_offset:
            last_removed = self._entries.pop(0)
        if last_removed is not None:
            self._entries.insert(0, EpochEntry(last_removed.epoch, start_offset))
        if flush:
            self.flush()
        else:
            self.load_truncation_pending = self.is_dirty

    def clear_and_flush(self) -> None:
        self._entries.clear()
        self.flush()

    @property
    def is_dirty(self) -> bool:
        """The cache differs from the file (only while a load-time truncation
        is pending: every other change writes the file)."""
        return self._file is not None and tuple(self._entries) != self._persisted

    @property
    def needs_fsync(self) -> bool:
        return self._unsynced

    def flush(self) -> None:
        """Write the file if its content would change (fsynced when ``sync``)."""
        f = self._file
        if f is None:
            return
        entries = tuple(self._entries)
        if entries == self._persisted:
            self.load_truncation_pending = False
            return
        f.write(entries)
        self._persisted = entries
        self.load_truncation_pending = False
        self.write_generation += 1
        if not f.sync:
            self._unsynced = True

    def sync_to_disk(self) -> None:
        """Write what is pending and fsync the file and its directory.

        A pending load-time truncation is left alone: the data it covers is
        already durable, and the next load truncates the same way.
        """
        if not self.load_truncation_pending:
            self.flush()
        if self._unsynced and self._file is not None:
            fsync_file(self._file.path)
            fsync_dir(self._file.path.parent)
            self._unsynced = False

    def mark_synced(self, generation: int) -> None:
        """A background fsync covered every write up to ``generation``."""
        if generation == self.write_generation:
            self._unsynced = False
