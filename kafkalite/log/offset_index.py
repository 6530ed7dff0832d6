"""``.index``: sparse map from offset to file position within one segment.

Entries are 8 bytes, big-endian: int32 offset relative to the segment's base
offset, int32 byte position of a batch in the ``.log``. Kafka 4 indexes a
batch by its *last* offset at the batch's start position, so a lookup of the
largest entry <= target followed by a forward scan of batch headers lands on
the batch containing target.
"""

from __future__ import annotations

import mmap
import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path
from typing import NamedTuple

from kafkalite.common import structs
from kafkalite.log.abstract_index import AbstractIndex, CorruptIndexError

__all__ = ["OffsetIndex", "OffsetPosition"]

#: relative offset, position: one 8-byte entry of a .index file
OFFSET_ENTRY = struct.Struct(">ii")


class OffsetPosition(NamedTuple):
    offset: int
    position: int


def _key(mm: mmap.mmap, slot: int) -> int:
    return structs.I32.unpack_from(mm, slot * 8)[0]


class OffsetIndex(AbstractIndex):
    ENTRY_SIZE = 8

    __slots__ = ("_last_offset", "_keys")

    def __init__(self, path: Path, base_offset: int, max_index_size: int = -1) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._last_offset: int | None = None  # loaded lazily
        # Relative offsets in a C array so lookups bisect in C (4 bytes/entry),
        # built on the first lookup and dropped when the mapping is released.
        self._keys: array[int] | None = None

    def _key_array(self) -> array[int]:
        keys = self._keys
        if keys is None:
            keys = array("i")
            if self._entries:
                keys.frombytes(self._map()[: self._entries * 8])
                if sys.byteorder == "little":
                    keys.byteswap()
                keys = keys[0::2]
            self._keys = keys
        return keys

    def _unmap(self) -> None:
        super()._unmap()
        self._keys = None

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        if self._last_offset is None:
            self._last_offset = (
                self.entry(self._entries - 1).offset if self._entries else self.base_offset
            )
        return self._last_offset

    def _after_truncate(self) -> None:
        self._last_offset = None
        if self._keys is not None:
            del self._keys[self._entries :]

    def entry(self, n: int) -> OffsetPosition:
        if n < 0 or n >= self._entries:
            raise IndexError(
                f"index entry {n} out of range in {self.path} ({self._entries} entries)"
            )
        rel, pos = OFFSET_ENTRY.unpack_from(*self._entry_buffer(n))
        return OffsetPosition(self.base_offset + rel, pos)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Largest entry with offset <= target, else (base_offset, 0)."""
        if not self._entries:
            return OffsetPosition(self.base_offset, 0)
        rel = target_offset - self.base_offset
        slot = bisect_right(self._key_array(), rel if rel < 2**31 else 2**31 - 1) - 1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        rel, pos = OFFSET_ENTRY.unpack_from(self._map(), slot * 8)
        return OffsetPosition(self.base_offset + rel, pos)

    def fetch_upper_bound_offset(
        self, fetch_position: OffsetPosition, fetch_size: int
    ) -> OffsetPosition | None:
        """First entry whose position is >= fetch_position.position + fetch_size (cleaner)."""
        target = fetch_position.position + fetch_size
        n = self._entries
        if n == 0:
            return None
        mm = self._map()
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) >> 1
            if OFFSET_ENTRY.unpack_from(mm, mid * 8)[1] < target:
                lo = mid + 1
            else:
                hi = mid
        if lo == n:
            return None
        return self.entry(lo)

    def append(self, offset: int, position: int) -> None:
        """Append (offset, position); offsets must increase."""
        if self.is_full:
            raise CorruptIndexError(f"attempt to append to a full index {self.path}")
        if self._entries and offset <= self.last_offset:
            raise CorruptIndexError(
                f"attempt to append offset {offset} to position {self._entries} no larger than"
                f" the last offset appended ({self.last_offset}) to {self.path}"
            )
        rel = self.relative_offset(offset)
        OFFSET_ENTRY.pack_into(self._map(), self._entries * 8, rel, position)
        self._entries += 1
        self._last_offset = offset
        if self._keys is not None:
            self._keys.append(rel)

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        slot = self._upper_bound_slot(offset - self.base_offset, _key)
        self.truncate_to_entries(self._entries if slot < 0 else slot)

    def sanity_check(self, log_size: int | None = None) -> None:
        """Raise CorruptIndexError when the file cannot be this segment's index.

        Beyond Kafka's checks (length, last offset >= base) this catches an
        untrimmed preallocated file left by a crash (zero entries at the tail)
        and positions past the end of the log.
        """
        self._check_length()
        n = self._entries
        if n == 0:
            return
        raw = self._read_raw([max(n - 2, 0), n - 1])
        prev_rel, _ = OFFSET_ENTRY.unpack(raw[0])
        rel, pos = OFFSET_ENTRY.unpack(raw[1])
        if rel < 0:
            raise CorruptIndexError(
                f"corrupt index {self.path}: last offset {self.base_offset + rel} < base offset"
            )
        if n >= 2 and rel <= prev_rel:
            raise CorruptIndexError(f"corrupt index {self.path}: entries are not increasing")
        if log_size is not None and pos > log_size:
            raise CorruptIndexError(
                f"corrupt index {self.path}: position {pos} beyond log size {log_size}"
            )
