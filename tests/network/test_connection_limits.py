"""Bounded connections against a real broker over TCP: read buffers that follow the
bytes that arrive, muting a client that does not read, Kafka's queued.max.requests,
max.connections and max.connections.per.ip, and hostile connection patterns.

Memory bounds of the broker process itself (RSS) are in test_connection_memory.py.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from kafkalite.protocol.records import build_batch
from kafkalite.server.config import BrokerConfig, ConfigError
from kafkalite.testing import hostile_connections as hc
from tests.server.raw_client import RawClient, api_versions, produce, request_bytes

PRODUCE, METADATA, API_VERSIONS = 0, 3, 18


def wait_until(cond: Callable[[], Any], timeout: float = 15, what: str = "condition") -> Any:
    """Poll ``cond`` until it is truthy (waiting for the broker, not timing it)."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def server_side(b, client: RawClient):
    """The broker's Connection for ``client`` (None until accepted)."""
    me = client.sock.getsockname()[:2]

    def find():
        return next((c for c in b.kafka.channel.connections if tuple(c.peer[:2]) == me), None)

    return wait_until(lambda: b.call(find), what="the broker to accept the connection")


def conn_state(b, conn, *names: str) -> tuple:
    return b.call(lambda: tuple(getattr(conn, n) for n in names))


def assert_serves(bootstrap: str) -> None:
    c = RawClient.to(bootstrap)
    try:
        assert c.call(API_VERSIONS, 3, api_versions()).error_code == 0
    finally:
        c.close()


# ---- read buffers -----------------------------------------------------------------


def test_length_prefix_without_body_allocates_a_small_buffer(kafka_broker):
    """A 4-byte prefix announcing 100 MiB used to reserve 100 MiB at once."""
    c = RawClient.to(kafka_broker.bootstrap_servers)
    try:
        conn = server_side(kafka_broker, c)
        c.send_raw(struct.pack(">i", 100 << 20))
        wait_until(
            lambda: conn_state(kafka_broker, conn, "buffered_bytes")[0] > 0,
            what="the prefix to be read",
        )
        (size,) = conn_state(kafka_broker, conn, "buffered_bytes")
        assert 0 < size <= 4096
        assert not c.is_closed(timeout=0.2)  # a legal prefix: the broker waits for the body
    finally:
        c.close()


def test_idle_connection_holds_no_read_buffer(kafka_broker):
    """Each connection used to preallocate 256 KiB it never gave back."""
    c = RawClient.to(kafka_broker.bootstrap_servers)
    try:
        assert c.call(API_VERSIONS, 3, api_versions()).error_code == 0
        conn = server_side(kafka_broker, c)
        assert conn_state(kafka_broker, conn, "buffered_bytes") == (0,)
    finally:
        c.close()


def test_request_sent_one_byte_at_a_time_is_answered_with_a_small_buffer(kafka_broker):
    """Slowloris: a request trickling in byte by byte costs a few KiB, then is answered,
    and the buffer is dropped once the connection is quiet."""
    c = RawClient.to(kafka_broker.bootstrap_servers)
    try:
        conn = server_side(kafka_broker, c)
        frame = request_bytes(API_VERSIONS, 3, 7, api_versions())
        sizes = []
        for i in range(len(frame)):
            c.send_raw(frame[i : i + 1])
            if i < len(frame) - 1:
                time.sleep(0.002)
                sizes.append(conn_state(kafka_broker, conn, "buffered_bytes")[0])
        cid, resp = c.read_response(API_VERSIONS, 3)
        assert cid == 7 and resp.error_code == 0
        assert max(sizes) <= 4096
        wait_until(
            lambda: conn_state(kafka_broker, conn, "buffered_bytes") == (0,),
            what="the idle connection's buffer to be dropped",
        )
    finally:
        c.close()


def test_read_buffer_is_dropped_after_a_large_frame(kafka_broker):
    """A 2 MiB request grows the buffer with its bytes; once answered the memory goes back."""
    kafka_broker.create_topic("big-frames", config={"max.message.bytes": str(4 << 20)})
    c = RawClient.to(kafka_broker.bootstrap_servers)
    try:
        conn = server_side(kafka_broker, c)
        resp = c.call(PRODUCE, 9, produce("big-frames", build_batch([(None, b"x" * (2 << 20))])))
        assert resp.responses[0].partition_responses[0].error_code == 0
        assert conn_state(kafka_broker, conn, "buffered_bytes") == (0,)
    finally:
        c.close()
        kafka_broker.delete_topic("big-frames")


def broker_state(b) -> tuple[int, int, int, int]:
    """Connections, counted connections, queued request bytes and requests."""
    ss = b.kafka.socket_server
    return b.call(
        lambda: (
            len(b.kafka.channel.connections),
            ss.quotas.total,
            ss.queue.bytes,
            ss.queue.requests,
        )
    )


def test_partial_frame_then_close_leaves_nothing_behind(kafka_broker_factory):
    """Half a request, then a close or a reset: the connection and the bytes it had
    announced are gone (the reset used to leave the connection open under uvloop)."""
    b = kafka_broker_factory()
    before = broker_state(b)
    for reset in (False, True):
        c = RawClient.to(b.bootstrap_servers)
        c.send_raw(struct.pack(">i", 100 << 20) + b"\x00\x12\x00")
        if reset:
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()
    wait_until(lambda: broker_state(b) == before, what="the connections to be gone")
    assert_serves(b.bootstrap_servers)


def test_reset_after_a_request_without_response_closes_the_connection(kafka_broker_factory):
    """An acks=0 produce (no response to write) and a reset in one go: the reset must
    still close the connection long before connections.max.idle.ms."""
    b = kafka_broker_factory()
    b.create_topic("acks0", partitions=1)
    before = broker_state(b)
    for _ in range(3):
        c = RawClient.to(b.bootstrap_servers)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.send(PRODUCE, 9, produce("acks0", build_batch([(None, b"v")]), acks=0))
        c.close()
    wait_until(lambda: broker_state(b) == before, what="the reset connections to be gone")
    assert len(b.records("acks0")) == 3


def test_connection_churn_leaves_nothing_behind(kafka_broker_factory, caplog):
    """Thousands of connects and closes (some after a request, some reset mid-frame)."""
    b = kafka_broker_factory()
    host, port = b.bootstrap_servers.split(":")

    before = broker_state(b)

    async def storm():
        got = await asyncio.gather(
            hc.connection_churn(host, int(port), 1.5),
            hc.connection_churn(host, int(port), 1.5, send_first=True),
            hc.partial_frame_then_close(host, int(port), 1.5, reset=True),
        )
        return got

    with caplog.at_level(logging.WARNING):
        counters = asyncio.run(storm())
        assert sum(x.connections for x in counters) > 1000
        wait_until(lambda: broker_state(b) == before, what="every churned connection to be gone")
        assert_serves(b.bootstrap_servers)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


# ---- a client that does not read its responses -----------------------------------


def test_connection_is_muted_while_its_responses_are_unwritten_and_read_again_when_drained(
    kafka_broker_factory,
):
    """The client pipelines thousands of requests and reads nothing: the broker stops
    reading it (Kafka mutes the channel) instead of queueing responses without bound;
    once the client reads, every response arrives, in order."""
    b = kafka_broker_factory(
        **{
            "kafkalite.connection.max.inflight.requests": 8,
            "kafkalite.connection.max.queued.response.bytes": 16384,
        }
    )
    c = RawClient.to(b.bootstrap_servers, rcvbuf=4096, timeout=30)
    n = 20000
    frames = b"".join(request_bytes(API_VERSIONS, 3, cid, api_versions()) for cid in range(n))
    sender = threading.Thread(target=c.send_raw, args=(frames,), daemon=True)
    try:
        conn = server_side(b, c)
        sender.start()
        wait_until(lambda: not conn_state(b, conn, "reading")[0], what="the connection to be muted")
        inflight, unsent = conn_state(b, conn, "inflight", "unsent_bytes")
        assert inflight <= 8
        assert unsent < 16384 + 4096  # the bound, plus at most one response
        assert_serves(b.bootstrap_servers)  # everyone else is served meanwhile
        for expected in range(n):
            cid, resp = c.read_response(API_VERSIONS, 3)
            assert (cid, resp.error_code) == (expected, 0)
        sender.join(30)
        assert not sender.is_alive()
    finally:
        c.close()


def test_a_pipelining_client_takes_turns_with_the_others(kafka_broker_factory):
    """A client pipelining 20,000 cheap requests in one write (and reading every answer,
    so no bound mutes it) starts at most a turn's worth of them before other clients'
    requests are handled: another client's ApiVersions is answered long before the
    burst is through. Before, one read callback handled every frame it had read (the
    fuzz bench saw the event loop held 2 s by a burst of ApiVersions v0)."""
    b = kafka_broker_factory()
    burst = RawClient.to(b.bootstrap_servers, timeout=60)
    other = RawClient.to(b.bootstrap_servers)
    n = 20000
    frames = b"".join(request_bytes(API_VERSIONS, 3, cid, api_versions()) for cid in range(n))
    answered: list[int] = []

    def drain() -> None:
        for _ in range(n):
            answered.append(struct.unpack_from(">i", burst.read_frame())[0])

    def handled() -> int:
        return b.call(lambda: b.kafka.channel.requests_total.get(API_VERSIONS, 0))

    reader = threading.Thread(target=drain, daemon=True)
    try:
        server_side(b, burst)
        server_side(b, other)
        before = handled()
        reader.start()
        burst.send_raw(frames)  # all of it is in the broker's socket buffer now
        assert other.call(API_VERSIONS, 3, api_versions()).error_code == 0
        during = handled() - before
        assert during < n // 2, f"{during} of the burst's {n} requests were handled first"
        reader.join(60)
        assert answered == list(range(n))  # the burst is answered in full, in order
    finally:
        burst.close()
        other.close()


def test_pipelining_deeper_than_the_inflight_bound_is_answered_in_order(
    kafka_broker_factory,
):
    """700 produces in one write with at most 2 unanswered at a time: all of them are
    handled, in order, as the responses are written."""
    b = kafka_broker_factory(**{"kafkalite.connection.max.inflight.requests": 2})
    b.create_topic("deep", partitions=1)
    c = RawClient.to(b.bootstrap_servers)
    try:
        n = 700
        c.send_raw(
            b"".join(
                request_bytes(PRODUCE, 9, cid, produce("deep", build_batch([(None, b"%d" % cid)])))
                for cid in range(1, n + 1)
            )
        )
        for expected in range(1, n + 1):
            cid, resp = c.read_response(PRODUCE, 9)
            p = resp.responses[0].partition_responses[0]
            assert (cid, p.error_code, p.base_offset) == (expected, 0, expected - 1)
    finally:
        c.close()


# ---- queued.max.requests ---------------------------------------------------------


def test_queued_max_requests_stops_reading_until_a_request_finishes(kafka_broker_factory):
    """queued.max.requests=1 and one request held in its handler: another connection's
    request is not started (it waits, unread) until the held one finishes."""
    b = kafka_broker_factory(**{"queued.max.requests": 1})
    rule = b.faults.delay(METADATA, None)
    holder, other = RawClient.to(b.bootstrap_servers), RawClient.to(b.bootstrap_servers)
    try:
        holder.send(METADATA, 1, b"\xff\xff\xff\xff")  # all topics; held by the rule
        queue = b.kafka.socket_server.queue
        wait_until(lambda: b.call(lambda: queue.paused), what="the queue to fill")
        served = b.call(lambda: b.kafka.channel.requests_total.get(API_VERSIONS, 0))
        conn = server_side(b, other)
        other.send(API_VERSIONS, 3, api_versions())
        wait_until(
            lambda: (
                conn_state(b, conn, "buffered_bytes")[0] > 0
                and not conn_state(b, conn, "reading")[0]
            ),
            what="the request to be read and held back",
        )
        assert b.call(lambda: b.kafka.channel.requests_total.get(API_VERSIONS, 0)) == served
        b.faults.remove(rule)
        assert holder.read_frame()  # the Metadata response
        _, resp = other.read_response(API_VERSIONS, 3)
        assert resp.error_code == 0
        assert b.call(lambda: (queue.paused, queue.requests, queue.bytes)) == (False, 0, 0)
    finally:
        b.faults.clear()
        holder.close()
        other.close()


def test_queued_max_request_bytes_holds_new_requests_while_started_frames_finish(
    kafka_broker_factory,
):
    """queued.max.request.bytes=2 MiB and two clients each half-way through a 1.5 MiB
    request (their announced sizes are counted, as Kafka's memory pool allocates
    them): a third client's request waits, the two frames still complete (no
    deadlock), and once they are handled the third is answered."""
    mib = 1 << 20
    b = kafka_broker_factory(
        **{"socket.request.max.bytes": 2 * mib, "queued.max.request.bytes": 2 * mib}
    )
    b.create_topic("big", config={"max.message.bytes": str(4 * mib)})
    queue = b.kafka.socket_server.queue
    frame = request_bytes(
        PRODUCE, 9, 1, produce("big", build_batch([(None, b"x" * (3 * mib // 2))]))
    )
    senders = [RawClient.to(b.bootstrap_servers, timeout=30) for _ in range(2)]
    other = RawClient.to(b.bootstrap_servers, timeout=30)
    try:
        for c in senders:
            c.send_raw(frame[: len(frame) // 2])
        wait_until(lambda: b.call(lambda: queue.paused), what="the announced bytes to fill it")
        conn = server_side(b, other)
        served = b.call(lambda: b.kafka.channel.requests_total.get(API_VERSIONS, 0))
        other.send(API_VERSIONS, 3, api_versions())
        wait_until(
            lambda: not conn_state(b, conn, "reading")[0], what="the request to be held back"
        )
        assert b.call(lambda: b.kafka.channel.requests_total.get(API_VERSIONS, 0)) == served
        for c in senders:
            c.send_raw(frame[len(frame) // 2 :])
        for c in senders:
            _, resp = c.read_response(PRODUCE, 9)
            assert resp.responses[0].partition_responses[0].error_code == 0
        _, resp = other.read_response(API_VERSIONS, 3)
        assert resp.error_code == 0
        assert b.call(lambda: (queue.paused, queue.bytes)) == (False, 0)
    finally:
        for c in (*senders, other):
            c.close()


def test_full_request_queue_does_not_starve_the_controller(kafka_broker_factory):
    """Controller requests come on connections exempt from queued.max.requests (Kafka's
    control plane): a topic is created while client requests fill the queue, also over
    a controller connection opened after the queue filled."""
    b = kafka_broker_factory(**{"queued.max.requests": 1})
    b.faults.delay(METADATA, None)
    holder = RawClient.to(b.bootstrap_servers)
    try:
        holder.send(METADATA, 1, b"\xff\xff\xff\xff")
        queue = b.kafka.socket_server.queue
        wait_until(lambda: b.call(lambda: queue.paused), what="the queue to fill")
        # the controller must also get through on a connection opened while paused
        dropped = b.call(
            lambda: [c.close() for c in list(b.kafka.channel.connections) if c.control_plane]
        )
        assert dropped
        b.create_topic("made-while-full", partitions=2)  # LeaderAndIsr + UpdateMetadata
        assert b.call(lambda: queue.paused)
        rm = b.kafka.replica_manager
        leaders = b.call(
            lambda: [rm.get_partition(("made-while-full", i)) is not None for i in range(2)]
        )
        assert leaders == [True, True]
    finally:
        b.faults.clear()
        holder.close()


# ---- max.connections / max.connections.per.ip -------------------------------------


def test_max_connections_per_ip_closes_new_connections_over_the_limit(kafka_broker_factory):
    """Kafka accepts and closes a connection from an address at its maximum."""
    b = kafka_broker_factory(**{"max.connections.per.ip": 3})
    quotas = b.kafka.socket_server.quotas
    existing = b.call(lambda: quotas.per_ip.get("127.0.0.1", 0))  # the controller's own
    clients = []
    try:
        for _ in range(3 - existing):
            c = RawClient.to(b.bootstrap_servers)
            clients.append(c)
            assert c.call(API_VERSIONS, 3, api_versions()).error_code == 0
        extra = RawClient.to(b.bootstrap_servers)
        clients.append(extra)
        assert extra.is_closed()
        clients.pop(0).close()
        wait_until(lambda: b.call(lambda: quotas.per_ip.get("127.0.0.1", 0)) < 3)
        assert_serves(b.bootstrap_servers)
    finally:
        for c in clients:
            c.close()


def test_max_connections_stops_accepting_until_a_connection_closes(kafka_broker_factory):
    """Over max.connections Kafka's acceptor waits for a slot: the new client is not
    served until another connection closes, then it is."""
    b = kafka_broker_factory(**{"max.connections": 3})
    quotas = b.kafka.socket_server.quotas
    clients = []
    try:
        while b.call(lambda: quotas.total) < 3:
            c = RawClient.to(b.bootstrap_servers)
            clients.append(c)
            assert c.call(API_VERSIONS, 3, api_versions()).error_code == 0
        waiting = RawClient.to(b.bootstrap_servers, timeout=30)  # in the kernel's backlog
        cid = waiting.send(API_VERSIONS, 3, api_versions())
        assert not waiting.is_closed(timeout=0.3)  # nothing comes back: not accepted yet
        assert b.call(lambda: quotas.total) == 3
        clients.pop(0).close()
        got, resp = waiting.read_response(API_VERSIONS, 3)
        assert (got, resp.error_code) == (cid, 0)
        clients.append(waiting)
    finally:
        for c in clients:
            c.close()


# ---- configuration ---------------------------------------------------------------


def test_queue_and_connection_limit_keys_have_kafkas_defaults():
    c = BrokerConfig({})
    assert c["queued.max.requests"] == 500
    assert c["queued.max.request.bytes"] == -1
    assert c["max.connections"] == 2**31 - 1
    assert c["max.connections.per.ip"] == 2**31 - 1
    assert c["max.connections.per.ip.overrides"] == ""
    assert "queued.max.requests" not in BrokerConfig({"queued.max.requests": 10}).ignored


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"queued.max.requests": 0}, "queued.max.requests"),
        ({"queued.max.request.bytes": 1024}, "queued.max.request.bytes"),
        ({"max.connections.per.ip": 0}, "max.connections.per.ip"),
        ({"max.connections.per.ip.overrides": "host-without-count"}, "max.connections"),
        ({"max.connections": -1}, "max.connections"),
        ({"kafkalite.connection.max.inflight.requests": 0}, "kafkalite.connection"),
    ],
)
def test_bad_queue_and_connection_limit_values_name_the_key(values, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig(values)


def test_queue_bytes_and_per_ip_overrides_accepted_as_kafka_does():
    c = BrokerConfig(
        {
            "queued.max.request.bytes": 104857600,
            "max.connections.per.ip": 0,
            "max.connections.per.ip.overrides": "127.0.0.1:5, localhost:7",
        }
    )
    assert c["queued.max.request.bytes"] == 104857600


def test_unsigned_controller_request_does_not_exempt_a_client_from_the_queue(kafka_broker_factory):
    """A client that opens with a forged (unsigned) StopReplica is refused, and its
    connection is not treated as the controller's: it waits on a full queue like any
    other client's, instead of bypassing queued.max.requests."""
    from kafkalite.protocol import inter_broker as ib

    b = kafka_broker_factory(**{"queued.max.requests": 1})
    forger = RawClient.to(b.bootstrap_servers)
    try:
        stop = ib.StopReplicaRequest(0, 1, [])
        forger.sock.sendall(ib.request_frame(ib.STOP_REPLICA, 4, 1, "x", stop))
        conn = server_side(b, forger)
        wait_until(lambda: conn_state(b, conn, "control_plane") == (False,), what="revocation")
        resp = forger.sock.recv(4096)
        assert len(resp) > 8  # answered (CLUSTER_AUTHORIZATION_FAILED), not closed
    finally:
        forger.close()
