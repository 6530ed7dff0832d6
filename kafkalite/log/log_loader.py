"""Opening a log from its directory (Kafka's LogLoader): clean-up, swaps, recovery.

A ``Log`` is built in one step from what is on disk. Loading deletes what
interrupted operations left behind, completes a cleaner swap a crash cut short,
opens every segment (rebuilding missing or corrupt indexes), re-validates what
was written after the recovery point when the broker did not shut down
cleanly, and settles the offsets the log starts with. It runs once per log,
before the log serves anything, so it lives apart from the append/read code.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafkalite.log.abstract_index import CorruptIndexError
from kafkalite.log.checkpoint import CorruptCheckpointError
from kafkalite.log.leader_epoch_cache import LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochFileCache
from kafkalite.log.log_config import LogConfig
from kafkalite.log.log_segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    LogSegment,
)
from kafkalite.log.log_segments import LogSegments

__all__ = ["LoadedLog", "LogLoader"]

log = logging.getLogger(__name__)

_SEGMENT_FILE_SUFFIXES = (
    LOG_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
)


@dataclass(frozen=True, slots=True)
class LoadedLog:
    """What loading settled (Kafka's LoadedLogOffsets, with the epoch cache it opened)."""

    leader_epoch_cache: LeaderEpochFileCache
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    #: bytes recovery cut from the segments (the LogManager logs it)
    truncated_bytes: int
    #: base offset of the first segment recovery re-validated (its .txnindex was reset
    #: with its other indexes), None if none was
    first_recovered_offset: int | None = None


def log_file_offsets(names: list[str]) -> list[int]:
    """Base offsets of the ``<20 digits>.log`` files among ``names``."""
    out = []
    for name in names:
        if name.endswith(LOG_FILE_SUFFIX):
            stem = name[: -len(LOG_FILE_SUFFIX)]
            if stem.isdigit():
                out.append(int(stem))
    return out


class LogLoader:
    """Loads one log directory into ``segments``; :meth:`load` runs once.

    ``log_start_offset`` and ``recovery_point`` are the checkpointed values;
    ``needs_recovery`` is False after a clean shutdown, when only damage the
    files show (a missing index, a partial tail) is repaired.
    """

    def __init__(
        self,
        dir: Path,
        config: LogConfig,
        segments: LogSegments,
        *,
        name: str,
        log_start_offset: int,
        recovery_point: int,
        needs_recovery: bool,
        clock_ms: Callable[[], int],
    ) -> None:
        self.dir = dir
        self.config = config
        self.segments = segments
        self.name = name
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._first_recovered: int | None = None
        self._needs_recovery = needs_recovery
        self._clock = clock_ms
        self._truncated_bytes = 0

    def load(self) -> LoadedLog:
        """Fill ``segments`` from the directory and return the offsets the log starts with."""
        epoch_cache = self._open_leader_epoch_cache()
        log_start_offset = self._log_start_offset
        # One listing serves every step unless one of them changed the directory.
        names = os.listdir(self.dir)
        if self._remove_temp_files(names):
            names = os.listdir(self.dir)
        if self._complete_swap_operations(names):
            names = os.listdir(self.dir)
        rebuild = self._load_segment_files(names)
        leo = self._recover_log(epoch_cache, rebuild)
        segments = self.segments
        log_start_offset = max(log_start_offset, segments.first.base_offset)
        # After a clean shutdown everything up to the log end was flushed. After a
        # crash the recovered range was re-validated but is not known to be durable
        # (nor the epochs recovery learnt): the recovery point moves only with the
        # next flush, as Kafka's LogLoader keeps min(checkpoint, log end).
        recovery_point = min(self._recovery_point, leo) if self._needs_recovery else leo
        segments.active.resize_indexes(self.config.segment_index_bytes)
        # In memory only: every load applies it again, and the first append writes
        # it (load_truncation_pending) before data goes past the old log end.
        epoch_cache.truncate_from_end(leo, flush=False)
        epoch_cache.truncate_from_start(log_start_offset, flush=False)
        # Loading read the active segment's tail (and recovery whole segments): let go
        # of those descriptors, so an idle partition holds none until it is used.
        for seg in segments:
            seg.release_handle()
        return LoadedLog(
            epoch_cache,
            log_start_offset,
            leo,
            recovery_point,
            self._truncated_bytes,
            self._first_recovered,
        )

    def _open_leader_epoch_cache(self) -> LeaderEpochFileCache:
        """The leader-epoch checkpoint; a corrupt one is rebuilt by recovering the whole log."""
        epoch_path = self.dir / LEADER_EPOCH_CHECKPOINT_FILE
        try:
            # fsynced by Log.flush() before the recovery point moves (see leader_epoch_cache)
            return LeaderEpochFileCache(epoch_path, sync=False)
        except CorruptCheckpointError as e:
            log.warning("%s; rebuilding the leader epoch cache from the log", e)
            epoch_path.unlink()
            self._needs_recovery = True
            self._recovery_point = 0
            return LeaderEpochFileCache(epoch_path, sync=False)

    def _remove_temp_files(self, names: list[str]) -> bool:
        """Delete leftovers of interrupted deletes/cleans and orphaned indexes (as Kafka).

        Returns True when something was deleted."""
        logs = {n[: -len(LOG_FILE_SUFFIX)] for n in names if n.endswith(LOG_FILE_SUFFIX)}
        changed = False
        for name in names:
            if name.endswith((DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, ".tmp")):
                p = self.dir / name
                if p.is_file():
                    p.unlink()
                    changed = True
                continue
            for suffix in (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX):
                if name.endswith(suffix) and name[: -len(suffix)] not in logs:
                    p = self.dir / name
                    if p.is_file():
                        log.info("%s: deleting orphaned index %s", self.name, name)
                        p.unlink()
                        changed = True
        return changed

    def _complete_swap_operations(self, names: list[str]) -> bool:
        """Finish a cleaner swap interrupted by a crash (``Log.replace_segments``).

        A ``.log.swap`` is a complete replacement for the segments whose base
        offsets fall in its offset range: delete those and drop the suffix.
        Swap indexes are discarded and rebuilt. Returns True when there was one.
        """
        swaps = sorted(n for n in names if n.endswith(SWAP_FILE_SUFFIX))
        if not swaps:
            return False
        for name in swaps:
            if not name.endswith(LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX):
                (self.dir / name).unlink()
        for p in sorted(self.dir.glob(f"*{LOG_FILE_SUFFIX}{SWAP_FILE_SUFFIX}")):
            base = int(p.name.split(".", 1)[0])
            seg = LogSegment.open(self.dir, base, self.config, file_suffix=SWAP_FILE_SUFFIX)
            seg.recover(None)
            end = seg.read_next_offset()
            seg.close()
            for other in log_file_offsets(os.listdir(self.dir)):
                if base <= other < end:
                    for suffix in _SEGMENT_FILE_SUFFIXES:
                        (self.dir / f"{other:020d}{suffix}").unlink(missing_ok=True)
            for suffix in _SEGMENT_FILE_SUFFIXES:
                swap = self.dir / f"{base:020d}{suffix}{SWAP_FILE_SUFFIX}"
                if swap.exists():
                    os.replace(swap, self.dir / f"{base:020d}{suffix}")
            log.info("%s: completed interrupted swap of segment %d", self.name, base)
        return True

    def _load_segment_files(self, names: list[str]) -> set[int]:
        """Open every segment; returns the base offsets whose indexes must be rebuilt."""
        present = set(names)
        rebuild: set[int] = set()
        for base in sorted(log_file_offsets(names)):
            missing_index = f"{base:020d}{INDEX_FILE_SUFFIX}" not in present
            seg = LogSegment.open(self.dir, base, self.config, created_ms=0)
            self.segments.add(seg)
            if missing_index:
                log.info("%s: rebuilding the missing indexes of segment %d", self.name, base)
                rebuild.add(base)
                continue
            try:
                seg.sanity_check()
            except CorruptIndexError as e:
                log.warning("%s: %s; rebuilding the indexes of segment %d", self.name, e, base)
                rebuild.add(base)
        return rebuild

    def _recover_log(self, epoch_cache: LeaderEpochFileCache, rebuild: set[int]) -> int:
        """Recover what needs it and make sure there is an active segment; returns the
        log end offset."""
        segments = self.segments
        log_start_offset = self._log_start_offset
        if self._needs_recovery:
            self._recover_from(epoch_cache, rebuild)
        else:
            for seg in segments:
                if seg.base_offset in rebuild:
                    self._note_recovered(seg.base_offset)
                    self._truncated_bytes += seg.recover(None)
        if not segments:
            segments.add(self._new_segment(log_start_offset))
        active = segments.active
        leo, end = active.scan_end()
        if end != active.size:
            # A clean shutdown never leaves a partial tail; recover rather than append after it.
            log.warning(
                "%s: the active segment ends with %d unreadable bytes",
                self.name,
                active.size - end,
            )
            self._note_recovered(active.base_offset)
            self._truncated_bytes += active.recover(epoch_cache)
            leo = active.read_next_offset()
        if leo < log_start_offset:
            log.warning(
                "%s: log end offset %d is below the checkpointed log start offset %d; starting afresh there",
                self.name,
                leo,
                log_start_offset,
            )
            for seg in list(segments):
                seg.delete()
            segments.clear()
            segments.add(self._new_segment(log_start_offset))
            leo = log_start_offset
        return leo

    def _recover_from(self, epoch_cache: LeaderEpochFileCache, rebuild: set[int]) -> None:
        """Re-validate segments holding offsets >= the recovery point (and those with bad
        indexes); drop every later segment after a bad batch."""
        segments = self.segments
        recovery_point = self._recovery_point
        for i, seg in enumerate(segments.values()):
            next_base = segments.next_base_offset(i)
            if (
                next_base is not None
                and next_base <= recovery_point
                and seg.base_offset not in rebuild
            ):
                continue
            self._note_recovered(seg.base_offset)
            truncated = seg.recover(epoch_cache)
            if truncated > 0:
                self._truncated_bytes += truncated
                dropped = segments.remove_from(i + 1)
                if dropped:
                    log.warning(
                        "%s: corruption in segment %d; deleting %d later segments",
                        self.name,
                        seg.base_offset,
                        len(dropped),
                    )
                for d in dropped:
                    self._truncated_bytes += d.size
                    d.delete()
                break

    def _note_recovered(self, base_offset: int) -> None:
        if self._first_recovered is None or base_offset < self._first_recovered:
            self._first_recovered = base_offset

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment.open(self.dir, base_offset, self.config, created_ms=self._clock())
