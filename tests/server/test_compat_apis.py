"""Kafka 4.2 client APIs kafkalite added for compatibility, driven by kafka-python's
admin client (a stock client exposing them): DescribeTopicPartitions with its cursor,
the ApiVersions feature fields and UpdateFeatures."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient
from kafka.errors import InvalidUpdateVersionError

from kafkalite.server import features


@pytest.fixture(scope="module")
def admin(kafka_broker):
    kafka_broker.create_topic("dtp-a", partitions=3)
    kafka_broker.create_topic("dtp-b", partitions=2)
    a = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers, client_id="compat")
    yield a
    a.close()


def test_describe_topic_partitions_pages_with_a_cursor(admin):
    pages, cursor = [], None
    while True:
        r = admin.describe_topic_partitions(
            ["dtp-b", "dtp-a", "missing"], response_partition_limit=2, cursor=cursor
        )
        pages.append(
            [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in r["topics"]]
        )
        cursor = r["next_cursor"]
        if cursor is None:
            break
    # name order, two partitions a page, resuming mid-topic; the unknown topic last, in error
    assert pages == [
        [("dtp-a", [0, 1])],
        [("dtp-a", [2]), ("dtp-b", [0])],
        [("dtp-b", [1]), ("missing", [])],
    ]
    last = r["topics"]
    assert last[1]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    p = last[0]["partitions"][0]
    assert p["leader_id"] >= 0 and p["replica_nodes"] == p["isr_nodes"] == [p["leader_id"]]
    assert last[0]["topic_authorized_operations"] == 3576  # every topic operation


def test_describe_topic_partitions_cursor_must_name_a_requested_topic(admin):
    r = admin.describe_topic_partitions(
        ["dtp-a"], cursor={"topic_name": "dtp-b", "partition_index": 0}
    )
    assert [t["error_code"] for t in r["topics"]] == [42]  # INVALID_REQUEST


def test_features_report_what_kafkalite_implements(admin):
    f = admin.describe_features()
    assert f["transaction.version"] == {
        "supported": (0, 1),
        "finalized": (1, 1),
        "finalized_epoch": 0,
    }
    assert f["group.version"]["finalized"] == (1, 1)
    assert f["share.version"]["supported"] == (0, features.SHARE_VERSION)
    # a ZooKeeper-mode broker supports metadata.version but never finalizes it
    assert f["metadata.version"] == {"supported": (1, 21)}


def test_update_features_accepts_only_the_implemented_levels(admin):
    assert admin.update_features({"group.version": 1}) == {"group.version": "OK"}
    with pytest.raises(InvalidUpdateVersionError, match="at level 1 only"):
        admin.update_features({"transaction.version": 2})
    with pytest.raises(InvalidUpdateVersionError, match="safe or unsafe downgrade"):
        admin.update_features({"group.version": 0})
