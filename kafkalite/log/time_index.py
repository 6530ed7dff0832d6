"""``.timeindex``: sparse map from timestamp to offset within one segment.

Entries are 12 bytes, big-endian: int64 timestamp (the segment's max timestamp
so far), int32 offset relative to the base offset. Timestamps only grow: an
entry is written only when the max timestamp increased. One slot is kept free
so the final max timestamp can always be written when the segment is rolled.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path
from typing import NamedTuple

from kafkalite.common import structs
from kafkalite.log.abstract_index import AbstractIndex, CorruptIndexError

__all__ = ["TimeIndex", "TimestampOffset"]

#: timestamp, relative offset: one 12-byte entry of a .timeindex file
TIME_ENTRY = struct.Struct(">qi")

NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


def _ts_key(mm: mmap.mmap, slot: int) -> int:
    return structs.I64.unpack_from(mm, slot * 12)[0]


def _offset_key(mm: mmap.mmap, slot: int) -> int:
    return structs.I32.unpack_from(mm, slot * 12 + 8)[0]


class TimeIndex(AbstractIndex):
    ENTRY_SIZE = 12

    __slots__ = ("_last_entry",)

    def __init__(self, path: Path, base_offset: int, max_index_size: int = -1) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._last_entry: TimestampOffset | None = None

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """Last entry, or (-1, base_offset) when empty."""
        if self._last_entry is None:
            self._last_entry = (
                self.entry(self._entries - 1)
                if self._entries
                else TimestampOffset(NO_TIMESTAMP, self.base_offset)
            )
        return self._last_entry

    def _after_truncate(self) -> None:
        self._last_entry = None

    def entry(self, n: int) -> TimestampOffset:
        if n < 0 or n >= self._entries:
            raise IndexError(f"time index entry {n} out of range in {self.path}")
        ts, rel = TIME_ENTRY.unpack_from(*self._entry_buffer(n))
        return TimestampOffset(ts, self.base_offset + rel)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append when ``timestamp`` is larger than the last entry's."""
        if not skip_full_check and self.is_full:
            raise CorruptIndexError(f"attempt to append to a full time index {self.path}")
        last = self.last_entry
        if self._entries and offset < last.offset:
            raise CorruptIndexError(
                f"attempt to append offset {offset} smaller than the last offset {last.offset} to {self.path}"
            )
        if self._entries and timestamp < last.timestamp:
            raise CorruptIndexError(
                f"attempt to append timestamp {timestamp} smaller than the last {last.timestamp} to {self.path}"
            )
        if timestamp > last.timestamp:
            if self._entries >= self.max_entries:
                # Only reachable with skip_full_check on an exactly full file.
                self.resize(self._length + self.ENTRY_SIZE)
            TIME_ENTRY.pack_into(
                self._map(), self._entries * 12, timestamp, self.relative_offset(offset)
            )
            self._entries += 1
            self._last_entry = TimestampOffset(timestamp, offset)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Largest entry with timestamp <= target, else (-1, base_offset)."""
        slot = self._lower_bound_slot(target_timestamp, _ts_key)
        if slot == -1:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        ts, rel = TIME_ENTRY.unpack_from(self._mm, slot * 12)  # type: ignore[arg-type]
        return TimestampOffset(ts, self.base_offset + rel)

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        slot = self._upper_bound_slot(offset - self.base_offset, _offset_key)
        self.truncate_to_entries(self._entries if slot < 0 else slot)

    def sanity_check(self) -> None:
        self._check_length()
        n = self._entries
        if n == 0:
            return
        first, last = (TIME_ENTRY.unpack(b) for b in self._read_raw([0, n - 1]))
        if last[1] < 0:
            raise CorruptIndexError(
                f"corrupt time index {self.path}: last offset below the base offset"
            )
        if last[0] < first[0]:
            raise CorruptIndexError(
                f"corrupt time index {self.path}: last timestamp {last[0]} < first timestamp {first[0]}"
            )
