"""Kafka 4.2 client APIs kafkalite added for compatibility, driven by kafka-python's
admin client (a stock client exposing them): DescribeTopicPartitions with its cursor,
the ApiVersions feature fields and UpdateFeatures."""

from __future__ import annotations

import datetime
import time
import uuid

import pytest
from kafka import KafkaAdminClient
from kafka.errors import InvalidUpdateVersionError
from kio.schema.fetch.v18 import request as fetch_v18
from kio.schema.init_producer_id.v6 import request as init_v6
from kio.schema.produce.v13 import request as produce_v13

from kafkalite.protocol.records import build_batch
from kafkalite.server import features
from tests.server.raw_client import RawClient


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
        "supported": (0, 2),
        "finalized": (2, 2),
        "finalized_epoch": 0,
    }
    assert f["group.version"]["finalized"] == (1, 1)
    assert f["share.version"]["supported"] == (0, features.SHARE_VERSION)
    # a ZooKeeper-mode broker supports metadata.version but never finalizes it
    assert f["metadata.version"] == {"supported": (1, 21)}


def test_update_features_accepts_only_the_implemented_levels(admin):
    assert admin.update_features({"group.version": 1}) == {"group.version": "OK"}
    assert admin.update_features({"transaction.version": 2}) == {"transaction.version": "OK"}
    with pytest.raises(InvalidUpdateVersionError, match="at level 1 only"):
        admin.update_features({"group.version": 2})
    with pytest.raises(InvalidUpdateVersionError, match="safe or unsafe downgrade"):
        admin.update_features({"group.version": 0})


def test_produce_v13_addresses_topics_by_id_and_fetch_v18_reads_them(admin, kafka_broker):
    topic_id = admin.describe_topic_partitions(["dtp-b"])["topics"][0]["topic_id"]
    batch = build_batch([(b"k", b"by-id", [], int(time.time() * 1000))])

    def produce(tid: uuid.UUID):
        req = produce_v13.ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout=datetime.timedelta(seconds=10),
            topic_data=(
                produce_v13.TopicProduceData(
                    topic_id=tid,
                    partition_data=(produce_v13.PartitionProduceData(index=1, records=batch),),
                ),
            ),
        )
        return c.call(0, 13, req).responses[0]

    c = RawClient.to(kafka_broker.bootstrap_servers)
    try:
        ok = produce(uuid.UUID(str(topic_id)))
        assert ok.topic_id == uuid.UUID(str(topic_id))
        assert ok.partition_responses[0].error_code == 0
        unknown = produce(uuid.uuid4()).partition_responses[0]
        assert unknown.error_code == 100  # UNKNOWN_TOPIC_ID
        fetch = fetch_v18.FetchRequest(
            max_wait=datetime.timedelta(0),
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=(
                fetch_v18.FetchTopic(
                    topic_id=uuid.UUID(str(topic_id)),
                    partitions=(
                        fetch_v18.FetchPartition(
                            partition=1,
                            current_leader_epoch=-1,
                            fetch_offset=0,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=1 << 20,
                            high_watermark=5,  # v18's tagged field, ignored by a leader
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
        got = c.call(1, 18, fetch).responses[0].partitions[0]
        assert got.error_code == 0 and b"by-id" in bytes(got.records)
    finally:
        c.close()


def test_init_producer_id_v6_refuses_two_phase_commit(kafka_broker):
    c = RawClient.to(kafka_broker.bootstrap_servers)
    try:

        def init(tid: str | None = "tx-2pc", **kw):
            req = init_v6.InitProducerIdRequest(
                transactional_id=tid,
                transaction_timeout=datetime.timedelta(seconds=60),
                **kw,
            )
            return c.call(22, 6, req)

        assert init(enable2_pc=True).error_code == 42  # INVALID_REQUEST
        assert init(keep_prepared_txn=True).error_code == 42
        ok = init(None)  # an idempotent producer at v6
        assert ok.error_code == 0 and ok.producer_id >= 0
        assert (ok.ongoing_txn_producer_id, ok.ongoing_txn_producer_epoch) == (-1, -1)
    finally:
        c.close()
