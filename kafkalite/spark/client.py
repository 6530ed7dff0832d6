"""confluent-kafka calls behind the data source: the driver's metadata and offset look-ups,
and the executors' range reads into Arrow batches.

Executors never join a group and never commit: each one assigns the exact partitions and
offsets it was planned, as Spark's JVM connector does. Their consumer is created lazily on
first use and kept for the life of the Python worker (Spark reuses workers), one per client
configuration.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import operator
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from kafkalite.spark.options import EARLIEST, LATEST, OffsetSpec, SourceOptions
from kafkalite.spark.record_columns import gc_paused

__all__ = [
    "DataLossError",
    "OffsetRange",
    "Offsets",
    "check_data_loss",
    "driver_consumer",
    "list_partitions",
    "read_range",
    "resolve",
]

log = logging.getLogger(__name__)

#: topic -> partition -> offset
Offsets = dict[str, dict[int, int]]

#: rows per Arrow batch an executor yields
BATCH_ROWS = 8192
#: one poll's wait: a range ending in a transaction marker ends after one empty poll
POLL_SECONDS = 0.1


#: librdkafka settings for executors' range reads (``kafka.*`` options still override them).
#: An executor reads ranges that are already in the log as fast as it can take them:
#: - ``fetch.queue.backoff.ms``: librdkafka postpones a partition's next fetch by this much
#:   (default 1000 ms) whenever its local queue is over ``queued.max.messages.kbytes``
#:   (64 MiB), which 1 KiB records reach in about 64,000: a reader that builds Arrow batches
#:   then waits a second for every ~100,000 records (4 of every 5 seconds of a 500,000-record
#:   range in the bench, docs/spark.md);
#: - ``fetch.wait.max.ms``: the broker holds a fetch at the log end this long (default 500
#:   ms); a range ending there leaves one such fetch in flight, and the next range's first
#:   fetch queues behind it;
#: - ``max.partition.fetch.bytes``: 8 MiB per fetch rather than 1 MiB (an executor reads one
#:   partition at a time): a kafkalite broker spends 40% less CPU serving the same records,
#:   on machines where it shares the cores with Spark.
EXECUTOR_FETCH = {
    "fetch.queue.backoff.ms": "10",
    "fetch.wait.max.ms": "10",
    "max.partition.fetch.bytes": str(8 << 20),
}

#: librdkafka settings for the driver's look-ups (``kafka.*`` options still override them).
#: Every streaming query starts a Python source runner, and with it a new client, on the
#: query's critical path:
#: - ``reconnect.backoff.ms``: once its first Metadata names the brokers, librdkafka drops
#:   the bootstrap connection, with the look-up that was in flight on it, and holds off
#:   connecting to the broker it just learned for a fraction of this backoff (the default
#:   100 ms): half the time, a query's first look-up waited about 50 ms for nothing (35 ms
#:   on average over 20 new clients, 17 ms with 10 ms; docs/spark.md, "Round 5").
DRIVER_LOOKUP = {"reconnect.backoff.ms": "10"}


class DataLossError(RuntimeError):
    """Offsets a query needs are gone (retention, DeleteRecords, a deleted topic): raised when
    ``failOnDataLoss`` is true, as Spark's connector fails the query."""


@dataclass(frozen=True)
class OffsetRange:
    """One input partition's work: ``[start, end)`` of one topic partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def _consumer_conf(client: dict[str, str], role: str, group_id_prefix: str) -> dict[str, Any]:
    conf: dict[str, Any] = {
        # never joined nor committed to (assign only), but librdkafka requires one; named as
        # Spark's connector names its own (groupIdPrefix, unless kafka.group.id is given)
        "group.id": f"{group_id_prefix}-{uuid.uuid4()}-{role}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        # an offset deleted under a reader is an error to decide on (failOnDataLoss), never
        # a silent jump to the log start
        "auto.offset.reset": "error",
        "allow.auto.create.topics": False,
        # Spark's (the Java client's) default; librdkafka's own is read_committed
        "isolation.level": "read_uncommitted",
    }
    conf.update(EXECUTOR_FETCH if role == "executor" else DRIVER_LOOKUP)
    conf.update(client)
    return conf


def driver_consumer(client: dict[str, str], group_id_prefix: str = "spark-kafka-source") -> Any:
    from confluent_kafka import Consumer

    return Consumer(_consumer_conf(client, "driver", group_id_prefix))


def list_partitions(
    consumer: Any, opts: SourceOptions, timeout: float = 30.0
) -> list[tuple[str, int]]:
    """The partitions the options select, as (topic, partition), sorted."""
    if opts.assign is not None:
        return sorted((t, p) for t, ps in opts.assign.items() for p in ps)
    md = consumer.list_topics(timeout=timeout)
    if opts.subscribe is not None:
        wanted = set(opts.subscribe)
        names = [t for t in md.topics if t in wanted]
    else:
        assert opts.subscribe_pattern is not None
        rx = re.compile(opts.subscribe_pattern)
        # as the Java consumer's exclude.internal.topics=true
        names = [t for t in md.topics if rx.fullmatch(t) and not t.startswith("__")]
    out: list[tuple[str, int]] = []
    for name in names:
        topic = md.topics[name]
        if topic.error is not None:
            continue
        out.extend((name, p) for p in topic.partitions)
    return sorted(out)


def watermarks(
    consumer: Any, parts: Sequence[tuple[str, int]], timeout: float = 30.0
) -> dict[tuple[str, int], tuple[int, int]]:
    """(log start, latest) per partition; latest is the LSO under read_committed, since the
    consumer's isolation.level is passed to ListOffsets."""
    from confluent_kafka import TopicPartition

    return {(t, p): _watermark(consumer, TopicPartition(t, p), timeout) for t, p in parts}


def _watermark(consumer: Any, tp: Any, timeout: float) -> tuple[int, int]:
    """One partition's (log start, latest), refreshing a long-lived client's metadata when the
    partition is newer than its cache (librdkafka answers _UNKNOWN_PARTITION from the cache)."""
    from confluent_kafka import KafkaError, KafkaException

    deadline = time.monotonic() + timeout
    while True:
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)
            return int(low), int(high)
        except KafkaException as e:
            code = e.args[0].code()
            if code not in (KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC):
                raise
            if time.monotonic() > deadline:
                raise
            consumer.list_topics(tp.topic, timeout=timeout)
            time.sleep(0.05)


def _by_timestamp(
    consumer: Any, stamps: dict[tuple[str, int], int], strategy: str, timeout: float
) -> dict[tuple[str, int], int]:
    from confluent_kafka import TopicPartition

    if not stamps:
        return {}
    got = consumer.offsets_for_times(
        [TopicPartition(t, p, ts) for (t, p), ts in stamps.items()], timeout=timeout
    )
    out = {}
    for tp in got:
        if tp.error is not None:
            raise RuntimeError(f"offset by timestamp for {tp.topic}-{tp.partition}: {tp.error}")
        if tp.offset < 0:  # no record at or after the timestamp
            if strategy == "error":
                raise RuntimeError(
                    f"no offset matched timestamp {stamps[(tp.topic, tp.partition)]} in "
                    f"{tp.topic}-{tp.partition} (startingOffsetsByTimestampStrategy=error)"
                )
            out[(tp.topic, tp.partition)] = LATEST
        else:
            out[(tp.topic, tp.partition)] = tp.offset
    return out


def resolve(
    consumer: Any,
    spec: OffsetSpec,
    parts: Sequence[tuple[str, int]],
    marks: dict[tuple[str, int], tuple[int, int]],
    strategy: str = "error",
    timeout: float = 30.0,
) -> dict[tuple[str, int], int]:
    """Concrete offsets for ``parts`` from a spec. A partition no record reaches by timestamp
    (strategy ``latest``) gets the latest offset. A JSON of offsets must name exactly the
    partitions read, as Spark's Kafka source requires (it fails the query otherwise)."""
    if spec.kind == "earliest":
        return {tp: marks[tp][0] for tp in parts}
    if spec.kind == "latest":
        return {tp: marks[tp][1] for tp in parts}
    if spec.kind == "timestamp":
        assert spec.timestamp is not None
        got = _by_timestamp(consumer, {tp: spec.timestamp for tp in parts}, strategy, timeout)
        return {tp: marks[tp][1] if off == LATEST else off for tp, off in got.items()}
    if spec.kind == "timestamps":
        stamps = {
            (t, p): ts for t, ps in spec.offsets.items() for p, ts in ps.items() if (t, p) in marks
        }
        got = _by_timestamp(consumer, stamps, strategy, timeout)
        return {tp: marks[tp][1] if got.get(tp, LATEST) == LATEST else got[tp] for tp in parts}
    named = {(t, p) for t, ps in spec.offsets.items() for p in ps}
    if named != set(parts):
        raise ValueError(
            "If startingOffsets or endingOffsets contains specific offsets, you must specify"
            " all TopicPartitions. Use -1 for latest, -2 for earliest."
            f" Specified: {sorted(named)} Assigned: {sorted(parts)}"
        )
    out = {}
    for tp in parts:
        off = spec.offsets.get(tp[0], {}).get(tp[1])
        if off is None or off == LATEST:
            out[tp] = marks[tp][1]
        elif off == EARLIEST:
            out[tp] = marks[tp][0]
        else:
            out[tp] = off
    return out


def check_data_loss(message: str, fail: bool) -> None:
    if fail:
        raise DataLossError(
            message
            + ". Some data may have been lost because they are not available in Kafka any more;"
            " either the data was aged out by Kafka or the topic may have been deleted before all"
            " the data in the topic was processed. If you want your streaming query to continue"
            ' with the data that is left, set the source option "failOnDataLoss" to "false".'
        )


# --- executors -------------------------------------------------------------------------------

_CONSUMERS: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}


def _executor_consumer(client: dict[str, str], group_id_prefix: str) -> Any:
    key = (group_id_prefix, tuple(sorted(client.items())))
    consumer = _CONSUMERS.get(key)
    if consumer is None:
        from confluent_kafka import Consumer

        consumer = Consumer(_consumer_conf(client, "executor", group_id_prefix))
        _CONSUMERS[key] = consumer
    return consumer


_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)


class _Columns:
    """Arrow record batches built column-wise from confluent-kafka messages.

    Each column is one C-level pass (``map`` of the unbound ``Message`` method) and one
    ``pa.array`` call: no Python code runs per record. Topic, partition and (usually) the
    timestamp type are the same for a whole range, so they are repeated scalars, and the
    headers column is only built when ``includeHeaders`` asks for it.
    """

    def __init__(self, rng: OffsetRange, include_headers: bool, arrow_schema: Any) -> None:
        import pyarrow as pa

        self.pa = pa
        self.schema = arrow_schema
        self.include_headers = include_headers
        self.topic = pa.scalar(rng.topic, pa.string())
        self.partition = pa.scalar(rng.partition, pa.int32())
        self.msgs: list[Any] = []
        self.offsets: list[int] = []

    def add(self, msgs: list[Any], offsets: list[int]) -> None:
        self.msgs.extend(msgs)
        self.offsets.extend(offsets)

    def __len__(self) -> int:
        return len(self.msgs)

    def take(self) -> Any:
        """The pending messages as one ``pyarrow.RecordBatch``; the pending list is emptied."""
        from confluent_kafka import Message

        pa = self.pa
        ms, offs = self.msgs, self.offsets
        self.msgs, self.offsets = [], []
        n = len(ms)
        stamps = list(map(Message.timestamp, ms))  # (type, milliseconds) pairs
        types = list(map(_FIRST, stamps))
        # confluent-kafka: 0 none, 1 create time, 2 log append time; Spark: 0 create, 1 append
        if types.count(types[0]) == n:
            ts_type = pa.repeat(pa.scalar(1 if types[0] == 2 else 0, pa.int32()), n)
        else:
            ts_type = pa.array([1 if t == 2 else 0 for t in types], pa.int32())
        cols = [
            pa.array(list(map(Message.key, ms)), pa.binary()),
            pa.array(list(map(Message.value, ms)), pa.binary()),
            pa.repeat(self.topic, n),
            pa.repeat(self.partition, n),
            pa.array(offs, pa.int64()),
            pa.array(list(map(_SECOND, stamps)), pa.timestamp("ms", tz="UTC")).cast(
                self.schema.field("timestamp").type
            ),
            ts_type,
        ]
        if self.include_headers:
            cols.append(
                pa.array(
                    [[{"key": k, "value": v} for k, v in m.headers() or ()] for m in ms],
                    self.schema.field("headers").type,
                )
            )
        return pa.RecordBatch.from_arrays(cols, schema=self.schema)


_DIRECT: dict[tuple[tuple[str, str], ...], Any] = {}


def _direct_reader(client: dict[str, str]) -> Any:
    from kafkalite.spark.direct_fetch import DirectReader

    key = tuple(sorted(client.items()))
    reader = _DIRECT.get(key)
    if reader is None:
        reader = _DIRECT[key] = DirectReader(client)
    return reader


def read_range(
    rng: OffsetRange,
    client: dict[str, str],
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
    arrow_schema: Any,
    group_id_prefix: str = "spark-kafka-source",
    direct: bool = True,
) -> Iterator[Any]:
    """Yield ``pyarrow.RecordBatch`` es of the records in ``[rng.start, rng.end)``.

    With ``direct`` (the ``directFetch`` option, on by default) and settings the direct path
    understands, the range is read with Fetch requests decoded straight into columns
    (:mod:`kafkalite.spark.direct_fetch`); whatever that path does not read (an error, a
    leader move, an old message format) is read on with confluent-kafka from the offset it
    reached. Both give the same rows (tests/spark/test_direct_fetch.py).
    """
    if rng.size == 0:
        return
    if direct:
        from kafkalite.spark.direct_fetch import DirectUnavailable, understood
        from kafkalite.spark.record_columns import BatchColumns

        if understood(client):
            cols = BatchColumns(rng.topic, rng.partition, include_headers, arrow_schema)
            try:
                yield from _direct_reader(client).read(
                    rng.topic, rng.partition, rng.start, rng.end, cols
                )
                return
            except DirectUnavailable as e:
                log.info(
                    "direct read of %s-%s stopped at %d (%s): reading on with confluent-kafka",
                    rng.topic,
                    rng.partition,
                    e.offset,
                    e.reason,
                )
                rng = OffsetRange(rng.topic, rng.partition, max(rng.start, e.offset), rng.end)
                if rng.size == 0:
                    return
    yield from _consumer_read(
        rng,
        client,
        include_headers=include_headers,
        fail_on_data_loss=fail_on_data_loss,
        poll_timeout_ms=poll_timeout_ms,
        arrow_schema=arrow_schema,
        group_id_prefix=group_id_prefix,
    )


def _consumer_read(
    rng: OffsetRange,
    client: dict[str, str],
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
    arrow_schema: Any,
    group_id_prefix: str,
) -> Iterator[Any]:
    """The records in ``[rng.start, rng.end)`` read with a confluent-kafka consumer.

    Gaps (compacted records, transaction markers, aborted records under read_committed)
    are skipped: the read ends when the consumer's position reaches ``end`` (librdkafka moves
    it over markers and aborted records it filters). A position that stops short of ``end``
    fails after ``kafkaConsumer.pollTimeoutMs`` rather than dropping what it did not see.
    Offsets deleted before or during the read (the consumer runs with
    ``auto.offset.reset=error``) come back as OffsetOutOfRange and go through
    ``failOnDataLoss``; no watermark look-up precedes the read, since it would queue behind
    the consumer's last long-polling fetch (up to ``fetch.wait.max.ms``) on every range.
    """
    from confluent_kafka import KafkaError, Message, TopicPartition

    if rng.size == 0:
        return
    consumer = _executor_consumer(client, group_id_prefix)
    tp = TopicPartition(rng.topic, rng.partition)
    consumer.assign([TopicPartition(rng.topic, rng.partition, rng.start)])
    pending = _Columns(rng, include_headers, arrow_schema)
    deadline = time.monotonic() + poll_timeout_ms / 1000
    next_off = rng.start
    try:
        while next_off < rng.end:
            # asking for no more than the range holds returns as soon as it is all there
            want = min(BATCH_ROWS, rng.end - next_off)
            with gc_paused():
                msgs = consumer.consume(num_messages=want, timeout=POLL_SECONDS)
            if not msgs:
                pos = consumer.position([tp])[0].offset
                if pos >= rng.end:
                    break
                if time.monotonic() > deadline:
                    low, high = _watermark(consumer, tp, 10)
                    if high <= max(pos, next_off):
                        check_data_loss(
                            f"{rng.topic}-{rng.partition} ends at {high}, before the planned end"
                            f" {rng.end}",
                            fail_on_data_loss,
                        )
                        break
                    raise TimeoutError(
                        f"no record of {rng.topic}-{rng.partition} from {pos} within"
                        f" kafkaConsumer.pollTimeoutMs={poll_timeout_ms}"
                    )
                continue
            deadline = time.monotonic() + poll_timeout_ms / 1000
            errs = list(map(Message.error, msgs))
            err = None
            # (identity tests: a KafkaError compared with None by == raises)
            if any(map(operator.is_not, errs, itertools.repeat(None))):
                # rare: drop end-of-partition events, keep what precedes any other error
                kept = []
                for m, e in zip(msgs, errs, strict=True):
                    if e is None:
                        kept.append(m)
                    elif e.code() != KafkaError._PARTITION_EOF:
                        err = e
                        break
                msgs = kept
            if msgs:
                # a record without an error always has an offset
                offs = cast(list[int], list(map(Message.offset, msgs)))
                if offs[-1] >= rng.end:  # past a gap at the range's end
                    cut = bisect.bisect_left(offs, rng.end)
                    msgs, offs = msgs[:cut], offs[:cut]
                    next_off = rng.end
                if msgs:
                    pending.add(msgs, offs)
                    next_off = max(next_off, offs[-1] + 1)
                if len(pending) >= BATCH_ROWS:
                    with gc_paused():
                        batch = pending.take()
                    yield batch
            if err is None:
                continue
            if err.code() not in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
                raise RuntimeError(f"reading {rng.topic}-{rng.partition}: {err}")
            # the offset to read is not in the log: deleted (retention, DeleteRecords), or past
            # its end (the partition was truncated or re-created)
            low, high = _watermark(consumer, tp, 10)
            if next_off >= low:
                check_data_loss(
                    f"{rng.topic}-{rng.partition} ends at {high}, before the planned end {rng.end}",
                    fail_on_data_loss,
                )
                break
            check_data_loss(
                f"Cannot fetch offsets {next_off} to {low} of {rng.topic}-{rng.partition}: the"
                f" log starts at {low}",
                fail_on_data_loss,
            )
            next_off = low
            if low < rng.end:
                consumer.assign([TopicPartition(rng.topic, rng.partition, low)])
        if len(pending):
            yield pending.take()
    finally:
        consumer.unassign()
