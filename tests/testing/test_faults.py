"""Fault injection against a real broker, seen through stock clients and the raw wire.

Rules go on the shared broker through the ``kafka_faults`` fixture (cleared after each
test); every test uses its own topic, so rules are scoped with ``when=`` or client ids
where other traffic could match them.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as ATopicPartition
from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.protocol import messages
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing.faults import Delay, Error, api_key_of, error_code_of
from tests.server.raw_client import RawClient

N = 200


def _for_topic(topic: str):
    """A rule predicate: the request names ``topic`` (Produce, Fetch v<13, ListOffsets, ...)."""

    def match(_ctx, req) -> bool:
        for t in getattr(req, "topic_data", None) or getattr(req, "topics", None) or ():
            if topic in (getattr(t, "name", None), getattr(t, "topic", None)):
                return True
        return False

    return match


def _produce_all(producer: Producer, topic: str, values: list[bytes]) -> list[str]:
    errors: list[str] = []

    def report(err, _msg) -> None:
        if err is not None:
            errors.append(str(err))

    for v in values:
        producer.produce(topic, v, partition=0, on_delivery=report)
        producer.poll(0)
    assert producer.flush(30) == 0
    return errors


def _values(n: int, tag: str) -> list[bytes]:
    return [f"{tag}-{i:04d}".encode() for i in range(n)]


# ---- producer retries -------------------------------------------------------------


def test_idempotent_confluent_producer_survives_not_leader_and_timeouts_exactly_once(
    kafka_broker, kafka_faults, kafka_topic
):
    match = _for_topic(kafka_topic)
    not_leader = kafka_faults.error("Produce", "NOT_LEADER_OR_FOLLOWER", times=2, when=match)
    # Kafka's REQUEST_TIMED_OUT comes after the append: the retry must not duplicate
    timed_out = kafka_faults.error(
        "Produce", "REQUEST_TIMED_OUT", after_handling=True, times=2, when=match
    )
    values = _values(N, "idem")
    p = Producer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "enable.idempotence": True,
            "linger.ms": 2,
            "retry.backoff.ms": 10,
        }
    )
    assert _produce_all(p, kafka_topic, values) == []
    assert not_leader.hits == 2 and timed_out.hits == 2
    assert [r.value for r in kafka_broker.records(kafka_topic)] == values


def test_plain_producer_with_retries_loses_nothing_when_responses_time_out(
    kafka_broker, kafka_faults, kafka_topic
):
    match = _for_topic(kafka_topic)
    kafka_faults.error("Produce", "NOT_LEADER_OR_FOLLOWER", times=2, when=match)
    kafka_faults.error("Produce", "REQUEST_TIMED_OUT", after_handling=True, times=2, when=match)
    values = _values(N, "plain")
    p = Producer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "enable.idempotence": False,
            "acks": "all",
            "retries": 10,
            "max.in.flight.requests.per.connection": 1,
            "linger.ms": 2,
            "retry.backoff.ms": 10,
        }
    )
    assert _produce_all(p, kafka_topic, values) == []
    stored = [r.value for r in kafka_broker.records(kafka_topic)]
    assert set(stored) == set(values)  # at least once
    assert len(stored) > len(values)  # the appended-then-timed-out batches came twice


def test_delayed_produce_keeps_an_idempotent_pipeline_in_order(
    kafka_broker, kafka_faults, kafka_topic
):
    rule = kafka_faults.delay("Produce", 150, times=3, when=_for_topic(kafka_topic))
    values = _values(N, "delay")
    p = Producer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "enable.idempotence": True,
            "linger.ms": 1,
            "batch.num.messages": 20,
        }
    )
    t0 = time.monotonic()
    assert _produce_all(p, kafka_topic, values) == []
    assert time.monotonic() - t0 >= 0.15
    assert rule.hits == 3
    assert [r.value for r in kafka_broker.records(kafka_topic)] == values


@pytest.mark.parametrize("after_handling", [False, True], ids=["request-lost", "response-lost"])
def test_dropped_produce_is_retried_after_the_broker_closes_the_connection(
    kafka_broker, kafka_faults, kafka_topic, after_handling
):
    rule = kafka_faults.drop(
        "Produce", close_after_ms=100, after_handling=after_handling, when=_for_topic(kafka_topic)
    )
    values = _values(20, "drop")
    p = Producer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "enable.idempotence": True,
            "retry.backoff.ms": 10,
            "reconnect.backoff.ms": 10,
        }
    )
    assert _produce_all(p, kafka_topic, values) == []
    assert rule.hits == 1
    assert [r.value for r in kafka_broker.records(kafka_topic)] == values


# ---- consumers and severed connections ----------------------------------------------


async def _produce_async(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await p.start()
    try:
        for v in values:
            await p.send(topic, v, partition=0)
        await p.flush()
    finally:
        await p.stop()


async def _take(c: AIOKafkaConsumer, n: int) -> list[bytes]:
    got: list[bytes] = []
    while len(got) < n:
        batch = await asyncio.wait_for(c.getmany(timeout_ms=200), 15)
        for msgs in batch.values():
            got += [m.value for m in msgs]
    return got


@pytest.mark.parametrize("how", ["sever_connections", "sever_rule"])
async def test_aiokafka_consumer_keeps_consuming_after_its_connection_is_severed(
    kafka_broker, kafka_faults, kafka_topic, how
):
    bootstrap = kafka_broker.bootstrap_servers
    first, second = _values(30, "before"), _values(30, "after")
    await _produce_async(bootstrap, kafka_topic, first)
    c = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id="sever-me",
        enable_auto_commit=False,
        retry_backoff_ms=20,
    )
    await c.start()
    try:
        tp = ATopicPartition(kafka_topic, 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        assert await _take(c, len(first)) == first
        if how == "sever_connections":
            severed = await asyncio.to_thread(kafka_faults.sever_connections, "sever-me")
            assert severed >= 1
        else:
            rule = kafka_faults.sever("Fetch", client_id="sever-me", times=2)
        await _produce_async(bootstrap, kafka_topic, second)
        assert await _take(c, len(second)) == second
        if how == "sever_rule":
            assert rule.hits == 2
    finally:
        await c.stop()


def test_confluent_consumer_follows_a_leader_epoch_bump(kafka_broker, kafka_faults, kafka_topic):
    p = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    assert _produce_all(p, kafka_topic, _values(10, "e1")) == []
    c = Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "group.id": "epoch-bump",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition(kafka_topic, 0, 0)])
        got = []
        while len(got) < 10:
            m = c.poll(10)
            assert m is not None and m.error() is None
            got.append(m.value())
        old = kafka_broker.kafka.metadata_cache.get_topic(kafka_topic).partitions[0].leader_epoch
        epoch = kafka_faults.bump_leader_epoch(kafka_topic, 0)
        assert epoch == old + 1
        host, port = kafka_broker.bootstrap_servers.rsplit(":", 1)
        raw = RawClient(host, int(port))
        try:  # a request still carrying the old epoch is fenced
            assert _list_offsets(raw, kafka_topic, epoch=old) == ErrorCode.fenced_leader_epoch
            assert _list_offsets(raw, kafka_topic, epoch=epoch) == 0
        finally:
            raw.close()
        assert _produce_all(p, kafka_topic, _values(10, "e2")) == []
        while len(got) < 20:
            m = c.poll(10)
            assert m is not None and m.error() is None
            got.append(m.value())
        assert got == _values(10, "e1") + _values(10, "e2")
    finally:
        c.close()


# ---- the raw wire ---------------------------------------------------------------------


def _list_offsets(client: RawClient, topic: str, epoch: int = -1) -> int:
    part = {"partition_index": 0, "timestamp": -1, "current_leader_epoch": epoch}
    req = messages.build(
        messages.request_type(ApiKey.LIST_OFFSETS, 7),
        {"replica_id": -1, "topics": [{"name": topic, "partitions": [part]}]},
    )
    resp = client.call(ApiKey.LIST_OFFSETS, 7, req)
    return int(resp.topics[0].partitions[0].error_code)


def _metadata(client: RawClient, version: int = 12):
    req = messages.build(messages.request_type(ApiKey.METADATA, version), {"topics": None})
    return client.call(ApiKey.METADATA, version, req)


def test_rules_match_on_client_id_and_version_and_expire_after_times(
    kafka_broker, kafka_faults, kafka_topic
):
    host, port = kafka_broker.bootstrap_servers.rsplit(":", 1)
    a, b = RawClient(host, int(port)), RawClient(host, int(port))
    try:
        code = int(ErrorCode.not_leader_or_follower)
        rule = kafka_faults.error("ListOffsets", code, client_id="a", times=2)
        assert _list_offsets(b, kafka_topic) == 0  # client "raw" is not "a"
        a.send = _with_client_id(a.send, "a")  # type: ignore[method-assign]
        assert _list_offsets(a, kafka_topic) == code
        assert _list_offsets(a, kafka_topic) == code
        assert _list_offsets(a, kafka_topic) == 0  # used up
        assert rule.hits == 2 and rule not in kafka_faults.rules

        kafka_faults.error("Metadata", "BROKER_NOT_AVAILABLE", versions=(0, 8), times=None)
        resp = _metadata(b, 12)  # outside the version range: untouched
        assert all(t.error_code == 0 for t in resp.topics)
        resp = _metadata(b, 8)
        assert resp.topics and all(
            t.error_code == ErrorCode.broker_not_available for t in resp.topics
        )
        assert resp.brokers  # the injected answer keeps the brokers: clients stay connected
    finally:
        a.close()
        b.close()


def _with_client_id(send, client_id: str):
    def wrapped(api_key, version, body, **kw):
        return send(api_key, version, body, client_id=client_id, **kw)

    return wrapped


def test_held_requests_are_answered_in_order_when_the_rule_is_removed(kafka_broker, kafka_faults):
    host, port = kafka_broker.bootstrap_servers.rsplit(":", 1)
    c = RawClient(host, int(port))
    try:
        rule = kafka_faults.add("Metadata", Delay(None), client_id="raw", times=1)
        body = messages.build(messages.request_type(ApiKey.METADATA, 12), {"topics": None})
        first = c.send(ApiKey.METADATA, 12, body)
        second = c.send(ApiKey.METADATA, 12, body)  # not matched, but queued behind the first
        c.sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            c.sock.recv(1, 2)  # MSG_PEEK: nothing arrives while held
        c.sock.settimeout(10)
        kafka_faults.remove(rule)
        assert c.read_response(ApiKey.METADATA, 12)[0] == first
        assert c.read_response(ApiKey.METADATA, 12)[0] == second
    finally:
        c.close()


def test_sever_rule_closes_the_connection_and_error_on_acks0_produce_too(
    kafka_broker, kafka_faults
):
    host, port = kafka_broker.bootstrap_servers.rsplit(":", 1)
    c = RawClient(host, int(port))
    try:
        kafka_faults.sever("ApiVersions", client_id="raw")
        c.send(ApiKey.API_VERSIONS, 3, messages.build(messages.request_type(18, 3), {}))
        assert c.is_closed()
    finally:
        c.close()
    c = RawClient(host, int(port))
    try:
        kafka_faults.add("Produce", Error(int(ErrorCode.not_leader_or_follower)), client_id="raw")
        req = messages.build(
            messages.request_type(ApiKey.PRODUCE, 9),
            {"acks": 0, "timeout": 1000, "topic_data": [{"name": "nope", "partition_data": []}]},
        )
        c.send(ApiKey.PRODUCE, 9, req)
        assert c.is_closed()  # acks=0 has no response: closing is the signal
    finally:
        c.close()


def test_api_and_error_names_resolve_like_kafka_spells_them():
    assert api_key_of("FindCoordinator") == api_key_of("find_coordinator") == 10
    assert api_key_of(ApiKey.LIST_OFFSETS) == api_key_of("LIST_OFFSETS") == 2
    assert error_code_of("NOT_LEADER_OR_FOLLOWER") == error_code_of(6) == 6
    with pytest.raises(ValueError):
        api_key_of("Produced")
    with pytest.raises(ValueError):
        error_code_of("NOT_AN_ERROR")
