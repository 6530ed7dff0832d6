"""Streaming reads (``spark.readStream.format("kafkalite")``): admission control,
``Trigger.AvailableNow``, restarts from the checkpoint, new partitions, data loss."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.spark.conftest import produce


def _stream(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    reader = (
        spark.readStream.format("kafkalite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _to_parquet(df: Any, out: Path, cp: Path) -> Any:
    """Run ``df`` (value as string, partition, offset) to a Parquet file sink until the data
    available at start is read (AvailableNow); the query, for its progress."""
    q = (
        df.selectExpr("CAST(value AS STRING) AS v", "partition", "offset")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
        .start()
    )
    try:
        q.awaitTermination(180)
    finally:
        q.stop()
    return q


def _ms(progress_timestamp: str) -> int:
    """A query progress' ``timestamp`` (ISO 8601, UTC) in epoch milliseconds."""
    return int(datetime.fromisoformat(progress_timestamp.replace("Z", "+00:00")).timestamp() * 1000)


def _values(spark: Any, out: Path) -> list[str]:
    return sorted(r["v"] for r in spark.read.parquet(str(out)).collect())


def test_max_offsets_per_trigger_and_available_now(
    spark: Any, spark_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    spark_broker.create_topic(topic_name, 2)
    sent = produce(spark_broker.bootstrap_servers, topic_name, 40, partitions=2)
    df = _stream(spark, spark_broker.bootstrap_servers, topic_name, maxOffsetsPerTrigger="10")
    q = _to_parquet(df, tmp_path / "out", tmp_path / "cp")
    assert not q.isActive and q.exception() is None  # AvailableNow stopped by itself
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sizes == [10, 10, 10, 10]  # the limit shared by the two partitions' backlogs
    assert _values(spark, tmp_path / "out") == sorted(s.value.decode() for s in sent)
    # the checkpoint holds Spark's Kafka offset JSON: {"topic": {"partition": nextOffset}}
    last = (tmp_path / "cp" / "offsets" / "3").read_text().splitlines()[-1]
    assert json.loads(last) == {topic_name: {"0": 20, "1": 20}}

    # more data and a new partition: the next run reads both (the new one from its start)
    admin = AdminClient({"bootstrap.servers": spark_broker.bootstrap_servers})
    for fut in admin.create_partitions([NewPartitions(topic_name, 3)]).values():
        fut.result(30)
    more = produce(spark_broker.bootstrap_servers, topic_name, 9, partitions=3, start=40)
    q = _to_parquet(df, tmp_path / "out", tmp_path / "cp")
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [9]
    assert _values(spark, tmp_path / "out") == sorted(s.value.decode() for s in sent + more)


def test_killed_after_offsets_before_commit_restarts_exactly_once(
    spark: Any, spark_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    """Batch 1's offsets are written, then its job fails (as a killed query would leave it):
    the restart re-runs batch 1 from the checkpoint and the file sink holds every input once."""
    spark_broker.create_topic(topic_name, 1)
    sent = produce(spark_broker.bootstrap_servers, topic_name, 30)
    df = _stream(spark, spark_broker.bootstrap_servers, topic_name, maxOffsetsPerTrigger="10")
    poisoned = df.selectExpr(
        "CASE WHEN offset = 15 THEN raise_error('killed mid-batch') ELSE value END AS value",
        "partition",
        "offset",
    )
    out, cp = tmp_path / "out", tmp_path / "cp"
    with pytest.raises(Exception, match=r"USER_RAISED_EXCEPTION\] killed mid-batch"):
        _to_parquet(poisoned, out, cp)
    assert (cp / "offsets" / "1").exists() and not (cp / "commits" / "1").exists()
    assert _values(spark, out) == sorted(s.value.decode() for s in sent[:10])

    q = _to_parquet(df, out, cp)
    assert q.exception() is None
    values = _values(spark, out)
    assert values == sorted(s.value.decode() for s in sent)  # each exactly once
    # offsets/1 was re-used as written, not re-planned
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [10, 10]


@pytest.mark.parametrize("fail", [True, False])
def test_fail_on_data_loss_in_a_stream(
    spark: Any, spark_broker: Any, topic_name: str, tmp_path: Path, fail: bool
) -> None:
    """Retention (here DeleteRecords, which moves the log start the same way) removes offsets
    the query still needs between two runs."""
    spark_broker.create_topic(topic_name, 1)
    sent = produce(spark_broker.bootstrap_servers, topic_name, 10)
    df = _stream(
        spark, spark_broker.bootstrap_servers, topic_name, failOnDataLoss=str(fail).lower()
    )
    out, cp = tmp_path / "out", tmp_path / "cp"
    _to_parquet(df, out, cp)
    more = produce(spark_broker.bootstrap_servers, topic_name, 10, start=10)
    admin = AdminClient({"bootstrap.servers": spark_broker.bootstrap_servers})
    for fut in admin.delete_records([TopicPartition(topic_name, 0, 15)]).values():
        fut.result(30)
    if fail:
        with pytest.raises(Exception, match="failOnDataLoss"):
            _to_parquet(df, out, cp)
        assert _values(spark, out) == sorted(s.value.decode() for s in sent)
    else:
        _to_parquet(df, out, cp)
        kept = sent + [s for s in more if s.offset >= 15]
        assert _values(spark, out) == sorted(s.value.decode() for s in kept)


def test_streaming_starts_at_latest_by_default(
    spark: Any, spark_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    """As Spark's Kafka source: a new query without startingOffsets reads only what comes
    after it started; its checkpoint then carries it on."""
    spark_broker.create_topic(topic_name, 2)
    produce(spark_broker.bootstrap_servers, topic_name, 10, partitions=2)
    df = (
        spark.readStream.format("kafkalite")
        .option("kafka.bootstrap.servers", spark_broker.bootstrap_servers)
        .option("subscribe", topic_name)
        .load()
    )
    out, cp = tmp_path / "out", tmp_path / "cp"
    q = _to_parquet(df, out, cp)
    assert not any(p["numInputRows"] for p in q.recentProgress)
    later = produce(spark_broker.bootstrap_servers, topic_name, 6, partitions=2, start=10)
    _to_parquet(df, out, cp)
    assert _values(spark, out) == sorted(s.value.decode() for s in later)


def test_min_partitions_splits_a_micro_batch_into_more_tasks(
    spark: Any, spark_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    """One Kafka partition's range split into ``minPartitions`` input partitions: the file sink
    writes one file per non-empty task, so four files, holding every record once."""
    spark_broker.create_topic(topic_name, 1)
    sent = produce(spark_broker.bootstrap_servers, topic_name, 40, partitions=1)
    df = _stream(spark, spark_broker.bootstrap_servers, topic_name, minPartitions="4")
    q = _to_parquet(df, tmp_path / "out", tmp_path / "cp")
    assert q.exception() is None
    assert len(list((tmp_path / "out").glob("part-*.parquet"))) == 4
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(r["offset"] for r in rows) == list(range(40))
    assert _values(spark, tmp_path / "out") == sorted(s.value.decode() for s in sent)


def test_min_offsets_per_trigger_with_max_trigger_delay(
    spark: Any, spark_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    """As Spark's Kafka source: a query's first trigger runs what there is; after it, triggers
    that find fewer than ``minOffsetsPerTrigger`` new records are skipped, until enough arrive
    or ``maxTriggerDelay`` has passed since the last batch."""
    bootstrap = spark_broker.bootstrap_servers
    spark_broker.create_topic(topic_name, 2)
    produce(bootstrap, topic_name, 3, partitions=2)
    cp = tmp_path / "cp"

    def start(delay: str) -> Any:
        df = _stream(spark, bootstrap, topic_name, minOffsetsPerTrigger="6", maxTriggerDelay=delay)
        return (
            df.writeStream.format("noop")
            .option("checkpointLocation", str(cp))
            .trigger(processingTime="100 milliseconds")
            .start()
        )

    def batches(q: Any) -> list[int]:
        return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]

    q = start("1h")
    try:
        q.processAllAvailable()  # the first trigger runs below the minimum
        assert batches(q) == [3]
        produce(bootstrap, topic_name, 2, partitions=2, start=3)
        # processAllAvailable returns after a trigger that planned no batch; the second call's
        # trigger began after the two records were acknowledged, so it saw them and skipped
        q.processAllAvailable()
        q.processAllAvailable()
        assert batches(q) == [3]
        # (a trigger seeing only some of the 4 sees at most 2 + 3, under the minimum of 6)
        produce(bootstrap, topic_name, 4, partitions=2, start=5)
        q.processAllAvailable()
        assert batches(q) == [3, 6]  # 2 + 4 reached the minimum: one batch of both
    finally:
        q.stop()

    produce(bootstrap, topic_name, 1, partitions=2, start=9)
    q = start("2s")
    try:
        q.processAllAvailable()
        assert batches(q) == [1]  # a restarted query's first trigger runs too
        produce(bootstrap, topic_name, 1, partitions=2, start=10)
        deadline = time.monotonic() + 120
        while len(batches(q)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        # one record, below the minimum: only the delay can have run this batch
        assert batches(q) == [1, 1]
        first, second = (p for p in q.recentProgress if p["numInputRows"])
        waited = _ms(second["timestamp"]) - _ms(first["timestamp"])
        assert waited >= 1500, waited  # not before ~maxTriggerDelay after the previous batch
    finally:
        q.stop()
