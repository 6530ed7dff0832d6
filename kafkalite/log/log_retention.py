"""Which segments retention deletes (Kafka's UnifiedLog.deleteOldSegments and its
breach predicates: StartOffsetBreach, RetentionMsBreach, RetentionSizeBreach).

Retention only ever deletes a prefix of the log: the oldest segments, one
predicate at a time, stopping at the first segment the predicate spares. The
``Log`` deletes what these functions select (``Log.delete_old_segments``), so
the offsets and the epoch cache stay the Log's own business.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kafkalite.log.log_config import LogConfig
from kafkalite.log.log_segment import LogSegment
from kafkalite.log.log_segments import LogSegments

__all__ = [
    "SegmentPredicate",
    "deletable_segments",
    "log_start_offset_breached",
    "retention_breaches",
    "retention_ms_breached",
    "retention_size_breached",
]

#: (segment, the segment after it or None for the active one) -> delete it?
SegmentPredicate = Callable[[LogSegment, LogSegment | None], bool]


def retention_breaches(
    config: LogConfig,
    segments: LogSegments,
    log_start_offset: int,
    clock_ms: Callable[[], int],
) -> Iterator[SegmentPredicate]:
    """The predicates one retention pass applies, in order: segments wholly below the
    log start offset, then (cleanup.policy with ``delete``) retention.ms, then
    retention.bytes.

    Lazy: the caller deletes what each predicate selects before asking for the
    next, so retention.bytes counts the size retention.ms left.
    """
    yield log_start_offset_breached(log_start_offset)
    if not config.delete:
        return
    if config.retention_ms >= 0:
        yield retention_ms_breached(clock_ms(), config.retention_ms)
    if config.retention_bytes >= 0:
        excess = segments.size_in_bytes - config.retention_bytes
        if excess > 0:
            yield retention_size_breached(excess)


def log_start_offset_breached(log_start_offset: int) -> SegmentPredicate:
    """Segments whose successor starts at or below the log start offset (DeleteRecords
    moved it past them)."""

    def breached(_seg: LogSegment, nxt: LogSegment | None) -> bool:
        return nxt is not None and nxt.base_offset <= log_start_offset

    return breached


def retention_ms_breached(now_ms: int, retention_ms: int) -> SegmentPredicate:
    """Segments whose largest timestamp is more than retention.ms old."""

    def breached(seg: LogSegment, _nxt: LogSegment | None) -> bool:
        return now_ms - seg.largest_timestamp > retention_ms

    return breached


def retention_size_breached(excess_bytes: int) -> SegmentPredicate:
    """The oldest segments whose sizes add up to no more than ``excess_bytes`` (the log's
    size over retention.bytes). Stateful: one use per deletion pass."""
    remaining = excess_bytes

    def breached(seg: LogSegment, _nxt: LogSegment | None) -> bool:
        nonlocal remaining
        if remaining - seg.size >= 0:
            remaining -= seg.size
            return True
        return False

    return breached


def deletable_segments(
    segments: LogSegments,
    predicate: SegmentPredicate,
    *,
    high_watermark: int,
    log_end_offset: int,
) -> list[LogSegment]:
    """The oldest segments ``predicate`` selects, up to the first it spares.

    Only segments wholly below the high watermark qualify (consumers may still
    need the rest), and never an empty active segment. The caller rolls first
    when every segment qualifies, so the active segment can go too.
    """
    segs = segments.values()
    deletable: list[LogSegment] = []
    for i, seg in enumerate(segs):
        nxt = segs[i + 1] if i + 1 < len(segs) else None
        upper = nxt.base_offset if nxt is not None else log_end_offset
        if high_watermark < upper:
            break
        if nxt is None and seg.size == 0:
            break
        if not predicate(seg, nxt):
            break
        deletable.append(seg)
    return deletable
