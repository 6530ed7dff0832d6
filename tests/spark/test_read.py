"""Batch reads (``spark.read.format("kafkalite")``) against an embedded broker: what Spark
returns is what was produced, keys, headers and timestamps included."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from tests.spark.conftest import kafka_rows, produce


def _read(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_subscribe_reads_what_was_produced(spark: Any, spark_broker: Any, topic_name: str) -> None:
    spark_broker.create_topic(topic_name, 3)
    sent = produce(spark_broker.bootstrap_servers, topic_name, 60, partitions=3, headers=True)
    df = _read(spark, spark_broker.bootstrap_servers, subscribe=topic_name, includeHeaders="true")
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
    ]  # fmt: skip
    assert kafka_rows(df) == sent
    assert {r[0] for r in df.select("timestampType").distinct().collect()} == {0}  # CreateTime
    assert any(s.key is None for s in sent) and all(s.headers for s in sent)


@pytest.mark.parametrize("direct", ["true", "false"])
def test_both_executor_read_paths_give_what_was_produced(
    spark: Any, spark_broker: Any, topic_name: str, direct: str
) -> None:
    # directFetch=true (the default): Fetch requests decoded into columns; false: the
    # confluent-kafka consumer (tests/spark/test_direct_fetch.py compares them range by range)
    spark_broker.create_topic(topic_name, 2)
    sent = produce(spark_broker.bootstrap_servers, topic_name, 40, partitions=2, headers=True)
    df = _read(
        spark,
        spark_broker.bootstrap_servers,
        subscribe=topic_name,
        includeHeaders="true",
        directFetch=direct,
    )
    assert kafka_rows(df) == sent


def test_subscribe_pattern_and_case_insensitive_options(
    spark: Any, spark_broker: Any, topic_name: str
) -> None:
    # option names in any case; values (topic names, patterns) kept as given
    a, b, other = f"{topic_name}-Orders", f"{topic_name}-Refunds", f"x{topic_name}-Orders"
    for t in (a, b, other):
        spark_broker.create_topic(t, 2)
    sent = produce(spark_broker.bootstrap_servers, a, 10, partitions=2)
    sent += produce(spark_broker.bootstrap_servers, b, 7, partitions=2)
    produce(spark_broker.bootstrap_servers, other, 5, partitions=2)
    df = (
        spark.read.format("kafkalite")
        .option("KAFKA.BOOTSTRAP.SERVERS", spark_broker.bootstrap_servers)
        .option("SubscribePattern", f"{topic_name}-[A-Z].*")
        .load()
    )
    assert "headers" not in df.columns
    assert kafka_rows(df, with_headers=False) == sorted(
        sent, key=lambda s: (s.topic, s.partition, s.offset)
    )


def test_assign_with_json_offsets_and_min_partitions(
    spark: Any, spark_broker: Any, topic_name: str
) -> None:
    spark_broker.create_topic(topic_name, 3)
    sent = produce(spark_broker.bootstrap_servers, topic_name, 90, partitions=3, headers=True)
    df = _read(
        spark,
        spark_broker.bootstrap_servers,
        assign=json.dumps({topic_name: [1, 2]}),
        startingOffsets=json.dumps({topic_name: {"1": 5, "2": -2}}),
        endingOffsets=json.dumps({topic_name: {"1": 25, "2": -1}}),
        includeHeaders="true",
        minPartitions="8",
    )
    want = [s for s in sent if (s.partition == 1 and 5 <= s.offset < 25) or s.partition == 2]
    assert kafka_rows(df) == want
    # 50 records over 2 ranges split into about 8 input partitions
    assert df.rdd.getNumPartitions() >= 7


def test_starting_timestamp(spark: Any, spark_broker: Any, topic_name: str) -> None:
    spark_broker.create_topic(topic_name, 2)
    sent = produce(spark_broker.bootstrap_servers, topic_name, 40, partitions=2)
    cut = 1_700_000_000_000 + 30
    df = _read(
        spark, spark_broker.bootstrap_servers, subscribe=topic_name, startingTimestamp=str(cut)
    )
    assert kafka_rows(df, with_headers=False) == [s for s in sent if s.timestamp_ms >= cut]
    by_partition = json.dumps({topic_name: {"0": cut, "1": 1_700_000_000_000}})
    df = _read(
        spark,
        spark_broker.bootstrap_servers,
        subscribe=topic_name,
        startingOffsetsByTimestamp=by_partition,
    )
    assert kafka_rows(df, with_headers=False) == [
        s for s in sent if s.partition == 1 or s.timestamp_ms >= cut
    ]


def test_bad_options_are_rejected(spark: Any, spark_broker: Any, topic_name: str) -> None:
    with pytest.raises(Exception, match="exactly one of"):
        _read(spark, spark_broker.bootstrap_servers, subscribe="a", assign='{"a":[0]}').collect()
    with pytest.raises(Exception, match="startingOffsets"):
        _read(
            spark, spark_broker.bootstrap_servers, subscribe="a", startingOffsets="latest"
        ).collect()


def test_json_offsets_must_name_every_partition_read(
    spark: Any, spark_broker: Any, topic_name: str
) -> None:
    """As Spark's Kafka source: a JSON of offsets that leaves a partition out fails the query
    (it does not quietly start that partition somewhere)."""
    spark_broker.create_topic(topic_name, 2)
    produce(spark_broker.bootstrap_servers, topic_name, 4)
    for key in ("startingOffsets", "endingOffsets"):
        with pytest.raises(Exception, match="must specify all TopicPartitions"):
            _read(
                spark,
                spark_broker.bootstrap_servers,
                subscribe=topic_name,
                **{key: json.dumps({topic_name: {"0": -2 if key[0] == "s" else -1}})},
            ).collect()
    both = json.dumps({topic_name: {"0": -2, "1": -2}})
    assert (
        _read(
            spark, spark_broker.bootstrap_servers, subscribe=topic_name, startingOffsets=both
        ).count()
        == 4
    )


def test_fail_on_data_loss_in_a_batch_read(spark: Any, spark_broker: Any, topic_name: str) -> None:
    """Offsets asked for but deleted (DeleteRecords moves the log start as retention does)."""
    spark_broker.create_topic(topic_name, 1)
    sent = produce(spark_broker.bootstrap_servers, topic_name, 20)
    admin = AdminClient({"bootstrap.servers": spark_broker.bootstrap_servers})
    for fut in admin.delete_records([TopicPartition(topic_name, 0, 8)]).values():
        fut.result(30)
    start = json.dumps({topic_name: {"0": 0}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        _read(
            spark, spark_broker.bootstrap_servers, subscribe=topic_name, startingOffsets=start
        ).collect()
    df = _read(
        spark,
        spark_broker.bootstrap_servers,
        subscribe=topic_name,
        startingOffsets=start,
        failOnDataLoss="false",
    )
    assert kafka_rows(df, with_headers=False) == [s for s in sent if s.offset >= 8]
