"""Fetch on the wire: request-level max_bytes, HW / LSO / log start offset in the
response, zero-copy sendfile on PLAINTEXT, in-order answers behind a parked
long poll, and a segment truncated mid-send."""

from __future__ import annotations

import datetime
import os
import struct
import threading
import time

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.delete_records.v2.request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

from kafkalite.network.connection import COPY_RANGE_BYTES
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import build_batch, iter_records
from tests.server.raw_client import RawClient
from tests.server.test_protocol_edges import fetch, produce


def assert_still_serving(broker) -> None:
    """A new connection still gets answers: one client's trouble did not stop the broker."""
    other = RawClient.to(broker.bootstrap_servers)
    try:
        assert (
            other.call(
                18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")
            ).error_code
            == ErrorCode.none
        )
    finally:
        other.close()


def fetch_many(topic, parts, *, max_bytes, partition_max_bytes=1 << 20, max_wait_ms=0):
    return FetchRequest(
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            FetchTopic(
                topic=topic,
                partitions=tuple(
                    FetchPartition(
                        partition=p, fetch_offset=off, partition_max_bytes=partition_max_bytes
                    )
                    for p, off in parts
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def by_partition(resp):
    return {p.partition_index: p for t in resp.responses for p in t.partitions}


@pytest.fixture
def broker(kafka_broker_factory):
    return kafka_broker_factory()


@pytest.fixture
def client(broker):
    c = RawClient.to(broker.bootstrap_servers)
    yield c
    c.close()


def test_request_max_bytes_spans_partitions_but_returns_at_least_one_batch(broker, client):
    broker.create_topic("budget", partitions=3)
    sizes = {}
    for p in range(3):
        b = build_batch([(b"k", os.urandom(10_000))])
        sizes[p] = len(b)
        assert (
            client.call(0, 9, produce("budget", b, partition=p))
            .responses[0]
            .partition_responses[0]
            .error_code
            == 0
        )
    parts = [(0, 0), (1, 0), (2, 0)]
    # room for one batch and a half: partition 0 gets its batch, the rest nothing
    got = by_partition(client.call(1, 12, fetch_many("budget", parts, max_bytes=15_000)))
    assert len(got[0].records) == sizes[0]
    assert not got[1].records and not got[2].records
    assert all(got[p].error_code == 0 and got[p].high_watermark == 1 for p in range(3))
    # max_bytes smaller than any batch still returns the first whole batch
    got = by_partition(client.call(1, 12, fetch_many("budget", parts, max_bytes=1)))
    assert len(got[0].records) == sizes[0]
    assert not got[1].records and not got[2].records
    # enough for everything
    got = by_partition(client.call(1, 12, fetch_many("budget", parts, max_bytes=1 << 20)))
    assert [len(got[p].records) for p in range(3)] == [sizes[0], sizes[1], sizes[2]]
    # the per-partition limit also leaves at least one batch
    got = by_partition(
        client.call(1, 12, fetch_many("budget", parts, max_bytes=1 << 20, partition_max_bytes=10))
    )
    assert len(got[0].records) == sizes[0] and not got[1].records


def test_fetch_response_carries_hw_lso_and_log_start_offset(broker, client):
    broker.create_topic("marks")
    for n in (3, 4):
        client.call(0, 9, produce("marks", build_batch([(b"k", b"v")] * n)))
    resp = client.call(
        21,
        2,
        DeleteRecordsRequest(
            topics=(
                DeleteRecordsTopic(
                    name="marks",
                    partitions=(DeleteRecordsPartition(partition_index=0, offset=3),),
                ),
            ),
            timeout=datetime.timedelta(seconds=5),
        ),
    )
    assert resp.topics[0].partitions[0].low_watermark == 3
    part = client.call(1, 12, fetch("marks", 3)).responses[0].partitions[0]
    assert part.error_code == ErrorCode.none
    assert (part.high_watermark, part.last_stable_offset, part.log_start_offset) == (7, 7, 3)
    assert [r.offset for _, r in iter_records(part.records)] == [3, 4, 5, 6]
    assert part.aborted_transactions is None  # read_uncommitted
    # below the log start: OFFSET_OUT_OF_RANGE, with the marks filled in
    low = client.call(1, 12, fetch("marks", 0)).responses[0].partitions[0]
    assert low.error_code == ErrorCode.offset_out_of_range
    assert (low.high_watermark, low.log_start_offset) == (7, 3)


def test_plaintext_fetch_sends_records_with_sendfile(broker, client, monkeypatch):
    broker.create_topic("zerocopy")
    payload = build_batch([(f"k{i}".encode(), os.urandom(3000)) for i in range(20)])
    client.call(0, 9, produce("zerocopy", payload))
    log_dir = str(broker.kafka.config.log_dirs[0])
    calls: list[tuple[int, str, int]] = []
    real_sendfile = os.sendfile

    def counting_sendfile(out_fd, in_fd, offset, count):
        n = real_sendfile(out_fd, in_fd, offset, count)
        calls.append((out_fd, os.readlink(f"/proc/self/fd/{in_fd}"), n))
        return n

    monkeypatch.setattr(os, "sendfile", counting_sendfile)
    part = client.call(1, 12, fetch("zerocopy", 0)).responses[0].partitions[0]
    monkeypatch.undo()
    conn_fds = {c.fd for c in broker.kafka.channel.connections}
    ours = [(fd, path, n) for fd, path, n in calls if fd in conn_fds]
    assert ours, "the records were not sent with os.sendfile"
    assert all(path.startswith(log_dir) and path.endswith(".log") for _, path, _ in ours)
    assert sum(n for _, _, n in ours) == len(part.records)
    # and the bytes are the stored batch (offsets assigned by the broker)
    recs = [r for _, r in iter_records(part.records)]
    assert [r.offset for r in recs] == list(range(20))
    assert [r.key for r in recs] == [f"k{i}".encode() for i in range(20)]


def test_request_behind_a_parked_long_poll_is_answered_after_it(broker, client):
    broker.create_topic("parked")
    client.call(0, 9, produce("parked", build_batch([(b"k", b"old")])))
    poll = client.send(1, 12, fetch_many("parked", [(0, 1)], max_bytes=1 << 20, max_wait_ms=10_000))
    behind = client.send(
        18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")
    )

    def produce_later():
        time.sleep(0.3)
        other = RawClient.to(broker.bootstrap_servers)
        other.call(0, 9, produce("parked", build_batch([(b"k", b"new")])))
        other.close()

    t = threading.Thread(target=produce_later)
    start = time.monotonic()
    t.start()
    first_cid, first = client.read_response(1, 12)
    second_cid, _ = client.read_response(18, 3)
    t.join()
    assert (first_cid, second_cid) == (poll, behind)
    # the fetch was parked at the log end and woken by the produce, not answered early
    [(_, rec)] = list(iter_records(first.responses[0].partitions[0].records))
    assert rec.value == b"new" and rec.offset == 1
    assert time.monotonic() - start < 5  # well under max_wait (10 s)


def test_segment_truncated_during_sendfile_aborts_the_connection(broker, client, monkeypatch):
    broker.create_topic("shrinks")
    client.call(0, 9, produce("shrinks", build_batch([(b"k", os.urandom(20_000))])))
    seg = str(broker.kafka.replica_manager.get_partition(("shrinks", 0)).log.dir)
    real_sendfile = os.sendfile
    truncated = []

    def truncating_sendfile(out_fd, in_fd, offset, count):
        path = os.readlink(f"/proc/self/fd/{in_fd}")
        if path.startswith(seg) and not truncated:
            os.truncate(path, offset + 100)  # the file loses its tail mid-response
            truncated.append(path)
        return real_sendfile(out_fd, in_fd, offset, count)

    monkeypatch.setattr(os, "sendfile", truncating_sendfile)
    cid = client.send(1, 12, fetch("shrinks", 0))
    head = client._read_exact(4)
    (size,) = struct.unpack(">i", head)
    received = b""
    with pytest.raises(ConnectionError):
        while len(received) < size:
            chunk = client.sock.recv(size - len(received))
            if not chunk:
                raise ConnectionError("closed")
            received += chunk
    monkeypatch.undo()
    assert truncated
    assert struct.unpack_from(">i", received)[0] == cid
    assert len(received) < size  # the frame was never completed with made-up bytes
    # the broker keeps serving others
    assert_still_serving(broker)


def test_small_fetch_responses_are_copied_into_one_sendmsg(broker, client, monkeypatch):
    """A few KiB at the log end cost less as pread + one sendmsg than as sendfile;
    the bytes on the wire are the stored batch either way."""
    broker.create_topic("tail")
    client.call(0, 9, produce("tail", build_batch([(b"k", b"v" * 2000)])))
    calls: list[int] = []
    real_sendfile = os.sendfile

    def counting_sendfile(out_fd, in_fd, offset, count):
        calls.append(count)
        return real_sendfile(out_fd, in_fd, offset, count)

    monkeypatch.setattr(os, "sendfile", counting_sendfile)
    part = client.call(1, 12, fetch("tail", 0)).responses[0].partitions[0]
    monkeypatch.undo()
    assert not calls
    assert 0 < len(part.records) <= COPY_RANGE_BYTES
    [(_, rec)] = list(iter_records(part.records))
    assert (rec.offset, rec.key, rec.value) == (0, b"k", b"v" * 2000)


def test_segment_truncated_before_a_copied_range_aborts_the_connection(broker, client, monkeypatch):
    """The frame size promised the range: a short read is never padded or sent short."""
    broker.create_topic("shrinks-small")
    client.call(0, 9, produce("shrinks-small", build_batch([(b"k", os.urandom(3000))])))
    lg = broker.kafka.replica_manager.get_partition(("shrinks-small", 0)).log
    seg, size = str(lg.dir), lg.size_in_bytes
    real_pread = os.pread
    truncated = []

    def truncating_pread(fd, count, offset):
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.startswith(seg) and path.endswith(".log") and count == size and not truncated:
            os.truncate(path, offset + 100)
            truncated.append(path)
        return real_pread(fd, count, offset)

    monkeypatch.setattr(os, "pread", truncating_pread)
    cid = client.send(1, 12, fetch("shrinks-small", 0))
    received = b""
    with pytest.raises(ConnectionError):
        while True:
            chunk = client.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("closed")
            received += chunk
    monkeypatch.undo()
    assert truncated
    # nothing of the response went out, or at most a frame that is not complete
    if len(received) >= 8:
        (frame_size,) = struct.unpack_from(">i", received)
        assert struct.unpack_from(">i", received, 4)[0] == cid
        assert len(received) - 4 < frame_size
    assert_still_serving(broker)


def test_request_max_bytes_above_fetch_max_bytes_is_capped_by_the_broker(kafka_broker_factory):
    """Kafka's KafkaApis serves min(request max_bytes, fetch.max.bytes): a consumer asking
    for 100 MiB of a broker with fetch.max.bytes=1024 gets about 1 KiB (whole first batch)."""
    broker = kafka_broker_factory(**{"fetch.max.bytes": 1024})
    broker.create_topic("capped", partitions=2)
    c = RawClient.to(broker.bootstrap_servers)
    try:
        sizes = []
        for p in range(2):
            b = build_batch([(b"k", os.urandom(700))])
            sizes.append(len(b))
            resp = c.call(0, 9, produce("capped", b, partition=p))
            assert resp.responses[0].partition_responses[0].error_code == 0
        parts = [(0, 0), (1, 0)]
        asked = 100 << 20
        got = by_partition(
            c.call(1, 12, fetch_many("capped", parts, max_bytes=asked, partition_max_bytes=asked))
        )
        # the first batch (about 800 bytes) fits; the second would pass 1024
        assert len(got[0].records) == sizes[0]
        assert not got[1].records
        assert got[1].error_code == 0 and got[1].high_watermark == 1
    finally:
        c.close()
