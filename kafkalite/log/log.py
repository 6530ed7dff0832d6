"""One partition's log (Kafka's UnifiedLog + LocalLog): append, read, roll, truncate.

The parts Kafka also keeps apart have modules of their own: the ordered
segments (``log_segments``), loading and crash recovery (``log_loader``), which
segments retention deletes (``log_retention``) and the delayed deletion of the
files of segments that left the log (``segment_deleter``).

All calls are synchronous file I/O made from the event loop, as Kafka's
request threads do: appends go to the page cache with no fsync (durability
comes from replication); the LogManager flushes rolled segments and
checkpoints in the background.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from kafkalite.common import structs
from kafkalite.common.types import TopicPartition
from kafkalite.log.errors import (
    CorruptRecordBatch,
    InvalidRecord,
    InvalidTimestamp,
    KafkaStorageError,
    OffsetOutOfRange,
    OffsetsOutOfOrder,
    PolicyViolation,
    RecordBatchTooLarge,
    RecordTooLarge,
    UnexpectedAppendOffset,
)
from kafkalite.log.fetch_data import (
    AbortedTxn,
    FetchDataInfo,
    LogOffsetMetadata,
    TimestampAndOffset,
)
from kafkalite.log.leader_epoch_cache import LeaderEpochFileCache
from kafkalite.log.log_config import LONG_MAX, LogConfig
from kafkalite.log.log_loader import LogLoader
from kafkalite.log.log_retention import (
    SegmentPredicate,
    deletable_segments,
    retention_breaches,
)
from kafkalite.log.log_segment import (
    CLEANED_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    LogSegment,
    check_stored_batch,
)
from kafkalite.log.log_segments import LogSegments
from kafkalite.log.producer_state import (
    ProducerStateManager,
    control_marker,
    list_snapshots,
)
from kafkalite.log.segment_deleter import SegmentDeleter
from kafkalite.protocol.compression import CompressionType, parse_compression_type
from kafkalite.protocol.recompression import needs_recompression, recompress_batches
from kafkalite.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    BatchHeader,
    ValidatedRecords,
    assign_offsets,
    validate_records,
)
from kafkalite.protocol.records import decode_batch

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "Log",
    "LogAppendInfo",
    "parse_topic_partition_name",
    "topic_partition_dir_name",
]

log = logging.getLogger(__name__)

# ListOffsets special timestamps
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


P = ParamSpec("P")
R = TypeVar("R")


def topic_partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_topic_partition_name(name: str) -> TopicPartition:
    """``<topic>-<partition>``; topics may contain '-', so split on the last one."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
    return topic, int(part)


def _validate_keys(buf: bytearray | memoryview, batches: list[tuple[int, int]], name: str) -> None:
    """Compacted topics need a key on every record (Kafka's LogValidator): INVALID_RECORD."""
    for pos, _size in batches:
        if buf[pos + ATTRIBUTES_OFFSET + 1] & CONTROL_FLAG_MASK:
            continue
        _h, records = decode_batch(buf, pos, check_crc=False)
        for r in records:
            if r.key is None:
                raise InvalidRecord(
                    f"Compacted topic cannot accept message without key in topic partition {name}."
                )


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class LogAppendInfo:
    """What an append did; the Produce response is built from it."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 for CreateTime
    log_start_offset: int
    num_messages: int
    valid_bytes: int
    shallow_count: int = 0  # batches


def _guarded(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn I/O errors into KafkaStorageError and take the log offline."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        self: Log = args[0]  # type: ignore[assignment]
        if self._offline:
            raise KafkaStorageError(f"log {self.name} in {self.dir.parent} is offline")
        try:
            return fn(*args, **kwargs)
        except OSError as e:
            self._io_error(e)
            raise KafkaStorageError(f"I/O error on log {self.name}: {e}") from e

    return wrapper


class Log:
    """One partition's segments under ``<log dir>/<topic>-<partition>``."""

    def __init__(
        self,
        dir: Path,
        config: LogConfig,
        *,
        topic: str,
        partition: int,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        clock_ms: Callable[[], int] = _wall_clock_ms,
        needs_recovery: bool = False,
        on_io_error: Callable[[Log, OSError], None] | None = None,
        on_truncate: Callable[[Log, int], None] | None = None,
    ) -> None:
        self.dir = Path(dir)
        self.config = config
        self.topic = topic
        self.partition = partition
        self._clock = clock_ms
        self._on_io_error = on_io_error
        #: told the new log end offset after a truncation (the cleaner resets its checkpoint)
        self.on_truncate = on_truncate
        #: told each flush's duration in seconds (the log manager's LogFlushRateAndTimeMs)
        self.on_flush: Callable[[float], None] | None = None
        self._offline = False
        self._segments = LogSegments()
        self._deleter = SegmentDeleter(self.name, clock_ms)
        self._meta_cache: dict[int, LogOffsetMetadata] = {}
        self._unflushed_messages = 0
        self.last_flush_ms = clock_ms()
        self.dir.mkdir(parents=True, exist_ok=True)
        loaded = LogLoader(
            self.dir,
            config,
            self._segments,
            name=self.name,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            needs_recovery=needs_recovery,
            clock_ms=clock_ms,
        ).load()
        self._epoch_cache = loaded.leader_epoch_cache
        self._leo = loaded.log_end_offset
        self._log_start_offset = loaded.log_start_offset
        self.recovery_point = loaded.recovery_point
        self._hw = loaded.log_start_offset
        #: bytes recovery truncated at load (LogManager logs it)
        self.recovery_truncated_bytes = loaded.truncated_bytes
        #: producer ids, sequences and open transactions (loaded when first needed)
        self._producer_state: ProducerStateManager | None = None
        #: recovery reset the .txnindex of the segments it re-validated: the first
        #: producer-state load starts from a snapshot no later than the first of them
        #: and rebuilds their indexes from the markers (as Kafka's recoverSegment)
        recovered = loaded.first_recovered_offset
        self._rebuild_txn_indexes = recovered is not None
        if recovered is not None:
            self._delete_snapshots_above(recovered)

    # ------------------------------------------------------------ properties

    @property
    def name(self) -> str:
        return topic_partition_dir_name(self.topic, self.partition)

    @property
    def topic_partition(self) -> TopicPartition:
        return self.topic, self.partition

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        active = self._segments.active
        return LogOffsetMetadata(self._leo, active.base_offset, active.size)

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def high_watermark_metadata(self) -> LogOffsetMetadata:
        return self.offset_metadata(self._hw)

    @property
    def last_stable_offset(self) -> int:
        """min(first offset of an open transaction, high watermark): what read_committed sees."""
        fuo = self.producer_state.first_unstable_offset
        return self._hw if fuo is None or fuo > self._hw else fuo

    @property
    def first_unstable_offset(self) -> int | None:
        return self.producer_state.first_unstable_offset

    @property
    def txn_state_loaded(self) -> bool:
        """The producer state is loaded (metrics read it only then, never forcing a load)."""
        return self._producer_state is not None

    @property
    def producer_state(self) -> ProducerStateManager:
        """Loaded on first use: the latest snapshot plus the batch headers after it."""
        st = self._producer_state
        if st is None:
            st = self._producer_state = ProducerStateManager.load(
                self.dir,
                list(self._segments),
                self._log_start_offset,
                self._leo,
                rebuild_indexes=self._rebuild_txn_indexes,
            )
            self._rebuild_txn_indexes = False
        return st

    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction (DescribeProducers)."""
        return dict(self.producer_state.ongoing)

    def take_producer_snapshot(self, *, sync: bool = True) -> None:
        """Write ``<log end offset>.snapshot`` (at a roll and a clean close). As Kafka, one
        is kept per segment roll until retention deletes the segments below it: crash
        recovery loads from the last one before the segments it re-validated."""
        st = self._producer_state
        if st is None:
            return
        st.write_snapshot(self.dir, self._leo, sync=sync)
        first = self._segments.first.base_offset
        for offset, path in list_snapshots(self.dir):
            if offset < first:
                path.unlink(missing_ok=True)

    def _delete_snapshots_above(self, offset: int) -> None:
        for snap_offset, path in list_snapshots(self.dir):
            if snap_offset > offset:
                path.unlink(missing_ok=True)

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """producer.id.expiration.ms (only a loaded state has anything to expire)."""
        st = self._producer_state
        return 0 if st is None else st.remove_expired(now_ms, expiration_ms)

    def _track_producers(
        self,
        seg: LogSegment,
        buf: bytes | bytearray | memoryview,
        positions: Sequence[int],
        headers: Sequence[BatchHeader],
    ) -> None:
        """Update the producer state with appended batches; index aborted transactions."""
        st = self.producer_state
        st.update(headers)
        for pos, h in zip(positions, headers, strict=True):
            if h.is_control and h.is_transactional:
                aborted = st.complete_txn(h, *control_marker(buf, pos))
                if aborted is not None:
                    seg.txn_index.append(aborted)

    @property
    def size_in_bytes(self) -> int:
        return self._segments.size_in_bytes

    @property
    def first_segment_base_offset(self) -> int:
        return self._segments.first.base_offset

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.active

    @property
    def leader_epoch_cache(self) -> LeaderEpochFileCache:
        return self._epoch_cache

    @property
    def latest_epoch(self) -> int | None:
        return self._epoch_cache.latest_epoch

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    @property
    def is_offline(self) -> bool:
        return self._offline

    def __repr__(self) -> str:
        return f"Log({self.name}, start={self._log_start_offset}, end={self._leo}, segments={len(self._segments)})"

    # ------------------------------------------------------------ offline

    def _io_error(self, e: OSError) -> None:
        log.error("%s: I/O error, taking the log offline: %s", self.name, e)
        self._offline = True
        if self._on_io_error is not None:
            self._on_io_error(self, e)

    def mark_offline(self) -> None:
        """The log dir failed: every further call raises KafkaStorageError."""
        if not self._offline:
            self._offline = True
            self._segments.close_handlers()

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    # ------------------------------------------------------------ append

    def _recompress(
        self, buf: bytearray | memoryview, v: ValidatedRecords
    ) -> tuple[bytearray | memoryview, ValidatedRecords]:
        """The topic's ``compression.type`` codec, when it is not the producer's."""
        cfg = self.config
        target = parse_compression_type(cfg.compression_type)
        if not needs_recompression(buf, target):
            return buf, v
        assert target is not None
        level = {
            CompressionType.GZIP: None
            if cfg.compression_gzip_level < 0
            else cfg.compression_gzip_level,
            CompressionType.LZ4: cfg.compression_lz4_level,
            CompressionType.ZSTD: cfg.compression_zstd_level,
        }.get(target)
        out = recompress_batches(buf, target, level=level)
        return out, validate_records(out)

    @_guarded
    def append_as_leader(
        self,
        records: bytearray | memoryview | bytes,
        leader_epoch: int,
        validated: ValidatedRecords | None = None,
    ) -> LogAppendInfo:
        """Validate, assign offsets (in place), append. Produce and coordinator writes.

        ``validated`` is the caller's ``validate_records`` of these same bytes
        (the Partition checks producer sequences with it), so they are not
        checked twice.

        Raises the record_batch errors (CORRUPT_MESSAGE, UNSUPPORTED_VERSION,
        INVALID_RECORD, ...), RecordTooLarge, RecordBatchTooLarge, InvalidTimestamp.
        """
        if not records:
            return self._empty_append_info()
        buf = records
        if not isinstance(buf, bytearray) and not (
            isinstance(buf, memoryview) and not buf.readonly
        ):
            buf = bytearray(records)  # offsets are assigned in place
        # the caller's validation of these same bytes, when it made one (the CRC once)
        v = validated if validated is not None else validate_records(buf)
        cfg = self.config
        if cfg.compression_type != "producer":
            buf, v = self._recompress(buf, v)
        if cfg.compact and not v.records_checked:
            _validate_keys(buf, v.batches, self.name)
        max_bytes = cfg.max_message_bytes
        for _pos, size in v.batches:
            if size > max_bytes:
                raise RecordTooLarge(
                    f"batch of {size} bytes is larger than max.message.bytes {max_bytes} of {self.name}"
                )
        if v.size > cfg.segment_bytes:
            raise RecordBatchTooLarge(
                f"records of {v.size} bytes are larger than segment.bytes {cfg.segment_bytes} of {self.name}"
            )
        now = self._clock()
        append_time = now if cfg.log_append_time else None
        if append_time is None and (
            cfg.message_timestamp_after_max_ms < LONG_MAX
            or cfg.message_timestamp_before_max_ms < LONG_MAX
        ):
            self._validate_timestamps(v.headers, now)
        first = self._leo
        next_offset = assign_offsets(
            buf,
            v,
            first,
            leader_epoch=leader_epoch if leader_epoch >= 0 else None,
            log_append_time_ms=append_time,
        )
        last = next_offset - 1
        if append_time is not None:
            max_ts, off_max = append_time, first
        else:
            max_ts, off_max = NO_TIMESTAMP, first
            for h in v.headers:
                if h.max_timestamp > max_ts:
                    max_ts, off_max = h.max_timestamp, h.base_offset + h.last_offset_delta
        seg = self._maybe_roll(v.size, max_ts, last, now, first)
        if self._epoch_cache.load_truncation_pending:
            self._epoch_cache.flush()  # the file must not claim this data's offsets
        if leader_epoch >= 0 and self._epoch_cache.latest_epoch != leader_epoch:
            self._epoch_cache.assign(leader_epoch, first)
        seg.append(last, max_ts, off_max, buf, v.headers)
        if self._producer_state is not None or any(h.producer_id >= 0 for h in v.headers):
            self._track_producers(seg, buf, [p for p, _s in v.batches], v.headers)
        self._after_append(next_offset, v.record_count)
        return LogAppendInfo(
            first,
            last,
            max_ts,
            off_max,
            -1 if append_time is None else append_time,
            self._log_start_offset,
            v.record_count,
            v.size,
            len(v.headers),
        )

    @_guarded
    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append replicated batches as they are (offsets and epochs from the leader).

        A trailing partial batch (fetch responses may end with one) is dropped.
        """
        mv = memoryview(records)
        total = len(mv)
        headers: list[BatchHeader] = []
        positions: list[int] = []
        pos = 0
        prev_last = self._leo - 1
        while pos + LOG_OVERHEAD <= total:
            size = structs.I32.unpack_from(mv, pos + 8)[0] + LOG_OVERHEAD
            if pos + size > total:
                break
            if size < 61:
                raise CorruptRecordBatch(f"batch at {pos} has invalid length {size - LOG_OVERHEAD}")
            h = check_stored_batch(mv, pos, size)
            if h.base_offset <= prev_last:
                if not headers:
                    raise UnexpectedAppendOffset(
                        f"{self.name}: first offset {h.base_offset} is below the log end offset {self._leo}",
                        h.base_offset,
                        h.base_offset + h.last_offset_delta,
                    )
                raise OffsetsOutOfOrder(f"{self.name}: out of order offsets at {h.base_offset}")
            prev_last = h.base_offset + h.last_offset_delta
            headers.append(h)
            positions.append(pos)
            pos += size
        if not headers:
            return self._empty_append_info()
        valid = mv[:pos] if pos < total else mv
        first = headers[0].base_offset
        last = prev_last
        max_ts, off_max = NO_TIMESTAMP, first
        count = 0
        for h in headers:
            count += h.last_offset_delta + 1
            if h.max_timestamp > max_ts:
                max_ts, off_max = h.max_timestamp, h.base_offset + h.last_offset_delta
        now = self._clock()
        seg = self._maybe_roll(pos, max_ts, last, now, first)
        cache = self._epoch_cache
        if cache.load_truncation_pending:
            cache.flush()  # the file must not claim this data's offsets
        for h in headers:
            epoch = h.partition_leader_epoch
            if epoch >= 0:
                latest = cache.latest_epoch
                if latest is None or epoch > latest:
                    cache.assign(epoch, h.base_offset)
        seg.append(last, max_ts, off_max, valid, headers)
        if self._producer_state is not None or any(h.producer_id >= 0 for h in headers):
            self._track_producers(seg, valid, positions, headers)
        self._after_append(last + 1, count)
        return LogAppendInfo(
            first, last, max_ts, off_max, -1, self._log_start_offset, count, pos, len(headers)
        )

    def _empty_append_info(self) -> LogAppendInfo:
        return LogAppendInfo(-1, -1, NO_TIMESTAMP, -1, -1, self._log_start_offset, 0, 0, 0)

    def _validate_timestamps(self, headers: list[BatchHeader], now: int) -> None:
        cfg = self.config
        before, after = cfg.message_timestamp_before_max_ms, cfg.message_timestamp_after_max_ms
        for h in headers:
            for ts in (h.base_timestamp, h.max_timestamp):
                if ts == NO_TIMESTAMP:
                    continue
                if now - ts > before or ts - now > after:
                    raise InvalidTimestamp(
                        f"timestamp {ts} of the batch at offset {h.base_offset} is out of range; it must be"
                        f" within [{now - before}, {now + after}]"
                    )

    def _after_append(self, next_offset: int, count: int) -> None:
        self._leo = next_offset
        self._unflushed_messages += count
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()

    def _maybe_roll(
        self, size: int, max_ts: int, max_offset: int, now: int, first_offset: int
    ) -> LogSegment:
        seg = self._segments.active
        cfg = self.config
        if seg.should_roll(
            max_segment_bytes=cfg.segment_bytes,
            max_segment_ms=cfg.segment_ms,
            messages_size=size,
            max_timestamp_in_messages=max_ts,
            max_offset_in_messages=max_offset,
            now_ms=now,
        ):
            log.debug("%s: rolling new segment at %d (active %r)", self.name, first_offset, seg)
            return self._roll(first_offset)
        return seg

    # ------------------------------------------------------------ roll

    @_guarded
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, log end offset)."""
        return self._roll(expected_next_offset)

    def _roll(self, expected_next_offset: int | None) -> LogSegment:
        new_offset = max(expected_next_offset or 0, self._leo)
        active = self._segments.active
        if active.base_offset == new_offset:
            if active.size == 0:
                return active  # rolling an empty segment would recreate it at the same offset
            raise RuntimeError(f"{self.name}: segment {new_offset} already exists")
        active.on_become_inactive()
        seg = self._new_segment(new_offset)
        self._segments.add(seg)
        try:
            # as Kafka at every roll: loading starts from here next time
            self.take_producer_snapshot(sync=False)
        except OSError as e:
            log.warning("%s: could not write the producer snapshot: %s", self.name, e)
        return seg

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment.open(self.dir, base_offset, self.config, created_ms=self._clock())

    # ------------------------------------------------------------ read

    @_guarded
    def read(
        self,
        start_offset: int,
        max_length: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Batches from the one holding ``start_offset``, from a single segment.

        ``max_offset`` is the exclusive bound (high watermark / LSO for
        consumers, None = log end): the read stops at the position of the batch
        holding it, so a batch straddling it is not returned. Raises
        OffsetOutOfRange below the log start or above the log end offset;
        reading at the log end offset returns empty records.
        """
        leo = self._leo
        if start_offset < self._log_start_offset or start_offset > leo:
            raise OffsetOutOfRange(
                f"offset {start_offset} is out of range for {self.name}: [{self._log_start_offset}, {leo}]"
            )
        if max_offset is None or max_offset >= leo:
            bound = self.log_end_offset_metadata
        else:
            bound = self.offset_metadata(max(max_offset, self._log_start_offset))
        if start_offset >= bound.message_offset:
            meta = (
                bound
                if start_offset == bound.message_offset
                else self.offset_metadata(start_offset)
            )
            return FetchDataInfo(meta, b"")
        segments = self._segments
        segs = segments.values()
        i = segments.floor_index(start_offset)
        bound_base = bound.segment_base_offset
        while 0 <= i < len(segs):
            seg = segs[i]
            if seg.base_offset < bound_base:
                max_pos = seg.size
            elif seg.base_offset == bound_base:
                max_pos = bound.relative_position_in_segment
            else:
                return FetchDataInfo(LogOffsetMetadata(start_offset, seg.base_offset, 0), b"")
            info = seg.read(start_offset, max_length, max_pos, min_one_message)
            if info is not None:
                return info
            i += 1
        return FetchDataInfo(self.log_end_offset_metadata, b"")

    @_guarded
    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Segment and position of the batch holding ``offset`` (cached: HW/LSO repeat)."""
        if offset >= self._leo:
            if offset > self._leo:
                raise OffsetOutOfRange(
                    f"offset {offset} is above the log end offset {self._leo} of {self.name}"
                )
            return self.log_end_offset_metadata
        cached = self._meta_cache.get(offset)
        if cached is not None:
            return cached
        if offset < self._log_start_offset:
            raise OffsetOutOfRange(
                f"offset {offset} is below the log start offset {self._log_start_offset}"
            )
        segments = self._segments
        segs = segments.values()
        i = segments.floor_index(offset)
        meta = None
        while 0 <= i < len(segs):
            sp = segs[i].translate_offset(offset)
            if sp is not None:
                meta = LogOffsetMetadata(offset, segs[i].base_offset, sp.position)
                break
            i += 1
        if meta is None:
            return self.log_end_offset_metadata
        if len(self._meta_cache) >= 8:
            self._meta_cache.clear()
        self._meta_cache[offset] = meta
        return meta

    def update_high_watermark(self, offset: int) -> int:
        """Set the HW, clamped to [log_start_offset, log_end_offset]; returns it."""
        hw = min(max(offset, self._log_start_offset), self._leo)
        self._hw = hw
        return hw

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """Raise the HW (never lowers it); True when it moved."""
        if offset > self._hw:
            old = self._hw
            return self.update_high_watermark(offset) != old
        return False

    # ------------------------------------------------------------ timestamps

    @_guarded
    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets: (offset, timestamp) of the first record with timestamp >= ``timestamp``.

        Special values: -2 earliest -> (log_start_offset, -1); -4 earliest
        local (same); -1 latest -> (log_end_offset, -1) (the caller bounds by
        HW/LSO); -3 max timestamp -> the first record with the largest
        timestamp. None when no record qualifies.
        """
        r = self.fetch_timestamp_and_offset(timestamp)
        return None if r is None else (r.offset, r.timestamp)

    @_guarded
    def fetch_timestamp_and_offset(self, timestamp: int) -> TimestampAndOffset | None:
        """Like fetch_offset_by_timestamp, with the leader epoch of the found offset."""
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            lso = self._log_start_offset
            return TimestampAndOffset(NO_TIMESTAMP, lso, self._epoch_cache.epoch_for_offset(lso))
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, self._leo, self._epoch_cache.latest_epoch)
        if timestamp == MAX_TIMESTAMP:
            best = None
            for seg in self._segments:
                if best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far:
                    best = seg
            if best is None or best.max_timestamp_so_far < 0:
                return None
            return best.find_max_timestamp()
        if timestamp < 0:
            return None
        for seg in self._segments:
            if seg.max_timestamp_so_far >= timestamp:
                found = seg.find_offset_by_timestamp(timestamp, self._log_start_offset)
                if found is not None:
                    return found
        return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) from the leader epoch cache."""
        return self._epoch_cache.end_offset_for(epoch, self._leo)

    # ------------------------------------------------------------ log start / retention

    @_guarded
    def maybe_increment_log_start_offset(self, new_offset: int) -> bool:
        """Advance the log start offset (DeleteRecords, retention); never beyond the HW."""
        if new_offset > self._hw:
            raise OffsetOutOfRange(
                f"cannot increment the log start offset of {self.name} to {new_offset}:"
                f" it is above the high watermark {self._hw}"
            )
        if new_offset > self._log_start_offset:
            self._log_start_offset = new_offset
            self._epoch_cache.truncate_from_start(new_offset)
            return True
        return False

    def delete_records(self, offset: int) -> int:
        """DeleteRecords on the leader: -1 means the HW. Returns the new low watermark."""
        if not self.config.delete:
            raise PolicyViolation(
                f"records of {self.name} cannot be deleted: cleanup.policy has no delete"
            )
        if offset == -1:
            offset = self._hw
        if offset < 0:
            raise OffsetOutOfRange(f"invalid DeleteRecords offset {offset}")
        self.maybe_increment_log_start_offset(offset)
        return self._log_start_offset

    @_guarded
    def delete_old_segments(self) -> int:
        """Retention: delete whole segments below the log start offset, and by
        retention.ms / retention.bytes when cleanup.policy has ``delete``.

        Only data below the HW goes. When every segment qualifies the log rolls
        first, so the active segment itself is never deleted (Kafka does the same).
        Returns the number of segments deleted. ``log_retention`` decides which.
        """
        n = 0
        for breached in retention_breaches(
            self.config, self._segments, self._log_start_offset, self._clock
        ):
            n += self._delete_segments(breached)
        return n

    def _delete_segments(self, breached: SegmentPredicate) -> int:
        """Delete the oldest segments ``breached`` selects (Kafka's deleteSegments)."""
        deletable = deletable_segments(
            self._segments, breached, high_watermark=self._hw, log_end_offset=self._leo
        )
        if not deletable:
            return 0
        if len(deletable) == len(self._segments):
            self._roll(None)
        self._remove_segments(deletable, "retention")
        first_base = self._segments.first.base_offset
        if first_base > self._log_start_offset:
            self._log_start_offset = first_base
            self._epoch_cache.truncate_from_start(first_base)
        return len(deletable)

    def _remove_segments(self, doomed: Sequence[LogSegment], reason: str) -> None:
        """Drop segments from the log; their files go after file.delete.delay.ms."""
        self._segments.remove(doomed)
        self._meta_cache.clear()
        self._deleter.delete(doomed, reason, self.config.file_delete_delay_ms)

    def run_pending_deletes(self, now_ms: int | None = None, *, force: bool = False) -> int:
        """Delete ``.deleted`` segment files whose delay expired; returns how many."""
        return self._deleter.run_pending(now_ms, force=force)

    @property
    def pending_deletes(self) -> list[tuple[int, LogSegment]]:
        return self._deleter.pending

    @property
    def file_deleter(self) -> Callable[[Callable[[], None]], None] | None:
        """Runs segment file deletions off the caller's thread (the LogManager's
        kafka-delete-logs thread); None deletes inline."""
        return self._deleter.file_deleter

    @file_deleter.setter
    def file_deleter(self, deleter: Callable[[Callable[[], None]], None] | None) -> None:
        self._deleter.file_deleter = deleter

    # ------------------------------------------------------------ truncation

    @_guarded
    def truncate_to(self, offset: int) -> bool:
        """Follower truncation: drop everything from the batch holding ``offset`` on."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self.name} to a negative offset {offset}")
        if offset >= self._leo:
            return False
        segments = self._segments
        if segments.first.base_offset > offset:
            self._truncate_fully_and_start_at(offset)
            return True
        doomed = segments.values()[segments.floor_index(offset) + 1 :]
        if doomed:
            self._remove_segments(doomed, f"truncation to {offset}")
        active = segments.active
        active.truncate_to(offset)
        self._leo = max(active.read_next_offset(), active.base_offset)
        self._meta_cache.clear()
        self._epoch_cache.truncate_from_end(self._leo)
        self._log_start_offset = min(self._log_start_offset, self._leo)
        self.recovery_point = min(self.recovery_point, self._leo)
        self._hw = min(self._hw, self._leo)
        self._producer_state = None  # reloaded from what is left
        self._delete_snapshots_above(self._leo)
        if self.on_truncate is not None:
            self.on_truncate(self, self._leo)
        return True

    @_guarded
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete all data; the log restarts empty at ``offset``."""
        self._truncate_fully_and_start_at(offset)

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        old = list(self._segments)
        old_active = old[-1]
        if old_active.base_offset == offset:
            # same file name: delete now rather than rename-and-wait
            self._segments.remove_from(len(old) - 1)
            old_active.delete()
            old.pop()
        if old:
            self._remove_segments(old, f"truncate fully and start at {offset}")
        self._segments.clear()
        self._segments.add(self._new_segment(offset))
        self._meta_cache.clear()
        self._epoch_cache.clear_and_flush()
        self._leo = offset
        self._log_start_offset = offset
        self.recovery_point = offset
        self._hw = offset
        self._producer_state = None
        self._delete_snapshots_above(-1)
        if self.on_truncate is not None:
            self.on_truncate(self, offset)

    # ------------------------------------------------------------ flush / close

    @_guarded
    def flush(self, up_to: int | None = None) -> None:
        """fsync segments holding offsets below ``up_to`` (default: everything); move the recovery point."""
        offset = self._leo if up_to is None else min(up_to, self._leo)
        if offset <= self.recovery_point:
            return
        t0 = time.perf_counter()
        for seg in self.unflushed_segments(offset):
            seg.flush()
        self._epoch_cache.sync_to_disk()
        self.recovery_point = offset
        self.last_flush_ms = self._clock()
        if offset >= self._leo:
            self._unflushed_messages = 0
        if self.on_flush is not None:
            self.on_flush(time.perf_counter() - t0)

    def unflushed_segments(self, up_to: int) -> list[LogSegment]:
        """Segments holding offsets in [recovery_point, up_to): what flush(up_to) would fsync."""
        return [
            seg
            for seg, next_base in self._segments.between(self.recovery_point, up_to)
            if next_base is None or next_base > self.recovery_point
        ]

    def mark_flushed(self, offset: int) -> None:
        """Record that data below ``offset`` was fsynced elsewhere (a worker thread)."""
        offset = min(offset, self._leo)
        if offset > self.recovery_point:
            self.recovery_point = offset
            self.last_flush_ms = self._clock()

    # ------------------------------------------------------------ transactions / cleaner hooks

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset) (read_committed fetch)."""
        _ = self.producer_state  # a recovered segment's index is rebuilt first
        out: list[AbortedTxn] = []
        for seg, _next_base in self._segments.between(start_offset, upper_bound_offset):
            r = seg.txn_index.collect_aborted_txns(start_offset, upper_bound_offset)
            out.extend(r.aborted)
            if r.is_complete:
                break
        return out

    @_guarded
    def replace_segments(
        self,
        new_segments: list[LogSegment],
        old_segments: list[LogSegment],
        *,
        after_step: Callable[[str], None] | None = None,
    ) -> None:
        """Swap cleaned segments in for old ones (Kafka's replaceSegments; for ``cleaner.py``).

        ``new_segments`` are complete, flushed segments written with the
        ``.cleaned`` suffix. They are renamed ``.swap`` first: from then on
        ``LogLoader`` completes a swap a crash interrupted. Then the old
        segments leave the log (renamed ``.deleted``, removed after
        file.delete.delay.ms) and the swap suffix is dropped. ``after_step`` is
        told ``"swap"`` and ``"deleted"`` as those steps complete (crash tests).
        """
        new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
        old_ids = {id(s) for s in old_segments}
        for seg in new_sorted:
            if seg.has_suffix(CLEANED_FILE_SUFFIX):
                seg.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
        if after_step is not None:
            after_step("swap")
        doomed = [s for s in self._segments if id(s) in old_ids]
        self._remove_segments(doomed, "replaced by cleaned segments")
        if after_step is not None:
            after_step("deleted")
        for seg in new_sorted:
            self._segments.add(seg)
        for seg in new_sorted:
            seg.change_file_suffixes(SWAP_FILE_SUFFIX, "")
        self._meta_cache.clear()

    def close(self, *, sync: bool = True) -> None:
        """Clean close: trim indexes, close files. Pending deletes keep their ``.deleted`` files.

        ``sync=False`` leaves the leader-epoch checkpoint written but not fsynced
        (the LogManager syncs the whole filesystem once at shutdown).
        """
        if not self._offline:
            try:
                self.take_producer_snapshot(sync=sync)
            except OSError as e:
                log.warning("%s: could not write the producer snapshot: %s", self.name, e)
        if sync:
            self._epoch_cache.sync_to_disk()
        elif not self._epoch_cache.load_truncation_pending:
            # (a pending load-time truncation: nothing was appended since the
            # load, and the next load truncates the same way)
            self._epoch_cache.flush()
        for seg in self._segments:
            try:
                seg.close()
            except OSError as e:
                log.warning("%s: error closing %r: %s", self.name, seg, e)
        self._deleter.close_handlers()
        self._deleter.clear()

    def checkpoint_state(self) -> None:
        """Producer snapshot and leader-epoch checkpoint on disk, synced: a copy of the
        flushed files then loads as this log (a move between log dirs)."""
        self.take_producer_snapshot(sync=True)
        self._epoch_cache.sync_to_disk()

    def close_handlers(self) -> None:
        """Release descriptors without touching files (offline dir, deleted log)."""
        self._segments.close_handlers()
        self._deleter.close_handlers()

    def delete(self) -> None:
        """Remove every file of the log and its directory."""
        import shutil

        self.close_handlers()
        self._segments.clear()
        self._deleter.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------ misc

    def debug_state(self) -> dict[str, Any]:
        return {
            "log_start_offset": self._log_start_offset,
            "log_end_offset": self._leo,
            "high_watermark": self._hw,
            "recovery_point": self.recovery_point,
            "segments": [(s.base_offset, s.size) for s in self._segments],
        }
