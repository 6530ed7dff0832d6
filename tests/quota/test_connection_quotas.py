"""Connection limits with Kafka's behaviour when exceeded: max.connections.per.ip
(closed at once), per-listener max.connections (accepting waits for a slot) and
max.connection.creation.rate (KIP-612: accepting is delayed, no connection refused)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from kafkalite.server.config import BrokerConfig, ConfigError
from tests.coordinator.wire import Wire
from tests.network.test_connection_limits import API_VERSIONS, wait_until
from tests.quota.quota_wire import alter
from tests.server.raw_client import RawClient, api_versions


def connect_from(bootstrap: str, source_ip: str, timeout: float = 10) -> RawClient:
    host, port = bootstrap.rsplit(":", 1)
    c = RawClient.__new__(RawClient)
    c.sock = socket.create_connection((host, int(port)), timeout, source_address=(source_ip, 0))
    c._cid = 0
    return c


def test_the_101st_connection_from_one_ip_is_closed_and_others_still_connect(
    kafka_broker_factory,
):
    b = kafka_broker_factory(**{"max.connections.per.ip": 100})
    quotas = b.kafka.socket_server.quotas
    existing = b.call(lambda: quotas.per_ip.get("127.0.0.1", 0))  # the controller's own
    clients: list[RawClient] = []
    try:
        for _ in range(100 - existing):
            c = RawClient.to(b.bootstrap_servers)
            clients.append(c)
        for c in clients:
            assert c.call(API_VERSIONS, 3, api_versions()).error_code == 0
        assert b.call(lambda: quotas.per_ip["127.0.0.1"]) == 100
        extra = RawClient.to(b.bootstrap_servers)
        clients.append(extra)
        assert extra.is_closed()  # the 101st
        # another address is not affected
        other = connect_from(b.bootstrap_servers, "127.0.0.2")
        clients.append(other)
        assert other.call(API_VERSIONS, 3, api_versions()).error_code == 0
        # and the first address connects again once one of its connections is gone
        clients.pop(0).close()
        wait_until(lambda: b.call(lambda: quotas.per_ip.get("127.0.0.1", 0)) < 100)
        again = RawClient.to(b.bootstrap_servers)
        clients.append(again)
        assert again.call(API_VERSIONS, 3, api_versions()).error_code == 0
    finally:
        for c in clients:
            c.close()


def test_listener_max_connections_makes_that_listener_wait_for_a_slot(kafka_broker_factory):
    b = kafka_broker_factory(**{"listener.name.plaintext.max.connections": 3})
    quotas = b.kafka.socket_server.quotas
    assert quotas.listener_max == {"PLAINTEXT": 3}
    clients = []
    try:
        while b.call(lambda: quotas.per_listener.get("PLAINTEXT", 0)) < 3:
            c = RawClient.to(b.bootstrap_servers)
            clients.append(c)
            assert c.call(API_VERSIONS, 3, api_versions()).error_code == 0
        waiting = RawClient.to(b.bootstrap_servers, timeout=30)  # in the kernel's backlog
        cid = waiting.send(API_VERSIONS, 3, api_versions())
        assert not waiting.is_closed(timeout=0.3)  # not accepted, not refused
        assert b.call(lambda: quotas.per_listener["PLAINTEXT"]) == 3
        clients.pop(0).close()
        got, resp = waiting.read_response(API_VERSIONS, 3)
        assert (got, resp.error_code) == (cid, 0)
        clients.append(waiting)
    finally:
        for c in clients:
            c.close()


def test_connection_creation_rate_delays_accepting_and_refuses_nothing(kafka_broker_factory):
    b = kafka_broker_factory(
        **{
            "max.connection.creation.rate": 5,
            "quota.window.num": 2,
            "quota.window.size.seconds": 1,
        }
    )
    server = b.kafka.socket_server
    clients = [RawClient.to(b.bootstrap_servers, timeout=30) for _ in range(15)]
    try:
        for c in clients:  # every one is served, some after a wait in the backlog
            assert c.call(API_VERSIONS, 3, api_versions()).error_code == 0
        assert b.call(lambda: server.accept_throttles) > 0
    finally:
        for c in clients:
            c.close()


def test_listener_limit_keys_are_parsed_and_checked():
    c = BrokerConfig(
        {
            "listener.name.plaintext.max.connections": "7",
            "listener.name.ssl.max.connection.creation.rate": 3,
        }
    )
    assert c.listener_connection_limits == {
        "PLAINTEXT": {"max.connections": 7},
        "SSL": {"max.connection.creation.rate": 3},
    }
    assert c["max.connection.creation.rate"] == 2**31 - 1
    assert c["quota.window.num"] == 11 and c["quota.window.size.seconds"] == 1
    with pytest.raises(ConfigError):
        BrokerConfig({"listener.name.plaintext.max.connections": "-1"})


def test_an_address_over_its_connection_creation_rate_is_held_then_closed(kafka_broker_factory):
    """KIP-612's ip entity: 2 connections/s for 127.0.0.2 (window 2 x 1 s); a burst of
    connections from it sees some closed unanswered, 127.0.0.1 is not affected."""
    b = kafka_broker_factory(**{"quota.window.num": 2, "quota.window.size.seconds": 1})

    async def go() -> None:
        w = await Wire.connect(b.bootstrap_servers, "admin")
        try:
            r = await alter(w, {"ip": "127.0.0.2"}, {"connection_creation_rate": 2})
            assert r.error_code == 0
        finally:
            await w.close()

    asyncio.run(go())
    server = b.kafka.socket_server
    burst = [connect_from(b.bootstrap_servers, "127.0.0.2", timeout=30) for _ in range(8)]
    others = [RawClient.to(b.bootstrap_servers) for _ in range(8)]
    try:
        for c in others:
            assert c.call(API_VERSIONS, 3, api_versions()).error_code == 0
        answered = closed = 0
        for c in burst:
            try:
                assert c.call(API_VERSIONS, 3, api_versions()).error_code == 0
                answered += 1
            except (ConnectionError, OSError):
                closed += 1
        assert answered >= 1 and closed >= 1
        assert b.call(lambda: server.throttled_ip_connections) == closed
    finally:
        for c in burst + others:
            c.close()
