"""Leader epoch -> start offset map, persisted as ``leader-epoch-checkpoint``.

Followers truncate with it (OffsetForLeaderEpoch) instead of trusting the
high watermark, which is what keeps replicas identical after a leader change.
File format: ``0\\n<count>\\n<epoch> <startOffset>\\n...`` (Kafka's).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from kafkalite.log.checkpoint import CheckpointFile

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

    __slots__ = ("_file", "_entries")

    def __init__(self, path: Path | None, *, sync: bool = True) -> None:
        self._file = CheckpointFile(path, 0, _fmt, _parse, sync=sync) if path is not None else None
        self._entries: list[EpochEntry] = self._file.read() if self._file is not None else []

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

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs starting at or after ``end_offset`` (log truncated there)."""
        if end_offset >= 0 and self._entries and self._entries[-1].start_offset >= end_offset:
            while self._entries and self._entries[-1].start_offset >= end_offset:
                self._entries.pop()
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop epochs wholly before ``start_offset``; the one holding it now starts there."""
        if start_offset < 0 or not self._entries or self._entries[0].start_offset >= start_offset:
            return
        last_removed = None
        while self._entries and self._entries[0].start_offset <= start_offset:
            last_removed = self._entries.pop(0)
        if last_removed is not None:
            self._entries.insert(0, EpochEntry(last_removed.epoch, start_offset))
        self.flush()

    def clear_and_flush(self) -> None:
        self._entries.clear()
        self.flush()

    def flush(self) -> None:
        if self._file is not None:
            self._file.write(self._entries)
