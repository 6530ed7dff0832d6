"""One segment: a ``.log`` file of record batches and its three indexes.

The ``.log`` holds batches exactly as the broker wrote them (Kafka's on-disk
format is the wire format with broker-assigned offsets), so a read is a file
range handed to ``sendfile``. Every append is one ``write`` at the end of the
file; indexing looks only at batch headers, never at records.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path

from kafkalite.common import structs
from kafkalite.log.abstract_index import CorruptIndexError, IndexOffsetOverflowError
from kafkalite.log.errors import InvalidReadSize
from kafkalite.log.fetch_data import (
    FetchDataInfo,
    FileSlice,
    LogOffsetMetadata,
    LogOffsetPosition,
    TimestampAndOffset,
)
from kafkalite.log.offset_index import OffsetIndex
from kafkalite.log.time_index import TimeIndex
from kafkalite.log.transaction_index import TransactionIndex
from kafkalite.protocol.record_batch import (
    COMPRESSION_CODEC_MASK,
    CURRENT_MAGIC,
    HEADER_SIZE,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchHeader,
    CorruptRecordBatch,
    compute_crc,
    parse_header,
)

__all__ = [
    "CLEANED_FILE_SUFFIX",
    "DELETED_FILE_SUFFIX",
    "INDEX_FILE_SUFFIX",
    "LOG_FILE_SUFFIX",
    "SNAPSHOT_FILE_SUFFIX",
    "SWAP_FILE_SUFFIX",
    "TIME_INDEX_FILE_SUFFIX",
    "TXN_INDEX_FILE_SUFFIX",
    "LogSegment",
    "SegmentFile",
    "file_name",
    "check_stored_batch",
    "offset_from_file_name",
    "segment_path",
]

log = logging.getLogger(__name__)

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
SNAPSHOT_FILE_SUFFIX = ".snapshot"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"

INT32_MAX = 2**31 - 1
#: batches whose (base offset, last offset, position, size) the segment remembers after
#: appending them: consumers and followers at the log end read one of these
TAIL_HINTS = 8
SCAN_CHUNK = 8192  # bytes read per header-scan step: covers a few small batches
RECOVER_CHUNK = 1 << 20
_BASE_AND_LENGTH = struct.Struct(">qi")
_SCAN_FIELDS = LAST_OFFSET_DELTA_OFFSET + 4
#: segments are read front to back; without this hint the small header pread that
#: starts each fetch resets the kernel's readahead, and a cold-cache sendfile of the
#: fetch then crawls (bench/log_bench.py: 440-650 -> ~2,000 MiB/s, plain sendfile ~2,150)
_FADV_SEQUENTIAL: int | None = getattr(
    os, "POSIX_FADV_SEQUENTIAL", None
)  # baseOffset, batchLength ... lastOffsetDelta


def file_name(base_offset: int) -> str:
    """Kafka's 20-digit zero-padded segment file prefix."""
    return f"{base_offset:020d}"


def offset_from_file_name(name: str) -> int:
    return int(name.split(".", 1)[0])


def segment_path(dir: Path, base_offset: int, suffix: str, file_suffix: str = "") -> Path:
    return dir / f"{base_offset:020d}{suffix}{file_suffix}"


class LogSegment:
    """A ``.log`` plus ``.index``/``.timeindex``/``.txnindex`` named by base offset."""

    __slots__ = (
        "dir",
        "base_offset",
        "index_interval_bytes",
        "roll_jitter_ms",
        "created_ms",
        "offset_index",
        "time_index",
        "txn_index",
        "log_path",
        "_file",
        "_closed",
        "_size",
        "_bytes_since_last_index_entry",
        "_rolling_based_timestamp",
        "_max_ts",
        "_offset_of_max_ts",
        "_max_ts_loaded",
        "_tail",
    )

    def __init__(
        self,
        dir: Path,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10_485_760,
        roll_jitter_ms: int = 0,
        created_ms: int = 0,
        file_suffix: str = "",
    ) -> None:
        self.dir = dir
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self.log_path = segment_path(dir, base_offset, LOG_FILE_SUFFIX, file_suffix)
        # The descriptor is opened on first use (see _handle): an idle segment holds none.
        self._file: SegmentFile | None = None
        self._closed = False
        try:
            st = os.stat(self.log_path)
        except FileNotFoundError:
            os.close(os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
            st = os.stat(self.log_path)
        self._size = st.st_size
        self.created_ms = created_ms if created_ms else int(st.st_mtime * 1000)
        self.offset_index = OffsetIndex(
            segment_path(dir, base_offset, INDEX_FILE_SUFFIX, file_suffix),
            base_offset,
            max_index_size,
        )
        self.time_index = TimeIndex(
            segment_path(dir, base_offset, TIME_INDEX_FILE_SUFFIX, file_suffix),
            base_offset,
            max_index_size,
        )
        self.txn_index = TransactionIndex(
            segment_path(dir, base_offset, TXN_INDEX_FILE_SUFFIX, file_suffix), base_offset
        )
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self._max_ts = -1
        self._offset_of_max_ts = base_offset
        self._max_ts_loaded = self._size == 0
        #: (base offset, last offset, position, size) of the segment's last few batches, in
        #: file order, contiguous and ending at ``_size`` (or empty): translate_offset answers
        #: from them without reading the file. Every change of ``_size`` keeps this true.
        self._tail: list[tuple[int, int, int, int]] = []

    # -- basic properties -------------------------------------------------

    @property
    def size(self) -> int:
        """Bytes in the ``.log``."""
        return self._size

    @property
    def file(self) -> SegmentFile:
        """The open ``.log`` file (has ``fileno()``), opened if it was not, for FileSlice."""
        return self._handle()

    def fileno(self) -> int:
        """The ``.log`` descriptor, opened (and kept) if it was not."""
        return self._handle().fd

    @property
    def is_open(self) -> bool:
        """Whether the segment holds a ``.log`` descriptor now."""
        return self._file is not None

    def _handle(self) -> SegmentFile:
        """The ``.log`` descriptor, opened on first use.

        Like Kafka's lazy indexes applied to the segment file: a broker hosting
        thousands of idle partitions would otherwise hold one descriptor per
        segment. O_APPEND, so every write lands at the end even after a truncate.
        """
        f = self._file
        if f is None:
            if self._closed:
                raise ValueError(f"I/O on closed segment {self.log_path}")
            fd = os.open(self.log_path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
            if _FADV_SEQUENTIAL is not None:
                os.posix_fadvise(fd, 0, 0, _FADV_SEQUENTIAL)
            f = self._file = SegmentFile(fd)
        return f

    def release_handle(self) -> None:
        """Drop the descriptor; the next use opens it again.

        Not closed here: a FileSlice handed out earlier (a fetch response still being
        sent) keeps the SegmentFile, which closes when the last reference goes.
        """
        self._file = None

    def dup_fd(self) -> int:
        """A private descriptor of the ``.log`` (for worker threads: fsync, cleaning),
        without making the segment hold one. The caller closes it."""
        if self._closed:
            raise ValueError(f"I/O on closed segment {self.log_path}")
        f = self._file
        if f is not None:
            return os.dup(f.fd)
        return os.open(self.log_path, os.O_RDONLY | os.O_CLOEXEC)

    def _file_size(self) -> int:
        f = self._file
        return os.fstat(f.fd).st_size if f is not None else os.stat(self.log_path).st_size

    @property
    def max_timestamp_so_far(self) -> int:
        if not self._max_ts_loaded:
            self._load_largest_timestamp()
        return self._max_ts

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        if not self._max_ts_loaded:
            self._load_largest_timestamp()
        return self._offset_of_max_ts

    @property
    def largest_timestamp(self) -> int:
        """What retention.ms compares: max timestamp, else the file's mtime."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        f = self._file
        st = os.fstat(f.fd) if f is not None else os.stat(self.log_path)
        return int(st.st_mtime * 1000)

    def set_last_modified_ms(self, ms: int) -> None:
        os.utime(self.log_path, ns=(ms * 1_000_000, ms * 1_000_000))

    def has_suffix(self, suffix: str) -> bool:
        return self.log_path.name.endswith(suffix)

    def __repr__(self) -> str:
        return (
            f"LogSegment(base_offset={self.base_offset}, size={self._size}, path={self.log_path})"
        )

    # -- scanning ---------------------------------------------------------

    def iter_batches(
        self, start: int = 0, end: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of each complete batch from ``start``; stops at a bad/partial one."""
        end = self._size if end is None else min(end, self._size)
        if start + HEADER_SIZE > end:
            return
        fd = self._handle().fd
        pos = start
        buf = b""
        buf_pos = start
        min_len = HEADER_SIZE - LOG_OVERHEAD
        while pos + HEADER_SIZE <= end:
            off = pos - buf_pos
            if off + HEADER_SIZE > len(buf):
                buf = os.pread(fd, min(SCAN_CHUNK, end - pos), pos)
                buf_pos = pos
                off = 0
                if len(buf) < HEADER_SIZE:
                    return
            h = parse_header(buf, off)
            if h.batch_length < min_len:
                return
            size = h.batch_length + LOG_OVERHEAD
            if pos + size > end:
                return
            yield pos, h
            pos += size

    def read_batch_bytes(self, position: int, size: int) -> bytes:
        return os.pread(self._handle().fd, size, position)

    def _load_largest_timestamp(self) -> None:
        """Max timestamp: last time index entry, then a scan of the batches after it.

        Retention asks this of every segment; indexes it had to map for the
        answer are released again so old segments hold no descriptors.
        """
        was_mapped = self.offset_index.is_mapped
        last = self.time_index.last_entry
        max_ts, off = last.timestamp, last.offset
        start = self.offset_index.lookup(last.offset).position if self.time_index.entries else 0
        for _pos, h in self.iter_batches(start):
            if h.max_timestamp > max_ts:
                max_ts, off = h.max_timestamp, h.base_offset + h.last_offset_delta
        self._max_ts, self._offset_of_max_ts = max_ts, off
        self._max_ts_loaded = True
        if not was_mapped:
            self.offset_index.close_handler()

    def _load_first_batch_timestamp(self) -> None:
        if self._rolling_based_timestamp is None:
            for _pos, h in self.iter_batches(0):
                self._rolling_based_timestamp = h.max_timestamp
                break

    # -- append -----------------------------------------------------------

    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_ts: int,
        records: bytes | bytearray | memoryview,
        headers: Sequence[BatchHeader] | None = None,
    ) -> None:
        """Append whole batches (offsets already assigned) with one ``write``.

        ``headers`` are the batches' parsed headers when the caller has them
        (the produce path does); index entries are added per batch, every
        index.interval.bytes, keyed by the batch's last offset.
        """
        n = len(records)
        if n == 0:
            return
        position = self._size
        if position == 0:
            self._rolling_based_timestamp = largest_timestamp
        if not 0 <= largest_offset - self.base_offset <= INT32_MAX:
            raise IndexOffsetOverflowError(
                f"largest offset {largest_offset} is out of range for segment base {self.base_offset}"
            )
        _write_all(self._handle().fd, records)
        if not self._max_ts_loaded:
            self._load_largest_timestamp()
        if headers is None:
            mv = memoryview(records)
            headers = [parse_header(mv, p) for p, _h in _positions(mv)]
        max_ts = self._max_ts
        since = self._bytes_since_last_index_entry
        interval = self.index_interval_bytes
        appended = []
        for h in headers:
            base = h.base_offset
            last = base + h.last_offset_delta
            if h.max_timestamp > max_ts:
                max_ts = h.max_timestamp
                self._offset_of_max_ts = last
            if since > interval:
                self.offset_index.append(last, position)
                self.time_index.maybe_append(max_ts, self._offset_of_max_ts)
                since = 0
            size = h.batch_length + LOG_OVERHEAD
            appended.append((base, last, position, size))
            position += size
            since += size
        self._max_ts = max_ts
        self._bytes_since_last_index_entry = since
        self._size += n
        tail = self._tail
        if position != self._size:  # headers that do not describe these bytes: no hints
            tail.clear()
            return
        tail += appended
        if len(tail) > TAIL_HINTS:
            del tail[:-TAIL_HINTS]

    # -- lookups ----------------------------------------------------------

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The batch holding ``offset`` (or the first batch after it): last offset, position, size.

        The fetch hot path. A consumer or follower at the log end asks for one of
        the last batches appended, answered from ``_tail`` without a read;
        anything else reads headers in chunks from the index entry and unpacks
        only the three fields it needs. Offsets grow strictly from batch to batch,
        so a batch of the tail holds ``offset`` exactly when the scan would find it.
        """
        tail = self._tail
        if tail and offset >= tail[0][0]:
            newer = found = None
            for entry in reversed(tail):
                if offset >= entry[0]:
                    # in this batch, else in the gap after it (compaction): the next one
                    found = entry if offset <= entry[1] else newer
                    break
                newer = entry
            if found is None:
                return None  # past the last batch
            if found[2] >= starting_position:
                return LogOffsetPosition(found[1], found[2], found[3])
        return self.scan_for_offset(offset, starting_position)

    def scan_for_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """translate_offset without the tail hints: a scan of the ``.log`` from the index."""
        pos = max(self.offset_index.lookup(offset).position, starting_position)
        end = self._size
        if pos + HEADER_SIZE > end:
            return None
        fd = self._handle().fd
        buf = b""
        buf_pos = pos
        while pos + HEADER_SIZE <= end:
            off = pos - buf_pos
            if off + _SCAN_FIELDS > len(buf):
                buf = os.pread(fd, min(SCAN_CHUNK, end - pos), pos)
                buf_pos, off = pos, 0
                if len(buf) < _SCAN_FIELDS:
                    return None
            base, length = _BASE_AND_LENGTH.unpack_from(buf, off)
            size = length + LOG_OVERHEAD
            if length < HEADER_SIZE - LOG_OVERHEAD or pos + size > end:
                return None
            last = base + structs.I32.unpack_from(buf, off + LAST_OFFSET_DELTA_OFFSET)[0]
            if last >= offset:
                return LogOffsetPosition(last, pos, size)
            pos += size
        return None

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> FetchDataInfo | None:
        """Bytes from the batch holding ``start_offset``, up to ``max_size`` / ``max_position``.

        None when ``start_offset`` is past this segment's last batch. With
        ``min_one_message`` the first batch is returned whole even if larger
        than ``max_size``; otherwise a read may end mid-batch (as in Kafka).
        """
        if max_size < 0:
            raise InvalidReadSize(
                f"invalid max size {max_size} for log read from segment {self.log_path}"
            )
        sp = self.translate_offset(start_offset)
        if sp is None:
            return None
        meta = LogOffsetMetadata(start_offset, self.base_offset, sp.position)
        adjusted = max(max_size, sp.size) if min_one_message else max_size
        limit = self._size if max_position is None else min(max_position, self._size)
        fetch_size = min(limit - sp.position, adjusted)
        if fetch_size <= 0:
            return FetchDataInfo(meta, b"")
        return FetchDataInfo(
            meta, FileSlice(self._handle(), sp.position, fetch_size), adjusted < sp.size
        )

    def read_next_offset(self) -> int:
        """Offset after the last batch (the log end offset when active)."""
        return self.scan_end()[0]

    def scan_end(self) -> tuple[int, int]:
        """(next offset, position after the last complete batch); a position short of
        the file size means a partial or garbage tail."""
        start = self.offset_index.lookup(self.offset_index.last_offset).position
        next_offset, end = self.base_offset, start
        recent: deque[tuple[int, int, int, int]] = deque(maxlen=TAIL_HINTS)
        for pos, h in self.iter_batches(start):
            next_offset = h.base_offset + h.last_offset_delta + 1
            end = pos + h.batch_length + LOG_OVERHEAD
            recent.append((h.base_offset, next_offset - 1, pos, end - pos))
        if end == self._size and recent:  # the log's load: hints for the active segment
            self._tail = list(recent)
        return next_offset, end

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int | None = None
    ) -> TimestampAndOffset | None:
        """First record with timestamp >= ``timestamp`` and offset >= ``starting_offset``."""
        if starting_offset is None:
            starting_offset = self.base_offset
        to = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(to.offset, starting_offset)).position
        for pos, h in self.iter_batches(position):
            if (
                h.max_timestamp >= timestamp
                and h.base_offset + h.last_offset_delta >= starting_offset
            ):
                found = self._search_records(pos, h, lambda ts: ts >= timestamp, starting_offset)
                if found is not None:
                    return found
        return None

    def find_max_timestamp(self) -> TimestampAndOffset | None:
        """The first record carrying this segment's max timestamp (ListOffsets -3)."""
        max_ts = self.max_timestamp_so_far
        if max_ts < 0 and self._size == 0:
            return None
        position = self.offset_index.lookup(self.offset_of_max_timestamp_so_far).position
        for pos, h in self.iter_batches(position):
            if h.max_timestamp == max_ts:
                found = self._search_records(pos, h, lambda ts: ts == max_ts, self.base_offset)
                if found is not None:
                    return found
        return None

    def _search_records(
        self, pos: int, h: BatchHeader, match, starting_offset: int
    ) -> TimestampAndOffset | None:  # noqa: ANN001
        """Record-level search in one batch; batch granularity when records can't be decoded."""
        if not h.is_log_append_time and h.records_count > 0:
            records = _decode_records(self.read_batch_bytes(pos, h.batch_length + LOG_OVERHEAD))
            if records is not None:
                for offset, ts in records:
                    if offset >= starting_offset and match(ts):
                        return TimestampAndOffset(ts, offset, _epoch(h))
                return None
        offset = max(h.base_offset, starting_offset)
        return (
            TimestampAndOffset(h.max_timestamp, offset, _epoch(h))
            if match(h.max_timestamp)
            else None
        )

    # -- roll / recovery / truncation ---------------------------------------

    def should_roll(
        self,
        *,
        max_segment_bytes: int,
        max_segment_ms: int,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int,
    ) -> bool:
        """Kafka's roll rule: size, age (segment.ms - jitter), full index, offset overflow."""
        if self._size > max_segment_bytes - messages_size:
            return True
        if (
            self._size > 0
            and self.time_waited_for_roll(now_ms, max_timestamp_in_messages)
            > max_segment_ms - self.roll_jitter_ms
        ):
            return True
        return (
            self.offset_index.is_full
            or self.time_index.is_full
            or not 0 <= max_offset_in_messages - self.base_offset <= INT32_MAX
        )

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Age by the first batch's timestamp when it has one, else by creation time."""
        self._load_first_batch_timestamp()
        t = self._rolling_based_timestamp
        if t is not None and t >= 0:
            return message_timestamp - t
        return now_ms - self.created_ms

    def recover(self, leader_epoch_cache: object | None = None) -> int:
        """Re-validate every batch, rebuild the indexes, truncate at the first bad one.

        Returns the number of bytes truncated. ``leader_epoch_cache`` (a
        LeaderEpochFileCache) learns each new epoch seen.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self._tail = []
        recent: deque[tuple[int, int, int, int]] = deque(maxlen=TAIL_HINTS)
        valid = 0
        last_index_entry = 0
        max_ts, off_max = -1, self.base_offset
        prev_last = self.base_offset - 1
        end = self._file_size()
        fd = self._handle().fd if end else -1
        buf = b""
        buf_pos = 0
        reason = None
        while valid < end:
            if end - valid < LOG_OVERHEAD:
                reason = f"{end - valid} trailing bytes, less than a batch header"
                break
            off = valid - buf_pos
            if off + HEADER_SIZE > len(buf):
                buf = os.pread(fd, min(RECOVER_CHUNK, end - valid), valid)
                buf_pos, off = valid, 0
            length = structs.I32.unpack_from(buf, off + 8)[0] if off + 12 <= len(buf) else -1
            size = length + LOG_OVERHEAD
            if length < HEADER_SIZE - LOG_OVERHEAD or valid + size > end:
                reason = f"batch at position {valid} has invalid or partial length {length}"
                break
            if off + size > len(buf):
                buf = os.pread(fd, max(size, min(RECOVER_CHUNK, end - valid)), valid)
                buf_pos, off = valid, 0
            try:
                h = _check_batch(buf, off, size)
            except CorruptRecordBatch as e:
                reason = f"batch at position {valid}: {e}"
                break
            last = h.base_offset + h.last_offset_delta
            if h.base_offset <= prev_last or last - self.base_offset > INT32_MAX:
                reason = (
                    f"batch at position {valid} has out-of-order offsets {h.base_offset}..{last}"
                )
                break
            prev_last = last
            if h.max_timestamp > max_ts:
                max_ts, off_max = h.max_timestamp, last
            if valid - last_index_entry > self.index_interval_bytes:
                self.offset_index.append(last, valid)
                self.time_index.maybe_append(max_ts, off_max)
                last_index_entry = valid
            recent.append((h.base_offset, last, valid, size))
            valid += size
            if leader_epoch_cache is not None and h.partition_leader_epoch >= 0:
                epoch = h.partition_leader_epoch
                latest = leader_epoch_cache.latest_epoch  # type: ignore[attr-defined]
                if latest is not None and epoch < latest:
                    # The file credits this batch to a later epoch: it is stale (a
                    # truncation written without fsync and lost). The batch is the
                    # truth: drop what starts here, then learn its epoch below.
                    held = leader_epoch_cache.epoch_for_offset(h.base_offset)  # type: ignore[attr-defined]
                    if held is not None and held > epoch:
                        leader_epoch_cache.truncate_from_end(h.base_offset)  # type: ignore[attr-defined]
                        latest = leader_epoch_cache.latest_epoch  # type: ignore[attr-defined]
                if latest is None or epoch > latest:
                    leader_epoch_cache.assign(epoch, h.base_offset)  # type: ignore[attr-defined]
        truncated = end - valid
        if truncated:
            log.warning(
                "found invalid data in %s: %s; truncating %d bytes",
                self.log_path,
                reason,
                truncated,
            )
            os.ftruncate(fd, valid)
        self._size = valid
        self._tail = list(recent)
        self._max_ts, self._offset_of_max_ts, self._max_ts_loaded = max_ts, off_max, True
        self._bytes_since_last_index_entry = valid - last_index_entry
        self._rolling_based_timestamp = None
        self.offset_index.trim_to_valid_size()
        # A cleanly closed segment always ends with its max timestamp; do the same.
        self.time_index.maybe_append(max_ts, off_max, skip_full_check=True)
        self.time_index.trim_to_valid_size()
        return truncated

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if an index cannot belong to this ``.log``."""
        if not self.offset_index.path.exists():
            raise CorruptIndexError(f"missing offset index {self.offset_index.path}")
        self.offset_index.sanity_check(self._size)
        self.time_index.sanity_check()
        self.txn_index.sanity_check()

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding ``offset`` and everything after; return bytes removed."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        truncated = 0
        if mapping is not None:
            truncated = self._size - mapping.position
            os.ftruncate(self._handle().fd, mapping.position)
            self._size = mapping.position
            # a batch boundary: the hints before it still end where the file now does
            self._tail = [e for e in self._tail if e[2] < mapping.position]
        if self._size == 0:
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        self._max_ts_loaded = False
        if self._size == 0:
            self._max_ts, self._offset_of_max_ts, self._max_ts_loaded = -1, self.base_offset, True
        return truncated

    def on_become_inactive(self) -> None:
        """Rolled away from: record the final max timestamp, trim the indexes."""
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
        )
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.offset_index.close_handler()
        self.time_index.close_handler()
        self._tail = []  # readers are at the new log end; the scan serves lagging ones
        # lagging readers reopen it; the roll's fsync uses a private descriptor
        self.release_handle()

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # -- lifecycle ----------------------------------------------------------

    def flush(self) -> None:
        if self._file is not None:
            os.fsync(self._file.fd)
        else:  # written through a released descriptor: the data is the inode's
            fd = self.dup_fd()
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Clean close: final time index entry, trimmed indexes, file closed."""
        if self._max_ts_loaded and self._max_ts >= 0:
            self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts, skip_full_check=True)
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        self._close_file()

    def close_handlers(self) -> None:
        """Release mappings and descriptors without touching the files."""
        self.offset_index.close_handler()
        self.time_index.close_handler()
        self.txn_index.close()
        self._close_file()

    def _close_file(self) -> None:
        """Close for good (a never-opened segment has nothing to close); later I/O raises."""
        self._closed = True
        f, self._file = self._file, None
        if f is not None:
            f.close()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of the segment, e.g. to ``.deleted``; descriptors stay valid."""

        def renamed(p: Path) -> Path:
            name = p.name
            if old_suffix and name.endswith(old_suffix):
                name = name[: -len(old_suffix)]
            return p.with_name(name + new_suffix)

        new_log = renamed(self.log_path)
        os.replace(self.log_path, new_log)
        self.log_path = new_log
        self.offset_index.rename_to(renamed(self.offset_index.path))
        self.time_index.rename_to(renamed(self.time_index.path))
        self.txn_index.rename_to(renamed(self.txn_index.path))

    def delete(self) -> None:
        """Close and remove all files of the segment."""
        try:
            self._close_file()
        finally:
            for p in (self.log_path,):
                try:
                    p.unlink()
                except FileNotFoundError:
                    pass
            self.offset_index.delete_if_exists()
            self.time_index.delete_if_exists()
            self.txn_index.delete_if_exists()

    @classmethod
    def open(
        cls,
        dir: Path,
        base_offset: int,
        config: object,
        *,
        created_ms: int = 0,
        file_suffix: str = "",
    ) -> LogSegment:
        """Open or create a segment with a LogConfig's index settings."""
        return cls(
            dir,
            base_offset,
            index_interval_bytes=config.index_interval_bytes,  # type: ignore[attr-defined]
            max_index_size=config.segment_index_bytes,  # type: ignore[attr-defined]
            roll_jitter_ms=config.random_segment_jitter(),  # type: ignore[attr-defined]
            created_ms=created_ms,
            file_suffix=file_suffix,
        )


class SegmentFile:
    """An open ``.log`` descriptor, shared by its segment and the FileSlices read from it.

    A segment that releases its descriptor (idle, rolled) just drops its reference:
    slices still being sent keep this object, and the descriptor closes with the last
    reference. A segment closed or deleted for good closes it explicitly.
    """

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        if self.fd < 0:
            raise ValueError("I/O operation on a closed segment file")
        return self.fd

    @property
    def closed(self) -> bool:
        return self.fd < 0

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    n = os.write(fd, data)
    if n != len(data):
        mv = memoryview(data)
        while n < len(mv):
            n += os.write(fd, mv[n:])


def _positions(buf: memoryview) -> Iterator[tuple[int, int]]:
    pos, end = 0, len(buf)
    while pos + LOG_OVERHEAD <= end:
        size = structs.I32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD
        yield pos, size
        pos += size


def _epoch(h: BatchHeader) -> int | None:
    return h.partition_leader_epoch if h.partition_leader_epoch >= 0 else None


def _check_batch(buf: bytes | memoryview, pos: int, size: int) -> BatchHeader:
    """Stored-batch validity for recovery and replication.

    Lenient where produce validation is strict: compaction leaves uncompressed
    batches whose lastOffsetDelta exceeds recordsCount - 1, and those are valid.
    """
    magic = buf[pos + MAGIC_OFFSET]
    if magic != CURRENT_MAGIC:
        raise CorruptRecordBatch(f"invalid magic {magic}")
    h = parse_header(buf, pos)
    if h.batch_length + LOG_OVERHEAD != size:
        raise CorruptRecordBatch("batch length does not match the data")
    if compute_crc(buf, pos, size) != h.crc:
        raise CorruptRecordBatch("CRC-32C mismatch")
    if h.records_count < 0 or h.last_offset_delta < 0:
        raise CorruptRecordBatch("negative record count or last offset delta")
    if h.attributes & COMPRESSION_CODEC_MASK > 4:
        raise CorruptRecordBatch(
            f"unknown compression codec {h.attributes & COMPRESSION_CODEC_MASK}"
        )
    return h


check_stored_batch = _check_batch


def _decode_records(batch: bytes) -> list[tuple[int, int]] | None:
    """(offset, timestamp) of every record, via the protocol's record codec if present."""
    try:
        from kafkalite.protocol.records import decode_batch
    except ImportError:  # pragma: no cover - records codec not available
        return None
    try:
        _h, records = decode_batch(batch, 0, check_crc=False)
    except Exception:  # noqa: BLE001 - a record we can't decode falls back to batch granularity
        return None
    return [(r.offset, r.timestamp) for r in records]
