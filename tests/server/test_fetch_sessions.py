"""Incremental fetch sessions (KIP-227), seed 000 behaviours 23-26."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic

from kafkalite.protocol.errors import ErrorCode
from tests.server.raw_client import RawClient
from tests.server.test_protocol_edges import batch, produce


def fetch_req(session_id, epoch, parts, forgotten=()):
    topics = {}
    for t, p, off in parts:
        topics.setdefault(t, []).append(
            FetchPartition(partition=p, fetch_offset=off, partition_max_bytes=1 << 20)
        )
    return FetchRequest(
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=tuple(FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in topics.items()),
        forgotten_topics_data=tuple(ForgottenTopic(topic=t, partitions=(p,)) for t, p in forgotten),
        rack_id="",
    )


def parts_of(resp):
    return {(t.topic, p.partition_index): p for t in resp.responses for p in t.partitions}


@pytest.fixture
def client(kafka_bootstrap):
    c = RawClient.to(kafka_bootstrap)
    yield c
    c.close()


def test_full_fetch_with_epoch_0_creates_a_session(client, kafka_topic):
    resp = client.call(1, 12, fetch_req(0, 0, [(kafka_topic, 0, 0), (kafka_topic, 1, 0)]))
    assert resp.error_code == ErrorCode.none
    assert resp.session_id != 0
    assert set(parts_of(resp)) == {(kafka_topic, 0), (kafka_topic, 1)}


def test_incremental_fetch_returns_new_data_for_cached_partitions_only(client, kafka_topic):
    first = client.call(1, 12, fetch_req(0, 0, [(kafka_topic, 0, 0), (kafka_topic, 1, 0)]))
    sid = first.session_id
    # nothing changed: an incremental response carries no partitions
    quiet = client.call(1, 12, fetch_req(sid, 1, []))
    assert quiet.session_id == sid and parts_of(quiet) == {}
    client.call(0, 9, produce(kafka_topic, batch(4), partition=1))
    inc = client.call(1, 12, fetch_req(sid, 2, []))
    got = parts_of(inc)
    assert set(got) == {(kafka_topic, 1)}
    assert got[(kafka_topic, 1)].high_watermark == 4 and got[(kafka_topic, 1)].records


def test_forgotten_partition_is_no_longer_returned(client, kafka_topic):
    sid = client.call(1, 12, fetch_req(0, 0, [(kafka_topic, 0, 0), (kafka_topic, 1, 0)])).session_id
    client.call(1, 12, fetch_req(sid, 1, [], forgotten=[(kafka_topic, 0)]))
    client.call(0, 9, produce(kafka_topic, batch(2), partition=0))
    client.call(0, 9, produce(kafka_topic, batch(2), partition=1))
    got = parts_of(client.call(1, 12, fetch_req(sid, 2, [])))
    assert set(got) == {(kafka_topic, 1)}


def test_wrong_epoch_and_unknown_session_errors(client, kafka_topic):
    sid = client.call(1, 12, fetch_req(0, 0, [(kafka_topic, 0, 0)])).session_id
    assert (
        client.call(1, 12, fetch_req(sid, 5, [])).error_code
        == ErrorCode.invalid_fetch_session_epoch
    )
    assert (
        client.call(1, 12, fetch_req(sid ^ 0x5A5A, 1, [])).error_code
        == ErrorCode.fetch_session_id_not_found
    )


def test_sessionless_fetch_gets_session_id_zero(client, kafka_topic):
    resp = client.call(1, 12, fetch_req(0, -1, [(kafka_topic, 0, 0)]))
    assert resp.session_id == 0 and resp.error_code == ErrorCode.none
