"""Writes (``df.write`` / ``df.writeStream`` with ``format("kafkalite")``): round trips,
and the exactly-once mode under a forced restart."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.spark.conftest import kafka_rows, produce


def _read(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    reader = (
        spark.read.format("kafkalite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_write_round_trip(spark: Any, spark_broker: Any, topic_name: str) -> None:
    spark_broker.create_topic(topic_name, 3)
    rows = [
        (f"k{i}" if i % 4 else None, f"v{i}".encode(), i % 3, [(f"h{i}", f"x{i}".encode())])
        for i in range(30)
    ]
    df = spark.createDataFrame(
        rows,
        "key string, value binary, partition int, headers array<struct<key:string,value:binary>>",
    )
    df.write.format("kafkalite").mode("append").option(
        "kafka.bootstrap.servers", spark_broker.bootstrap_servers
    ).option("topic", topic_name).save()
    got = kafka_rows(_read(spark, spark_broker.bootstrap_servers, topic_name))
    assert sorted((s.value, s.key, s.partition, s.headers) for s in got) == sorted(
        (v, k.encode() if k else None, p, tuple(h)) for k, v, p, h in rows
    )


def test_keyed_rows_go_where_the_java_client_puts_them(
    spark: Any, spark_broker: Any, topic_name: str
) -> None:
    """Without a partition column a key picks its partition by murmur2, as Spark's JVM sink
    (the Java producer) does, so keyed data lands in the same partitions either way."""
    from kafka.partitioner.default import murmur2

    spark_broker.create_topic(topic_name, 5)
    df = spark.createDataFrame(
        [(f"user-{i}", str(i)) for i in range(40)], "key string, value string"
    )
    df.write.format("kafkalite").mode("append").option(
        "kafka.bootstrap.servers", spark_broker.bootstrap_servers
    ).option("topic", topic_name).save()
    got = kafka_rows(_read(spark, spark_broker.bootstrap_servers, topic_name))
    assert len(got) == 40
    for s in got:
        assert s.key is not None
        assert s.partition == (murmur2(s.key) & 0x7FFFFFFF) % 5


def test_batch_write_topic_column_and_validation(
    spark: Any, spark_broker: Any, topic_name: str
) -> None:
    a, b = f"{topic_name}-a", f"{topic_name}-b"
    spark_broker.create_topic(a, 1)
    spark_broker.create_topic(b, 1)
    df = spark.createDataFrame([(a, "1"), (b, "2"), (a, "3")], "topic string, value string")
    df.write.format("kafkalite").mode("append").option(
        "kafka.bootstrap.servers", spark_broker.bootstrap_servers
    ).save()
    # two tasks write in parallel: order within a topic is not defined
    got_a = sorted(s.value for s in kafka_rows(_read(spark, spark_broker.bootstrap_servers, a)))
    assert got_a == [b"1", b"3"]
    assert [s.value for s in kafka_rows(_read(spark, spark_broker.bootstrap_servers, b))] == [b"2"]
    with pytest.raises(Exception, match="topic option required"):
        spark.createDataFrame([("x",)], "value string").write.format("kafkalite").mode(
            "append"
        ).option("kafka.bootstrap.servers", spark_broker.bootstrap_servers).save()


def _copy_stream(
    spark: Any,
    bootstrap: str,
    src: str,
    dst: str,
    cp: Path,
    poison: int | None = None,
    **sink_options: str,
) -> Any:
    """kafkalite -> kafkalite, 10 records a micro-batch, until the data available at start;
    with ``poison``, the task writing that source offset fails after writing the ones before."""
    df = (
        spark.readStream.format("kafkalite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "10")
        .option("includeHeaders", "true")
        .load()
    )
    value = "value"
    if poison is not None:
        value = f"CASE WHEN offset = {poison} THEN raise_error('poisoned') ELSE value END AS value"
    writer = (
        df.selectExpr("key", value, "headers")
        .writeStream.format("kafkalite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", dst)
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
    )
    for k, v in sink_options.items():
        writer = writer.option(k, v)
    q = writer.start()
    try:
        q.awaitTermination(180)
    finally:
        q.stop()
    return q


def test_streaming_write_round_trip(
    spark: Any, spark_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    spark_broker.create_topic(src, 2)
    spark_broker.create_topic(dst, 1)
    sent = produce(spark_broker.bootstrap_servers, src, 25, partitions=2, headers=True)
    q = _copy_stream(spark, spark_broker.bootstrap_servers, src, dst, tmp_path / "cp")
    assert q.exception() is None
    got = kafka_rows(_read(spark, spark_broker.bootstrap_servers, dst))
    assert sorted((s.value, s.key, s.headers) for s in got) == sorted(
        (s.value, s.key, s.headers) for s in sent
    )


def _committed_values(bootstrap: str, topic: str) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4()}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        while True:
            m = c.poll(10)
            assert m is not None
            if m.error():
                break  # partition EOF
            out.append(m.value())
    finally:
        c.close()
    return out


def _forget_last_commit(cp: Path) -> None:
    """What a crash between the sink's write and Spark's commit log leaves: the last batch's
    offsets but not its commit."""
    last = max(int(p.name) for p in (cp / "commits").iterdir() if p.name.isdigit())
    (cp / "commits" / str(last)).unlink()
    (cp / "commits" / f".{last}.crc").unlink(missing_ok=True)


def test_exactly_once_sink_no_duplicate_under_forced_restart(
    spark: Any, spark_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    spark_broker.create_topic(src, 1)
    spark_broker.create_topic(dst, 1)
    sent = produce(spark_broker.bootstrap_servers, src, 30)
    cp = tmp_path / "cp"
    eo = {"exactlyOnce": "true", "transactionalIdPrefix": f"eo-{topic_name}"}

    # 1. batch 1 fails mid-write (its transaction holds 5 records): aborted, never visible
    with pytest.raises(Exception, match=r"USER_RAISED_EXCEPTION\] poisoned"):
        _copy_stream(spark, spark_broker.bootstrap_servers, src, dst, cp, poison=15, **eo)
    assert sorted(_committed_values(spark_broker.bootstrap_servers, dst)) == sorted(
        s.value for s in sent[:10]
    )
    q = _copy_stream(spark, spark_broker.bootstrap_servers, src, dst, cp, **eo)
    assert q.exception() is None
    assert sorted(_committed_values(spark_broker.bootstrap_servers, dst)) == sorted(
        s.value for s in sent
    )
    # 2. a crash after the sink committed batch 2 but before Spark's commit log recorded it:
    # the restart re-runs batch 2, whose task finds its (queryId, batchId) marker and skips
    _forget_last_commit(cp)
    q = _copy_stream(spark, spark_broker.bootstrap_servers, src, dst, cp, **eo)
    assert q.exception() is None
    assert any(p["numInputRows"] for p in q.recentProgress)  # the batch did run again
    values = _committed_values(spark_broker.bootstrap_servers, dst)
    assert sorted(values) == sorted(s.value for s in sent)  # no duplicate


def test_at_least_once_sink_duplicates_a_replayed_batch(
    spark: Any, spark_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    """The default mode, under the same forced restart: the replayed batch is written twice
    (what exactlyOnce=true prevents)."""
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    spark_broker.create_topic(src, 1)
    spark_broker.create_topic(dst, 1)
    sent = produce(spark_broker.bootstrap_servers, src, 25)
    cp = tmp_path / "cp"
    _copy_stream(spark, spark_broker.bootstrap_servers, src, dst, cp)
    _forget_last_commit(cp)
    _copy_stream(spark, spark_broker.bootstrap_servers, src, dst, cp)
    values = _committed_values(spark_broker.bootstrap_servers, dst)
    assert len(values) == 30 and set(values) == {s.value for s in sent}


def test_read_committed_hides_aborted(spark: Any, spark_broker: Any, topic_name: str) -> None:
    spark_broker.create_topic(topic_name, 1)
    p = Producer(
        {"bootstrap.servers": spark_broker.bootstrap_servers, "transactional.id": topic_name}
    )
    try:
        p.init_transactions(30)
    except KafkaException as e:
        pytest.fail(f"transactions unavailable: {e}")
    for n, commit in ((5, True), (4, False), (3, True)):
        p.begin_transaction()
        for i in range(n):
            p.produce(topic_name, value=f"{'c' if commit else 'a'}{i}".encode())
        p.flush(30)  # on the broker before the abort (else the client just drops them)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    bootstrap = spark_broker.bootstrap_servers
    committed = _read(spark, bootstrap, topic_name, **{"kafka.isolation.level": "read_committed"})
    values = [s.value for s in kafka_rows(committed)]
    assert values == [b"c0", b"c1", b"c2", b"c3", b"c4", b"c0", b"c1", b"c2"]
    everything = [s.value for s in kafka_rows(_read(spark, bootstrap, topic_name))]
    assert len(everything) == 12 and b"a0" in everything
    # offsets keep their gaps: the markers and aborted records are skipped, not renumbered
    assert kafka_rows(committed)[-1].offset > 8


def test_exactly_once_batch_rerun_after_some_tasks_committed(
    spark: Any, spark_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    """The case per-task transactions must get right: batch 1 has two tasks; task 0 commits
    its transaction (rows and marker), then task 1 fails, so the driver never commits the
    batch (no commits/1). The restart re-runs batch 1 from its offsets log: task 0 finds its
    ``(queryId, task 0) -> batch 1`` marker and writes nothing, task 1 writes its rows. Every
    source record ends up in the output exactly once."""
    from pyspark.sql.functions import col, udf

    bootstrap = spark_broker.bootstrap_servers
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    spark_broker.create_topic(src, 2)
    spark_broker.create_topic(dst, 1)
    sent = produce(bootstrap, src, 40, partitions=2)  # 20 a partition: 5 + 5 a batch
    cp = tmp_path / "cp"
    eo = {"exactlyOnce": "true", "transactionalIdPrefix": f"eo-{topic_name}"}

    def crash_after_task_0_committed(value: bytes, partition: int, offset: int) -> bytes:
        """In batch 1's task 1 (source partition 1, offsets 5-9): wait until task 0's
        transaction is visible (batch 0's 10 records + task 0's 5), then fail."""
        import time as t
        import uuid as u

        from confluent_kafka import Consumer as C
        from confluent_kafka import TopicPartition as TP

        if (partition, offset) != (1, 7):
            return value
        c = C(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"w-{u.uuid4()}",
                "isolation.level": "read_committed",
            }
        )
        try:
            deadline = t.monotonic() + 120
            while t.monotonic() < deadline:
                # under read_committed the high watermark is the LSO
                _, lso = c.get_watermark_offsets(TP(dst, 0), timeout=10, cached=False)
                committed = 0
                if lso > 0:
                    c.assign([TP(dst, 0, 0)])
                    while (m := c.poll(1.0)) is not None and m.error() is None:
                        committed += 1
                if committed >= 15:
                    break
                t.sleep(0.2)
        finally:
            c.close()
        raise RuntimeError("crash after task 0 committed")

    def run(crash: bool) -> Any:
        df = (
            spark.readStream.format("kafkalite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", src)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "10")
            .load()
        )
        if crash:
            hook = udf(crash_after_task_0_committed, "binary", useArrow=False)
            df = df.withColumn("value", hook(col("value"), col("partition"), col("offset")))
        writer = (
            df.select("key", "value")
            .writeStream.format("kafkalite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", dst)
            .option("checkpointLocation", str(cp))
            .trigger(availableNow=True)
        )
        for k, v in eo.items():
            writer = writer.option(k, v)
        q = writer.start()
        try:
            q.awaitTermination(180)
        finally:
            q.stop()
        return q

    with pytest.raises(Exception, match="crash after task 0 committed"):
        run(crash=True)
    assert (cp / "offsets" / "1").exists() and not (cp / "commits" / "1").exists()
    task_0 = [s.value for s in sent if s.partition == 0 and 5 <= s.offset < 10]
    batch_0 = [s.value for s in sent if s.offset < 5]
    assert sorted(_committed_values(bootstrap, dst)) == sorted(batch_0 + task_0)

    q = run(crash=False)
    assert q.exception() is None
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [10, 10, 10]
    values = _committed_values(bootstrap, dst)
    assert sorted(values) == sorted(s.value for s in sent)  # each exactly once
