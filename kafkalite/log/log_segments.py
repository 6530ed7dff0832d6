"""A log's segments in base-offset order (Kafka's LogSegments).

The base offsets are kept in a list alongside the segments, so that finding the
segment holding an offset is one ``bisect`` on plain ints; keeping the two lists
in step is this class's whole job, which is why nothing else mutates them.
Everything runs on the event loop, so unlike Kafka's (a concurrent skip list)
nothing here is thread-safe.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterator, Sequence

from kafkalite.log.log_segment import LogSegment

__all__ = ["LogSegments"]


class LogSegments:
    """The segments of one log, oldest first; the last one is the active segment."""

    __slots__ = ("_segments", "_bases", "active")

    #: the last segment, the one taking appends (unset while there is none). An
    #: attribute the changes below keep, not a property: every append and read asks.
    active: LogSegment

    def __init__(self) -> None:
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    def values(self) -> Sequence[LogSegment]:
        """The segments, oldest first: the live list, not a copy (read paths index it)."""
        return self._segments

    def base_offsets(self) -> list[int]:
        return list(self._bases)

    @property
    def first(self) -> LogSegment:
        return self._segments[0]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    # ------------------------------------------------------------ lookups

    def floor_index(self, offset: int) -> int:
        """Index of the last segment whose base offset is <= ``offset`` (-1: none)."""
        return bisect.bisect_right(self._bases, offset) - 1

    def next_base_offset(self, index: int) -> int | None:
        """Base offset of the segment after ``index``; None after the active one."""
        return self._bases[index + 1] if index + 1 < len(self._bases) else None

    def between(self, start: int, end: int) -> Iterator[tuple[LogSegment, int | None]]:
        """(segment, next base offset) for the segments that may hold offsets in
        [start, end): from the one holding ``start`` to the last based below ``end``."""
        segs = self._segments
        i = max(self.floor_index(start), 0)
        while i < len(segs) and segs[i].base_offset < end:
            yield segs[i], self.next_base_offset(i)
            i += 1

    # ------------------------------------------------------------ changes

    def add(self, segment: LogSegment) -> None:
        """Insert in base-offset order (after any segment with the same base offset);
        a segment above the last one (a roll, a load) is a plain append."""
        base = segment.base_offset
        if not self._bases or base > self._bases[-1]:
            self._segments.append(segment)
            self._bases.append(base)
            self.active = segment
            return
        i = bisect.bisect_right(self._bases, base)
        self._segments.insert(i, segment)
        self._bases.insert(i, base)

    def remove(self, doomed: Collection[LogSegment]) -> None:
        """Take these segments (by identity) out of the log; their files are untouched."""
        ids = {id(s) for s in doomed}
        self._segments = [s for s in self._segments if id(s) not in ids]
        self._bases = [s.base_offset for s in self._segments]
        self._reset_active()

    def remove_from(self, index: int) -> list[LogSegment]:
        """Take out the segments from ``index`` on and return them (recovery drops
        everything after a corrupt batch)."""
        dropped = self._segments[index:]
        del self._segments[index:]
        del self._bases[index:]
        self._reset_active()
        return dropped

    def clear(self) -> None:
        self._segments = []
        self._bases = []
        self._reset_active()

    def _reset_active(self) -> None:
        if self._segments:
            self.active = self._segments[-1]
        elif hasattr(self, "active"):
            del self.active

    def close_handlers(self) -> None:
        """Release every segment's descriptors, ignoring errors (an offline or deleted log)."""
        for seg in self._segments:
            try:
                seg.close_handlers()
            except OSError:
                pass
