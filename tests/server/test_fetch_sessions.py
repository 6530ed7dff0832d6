"""Incremental fetch sessions (KIP-227), seed 000 behaviours 23-26."""

from __future__ import annotations

import datetime
import time

import pytest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic

from kafkalite.protocol.errors import ErrorCode
from tests.server.raw_client import RawClient
from tests.server.test_protocol_edges import batch, produce


def fetch_req(session_id, epoch, parts, forgotten=(), replica_id=-1):
    topics = {}
    for t, p, off in parts:
        topics.setdefault(t, []).append(
            FetchPartition(partition=p, fetch_offset=off, partition_max_bytes=1 << 20)
        )
    return FetchRequest(
        replica_id=replica_id,
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


def test_session_id_zero_with_a_positive_epoch_is_fetch_session_id_not_found(client, kafka_topic):
    # Kafka: epochs other than 0/-1 are incremental, and session 0 never exists
    resp = client.call(1, 12, fetch_req(0, 1, [(kafka_topic, 0, 0)]))
    assert resp.error_code == ErrorCode.fetch_session_id_not_found
    assert resp.session_id == 0 and resp.responses == ()


def test_forgetting_every_partition_closes_the_session(client, kafka_topic):
    sid = client.call(1, 12, fetch_req(0, 0, [(kafka_topic, 0, 0)])).session_id
    resp = client.call(1, 12, fetch_req(sid, 1, [], forgotten=[(kafka_topic, 0)]))
    assert resp.error_code == ErrorCode.none and resp.session_id == 0
    assert (
        client.call(1, 12, fetch_req(sid, 2, [])).error_code == ErrorCode.fetch_session_id_not_found
    )


def test_a_full_request_naming_a_session_closes_it(client, kafka_topic):
    sid = client.call(1, 12, fetch_req(0, 0, [(kafka_topic, 0, 0)])).session_id
    new = client.call(1, 12, fetch_req(sid, 0, [(kafka_topic, 1, 0)])).session_id
    assert new not in (0, sid)
    assert client.call(1, 12, fetch_req(sid, 1, [])).error_code == (
        ErrorCode.fetch_session_id_not_found
    )
    assert client.call(1, 12, fetch_req(new, 1, [])).error_code == ErrorCode.none


# ---- the bounded session cache ------------------------------------------------------
@pytest.fixture
def small_cache(kafka_broker_factory):
    def make(slots, eviction_ms=120000):
        b = kafka_broker_factory(
            **{
                "max.incremental.fetch.session.cache.slots": slots,
                "min.incremental.fetch.session.eviction.ms": eviction_ms,
            }
        )
        b.create_topic("cached", partitions=3)
        client = RawClient.to(b.bootstrap_servers)
        client.call(0, 9, produce("cached", batch(2), partition=0))
        return b, client

    made = []

    def factory(*a, **kw):
        b, c = make(*a, **kw)
        made.append(c)
        return b, c

    yield factory
    for c in made:
        c.close()


def test_full_cache_serves_new_fetchers_without_a_session(small_cache):
    b, c = small_cache(2)
    a = c.call(1, 12, fetch_req(0, 0, [("cached", 0, 0)])).session_id
    bb = c.call(1, 12, fetch_req(0, 0, [("cached", 1, 0)])).session_id
    assert 0 not in (a, bb) and a != bb
    third = c.call(1, 12, fetch_req(0, 0, [("cached", 0, 0)]))
    # no room and nothing evictable (both sessions are new): served sessionless, with data
    assert third.error_code == ErrorCode.none and third.session_id == 0
    assert parts_of(third)[("cached", 0)].records
    assert len(b.kafka.fetch_sessions) == 2
    for sid in (a, bb):
        assert c.call(1, 12, fetch_req(sid, 1, [])).error_code == ErrorCode.none


def test_a_follower_session_evicts_a_consumer_session(small_cache):
    b, c = small_cache(1)
    consumer = c.call(1, 12, fetch_req(0, 0, [("cached", 0, 0)])).session_id
    assert consumer != 0
    c.sign_in_as_broker(b.kafka, 1)  # follower fetches need a broker's signed request
    follower = c.call(1, 12, fetch_req(0, 0, [], replica_id=1))
    # followers' sessions are privileged: they may evict any consumer session
    assert follower.error_code == ErrorCode.none and follower.session_id != 0
    assert c.call(1, 12, fetch_req(consumer, 1, [])).error_code == (
        ErrorCode.fetch_session_id_not_found
    )
    # ...but a consumer cannot evict the (new) privileged session
    again = c.call(1, 12, fetch_req(0, 0, [("cached", 0, 0), ("cached", 1, 0)]))
    assert again.session_id == 0
    assert b.kafka.fetch_sessions.evictions == 1


def test_a_session_unused_for_the_eviction_time_is_evicted(small_cache):
    b, c = small_cache(1, eviction_ms=300)
    old = c.call(1, 12, fetch_req(0, 0, [("cached", 0, 0)])).session_id
    assert c.call(1, 12, fetch_req(0, 0, [("cached", 1, 0)])).session_id == 0
    time.sleep(0.5)  # longer than min.incremental.fetch.session.eviction.ms
    new = c.call(1, 12, fetch_req(0, 0, [("cached", 1, 0)])).session_id
    assert new not in (0, old)
    assert c.call(1, 12, fetch_req(old, 1, [])).error_code == ErrorCode.fetch_session_id_not_found


def test_a_bigger_session_evicts_an_older_smaller_one_in_use(small_cache):
    b, c = small_cache(1, eviction_ms=300)
    busy = c.call(1, 12, fetch_req(0, 0, [("cached", 0, 0)])).session_id
    epoch = 1
    deadline = time.monotonic() + 0.6
    while time.monotonic() < deadline:  # keep it in use: never stale, but no longer new
        assert c.call(1, 12, fetch_req(busy, epoch, [])).error_code == ErrorCode.none
        epoch += 1
        time.sleep(0.05)
    # as many partitions (a tie on size) is not enough...
    assert c.call(1, 12, fetch_req(0, 0, [("cached", 1, 0)])).session_id == 0
    # ...more partitions is
    bigger = c.call(1, 12, fetch_req(0, 0, [("cached", 1, 0), ("cached", 2, 0)])).session_id
    assert bigger not in (0, busy)
    assert c.call(1, 12, fetch_req(busy, epoch, [])).error_code == (
        ErrorCode.fetch_session_id_not_found
    )
