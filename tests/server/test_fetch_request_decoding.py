"""Fetch requests as the broker's own parser reads them, over TCP.

Truncated requests close the connection and nothing else; the fields that moved
between versions (replica_id into the replica_state tag at v15, topic ids at v13)
reach the handler.
"""

from __future__ import annotations

import uuid

import pytest

from kafkalite.protocol import messages
from kafkalite.protocol.errors import ErrorCode
from tests.replica.wire import set_replicas
from tests.server.raw_client import RawClient, api_versions, request_bytes
from tests.server.test_protocol_edges import batch, produce

FOLLOWER = 99


def _fetch(version: int, topic: str, topic_id: uuid.UUID, offset: int, **fields) -> object:
    body = {
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "topic_id": topic_id,
                "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                ],
            }
        ],
        **fields,
    }
    return messages.build(messages.request_type(1, version), body)


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_truncated_fetch_closes_only_its_connection(kafka_bootstrap, kafka_topic, version):
    other = RawClient.to(kafka_bootstrap)
    bad = RawClient.to(kafka_bootstrap)
    try:
        tid = uuid.UUID(int=1)
        frame = request_bytes(1, version, 7, _fetch(version, kafka_topic, tid, 0))
        # drop the body's last 3 bytes (the frame's length prefix says the shorter size)
        payload = frame[4:-3]
        bad.send_raw(len(payload).to_bytes(4, "big") + payload)
        assert bad.is_closed()
        assert other.call(18, 3, api_versions()).error_code == ErrorCode.none
    finally:
        other.close()
        bad.close()


def test_zero_topic_id_gets_unknown_topic_id(kafka_bootstrap):
    c = RawClient.to(kafka_bootstrap)
    try:
        resp = c.call(1, 13, _fetch(13, "", uuid.UUID(int=0), 0))
        part = resp.responses[0].partitions[0]
        assert part.error_code == ErrorCode.unknown_topic_id
    finally:
        c.close()


def test_follower_named_in_the_replica_state_tag_reads_past_the_hw(kafka_broker_factory):
    """v15+ carries replica_id only in the replica_state tag: a follower fetch must
    still read up to the log end and move the high watermark."""
    b = kafka_broker_factory()
    b.create_topic("rep", 1)
    set_replicas(b, "rep", isr=[0, FOLLOWER], replicas=[0, FOLLOWER])
    tid = b.kafka.metadata_cache.get_topic("rep").topic_id
    c = RawClient.to(b.bootstrap_servers)
    try:
        assert (
            c.call(0, 9, produce("rep", batch(3))).responses[0].partition_responses[0].error_code
            == 0
        )
        consumer = c.call(1, 15, _fetch(15, "rep", tid, 0)).responses[0].partitions[0]
        assert consumer.high_watermark == 0 and not consumer.records  # the follower lags
        c.sign_in_as_broker(b.kafka, FOLLOWER)  # follower fetches need a broker's signature
        follower_state = {"replica_state": {"replica_id": FOLLOWER, "replica_epoch": 1}}
        got = c.call(1, 15, _fetch(15, "rep", tid, 0, **follower_state)).responses[0]
        assert got.partitions[0].error_code == 0 and len(got.partitions[0].records) > 61
        c.call(1, 15, _fetch(15, "rep", tid, 3, **follower_state))  # it has them: HW -> 3
        consumer = c.call(1, 16, _fetch(16, "rep", tid, 0)).responses[0].partitions[0]
        assert consumer.high_watermark == 3 and len(consumer.records) > 61
    finally:
        c.close()
