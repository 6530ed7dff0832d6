"""The ``kafkalite`` data source's writers: batch (``df.write``) and streaming
(``df.writeStream``).

Columns as Spark's Kafka sink: ``value`` (string or binary, required), ``key`` (string or
binary), ``headers`` (array<struct<key string, value binary>>), ``topic`` (string, unless the
``topic`` option is set, which wins) and ``partition`` (int).

At-least-once by default: each task produces its rows and flushes; a failed task is retried
and may write its rows again. Exactly-once (``exactlyOnce=true``, streaming only): each task
of a micro-batch writes its rows in one transaction, with ``transactional.id`` fixed per
(query, task partition) so a retry fences its zombie, together with a marker record
``(queryId, partitionId) -> batchId`` in a marker topic. A task that finds its batch already
marked as committed (a restart after the commit) writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from kafkalite.spark.options import SinkOptions

__all__ = ["KafkaBatchWriter", "KafkaStreamWriter", "SinkCommit"]

#: the local properties Spark's micro-batch execution sets on every task of a batch
_BATCH_ID = "streaming.sql.batchId"
_QUERY_ID = "sql.streaming.queryId"
#: keyed records land where the Java client (so Spark's JVM sink) puts them
_PARTITIONER = {"partitioner": "murmur2_random"}


@dataclass
class SinkCommit(WriterCommitMessage):
    """What a task reports: rows written, and whether it skipped an already committed batch."""

    rows: int
    skipped: bool = False


def _columns(schema: StructType, topic_option: str | None) -> None:
    names = {f.name.lower(): f for f in schema.fields}
    if "value" not in names:
        raise ValueError("Required attribute 'value' not found")
    if topic_option is None and "topic" not in names:
        raise ValueError(
            "topic option required when no 'topic' attribute is present. Use the topic option"
            " for setting a topic."
        )
    for name, allowed in (("value", ("string", "binary")), ("key", ("string", "binary"))):
        f = names.get(name)
        if f is not None and f.dataType.typeName() not in allowed:
            raise ValueError(f"{name} attribute type must be a string or binary")
    f = names.get("topic")
    if f is not None and f.dataType.typeName() != "string":
        raise ValueError("topic attribute type must be a string")
    f = names.get("partition")
    if f is not None and f.dataType.typeName() != "integer":
        raise ValueError("partition attribute type must be an int")


def _as_bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    return str(v).encode()


def _rows(batches: Iterator[Any], topic_option: str | None) -> Iterator[tuple[Any, ...]]:
    """(topic, partition, key, value, headers) per row, from Arrow batches."""
    for b in batches:
        cols = {name.lower(): b.column(i).to_pylist() for i, name in enumerate(b.schema.names)}
        n = b.num_rows
        topics = [topic_option] * n if topic_option is not None else cols["topic"]
        none = [None] * n
        parts, keys, values, headers = (
            cols.get("partition", none),
            cols.get("key", none),
            cols["value"],
            cols.get("headers", none),
        )
        for i in range(n):
            topic = topics[i]
            if topic is None:
                raise ValueError(
                    "null topic present in the data. Use the topic option for setting a topic."
                )
            hs = headers[i]
            yield (
                topic,
                parts[i],
                _as_bytes(keys[i]),
                _as_bytes(values[i]),
                [(h["key"], h["value"]) for h in hs] if hs else None,
            )


def _produce_all(producer: Any, rows: Iterator[tuple[Any, ...]], errors: list[Any]) -> int:
    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    n = 0
    for topic, partition, key, value, headers in rows:
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        n += 1
        if errors:
            break
        if n % 10000 == 0:
            producer.poll(0)
    return n


def _write_at_least_once(opts: SinkOptions, batches: Iterator[Any]) -> SinkCommit:
    from confluent_kafka import Producer

    conf: dict[str, Any] = {"linger.ms": 5, "enable.idempotence": True, **_PARTITIONER}
    conf.update(opts.client)
    producer = Producer(conf)
    errors: list[Any] = []
    n = _produce_all(producer, _rows(batches, opts.topic), errors)
    remaining = producer.flush(300)
    if errors or remaining:
        raise RuntimeError(
            f"kafkalite sink: {len(errors)} failed deliveries, first: {errors[:1]}; {remaining} unsent"
        )
    return SinkCommit(n)


def _committed_batch(opts: SinkOptions, marker_key: bytes) -> int:
    """The last batch id committed for ``marker_key`` (-1 if none), read with read_committed."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    conf: dict[str, Any] = {
        "group.id": "kafkalite-spark-sink-marker-reader",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
    }
    conf.update(opts.client)
    conf["isolation.level"] = "read_committed"
    consumer = Consumer(conf)
    try:
        tp = TopicPartition(opts.marker_topic, 0)
        low, high = consumer.get_watermark_offsets(tp, timeout=30, cached=False)
        last = -1
        if high <= low:
            return last
        consumer.assign([TopicPartition(opts.marker_topic, 0, low)])
        while True:
            m = consumer.poll(10)
            if m is None:
                raise TimeoutError(f"reading the sink's marker topic {opts.marker_topic}")
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return last
                raise RuntimeError(f"reading {opts.marker_topic}: {err}")
            value = m.value()
            if m.key() == marker_key and value is not None:
                last = max(last, int(json.loads(value)["batchId"]))
    finally:
        consumer.close()


def _write_exactly_once(opts: SinkOptions, batches: Iterator[Any]) -> SinkCommit:
    from confluent_kafka import Producer
    from pyspark import TaskContext

    ctx = TaskContext.get()
    assert ctx is not None
    batch_id, query_id = ctx.getLocalProperty(_BATCH_ID), ctx.getLocalProperty(_QUERY_ID)
    if batch_id is None or query_id is None:
        raise RuntimeError("exactlyOnce needs a streaming query (no batch id on this task)")
    slot = f"{query_id}-{ctx.partitionId()}"
    marker_key = slot.encode()
    conf: dict[str, Any] = {
        "linger.ms": 5,
        "transactional.id": f"{opts.transactional_id_prefix}-{slot}",
        **_PARTITIONER,
    }
    conf.update(opts.client)
    producer = Producer(conf)
    # fences an earlier attempt of this task and settles its open transaction first
    producer.init_transactions(60)
    if _committed_batch(opts, marker_key) >= int(batch_id):
        return SinkCommit(0, skipped=True)
    producer.begin_transaction()
    errors: list[Any] = []
    try:
        n = _produce_all(producer, _rows(batches, opts.topic), errors)
        producer.produce(
            opts.marker_topic,
            key=marker_key,
            value=json.dumps({"queryId": query_id, "batchId": int(batch_id), "rows": n}).encode(),
            partition=0,
        )
        producer.flush(300)
        if errors:
            raise RuntimeError(
                f"kafkalite sink: {len(errors)} failed deliveries, first: {errors[0]}"
            )
        producer.commit_transaction(300)
    except BaseException:
        producer.abort_transaction(60)
        raise
    return SinkCommit(n)


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("kafkalite")``: at-least-once."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        _columns(schema, opts.topic)
        if opts.exactly_once:
            raise ValueError("exactlyOnce applies to streaming writes only (it keys on batch ids)")
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        return _write_at_least_once(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every task flushed its records before reporting: nothing left to publish."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records a failed job already wrote stay written (at-least-once, as Spark's sink)."""


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("kafkalite")``: at-least-once, or exactly-once per micro-batch
    with ``exactlyOnce=true``."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        _columns(schema, opts.topic)
        self.opts = opts
        if opts.exactly_once:
            _ensure_marker_topic(opts)

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        if self.opts.exactly_once:
            return _write_exactly_once(self.opts, iterator)
        return _write_at_least_once(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Tasks commit their own transactions; Spark's commit log then records the batch."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Open transactions of failed tasks are aborted when their retry fences them."""


def _ensure_marker_topic(opts: SinkOptions) -> None:
    """One compacted partition: a key per (query, task partition), its last batch wins."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({k: v for k, v in opts.client.items()})
    futures = admin.create_topics(
        [NewTopic(opts.marker_topic, 1, config={"cleanup.policy": "compact"})],
        operation_timeout=30,
    )
    for fut in futures.values():
        try:
            fut.result(60)
        except Exception as e:  # already there is fine
            if "TOPIC_ALREADY_EXISTS" not in str(e) and "already exists" not in str(e):
                raise
