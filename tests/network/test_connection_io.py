"""Connection I/O against a real broker over TCP: pipelining order, coalesced writes,
large responses through a full socket buffer, and a client leaving mid-response."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from kafkalite.protocol.records import build_batch, iter_records
from tests.server.raw_client import RawClient, api_versions, fetch, produce, request_bytes

PRODUCE, FETCH, API_VERSIONS = 0, 1, 18
FETCH_MAX = 256 << 20  # whole multi-megabyte logs in one response


def _base_offset(resp) -> int:
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == 0, p
    return int(p.base_offset)


def _fill(client: RawClient, topic: str, partition: int, batches: int, value_size: int) -> list:
    """Produce ``batches`` batches of 4 records each; returns the values in order."""
    values = []
    for b in range(batches):
        vs = [bytes([b % 251]) * value_size + f"-{b}-{i}".encode() for i in range(4)]
        values += vs
        client.call(
            PRODUCE, 9, produce(topic, build_batch([(None, v) for v in vs]), partition=partition)
        )
    return values


@pytest.fixture
def client(kafka_bootstrap):
    c = RawClient.to(kafka_bootstrap)
    yield c
    c.close()


def test_pipelined_mix_is_answered_in_request_order(client, kafka_topic):
    """Produces, a fetch that parks, more produces and ApiVersions, all in one write:
    answers come back in request order, and appends behind the parked fetch still happen."""
    reqs = []
    for i in range(5):
        reqs.append(
            (PRODUCE, 9, produce(kafka_topic, build_batch([(None, b"a%d" % i)]), partition=0))
        )
    reqs.append(
        (FETCH, 12, fetch(kafka_topic, 0, partition=1, max_wait_ms=300, max_bytes=FETCH_MAX))
    )  # parks
    for i in range(5):
        reqs.append(
            (PRODUCE, 9, produce(kafka_topic, build_batch([(None, b"b%d" % i)]), partition=0))
        )
    reqs.append((API_VERSIONS, 3, api_versions()))
    client.send_raw(
        b"".join(request_bytes(k, v, cid, body) for cid, (k, v, body) in enumerate(reqs, 1))
    )
    got = []
    for k, v, _ in reqs:
        cid, resp = client.read_response(k, v)
        got.append(cid)
        if k == PRODUCE:
            assert _base_offset(resp) == len([c for c in got if reqs[c - 1][0] == PRODUCE]) - 1
        elif k == FETCH:
            p = resp.responses[0].partitions[0]
            assert p.error_code == 0 and p.high_watermark == 0
    assert got == list(range(1, len(reqs) + 1))


def test_hundreds_of_pipelined_requests_coalesce_in_order(client, kafka_topic):
    """700 produces in one write: more responses than one sendmsg's iovec limit."""
    n = 700
    client.send_raw(
        b"".join(
            request_bytes(
                PRODUCE,
                9,
                cid,
                produce(kafka_topic, build_batch([(None, b"%d" % cid)]), partition=2),
            )
            for cid in range(1, n + 1)
        )
    )
    for expected in range(1, n + 1):
        cid, resp = client.read_response(PRODUCE, 9)
        assert cid == expected
        assert _base_offset(resp) == expected - 1


def test_responses_survive_a_full_socket_buffer(kafka_bootstrap, kafka_topic):
    """A client with a tiny receive buffer that reads late: the broker's writes are partial
    and wait for the socket; every response arrives whole and in order."""
    c = RawClient.to(kafka_bootstrap, timeout=30, rcvbuf=4096)
    sock = c.sock
    try:
        values = _fill(c, kafka_topic, 0, batches=12, value_size=200_000)  # ~10 MB, one segment
        # ~1.3 MB of small responses, a ~10 MB sendfile response, then small ones again
        first, last = 3000, 300
        small = [request_bytes(API_VERSIONS, 3, cid, api_versions()) for cid in range(1, first + 1)]
        big = request_bytes(FETCH, 12, first + 1, fetch(kafka_topic, 0, max_bytes=FETCH_MAX))
        tail = [
            request_bytes(API_VERSIONS, 3, cid, api_versions())
            for cid in range(first + 2, first + last + 2)
        ]
        sock.sendall(b"".join([*small, big, *tail]))
        time.sleep(0.5)  # let the broker fill the socket buffer and wait for it
        for expected in range(1, first + 1):
            cid, resp = c.read_response(API_VERSIONS, 3)
            assert cid == expected and resp.error_code == 0
        cid, resp = c.read_response(FETCH, 12)
        assert cid == first + 1
        records = bytes(resp.responses[0].partitions[0].records)
        assert [r.value for _, r in iter_records(records)] == values
        for expected in range(first + 2, first + last + 2):
            cid, resp = c.read_response(API_VERSIONS, 3)
            assert cid == expected and resp.error_code == 0
    finally:
        sock.close()


def test_client_closing_mid_response_leaves_the_broker_serving(
    kafka_broker, kafka_bootstrap, kafka_topic
):
    setup = RawClient.to(kafka_bootstrap)
    try:
        _fill(setup, kafka_topic, 1, batches=12, value_size=250_000)  # ~12 MB, one segment
    finally:
        setup.close()
    before = kafka_broker.call(lambda: len(kafka_broker.kafka.channel.connections))
    for _ in range(3):
        quitter = RawClient.to(kafka_bootstrap)
        quitter.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        quitter.send(FETCH, 12, fetch(kafka_topic, 0, partition=1, max_bytes=FETCH_MAX))
        quitter.send(API_VERSIONS, 3, api_versions())
        assert len(quitter.sock.recv(100)) > 0  # the response has started
        quitter.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        quitter.close()  # reset, with megabytes still to send
    other = RawClient.to(kafka_bootstrap)
    try:
        cid = other.send(FETCH, 12, fetch(kafka_topic, 0, partition=1, max_bytes=FETCH_MAX))
        got, resp = other.read_response(FETCH, 12)
        assert got == cid
        assert len(list(iter_records(bytes(resp.responses[0].partitions[0].records)))) == 48
    finally:
        other.close()
    deadline = time.monotonic() + 10
    while kafka_broker.call(lambda: len(kafka_broker.kafka.channel.connections)) > before:
        assert time.monotonic() < deadline, "closed connections were not dropped"
        time.sleep(0.05)
