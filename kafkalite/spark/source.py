"""The ``kafkalite`` data source's readers: batch (``spark.read``) and streaming
(``spark.readStream``), with Spark's Kafka source schema and options.

Readers are pickled to executors and rebuilt there, so they connect lazily and never pickle
a client. The driver's look-ups (metadata, watermarks, offsets by time) use one consumer per
reader that never joins a group.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from kafkalite.spark import client as kc
from kafkalite.spark.options import OffsetSpec, SourceOptions
from kafkalite.spark.planning import TP, from_json, rate_limit, split_ranges, to_json

__all__ = ["KafkaBatchReader", "KafkaStreamReader"]


def _wall_ms() -> int:
    return int(time.time() * 1000)


class _ReaderBase:
    """What both readers share: lazy driver consumer and the executor-side read."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._consumer: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_consumer"] = None  # a client never travels to executors
        return state

    @property
    def consumer(self) -> Any:
        if self._consumer is None:
            self._consumer = kc.driver_consumer(self.opts.client, self.opts.group_id_prefix)
        return self._consumer

    def _close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _marks(self) -> tuple[list[TP], dict[TP, tuple[int, int]]]:
        parts = kc.list_partitions(self.consumer, self.opts)
        return parts, kc.watermarks(self.consumer, parts)

    def _resolve(
        self, spec: OffsetSpec, parts: list[TP], marks: dict[TP, tuple[int, int]]
    ) -> dict[TP, int]:
        return kc.resolve(self.consumer, spec, parts, marks, self.opts.by_timestamp_strategy)

    def _plan(self, start: dict[TP, int], end: dict[TP, int]) -> list[InputPartition]:
        ranges = []
        for tp, stop in sorted(end.items()):
            begin = start.get(tp)
            if begin is None:
                continue
            if stop < begin:
                kc.check_data_loss(
                    f"{tp[0]}-{tp[1]}: offset went back from {begin} to {stop}",
                    self.opts.fail_on_data_loss,
                )
                continue
            ranges.append(kc.OffsetRange(tp[0], tp[1], begin, stop))
        return [
            InputPartition(r)
            for r in split_ranges(
                ranges, self.opts.min_partitions, self.opts.max_records_per_partition
            )
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from pyspark.sql.pandas.types import to_arrow_schema

        rng: kc.OffsetRange = partition.value
        yield from kc.read_range(
            rng,
            self.opts.client,
            include_headers=self.opts.include_headers,
            fail_on_data_loss=self.opts.fail_on_data_loss,
            poll_timeout_ms=self.opts.poll_timeout_ms,
            arrow_schema=to_arrow_schema(self.schema, timezone="UTC"),
            group_id_prefix=self.opts.group_id_prefix,
            direct=self.opts.direct_fetch,
        )


class KafkaBatchReader(_ReaderBase, DataSourceReader):
    """``spark.read.format("kafkalite")``: one input partition per topic partition (or more,
    with ``minPartitions``) between the starting and ending offsets."""

    def partitions(self) -> Sequence[InputPartition]:
        try:
            parts, marks = self._marks()
            start = self._resolve(self.opts.starting, parts, marks)
            # an ending timestamp nothing reaches means latest (Spark's rule), never an error
            end = kc.resolve(self.consumer, self.opts.ending, parts, marks, "latest")
        finally:
            self._close()
        for tp in parts:
            if start[tp] > end[tp]:
                raise ValueError(
                    f"{tp[0]}-{tp[1]}: the starting offset {start[tp]} is after the ending offset"
                    f" {end[tp]}"
                )
        return self._plan(start, end)


class KafkaStreamReader(_ReaderBase, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kafkalite")``: offsets are ``{"topic": {"partition":
    nextOffset}}``; admission control by ``maxOffsetsPerTrigger`` / ``minOffsetsPerTrigger``;
    ``Trigger.AvailableNow``; partitions that appear later are read from their start."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        super().__init__(opts, schema)
        self._target: dict[TP, int] | None = None
        self._latest: dict[TP, int] | None = None
        self._last_trigger_ms = 0  # Spark's lastTriggerMillis
        self._clock: Callable[[], int] = _wall_ms

    def initialOffset(self) -> dict:
        parts, marks = self._marks()
        return to_json(self._resolve(self.opts.starting, parts, marks))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        parts, marks = self._marks()
        self._target = {tp: marks[tp][1] for tp in parts}

    def _available(self, start: dict[TP, int]) -> dict[TP, int]:
        """Latest offsets, with partitions that are new since ``start`` included (Spark reads
        them from earliest) and never past the AvailableNow target."""
        if self._target is not None:
            return dict(self._target)
        parts, marks = self._marks()
        missing = [tp for tp in start if tp not in marks]
        if missing:
            kc.check_data_loss(f"partitions {missing} are gone", self.opts.fail_on_data_loss)
        return {tp: marks[tp][1] for tp in parts}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json(start)
        latest = self._available(begin)
        self._latest = latest
        parts = list(latest)
        new = [tp for tp in parts if tp not in begin]
        if new:
            marks = kc.watermarks(self.consumer, new)
            for tp in new:
                begin[tp] = marks[tp][0]
        # a partition whose end moved back (topic re-created) is planned as data loss later
        end = {tp: max(latest[tp], 0) for tp in parts}
        if not isinstance(limit, ReadAllAvailable):
            # Spark's Kafka source pairs the two limits (a CompositeReadLimit, which Python
            # readers cannot return): the minimum first, then the maximum
            min_rows = (
                limit.min_rows
                if isinstance(limit, ReadMinRows)
                else self.opts.min_offsets_per_trigger
            )
            max_rows = (
                limit.max_rows
                if isinstance(limit, ReadMaxRows)
                else self.opts.max_offsets_per_trigger
            )
            # (under AvailableNow no more data is coming: read what there is)
            if (
                min_rows is not None
                and self._target is None
                and self._delay_batch(min_rows, begin, end)
            ):
                return start
            if max_rows is not None:
                end = rate_limit(max_rows, begin, end)
        for tp, off in begin.items():
            end.setdefault(tp, off)
        return to_json(end)

    def _delay_batch(self, min_rows: int, begin: dict[TP, int], end: dict[TP, int]) -> bool:
        """Skip this trigger while fewer than ``minOffsetsPerTrigger`` records are available,
        unless ``maxTriggerDelay`` has passed since the last trigger that ran a batch (Spark's
        ``KafkaMicroBatchStream.delayBatch``: the clock starts at 0, so a query's first
        trigger always runs)."""
        now = self._clock()
        if now - self._last_trigger_ms >= self.opts.max_trigger_delay_ms:
            self._last_trigger_ms = now
            return False
        if sum(max(0, end[tp] - begin.get(tp, 0)) for tp in end) < min_rows:
            return True
        self._last_trigger_ms = now
        return False

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else to_json(self._latest)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, stop = from_json(start), from_json(end)
        new = [tp for tp in stop if tp not in begin]
        if new:  # partitions first seen in this batch start at their log start
            marks = kc.watermarks(self.consumer, new)
            for tp in new:
                begin[tp] = marks[tp][0]
        return self._plan(begin, stop)

    def commit(self, end: dict) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, never in Kafka."""

    def stop(self) -> None:
        self._close()
