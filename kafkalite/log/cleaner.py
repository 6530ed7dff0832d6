"""Log compaction (Kafka's LogCleaner, Cleaner and LogCleanerManager).

For every log with ``cleanup.policy`` containing ``compact`` the cleaner keeps
at least the last record of every key. One pass over the log chosen by
:meth:`LogCleanerManager.grab_filthiest_compacted_log`:

1. *Cleanable range.* From the log start to the first uncleanable offset: the
   active segment, the last stable offset and the first segment younger than
   ``min.compaction.lag.ms`` all bound it. Whole segments only, so a cleaned
   segment always replaces whole old ones.
2. *Offset map.* Key -> last offset over the dirty section (from the cleaner
   checkpoint on), bounded by ``log.cleaner.dedupe.buffer.size``. When it fills,
   the pass stops at the last segment that fitted.
3. *Recopy.* Every segment below the map's end is rewritten into a
   ``.cleaned`` segment (consecutive segments grouped while they fit in
   segment.bytes and the index size), dropping records whose key has a later
   offset, records without a key, aborted transactional records and
   tombstones whose delete horizon passed. Kept batches keep their base offset,
   lastOffsetDelta, producer fields and codec, so offsets never change and
   producer state can be rebuilt from the headers. A batch left empty is
   dropped unless it is its producer's last batch. When the group's last batch
   goes, an empty *coverage* batch takes its offsets: the crash recovery of a
   ``.swap`` deletes the old segments whose base offsets the swap file covers,
   so it must reach the group's last offset. Once the swap is complete the
   coverage batch is truncated away again (clients never see a fetch made of
   nothing but an empty batch, which librdkafka reports as a too-large message).
4. *Swap* each group as soon as it is written (so cleaning needs about one
   segment of extra disk), through :meth:`Log.replace_segments`: ``.cleaned``
   -> ``.swap``, old segments out, ``.swap`` -> final. Log load completes or
   discards each step.
5. *Checkpoint* the map's end in ``cleaner-offset-checkpoint``.

Steps 2 and 3 read old segments through duplicated descriptors in a worker
thread (throttled by ``log.cleaner.io.max.bytes.per.second``), so the event
loop keeps serving; each swap happens on the loop after checking that the log
still holds, unchanged, every segment the pass has yet to replace.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kafkalite.common import structs
from kafkalite.common.types import TopicPartition
from kafkalite.log.checkpoint import (
    CLEANER_CHECKPOINT_FILE,
    CorruptCheckpointError,
    OffsetCheckpointFile,
    fsync_dir,
)
from kafkalite.log.errors import KafkaStorageError
from kafkalite.log.fetch_data import AbortedTxn
from kafkalite.log.log_config import LONG_MAX, LogConfig
from kafkalite.log.log_segment import (
    CLEANED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    LogSegment,
)
from kafkalite.log.offset_map import OffsetMap
from kafkalite.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    BatchHeader,
    CorruptRecordBatch,
    parse_header,
)
from kafkalite.protocol.records import Record, build_batch, decode_batch

if TYPE_CHECKING:
    from kafkalite.log.log import Log
    from kafkalite.log.log_manager import LogManager

__all__ = [
    "CleanerConfig",
    "CleanerStats",
    "Cleaner",
    "LogCleaner",
    "LogCleanerManager",
    "LogCleaningAbortedError",
    "LogToClean",
    "Throttler",
]

log = logging.getLogger(__name__)

R = TypeVar("R")
DOUBLE_MAX = 1.7976931348623157e308
INT32_MAX = 2**31 - 1


class LogCleaningAbortedError(Exception):
    """The pass was aborted (log deleted or truncated, broker shutting down)."""


class DedupeBufferTooSmallError(Exception):
    """One segment has more keys than the offset map can hold (Kafka refuses too)."""


# --------------------------------------------------------------------- config


@dataclass(slots=True)
class CleanerConfig:
    """Broker-level ``log.cleaner.*`` settings (Kafka's CleanerConfig)."""

    num_threads: int = 1
    dedupe_buffer_size: int = 134_217_728
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 524_288
    max_io_bytes_per_second: float = DOUBLE_MAX
    backoff_ms: int = 15_000
    enable_cleaner: bool = True

    @classmethod
    def from_properties(cls, props: Mapping[str, Any] | Any) -> CleanerConfig:
        """From broker properties (a Mapping or BrokerConfig) with Kafka's names."""

        def prop(name: str, default: Any, conv: Callable[[Any], Any]) -> Any:
            try:
                v = props[name]
            except (KeyError, LookupError):
                return default
            if v is None:
                return default
            if conv is bool and isinstance(v, str):
                return v.strip().lower() == "true"
            return conv(v)

        d = cls()
        return cls(
            num_threads=prop("log.cleaner.threads", d.num_threads, int),
            dedupe_buffer_size=prop("log.cleaner.dedupe.buffer.size", d.dedupe_buffer_size, int),
            dedupe_buffer_load_factor=prop(
                "log.cleaner.io.buffer.load.factor", d.dedupe_buffer_load_factor, float
            ),
            io_buffer_size=prop("log.cleaner.io.buffer.size", d.io_buffer_size, int),
            max_io_bytes_per_second=prop(
                "log.cleaner.io.max.bytes.per.second", d.max_io_bytes_per_second, float
            ),
            backoff_ms=prop("log.cleaner.backoff.ms", d.backoff_ms, int),
            enable_cleaner=prop("log.cleaner.enable", d.enable_cleaner, bool),
        )


# --------------------------------------------------------------------- throttler


class Throttler:
    """Hold the calling thread to ``rate`` bytes/s (Kafka's Throttler).

    Measures every ``check_interval_s`` and sleeps off any excess, so it only
    ever runs on the cleaner's worker thread.
    """

    def __init__(
        self,
        rate: float,
        *,
        check_interval_s: float = 0.3,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = rate
        self.check_interval_s = check_interval_s
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._period_start = clock()
        self._observed = 0.0
        #: seconds spent sleeping so far
        self.throttled_s = 0.0

    def maybe_throttle(self, n: int) -> None:
        if self.rate >= DOUBLE_MAX:
            return
        with self._lock:
            self._observed += n
            now = self._clock()
            elapsed = now - self._period_start
            if elapsed < self.check_interval_s:
                return
            if self._observed / elapsed > self.rate:
                pause = self._observed / self.rate - elapsed
                if pause > 0:
                    self._sleep(pause)
                    self.throttled_s += pause
            self._period_start = self._clock()
            self._observed = 0.0


# --------------------------------------------------------------------- stats


@dataclass(slots=True)
class CleanerStats:
    """One pass over one log (Kafka's CleanerStats)."""

    topic_partition: TopicPartition = ("", -1)
    first_dirty_offset: int = 0
    end_offset: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    tombstones_removed: int = 0
    batches_emptied: int = 0
    buffer_utilization: float = 0.0
    segments_cleaned: int = 0
    start_s: float = field(default_factory=time.monotonic)
    map_complete_s: float = 0.0
    end_s: float = 0.0

    @property
    def elapsed_s(self) -> float:
        return (self.end_s or time.monotonic()) - self.start_s

    @property
    def recopy_percent(self) -> float:
        return 100.0 * self.bytes_written / self.bytes_read if self.bytes_read else 0.0


# --------------------------------------------------------------------- manager


@dataclass(slots=True)
class LogToClean:
    """A compacted log and how dirty it is (Kafka's LogToClean)."""

    topic_partition: TopicPartition
    log: Log
    first_dirty_offset: int
    #: segment-aligned: every segment below it is cleanable
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool = False
    tombstones_expired: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


class CleaningState(Enum):
    IN_PROGRESS = "in-progress"
    ABORTED = "aborted"


class LogCleanerManager:
    """Which log to clean next, in-progress/uncleanable bookkeeping, checkpoints."""

    def __init__(self, log_manager: LogManager) -> None:
        self._lm = log_manager
        self.in_progress: dict[TopicPartition, CleaningState] = {}
        #: partitions whose last pass failed, per log dir; never cleaned again until restart
        self.uncleanable: dict[Path, set[TopicPartition]] = {}
        #: earliest delete horizon of a kept tombstone per log (a pass is due when it passes)
        self.tombstone_horizons: dict[TopicPartition, int] = {}
        self.max_compaction_delay_ms = 0
        self.max_dirty_percent = 0

    # -- checkpoints --------------------------------------------------------

    def _checkpoint(self, d: Path) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(d / CLEANER_CHECKPOINT_FILE)

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for d in self._lm.online_dirs:
            try:
                out.update(self._checkpoint(d).read())
            except CorruptCheckpointError as e:
                log.warning("%s; cleaning every compacted log of %s from its start", e, d)
            except OSError as e:
                log.warning("cannot read the cleaner checkpoint of %s: %s", d, e)
        return out

    def update_checkpoints(
        self,
        d: Path,
        update: tuple[TopicPartition, int] | None = None,
        remove: Collection[TopicPartition] = (),
    ) -> None:
        """Rewrite ``d``'s checkpoint: entries of its current logs, plus one, minus ``remove``."""
        if d in self._lm.offline_dirs:
            return
        ckpt = self._checkpoint(d)
        try:
            current = ckpt.read()
        except CorruptCheckpointError:
            current = {}
        live = {lg.topic_partition for lg in self._lm.all_logs()}
        live = {tp for tp in live if self._lm.log_dir_of(*tp) == d}
        entries = {tp: off for tp, off in current.items() if tp in live and tp not in remove}
        if update is not None:
            entries[update[0]] = update[1]
        ckpt.write(entries)

    def maybe_truncate_checkpoint(self, d: Path, tp: TopicPartition, offset: int) -> None:
        """After a truncation the checkpoint may point past data written since: pull it back."""
        try:
            current = self._checkpoint(d).read().get(tp)
        except CorruptCheckpointError:
            return
        if current is not None and current > offset:
            self.update_checkpoints(d, update=(tp, offset))

    # -- choosing -----------------------------------------------------------

    def cleanable_offsets(
        self, lg: Log, last_clean_offset: int | None, now_ms: int
    ) -> tuple[int, int]:
        """(first dirty offset, segment-aligned first uncleanable offset)."""
        start = lg.log_start_offset
        if last_clean_offset is None or last_clean_offset < start:
            first_dirty = start
        elif last_clean_offset > lg.log_end_offset:
            log.warning(
                "%s: cleaner checkpoint %d is past the log end %d (truncated?); cleaning from the start",
                lg.name,
                last_clean_offset,
                lg.log_end_offset,
            )
            first_dirty = start
        else:
            first_dirty = last_clean_offset
        segs = lg.segments
        bound = min(lg.last_stable_offset, segs[-1].base_offset)
        lag = lg.config.min_compaction_lag_ms
        uncleanable = segs[0].base_offset
        for i, seg in enumerate(segs[:-1]):
            next_base = segs[i + 1].base_offset
            if next_base > bound:
                break
            if lag > 0 and next_base > first_dirty and seg.largest_timestamp > now_ms - lag:
                break
            uncleanable = next_base
        return first_dirty, uncleanable

    def max_compaction_delay(self, lg: Log, first_dirty: int, now_ms: int) -> int:
        """How long past max.compaction.lag.ms the oldest dirty record is (0 = not overdue)."""
        max_lag = lg.config.max_compaction_lag_ms
        if max_lag >= LONG_MAX:
            return 0  # the default: no log is ever overdue, and no segment need be read
        segs = lg.segments
        earliest = None
        for i, seg in enumerate(segs[:-1]):
            if segs[i + 1].base_offset <= first_dirty:
                continue
            ts = _first_batch_timestamp(seg)
            if ts > 0 and (earliest is None or ts < earliest):
                earliest = ts
        if earliest is None:
            return 0
        clean_until = now_ms - max(max_lag, 0)
        return clean_until - earliest if earliest < clean_until else 0

    def _is_uncleanable(self, tp: TopicPartition) -> bool:
        return any(tp in s for s in self.uncleanable.values())

    def grab_filthiest_compacted_log(self, now_ms: int) -> LogToClean | None:
        """The dirtiest eligible log, marked in progress; None when nothing is due."""
        checkpoints = self.all_cleaner_checkpoints()
        candidates: list[LogToClean] = []
        max_delay = 0
        for lg in self._lm.all_logs():
            tp = lg.topic_partition
            if (
                lg.is_offline
                or not lg.config.compact
                or tp in self.in_progress
                or self._is_uncleanable(tp)
            ):
                continue
            try:
                first_dirty, uncleanable = self.cleanable_offsets(lg, checkpoints.get(tp), now_ms)
                delay = self.max_compaction_delay(lg, first_dirty, now_ms)
            except (OSError, KafkaStorageError) as e:
                log.warning("%s: cannot compute its dirty section: %s", lg.name, e)
                continue
            max_delay = max(max_delay, delay)
            clean_bytes = dirty_bytes = 0
            segs = lg.segments
            for i, seg in enumerate(segs[:-1]):
                upper = segs[i + 1].base_offset
                if upper > uncleanable:
                    break
                if upper <= first_dirty:
                    clean_bytes += seg.size
                else:
                    dirty_bytes += seg.size
            horizon = self.tombstone_horizons.get(tp)
            candidates.append(
                LogToClean(
                    tp,
                    lg,
                    first_dirty,
                    uncleanable,
                    clean_bytes,
                    dirty_bytes,
                    needs_compaction_now=delay > 0,
                    tombstones_expired=horizon is not None and horizon <= now_ms,
                )
            )
        self.max_compaction_delay_ms = max_delay
        self.max_dirty_percent = int(
            100 * max((c.cleanable_ratio for c in candidates), default=0.0)
        )
        due = [
            c
            for c in candidates
            if c.total_bytes > 0
            and (
                (c.needs_compaction_now and c.cleanable_bytes > 0)
                or (
                    c.cleanable_bytes > 0
                    and c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio
                )
            )
        ]
        if not due:
            due = [c for c in candidates if c.tombstones_expired and c.total_bytes > 0]
        if not due:
            return None
        best = max(due, key=lambda c: c.cleanable_ratio)
        self.in_progress[best.topic_partition] = CleaningState.IN_PROGRESS
        return best

    # -- state --------------------------------------------------------------

    def abort_cleaning(self, tp: TopicPartition) -> bool:
        """Ask a running pass over ``tp`` to stop; True if one was running."""
        if tp in self.in_progress:
            self.in_progress[tp] = CleaningState.ABORTED
            return True
        return False

    def is_aborted(self, tp: TopicPartition) -> bool:
        return self.in_progress.get(tp) is CleaningState.ABORTED

    def done_cleaning(self, tp: TopicPartition) -> None:
        self.in_progress.pop(tp, None)

    def mark_uncleanable(self, d: Path, tp: TopicPartition) -> None:
        self.uncleanable.setdefault(d, set()).add(tp)

    @property
    def uncleanable_partitions_count(self) -> int:
        return sum(len(s) for s in self.uncleanable.values())


def _first_batch_timestamp(seg: LogSegment) -> int:
    for _pos, h in seg.iter_batches(0):
        return h.max_timestamp
    return -1


# --------------------------------------------------------------------- cleaner (worker side)


@dataclass(slots=True)
class _SegmentSource:
    """What the worker needs of one old segment; ``fd`` is a private duplicate."""

    segment: LogSegment
    base_offset: int
    next_offset: int
    size: int
    fd: int
    last_modified_ms: int
    index_bytes: int
    time_index_bytes: int
    aborted_txns: list[AbortedTxn]


@dataclass(slots=True)
class CleanJob:
    """A pass prepared on the event loop, run by :meth:`Cleaner.clean` anywhere."""

    topic_partition: TopicPartition
    log: Log
    log_dir: Path
    config: LogConfig
    sources: list[_SegmentSource]
    first_dirty_offset: int
    aborted_txns: list[AbortedTxn]
    now_ms: int
    abort: threading.Event = field(default_factory=threading.Event)
    #: a cancelled waiter left the descriptors to the worker's completion callback
    handed_off: bool = False

    def close_fds(self) -> None:
        for s in self.sources:
            if s.fd >= 0:
                try:
                    os.close(s.fd)
                except OSError:
                    pass
                s.fd = -1


@dataclass(slots=True)
class CleanPlan:
    """The offset map of a pass and the groups of old segments it will rewrite."""

    end_offset: int
    groups: list[list[_SegmentSource]]
    ctx: _BatchContext
    stats: CleanerStats
    min_tombstone_horizon: int | None = None


@dataclass(slots=True)
class GroupResult:
    """One cleaned segment (``.cleaned`` files) and the old segments it replaces."""

    segment: LogSegment
    group: list[_SegmentSource]
    #: earliest delete horizon of a tombstone it keeps
    tombstone_horizon: int | None
    #: base offset of its trailing coverage batch (see the module docstring)
    coverage_offset: int | None

    def discard(self) -> None:
        try:
            self.segment.delete()
        except OSError as e:
            log.warning("failed to delete %s: %s", self.segment.log_path, e)


class _BatchContext:
    """Per-pass decisions shared by the batches of one job."""

    __slots__ = (
        "offset_map",
        "now_ms",
        "delete_retention_ms",
        "aborted",
        "producer_last",
        "txn_data_seen",
        "removed_markers",
        "stats",
    )

    def __init__(self, job: CleanJob, offset_map: OffsetMap, stats: CleanerStats) -> None:
        self.offset_map = offset_map
        self.now_ms = job.now_ms
        self.delete_retention_ms = job.config.delete_retention_ms
        self.aborted: dict[int, list[tuple[int, int]]] = {}
        for t in job.aborted_txns:
            self.aborted.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
        #: producer id -> base offset of its last batch in the cleaned range
        self.producer_last: dict[int, int] = {}
        #: producers whose open transaction had a data batch in this pass (since its marker)
        self.txn_data_seen: set[int] = set()
        #: (producer id, offset) of the markers removed from the group being cleaned
        self.removed_markers: set[tuple[int, int]] = set()
        self.stats = stats

    def is_aborted(self, h: BatchHeader) -> bool:
        if not h.is_transactional or h.is_control:
            return False
        for first, last in self.aborted.get(h.producer_id, ()):
            if first <= h.base_offset <= last:
                return True
        return False


class Cleaner:
    """The cleaning work of one pass; thread-safe apart from the job it is given."""

    def __init__(self, config: CleanerConfig, throttler: Throttler) -> None:
        self.config = config
        self.throttler = throttler

    def _map_memory(self) -> int:
        return self.config.dedupe_buffer_size // max(self.config.num_threads, 1)

    # -- reading ------------------------------------------------------------

    def _batches(self, src: _SegmentSource, job: CleanJob, counter: list[int]) -> Iterator[bytes]:
        """Whole batches of an old segment, read in io-buffer chunks via its fd."""
        fd, size = src.fd, src.size
        chunk_size = max(self.config.io_buffer_size, HEADER_SIZE)
        pos = 0
        while pos < size:
            if job.abort.is_set():
                raise LogCleaningAbortedError(f"cleaning of {job.log.name} was aborted")
            chunk = os.pread(fd, min(chunk_size, size - pos), pos)
            if not chunk:
                raise CorruptRecordBatch(f"{src.segment.log_path}: unexpected end at {pos}")
            self.throttler.maybe_throttle(len(chunk))
            counter[0] += len(chunk)
            off = 0
            n = len(chunk)
            while off + LOG_OVERHEAD <= n:
                length = structs.I32.unpack_from(chunk, off + 8)[0]
                if length < HEADER_SIZE - LOG_OVERHEAD:
                    raise CorruptRecordBatch(
                        f"{src.segment.log_path}: invalid batch length {length} at {pos + off}"
                    )
                if off + length + LOG_OVERHEAD > n:
                    break
                yield chunk[off : off + length + LOG_OVERHEAD]
                off += length + LOG_OVERHEAD
            if off == 0:
                # a batch larger than the io buffer: read it whole
                length = structs.I32.unpack_from(chunk, 8)[0] if n >= LOG_OVERHEAD else -1
                if length < 0 or pos + length + LOG_OVERHEAD > size:
                    raise CorruptRecordBatch(
                        f"{src.segment.log_path}: partial batch at position {pos}"
                    )
                whole = os.pread(fd, length + LOG_OVERHEAD, pos)
                self.throttler.maybe_throttle(len(whole))
                counter[0] += len(whole)
                yield whole
                off = len(whole)
            pos += off

    # -- the pass -----------------------------------------------------------

    def build_plan(self, job: CleanJob) -> CleanPlan:
        """Build the offset map over the dirty section and group the segments to rewrite."""
        stats = CleanerStats(job.topic_partition, job.first_dirty_offset)
        offset_map = OffsetMap(self._map_memory(), self.config.dedupe_buffer_load_factor)
        ctx = _BatchContext(job, offset_map, stats)
        end = self._build_offset_map(job, ctx)
        stats.end_offset = end
        stats.buffer_utilization = offset_map.utilization
        stats.map_complete_s = time.monotonic()
        to_clean = [s for s in job.sources if s.next_offset <= end]
        self._scan_producers(
            job, ctx, [s for s in to_clean if s.next_offset <= job.first_dirty_offset]
        )
        groups = group_segments_by_size(
            to_clean, job.config.segment_bytes, job.config.segment_index_bytes
        )
        return CleanPlan(end, groups, ctx, stats)

    def clean_group(
        self, job: CleanJob, plan: CleanPlan, group: list[_SegmentSource]
    ) -> GroupResult:
        """Recopy one group into a ``.cleaned`` segment (deleted again on any failure)."""
        seg, horizon, coverage = self._clean_segments(job, group, plan.ctx)
        if job.abort.is_set():
            seg.delete()
            raise LogCleaningAbortedError(f"cleaning of {job.log.name} was aborted")
        return GroupResult(seg, group, horizon, coverage)

    def _build_offset_map(self, job: CleanJob, ctx: _BatchContext) -> int:
        """Fill the map from the dirty section; return the offset it is complete up to."""
        first_dirty = job.first_dirty_offset
        offset_map = ctx.offset_map
        end = first_dirty
        counter = [0]
        dirty = [s for s in job.sources if s.next_offset > first_dirty]
        for src in dirty:
            span = src.next_offset - max(src.base_offset, first_dirty)
            if end > first_dirty and offset_map.size + span > offset_map.slots:
                break  # the next segment might not fit: stop at a segment boundary
            for batch in self._batches(src, job, counter):
                h = parse_header(batch)
                if h.last_offset < first_dirty:
                    continue
                self._track_producer(ctx, h)
                if h.is_control or ctx.is_aborted(h):
                    continue
                _h, records = decode_batch(batch, check_crc=False)
                ctx.stats.map_messages_read += len(records)
                for r in records:
                    if r.key is not None and r.offset >= first_dirty:
                        offset_map.put(r.key, r.offset)
                if offset_map.size > offset_map.slots:
                    raise DedupeBufferTooSmallError(
                        f"{job.log.name}: segment {src.base_offset} has more keys than the"
                        f" offset map holds ({offset_map.slots}); raise log.cleaner.dedupe.buffer.size"
                    )
            end = src.next_offset
        ctx.stats.map_bytes_read += counter[0]
        return end

    @staticmethod
    def _track_producer(ctx: _BatchContext, h: BatchHeader) -> None:
        if h.producer_id != NO_PRODUCER_ID:
            ctx.producer_last[h.producer_id] = h.base_offset

    def _scan_producers(
        self, job: CleanJob, ctx: _BatchContext, clean: list[_SegmentSource]
    ) -> None:
        """Last batch of each producer in the clean section (the dirty one was seen by the map)."""
        if not clean:
            return
        dirty_seen = dict(ctx.producer_last)
        counter = [0]
        for src in clean:
            for batch in self._batches(src, job, counter):
                self._track_producer(ctx, parse_header(batch))
        ctx.producer_last.update(dirty_seen)  # later batches win
        ctx.stats.bytes_read += counter[0]

    def _clean_segments(
        self, job: CleanJob, group: list[_SegmentSource], ctx: _BatchContext
    ) -> tuple[LogSegment, int | None, int | None]:
        """Recopy ``group`` into one ``.cleaned`` segment named by its first base offset.

        Returns the segment, the earliest delete horizon of a tombstone it
        keeps, and the base offset of its trailing coverage batch, if any.
        """
        base = group[0].base_offset
        delete_cleaned_files(job.log.dir, base)
        seg = LogSegment.open(job.log.dir, base, job.config, file_suffix=CLEANED_FILE_SUFFIX)
        min_horizon: int | None = None
        coverage: int | None = None
        try:
            removed_markers = ctx.removed_markers
            removed_markers.clear()
            pending = bytearray()
            pending_headers: list[BatchHeader] = []
            counter = [0]
            limit = max(self.config.io_buffer_size, HEADER_SIZE)

            def emit(batch: bytes, h: BatchHeader, last_of_group: bool) -> None:
                nonlocal min_horizon, coverage
                out, horizon = self._filter_batch(batch, h, ctx)
                if out is None and last_of_group:
                    out = build_batch(
                        [], base_offset=h.base_offset, last_offset_delta=h.last_offset_delta
                    )
                    coverage = h.base_offset
                if out is None:
                    return
                if horizon is not None and (min_horizon is None or horizon < min_horizon):
                    min_horizon = horizon
                pending_headers.append(parse_header(out))
                pending.extend(out)
                if len(pending) >= limit:
                    flush()

            def flush() -> None:
                if not pending:
                    return
                last = pending_headers[-1]
                max_h = max(pending_headers, key=lambda x: x.max_timestamp)
                seg.append(
                    last.last_offset,
                    max_h.max_timestamp,
                    max_h.last_offset,
                    pending,
                    pending_headers,
                )
                self.throttler.maybe_throttle(len(pending))
                ctx.stats.bytes_written += len(pending)
                pending.clear()
                pending_headers.clear()

            held: tuple[bytes, BatchHeader] | None = None
            for src in group:
                for batch in self._batches(src, job, counter):
                    h = parse_header(batch)
                    if held is not None:
                        emit(held[0], held[1], False)
                    held = (batch, h)
            if held is not None:
                emit(held[0], held[1], True)
            flush()
            # an abort marker that went takes its index entry along: a read_committed reader
            # told of an aborted transaction skips the producer's batches until its marker
            for src in group:
                for txn in src.aborted_txns:
                    if (txn.producer_id, txn.last_offset) not in removed_markers:
                        seg.txn_index.append(txn)
            ctx.stats.bytes_read += counter[0]
            ctx.stats.segments_cleaned += len(group)
            seg.on_become_inactive()
            _fsync_segment(seg)
            seg.set_last_modified_ms(group[-1].last_modified_ms)
        except BaseException:
            seg.delete()
            raise
        return seg, min_horizon, coverage

    def _filter_batch(
        self, batch: bytes, h: BatchHeader, ctx: _BatchContext
    ) -> tuple[bytes | None, int | None]:
        """The batch to write (or None) and the delete horizon of tombstones it keeps."""
        stats = ctx.stats
        if h.is_control:
            return self._filter_marker(batch, h, ctx)
        if h.is_transactional:
            ctx.txn_data_seen.add(h.producer_id)
        _h, records = decode_batch(batch, check_crc=True)
        stats.messages_read += len(records)
        aborted = ctx.is_aborted(h)
        horizon = h.base_timestamp if h.has_delete_horizon else None
        offset_map = ctx.offset_map
        now = ctx.now_ms
        kept: list[Record] = []
        has_tombstones = False
        for r in records:
            if aborted:
                continue
            if r.key is None:
                stats.invalid_messages += 1
                continue
            if offset_map.get(r.key) > r.offset:
                continue  # a later record has this key
            if r.value is None:
                if horizon is not None and now >= horizon:
                    stats.tombstones_removed += 1
                    continue
                has_tombstones = True
            kept.append(r)
        new_horizon = horizon
        if has_tombstones and horizon is None:
            new_horizon = now + ctx.delete_retention_ms
        kept_horizon = new_horizon if has_tombstones else None
        if len(kept) == len(records) and new_horizon == horizon:
            stats.messages_written += len(kept)
            return batch, kept_horizon
        stats.messages_written += len(kept)
        common: dict[str, Any] = {
            "base_offset": h.base_offset,
            "timestamp_type": 1 if h.is_log_append_time else 0,
            "producer_id": h.producer_id,
            "producer_epoch": h.producer_epoch,
            "base_sequence": h.base_sequence,
            "is_transactional": h.is_transactional,
            "partition_leader_epoch": h.partition_leader_epoch,
            "last_offset_delta": h.last_offset_delta,
        }
        if not kept:
            if (
                h.producer_id == NO_PRODUCER_ID
                or ctx.producer_last.get(h.producer_id) != h.base_offset
            ):
                return None, None
            stats.batches_emptied += 1
            return build_batch([], max_timestamp=h.max_timestamp, **common), None
        return (
            build_batch(kept, compression=h.compression, delete_horizon_ms=new_horizon, **common),
            kept_horizon,
        )

    @staticmethod
    def _filter_marker(
        batch: bytes, h: BatchHeader, ctx: _BatchContext
    ) -> tuple[bytes | None, int | None]:
        """Kafka's rule for a transaction marker (KIP-534): it stays while any batch of its
        transaction is still in the log (a read_committed reader needs it to end the
        transaction); once none is, it gets a delete horizon of now + delete.retention.ms
        (so a reader that saw the data has time to see the marker too), and a pass after
        that horizon removes it. A producer's last batch always stays: its state is
        rebuilt from it."""
        stats = ctx.stats
        stats.messages_read += 1
        had_data = h.producer_id in ctx.txn_data_seen
        ctx.txn_data_seen.discard(h.producer_id)
        horizon = h.base_timestamp if h.has_delete_horizon else None
        if had_data or ctx.producer_last.get(h.producer_id) == h.base_offset:
            stats.messages_written += 1
            return batch, None
        if horizon is not None:
            if ctx.now_ms >= horizon:
                ctx.removed_markers.add((h.producer_id, h.base_offset))
                return None, None
            stats.messages_written += 1
            return batch, horizon
        horizon = ctx.now_ms + ctx.delete_retention_ms
        _h, records = decode_batch(batch, check_crc=True)
        stats.messages_written += 1
        out = build_batch(
            records,
            base_offset=h.base_offset,
            producer_id=h.producer_id,
            producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence,
            is_transactional=True,
            is_control=True,
            timestamp_type=1 if h.is_log_append_time else 0,
            partition_leader_epoch=h.partition_leader_epoch,
            last_offset_delta=h.last_offset_delta,
            delete_horizon_ms=horizon,
        )
        return out, horizon


def group_segments_by_size(
    segments: list[_SegmentSource], max_size: int, max_index_size: int
) -> list[list[_SegmentSource]]:
    """Consecutive segments whose sum fits one segment and one index (Kafka's rule)."""
    groups: list[list[_SegmentSource]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size = segments[i].size
        index = segments[i].index_bytes
        time_index = segments[i].time_index_bytes
        i += 1
        while i < len(segments):
            s = segments[i]
            if (
                size + s.size > max_size
                or index + s.index_bytes > max_index_size
                or time_index + s.time_index_bytes > max_index_size
                or s.next_offset - 1 - group[0].base_offset > INT32_MAX
            ):
                break
            group.append(s)
            size += s.size
            index += s.index_bytes
            time_index += s.time_index_bytes
            i += 1
        groups.append(group)
    return groups


def _drop_coverage_batch(seg: LogSegment, offset: int) -> None:
    """Truncate the swapped-in segment's trailing empty batch (no longer needed for recovery)."""
    seg.truncate_to(offset)
    seg.offset_index.trim_to_valid_size()
    seg.time_index.trim_to_valid_size()
    seg.offset_index.close_handler()
    seg.time_index.close_handler()


def delete_cleaned_files(d: Path, base_offset: int) -> None:
    """Leftover ``.cleaned`` files of an earlier, interrupted pass."""
    for suffix in (
        LOG_FILE_SUFFIX,
        INDEX_FILE_SUFFIX,
        TIME_INDEX_FILE_SUFFIX,
        TXN_INDEX_FILE_SUFFIX,
    ):
        (d / f"{base_offset:020d}{suffix}{CLEANED_FILE_SUFFIX}").unlink(missing_ok=True)


def _fsync_segment(seg: LogSegment) -> None:
    fd = seg.dup_fd()
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    for p in (seg.offset_index.path, seg.time_index.path, seg.txn_index.path):
        try:
            fd = os.open(p, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# --------------------------------------------------------------------- LogCleaner


class LogCleaner:
    """Runs compaction for a LogManager: background loop, clean-once entry points, metrics.

    ``crash_hook`` (tests) is called with the name of each completed swap step:
    ``cleaned``, ``swap``, ``deleted``, ``replaced``, ``checkpointed``. Raising a
    BaseException (not an Exception, which would mark the partition
    uncleanable) from it simulates a crash right after that step.
    """

    def __init__(
        self,
        config: CleanerConfig,
        log_manager: LogManager,
        *,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.config = config
        self.log_manager = log_manager
        self._clock = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self.manager = LogCleanerManager(log_manager)
        self.throttler = Throttler(config.max_io_bytes_per_second)
        self.cleaner = Cleaner(config, self.throttler)
        self.crash_hook: Callable[[str], None] | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._jobs: dict[TopicPartition, CleanJob] = {}
        self._stopped = False
        self._wakeup: asyncio.Event | None = None
        # metrics (Kafka's names, as attributes)
        self.max_clean_time_secs = 0
        self.max_buffer_utilization_percent = 0
        self.cleaner_recopy_percent = 0
        self.dead_thread_count = 0
        self.last_run_ms = self._clock()
        self.last_stats: CleanerStats | None = None
        self.passes = 0

    # -- metrics --------------------------------------------------------------

    @property
    def uncleanable_partitions_count(self) -> int:
        return self.manager.uncleanable_partitions_count

    @property
    def max_compaction_delay_secs(self) -> int:
        return self.manager.max_compaction_delay_ms // 1000

    @property
    def max_dirty_percent(self) -> int:
        return self.manager.max_dirty_percent

    @property
    def time_since_last_run_ms(self) -> int:
        return self._clock() - self.last_run_ms

    # -- lifecycle -------------------------------------------------------------

    async def run(self) -> None:
        """log.cleaner.threads background loops (none when 0 or log.cleaner.enable=false).

        Each loop cleans the filthiest log not already being cleaned and backs
        off log.cleaner.backoff.ms when nothing is due; the work of each pass
        runs on the worker pool (one thread per loop), all sharing one throttler.
        """
        self._wakeup = asyncio.Event()
        if not self.config.enable_cleaner or self.config.num_threads <= 0:
            return
        loops = [asyncio.ensure_future(self._run_loop()) for _ in range(self.config.num_threads)]
        try:
            await asyncio.gather(*loops)
        finally:
            for t in loops:
                t.cancel()

    async def _run_loop(self) -> None:
        assert self._wakeup is not None
        while not self._stopped:
            cleaned = False
            if self.config.enable_cleaner:
                try:
                    cleaned = await self.clean_once() is not None
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001 - the cleaner must outlive one bad pass
                    log.exception("log cleaner pass failed")
            if not cleaned:
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), self.config.backoff_ms / 1000)
                except TimeoutError:
                    pass

    def wakeup(self) -> None:
        """Cut the current back-off short (config change, tests)."""
        if self._wakeup is not None:
            self._wakeup.set()

    def shutdown(self) -> None:
        """Abort running passes and wait for the worker to drop its files."""
        self._stopped = True
        for job in self._jobs.values():
            job.abort.set()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        self.wakeup()

    def abort_cleaning(self, tp: TopicPartition) -> None:
        """The log is being deleted or truncated: stop any pass over it."""
        self.manager.abort_cleaning(tp)
        job = self._jobs.get(tp)
        if job is not None:
            job.abort.set()

    def on_truncated(self, d: Path, lg: Log, end_offset: int) -> None:
        """A truncation: stop a pass over the log, cap its checkpoint at the active segment."""
        tp = lg.topic_partition
        self.abort_cleaning(tp)
        try:
            self.manager.maybe_truncate_checkpoint(d, tp, lg.active_segment.base_offset)
        except OSError as e:
            log.warning("failed to update the cleaner checkpoint of %s: %s", d, e)

    def remove_partitions(self, d: Path, tps: Collection[TopicPartition]) -> None:
        """Forget deleted logs of ``d``: abort their passes, drop their state, and drop
        them from ``d``'s checkpoint in one rewrite (a topic's deletion removes
        thousands at once)."""
        for tp in tps:
            self.abort_cleaning(tp)
            self.manager.tombstone_horizons.pop(tp, None)
        for s in self.manager.uncleanable.values():
            s.difference_update(tps)
        try:
            self.manager.update_checkpoints(d, remove=frozenset(tps))
        except OSError as e:
            log.warning("failed to update the cleaner checkpoint of %s: %s", d, e)

    # -- entry points ------------------------------------------------------------

    async def clean_once(self, now_ms: int | None = None) -> CleanerStats | None:
        """Clean the filthiest eligible log; reading and writing happen on a worker thread."""
        now = self._clock() if now_ms is None else now_ms
        ltc = self.manager.grab_filthiest_compacted_log(now)
        if ltc is None:
            self.last_run_ms = self._clock()
            return None
        tp = ltc.topic_partition
        job: CleanJob | None = None
        try:
            job = self._prepare(ltc, now)
            self._jobs[tp] = job
            plan = await self._in_worker(job, self.cleaner.build_plan, job)
            for group in plan.groups:
                result = await self._in_worker(job, self.cleaner.clean_group, job, plan, group)
                if not self._swap_group(job, plan, result):
                    return None
            return self._complete(job, plan)
        except LogCleaningAbortedError as e:
            log.info("%s", e)
            return None
        except Exception as e:  # noqa: BLE001 - any failure makes the partition uncleanable
            self._failed(ltc, e)
            return None
        finally:
            if job is not None and not job.handed_off:
                job.close_fds()
            self._jobs.pop(tp, None)
            self.manager.done_cleaning(tp)
            self.last_run_ms = self._clock()

    async def _in_worker(self, job: CleanJob, fn: Callable[..., R], *args: Any) -> R:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=max(self.config.num_threads, 1),
                thread_name_prefix="kafka-log-cleaner-thread",
            )
        fut = self._executor.submit(fn, *args)
        try:
            return await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            # The worker still runs: it stops at its next chunk; whatever it returns is
            # dropped and the descriptors are closed once it is done with them.
            job.abort.set()
            job.handed_off = True
            fut.add_done_callback(lambda f: _after_abandoned_work(f, job))
            raise

    def clean_once_sync(self, now_ms: int | None = None) -> CleanerStats | None:
        """Same as :meth:`clean_once` with the work done on the calling thread."""
        now = self._clock() if now_ms is None else now_ms
        ltc = self.manager.grab_filthiest_compacted_log(now)
        if ltc is None:
            return None
        tp = ltc.topic_partition
        job: CleanJob | None = None
        try:
            job = self._prepare(ltc, now)
            self._jobs[tp] = job
            plan = self.cleaner.build_plan(job)
            for group in plan.groups:
                if not self._swap_group(job, plan, self.cleaner.clean_group(job, plan, group)):
                    return None
            return self._complete(job, plan)
        except LogCleaningAbortedError as e:
            log.info("%s", e)
            return None
        except Exception as e:  # noqa: BLE001 - any failure makes the partition uncleanable
            self._failed(ltc, e)
            return None
        finally:
            if job is not None:
                job.close_fds()
            self._jobs.pop(tp, None)
            self.manager.done_cleaning(tp)
            self.last_run_ms = self._clock()

    def clean_all_sync(self, now_ms: int | None = None) -> list[CleanerStats]:
        """Clean until nothing is due (tests, tick)."""
        out = []
        while (stats := self.clean_once_sync(now_ms)) is not None:
            out.append(stats)
        return out

    def tick(self, now_ms: int) -> None:
        """LogManager.tick: one synchronous pass per back-off period when enabled."""
        if (
            self.config.enable_cleaner
            and self.config.num_threads > 0
            and now_ms - self.last_run_ms >= self.config.backoff_ms
        ):
            self.clean_all_sync(now_ms)
            self.last_run_ms = now_ms

    # -- internals ---------------------------------------------------------------

    def _prepare(self, ltc: LogToClean, now_ms: int) -> CleanJob:
        lg = ltc.log
        tp = ltc.topic_partition
        d = self.log_manager.log_dir_of(*tp)
        if d is None:
            raise LogCleaningAbortedError(f"{lg.name} is no longer hosted here")
        segs = lg.segments
        sources: list[_SegmentSource] = []
        try:
            for i, seg in enumerate(segs[:-1]):
                next_base = segs[i + 1].base_offset
                if next_base > ltc.first_uncleanable_offset:
                    break
                sources.append(
                    _SegmentSource(
                        seg,
                        seg.base_offset,
                        next_base,
                        seg.size,
                        seg.dup_fd(),
                        seg.last_modified_ms,
                        seg.offset_index.size_in_bytes,
                        seg.time_index.size_in_bytes,
                        seg.txn_index.all_aborted_txns(),
                    )
                )
        except BaseException:
            for s in sources:
                os.close(s.fd)
            raise
        aborted = lg.collect_aborted_transactions(lg.log_start_offset, ltc.first_uncleanable_offset)
        return CleanJob(tp, lg, d, lg.config, sources, ltc.first_dirty_offset, aborted, now_ms)

    def _step(self, name: str) -> None:
        if self.crash_hook is not None:
            self.crash_hook(name)

    def _swap_group(self, job: CleanJob, plan: CleanPlan, result: GroupResult) -> bool:
        """On the loop: check the log still holds what the pass read, then swap one group in.

        Every not yet replaced source must be unchanged: they hold the rest of the
        dirty section the offset map was built from.
        """
        lg = job.log
        index = plan.groups.index(result.group)
        pending = [src for group in plan.groups[index:] for src in group]
        if not self._still_valid(job, pending):
            log.info("%s changed while it was being cleaned; discarding the pass", lg.name)
            result.discard()
            return False
        self._step("cleaned")
        lg.replace_segments(
            [result.segment], [s.segment for s in result.group], after_step=self._step
        )
        self._step("replaced")
        if result.coverage_offset is not None:
            _drop_coverage_batch(result.segment, result.coverage_offset)
        h = result.tombstone_horizon
        if h is not None and (plan.min_tombstone_horizon is None or h < plan.min_tombstone_horizon):
            plan.min_tombstone_horizon = h
        return True

    def _complete(self, job: CleanJob, plan: CleanPlan) -> CleanerStats:
        """Every group swapped in: checkpoint the end of the map, record the pass."""
        lg = job.log
        tp = job.topic_partition
        fsync_dir(lg.dir)
        self.manager.update_checkpoints(job.log_dir, update=(tp, plan.end_offset))
        self._step("checkpointed")
        if plan.min_tombstone_horizon is not None:
            self.manager.tombstone_horizons[tp] = plan.min_tombstone_horizon
        else:
            self.manager.tombstone_horizons.pop(tp, None)
        stats = plan.stats
        stats.end_s = time.monotonic()
        self._record(stats)
        log.info(
            "cleaned %s: offsets [%d, %d) in %.3fs; %d -> %d bytes (%.1f%% recopied), %d -> %d messages",
            lg.name,
            job.first_dirty_offset,
            plan.end_offset,
            stats.elapsed_s,
            stats.bytes_read,
            stats.bytes_written,
            stats.recopy_percent,
            stats.messages_read,
            stats.messages_written,
        )
        return stats

    def _still_valid(self, job: CleanJob, sources: list[_SegmentSource]) -> bool:
        lg = job.log
        if self._stopped or lg.is_offline or self.manager.is_aborted(job.topic_partition):
            return False
        if self.log_manager.get_log(*job.topic_partition) is not lg:
            return False
        ids = {id(s) for s in lg.segments[:-1]}
        return all(id(src.segment) in ids and src.segment.size == src.size for src in sources)

    def _record(self, stats: CleanerStats) -> None:
        self.passes += 1
        self.last_stats = stats
        self.max_clean_time_secs = int(stats.elapsed_s)
        self.max_buffer_utilization_percent = int(100 * stats.buffer_utilization)
        self.cleaner_recopy_percent = int(stats.recopy_percent)

    def _failed(self, ltc: LogToClean, e: BaseException) -> None:
        tp = ltc.topic_partition
        d = self.log_manager.log_dir_of(*tp)
        log.error(
            "unexpected error cleaning %s; marking it uncleanable: %s",
            ltc.log.name,
            e,
            exc_info=not isinstance(e, CorruptRecordBatch | DedupeBufferTooSmallError),
        )
        if d is not None:
            self.manager.mark_uncleanable(d, tp)


def _after_abandoned_work(fut: concurrent.futures.Future[Any], job: CleanJob) -> None:
    """Worker call whose waiter was cancelled: drop its ``.cleaned`` files, close the fds."""
    try:
        if not fut.cancelled() and fut.exception() is None:
            result = fut.result()
            if isinstance(result, GroupResult):
                result.discard()
    finally:
        job.close_fds()
