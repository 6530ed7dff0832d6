"""What a log read returns: a file range to ``sendfile`` plus where it starts."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "UNKNOWN_OFFSET_METADATA",
    "AbortedTxn",
    "FetchDataInfo",
    "FileSlice",
    "LogOffsetMetadata",
    "LogOffsetPosition",
    "TimestampAndOffset",
]


class _HasFileno(Protocol):
    def fileno(self) -> int: ...


@dataclass(slots=True)
class FileSlice:
    """``size`` bytes of an open segment file from ``position``.

    The network layer sends it with ``os.sendfile(sock, slice.fileno(),
    slice.position, slice.size)``; TLS and tests use :meth:`read_bytes`. The
    slice holds the segment's file object, so a segment releasing its idle
    descriptor does not close it under a pending slice; it is closed for good
    only when the segment is finally deleted (file.delete.delay.ms after
    retention). A follower truncation can shorten the file under it, in which
    case fewer bytes are available.
    """

    file: _HasFileno
    position: int
    size: int

    def fileno(self) -> int:
        return self.file.fileno()

    def read_bytes(self) -> bytes:
        """Copy the bytes out (short if the file was truncated meanwhile)."""
        fd = self.file.fileno()
        data = os.pread(fd, self.size, self.position)
        if len(data) == self.size or not data:
            return data
        parts = [data]
        got = len(data)
        while got < self.size:
            more = os.pread(fd, self.size - got, self.position + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def __len__(self) -> int:
        return self.size


@dataclass(slots=True, frozen=True)
class LogOffsetMetadata:
    """An offset plus, when known, the segment and byte position it lives at.

    DelayedFetch compares these to count bytes available without touching files.
    """

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1

    @property
    def message_offset_only(self) -> bool:
        return self.segment_base_offset == -1 and self.relative_position_in_segment == -1

    def on_older_segment(self, that: LogOffsetMetadata) -> bool:
        if self.message_offset_only or that.message_offset_only:
            raise ValueError("offset metadata without a segment position")
        return self.segment_base_offset < that.segment_base_offset

    def on_same_segment(self, that: LogOffsetMetadata) -> bool:
        if self.message_offset_only or that.message_offset_only:
            raise ValueError("offset metadata without a segment position")
        return self.segment_base_offset == that.segment_base_offset

    def position_diff(self, that: LogOffsetMetadata) -> int:
        """Bytes between two positions on the same segment."""
        if not self.on_same_segment(that):
            raise ValueError("positions on different segments")
        return self.relative_position_in_segment - that.relative_position_in_segment


UNKNOWN_OFFSET_METADATA = LogOffsetMetadata(-1)


@dataclass(slots=True, frozen=True)
class LogOffsetPosition:
    """A batch found by a segment scan: its last offset, position and size."""

    offset: int
    position: int
    size: int


@dataclass(slots=True, frozen=True)
class TimestampAndOffset:
    timestamp: int
    offset: int
    leader_epoch: int | None = None


@dataclass(slots=True, frozen=True)
class AbortedTxn:
    """One ``.txnindex`` entry (34 bytes on disk)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = 0


@dataclass(slots=True)
class FetchDataInfo:
    """Result of a read: at most one segment's range, or ``b""`` when empty."""

    fetch_offset_metadata: LogOffsetMetadata
    records: FileSlice | bytes = b""
    first_entry_incomplete: bool = False
    aborted_transactions: list[AbortedTxn] | None = field(default=None)

    @property
    def size(self) -> int:
        return len(self.records)

    def read_bytes(self) -> bytes:
        r = self.records
        return r if isinstance(r, bytes) else r.read_bytes()
