"""Pure planning arithmetic shared by the batch and stream readers: offset JSON, rate limits
and input-partition splits. No client and no Spark here, so it is unit-tested directly."""

from __future__ import annotations

import math

from kafkalite.spark.client import OffsetRange

__all__ = ["from_json", "rate_limit", "split_ranges", "to_json"]

TP = tuple[str, int]


def to_json(offsets: dict[TP, int]) -> dict[str, dict[str, int]]:
    """``{"topic": {"partition": nextOffset}}``, the JSON of Spark's Kafka checkpoints."""
    out: dict[str, dict[str, int]] = {}
    for (topic, p), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(p)] = int(off)
    return out


def from_json(data: dict[str, dict[str, int]]) -> dict[TP, int]:
    return {(topic, int(p)): int(off) for topic, parts in data.items() for p, off in parts.items()}


def rate_limit(limit: int, start: dict[TP, int], end: dict[TP, int]) -> dict[TP, int]:
    """Cap ``end`` so that about ``limit`` records are read in all, shared in proportion to each
    partition's backlog (Spark's ``KafkaMicroBatchStream.rateLimit``: a share under one record
    rounds up, others round down)."""
    sizes = {tp: max(0, end[tp] - start.get(tp, end[tp])) for tp in end}
    total = sum(sizes.values())
    if total <= limit:
        return dict(end)
    out = {}
    for tp, off in end.items():
        size = sizes[tp]
        if size == 0:
            out[tp] = off
            continue
        share = limit * size / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(off, start[tp] + step)
    return out


def split_ranges(
    ranges: list[OffsetRange], min_partitions: int | None, max_records: int | None = None
) -> list[OffsetRange]:
    """Drop empty ranges; split ranges over ``maxRecordsPerPartition`` into equal pieces
    under it; then, with ``minPartitions`` above the range count, split large ranges in
    proportion to their size (Spark's ``KafkaOffsetRangeCalculator``, in that order)."""
    ranges = [r for r in ranges if r.size > 0]
    if max_records:
        ranges = [piece for r in ranges for piece in _divide(r, math.ceil(r.size / max_records))]
    if not min_partitions or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        out.extend(_divide(r, max(1, round(r.size / total * min_partitions))))
    return out


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``r`` in ``parts`` contiguous pieces of (nearly) equal size."""
    step = r.size / parts
    bounds = [r.start + int(i * step) for i in range(parts)] + [r.end]
    return [
        OffsetRange(r.topic, r.partition, a, b)
        for a, b in zip(bounds, bounds[1:], strict=False)
        if b > a
    ]
