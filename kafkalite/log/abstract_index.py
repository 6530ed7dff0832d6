"""Shared machinery of the mmap'd sparse indexes (``.index``, ``.timeindex``).

As in Kafka, an index of the active segment is preallocated to
segment.index.bytes (rounded down to whole entries) so appends are plain
stores into a mapping, and is trimmed to its real length when the segment
stops being active or is closed; the trimmed file is what Kafka's tools read.

The mapping is opened lazily: old segments' indexes cost no file descriptor
until a lookup needs them.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

__all__ = ["AbstractIndex", "CorruptIndexError", "IndexOffsetOverflowError"]

INT32_MAX = 2**31 - 1
_MADV_RANDOM: int | None = getattr(mmap, "MADV_RANDOM", None)


class CorruptIndexError(Exception):
    """The index fails its sanity check; the segment's indexes must be rebuilt."""


class IndexOffsetOverflowError(Exception):
    """Offset not representable as int32 relative to the segment base offset."""


class AbstractIndex:
    ENTRY_SIZE: ClassVar[int] = 8

    __slots__ = ("path", "base_offset", "max_index_size", "_mm", "_length", "_entries")

    def __init__(self, path: Path, base_offset: int, max_index_size: int = -1) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._mm: mmap.mmap | None = None
        try:
            length = path.stat().st_size
            newly_created = False
        except FileNotFoundError:
            newly_created = True
            length = self._round(max_index_size) if max_index_size > 0 else 0
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                os.ftruncate(fd, length)
            finally:
                os.close(fd)
        self._length = length
        # A new file holds no entries; an existing one is trusted to have been trimmed.
        self._entries = 0 if newly_created else length // self.ENTRY_SIZE

    # -- geometry ---------------------------------------------------------

    def _round(self, n: int) -> int:
        return n - n % self.ENTRY_SIZE

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._length // self.ENTRY_SIZE

    @property
    def length(self) -> int:
        return self._length

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    def relative_offset(self, offset: int) -> int:
        rel = offset - self.base_offset
        if rel < 0 or rel > INT32_MAX:
            raise IndexOffsetOverflowError(
                f"offset {offset} is not within int32 of base offset {self.base_offset} in {self.path}"
            )
        return rel

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    # -- mapping ----------------------------------------------------------

    def _map(self) -> mmap.mmap:
        mm = self._mm
        if mm is None:
            if self._length == 0:
                raise CorruptIndexError(f"{self.path} is empty")
            fd = os.open(self.path, os.O_RDWR)
            try:
                mm = mmap.mmap(fd, self._length)
            finally:
                os.close(fd)  # the mapping keeps its own descriptor
            # Index pages are touched one entry at a time (binary search, appends at
            # the end): without this, the first fault on a fresh, sparse, preallocated
            # file makes the kernel read ahead megabytes of holes, costing tens of ms of
            # CPU on the event loop per index (bench/partitions_bench.py --first-appends).
            if _MADV_RANDOM is not None:
                mm.madvise(_MADV_RANDOM)
            self._mm = mm
        return mm

    @property
    def is_mapped(self) -> bool:
        return self._mm is not None

    def _entry_buffer(self, n: int) -> tuple[bytes | mmap.mmap, int]:
        """(buffer, offset) of entry ``n``: the mapping when open, else one pread."""
        if self._mm is not None:
            return self._mm, n * self.ENTRY_SIZE
        with open(self.path, "rb", buffering=0) as f:
            return os.pread(f.fileno(), self.ENTRY_SIZE, n * self.ENTRY_SIZE), 0

    def _unmap(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def resize(self, new_size: int) -> bool:
        """Set the file length (rounded down to entries); keep existing entries."""
        rounded = self._round(max(new_size, self._entries * self.ENTRY_SIZE))
        if rounded == self._length:
            return False
        self._unmap()
        os.truncate(self.path, rounded)
        self._length = rounded
        return True

    def trim_to_valid_size(self) -> None:
        self.resize(self._entries * self.ENTRY_SIZE)

    def reset(self) -> None:
        """Drop every entry and re-preallocate (before rebuilding from the log)."""
        self._entries = 0
        self._after_truncate()
        self.resize(self.max_index_size if self.max_index_size > 0 else 0)

    def truncate_to_entries(self, n: int) -> None:
        self._entries = min(self._entries, n)
        self._after_truncate()

    def _after_truncate(self) -> None:
        """Subclasses refresh cached last entries."""

    def flush(self) -> None:
        if self._mm is not None and self._entries:
            self._mm.flush(0, self._round_page(self._entries * self.ENTRY_SIZE))

    def _round_page(self, n: int) -> int:
        return min(self._length, ((n + mmap.PAGESIZE - 1) // mmap.PAGESIZE) * mmap.PAGESIZE)

    def close(self) -> None:
        """Trim to the real size (what a clean shutdown leaves) and unmap."""
        self.trim_to_valid_size()
        self._unmap()

    def close_handler(self) -> None:
        self._unmap()

    def rename_to(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def delete_if_exists(self) -> bool:
        self._unmap()
        try:
            self.path.unlink()
            return True
        except FileNotFoundError:
            return False

    # -- search -----------------------------------------------------------

    def _lower_bound_slot(self, target: int, key: Callable[[mmap.mmap, int], int]) -> int:
        """Largest slot whose key <= target, or -1."""
        n = self._entries
        if n == 0:
            return -1
        mm = self._map()
        if key(mm, 0) > target:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            k = key(mm, mid)
            if k > target:
                hi = mid - 1
            elif k < target:
                lo = mid
            else:
                return mid
        return lo

    def _upper_bound_slot(self, target: int, key: Callable[[mmap.mmap, int], int]) -> int:
        """Smallest slot whose key >= target, or -1."""
        n = self._entries
        if n == 0:
            return -1
        mm = self._map()
        if key(mm, n - 1) < target:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi) >> 1
            if key(mm, mid) < target:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _read_raw(self, slots: list[int]) -> list[bytes]:
        """Read entries straight from the file without mapping (sanity checks)."""
        out = []
        with open(self.path, "rb", buffering=0) as f:
            for s in slots:
                out.append(os.pread(f.fileno(), self.ENTRY_SIZE, s * self.ENTRY_SIZE))
        return out

    def _check_length(self) -> None:
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"index file {self.path} has length {self._length}, not a multiple of {self.ENTRY_SIZE}"
            )
