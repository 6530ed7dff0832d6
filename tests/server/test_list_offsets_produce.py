"""ListOffsets and Produce response fields on the wire: max-timestamp (-3) and its
cap below the high watermark, read_committed latest = LSO, log_append_time on
LogAppendTime topics, topic-level max.message.bytes."""

from __future__ import annotations

import time

import pytest
from kio.schema.list_offsets.v8.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import build_batch
from tests.server.raw_client import RawClient
from tests.server.test_protocol_edges import fetch, produce

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


def list_offsets(c: RawClient, topic: str, ts: int, *, partition=0, isolation=0):
    resp = c.call(
        2,
        8,
        ListOffsetsRequest(
            replica_id=-1,
            isolation_level=isolation,
            topics=(
                ListOffsetsTopic(
                    name=topic,
                    partitions=(ListOffsetsPartition(partition_index=partition, timestamp=ts),),
                ),
            ),
        ),
    )
    return resp.topics[0].partitions[0]


def ts_of(p) -> int:
    return int(p.timestamp)


@pytest.fixture
def broker(kafka_broker_factory):
    return kafka_broker_factory()


@pytest.fixture
def client(broker):
    c = RawClient.to(broker.bootstrap_servers)
    yield c
    c.close()


def test_max_timestamp_returns_the_record_with_the_largest_timestamp(broker, client):
    broker.create_topic("maxts")
    now = int(time.time() * 1000)
    # offsets 0..2 in one batch, 3..4 in another; the largest timestamp is offset 1
    b1 = build_batch(
        [(b"a", b"0", [], now - 500), (b"b", b"1", [], now + 900), (b"c", b"2", [], now)]
    )
    b2 = build_batch([(b"d", b"3", [], now - 100), (b"e", b"4", [], now + 100)])
    for b in (b1, b2):
        assert (
            client.call(0, 9, produce("maxts", b)).responses[0].partition_responses[0].error_code
            == 0
        )
    p = list_offsets(client, "maxts", MAX_TIMESTAMP)
    assert p.error_code == ErrorCode.none
    assert (p.offset, ts_of(p)) == (1, now + 900)
    assert p.leader_epoch == 0
    # an empty partition has no max timestamp: NONE with -1s
    broker.create_topic("maxts-empty")
    e = list_offsets(client, "maxts-empty", MAX_TIMESTAMP)
    assert (e.error_code, e.offset, ts_of(e), e.leader_epoch) == (ErrorCode.none, -1, -1, -1)


def test_timestamp_lookups_stay_below_the_high_watermark(broker, client):
    """Kafka filters every timestamp lookup (max timestamp included) to offsets below
    the last fetchable offset. A single broker's HW follows its log end at once, so the
    test holds the HW back the way a lagging follower would (Log.update_high_watermark)."""
    broker.create_topic("capped")
    now = int(time.time() * 1000)
    client.call(0, 9, produce("capped", build_batch([(b"k", b"v", [], now - 1000)] * 3)))
    client.call(0, 9, produce("capped", build_batch([(b"k", b"late", [], now + 5000)])))
    plog = broker.kafka.replica_manager.get_partition(("capped", 0)).log
    assert plog.high_watermark == 4

    def hold_hw(hw: int) -> None:
        async def go():
            plog.update_high_watermark(hw)

        broker.call(go)

    hold_hw(3)
    try:
        p = list_offsets(client, "capped", MAX_TIMESTAMP)
        assert (p.error_code, p.offset, ts_of(p)) == (ErrorCode.none, -1, -1)
        p = list_offsets(client, "capped", now + 1)  # first ts >= now+1 is offset 3 >= HW
        assert (p.error_code, p.offset) == (ErrorCode.none, -1)
        assert list_offsets(client, "capped", LATEST).offset == 3
        assert list_offsets(client, "capped", LATEST, isolation=1).offset == 3
        # a consumer fetch agrees: HW and LSO are 3
        part = client.call(1, 12, fetch("capped", 0)).responses[0].partitions[0]
        assert (part.high_watermark, part.last_stable_offset) == (3, 3)
    finally:
        hold_hw(4)
    p = list_offsets(client, "capped", MAX_TIMESTAMP)
    assert (p.offset, ts_of(p)) == (3, now + 5000)


def test_read_committed_latest_is_the_last_stable_offset(broker, client):
    broker.create_topic("lso", partitions=1)
    for n in (3, 4):
        client.call(0, 9, produce("lso", build_batch([(b"k", b"v")] * n)))
    part = client.call(1, 12, fetch("lso", 0)).responses[0].partitions[0]
    committed = list_offsets(client, "lso", LATEST, isolation=1)
    uncommitted = list_offsets(client, "lso", LATEST, isolation=0)
    assert committed.error_code == ErrorCode.none
    # no transactions: LSO == HW == 7, and read_committed latest reports the LSO
    assert part.last_stable_offset == part.high_watermark == 7
    assert committed.offset == part.last_stable_offset
    assert uncommitted.offset == part.high_watermark
    assert list_offsets(client, "lso", EARLIEST, isolation=1).offset == 0


def test_produce_log_append_time_is_broker_time_on_log_append_time_topics(broker, client):
    broker.create_topic("appendtime", config={"message.timestamp.type": "LogAppendTime"})
    broker.create_topic("createtime")
    old = 1_600_000_000_000
    before = int(time.time() * 1000)
    r = client.call(0, 9, produce("appendtime", build_batch([(b"k", b"v", [], old)] * 2)))
    after = int(time.time() * 1000)
    p = r.responses[0].partition_responses[0]
    assert p.error_code == ErrorCode.none
    lat = int(p.log_append_time.timestamp() * 1000)
    assert before <= lat <= after
    # the stored records carry that time, not the producer's
    assert {rec.timestamp for rec in broker.records("appendtime")} == {lat}
    # CreateTime topics answer -1 and keep the producer's timestamp
    r = client.call(0, 9, produce("createtime", build_batch([(b"k", b"v", [], before)])))
    p = r.responses[0].partition_responses[0]
    assert p.error_code == ErrorCode.none and p.log_append_time is None  # -1 on the wire
    assert [rec.timestamp for rec in broker.records("createtime")] == [before]


def test_topic_max_message_bytes_rejects_larger_batches(broker, client):
    broker.create_topic("small-msgs", config={"max.message.bytes": "1000"})
    big = build_batch([(b"k", b"v" * 2000)])
    small = build_batch([(b"k", b"v" * 100)])
    p = client.call(0, 9, produce("small-msgs", big)).responses[0].partition_responses[0]
    assert p.error_code == ErrorCode.message_too_large
    assert broker.records("small-msgs") == []
    p = client.call(0, 9, produce("small-msgs", small)).responses[0].partition_responses[0]
    assert (p.error_code, p.base_offset) == (ErrorCode.none, 0)
    # the broker-wide message.max.bytes is far larger: the topic override is what counts
    assert broker.kafka.config["message.max.bytes"] > len(big)
