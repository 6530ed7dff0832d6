"""Deleting the files of segments that left a log (Kafka's LocalLog.deleteSegmentFiles).

Retention, truncation and cleaner swaps take segments out of the log at once,
but their files go in two steps: renamed ``.deleted`` immediately, so a later
deletion never hits a new file of the same name (a cleaner swap), and unlinked
after ``file.delete.delay.ms``. Unlinking a large segment blocks for tens of
milliseconds, so it runs on the ``file_deleter`` (the LogManager's
kafka-delete-logs thread) when there is one. A crash before the delay leaves
the ``.deleted`` files; the next load removes them.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable

from kafkalite.log.log_segment import DELETED_FILE_SUFFIX, LogSegment

__all__ = ["SegmentDeleter"]

log = logging.getLogger(__name__)


class SegmentDeleter:
    """The segments one log removed, waiting for their file.delete.delay.ms."""

    __slots__ = ("name", "file_deleter", "_clock", "_pending")

    def __init__(self, name: str, clock_ms: Callable[[], int]) -> None:
        self.name = name
        #: runs unlinks off the caller's thread; None unlinks inline
        self.file_deleter: Callable[[Callable[[], None]], None] | None = None
        self._clock = clock_ms
        self._pending: list[tuple[int, LogSegment]] = []

    @property
    def pending(self) -> list[tuple[int, LogSegment]]:
        """(due time in ms, segment) of the deletions still waiting."""
        return list(self._pending)

    def delete(self, doomed: Iterable[LogSegment], reason: str, delay_ms: int) -> None:
        """Rename each segment's files ``.deleted`` now; unlink them after ``delay_ms``."""
        due = self._clock() + delay_ms
        for seg in doomed:
            log.info("%s: deleting segment %d (%s)", self.name, seg.base_offset, reason)
            # renamed first (as Kafka's asyncDeleteSegment), so a deletion that runs
            # later never hits a new file with the same name (a cleaner swap)
            seg.change_file_suffixes("", DELETED_FILE_SUFFIX)
            if delay_ms <= 0:
                self._delete_files(seg)
            else:
                self._pending.append((due, seg))

    def run_pending(self, now_ms: int | None = None, *, force: bool = False) -> int:
        """Delete the segments whose delay expired (all of them, inline, with ``force``);
        returns how many."""
        if not self._pending:
            return 0
        now = self._clock() if now_ms is None else now_ms
        keep, done = [], 0
        for due, seg in self._pending:
            if force:
                self._unlink(seg)
                done += 1
            elif due <= now:
                self._delete_files(seg)
                done += 1
            else:
                keep.append((due, seg))
        self._pending = keep
        return done

    def close_handlers(self) -> None:
        """Release the waiting segments' descriptors; their ``.deleted`` files stay."""
        for _due, seg in self._pending:
            try:
                seg.close_handlers()
            except OSError:
                pass

    def clear(self) -> None:
        """Forget the waiting segments (the log closed or its directory is going)."""
        self._pending = []

    def _delete_files(self, seg: LogSegment) -> None:
        deleter = self.file_deleter
        if deleter is None:
            self._unlink(seg)
        else:
            deleter(functools.partial(self._unlink, seg))

    def _unlink(self, seg: LogSegment) -> None:
        try:
            seg.delete()
        except OSError as e:
            log.warning("%s: failed to delete %s: %s", self.name, seg.log_path, e)
