"""Protocol edge cases against a real broker over TCP: bad input gets a Kafka error
code or a closed connection, and the broker keeps serving everyone else."""

from __future__ import annotations

import datetime
import struct

import pytest
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import build_batch
from tests.server.raw_client import RawClient, api_versions, fetch, produce, request_bytes

TIMEOUT = datetime.timedelta(seconds=10)


def metadata(*topics: str, auto: bool = False) -> MetadataRequest:
    return MetadataRequest(
        topics=tuple(MetadataRequestTopic(name=t, topic_id=None) for t in topics),
        allow_auto_topic_creation=auto,
        include_topic_authorized_operations=False,
    )


def batch(n: int = 3) -> bytes:
    return build_batch([(f"k{i}".encode(), f"v{i}".encode()) for i in range(n)])


@pytest.fixture
def client(kafka_bootstrap):
    c = RawClient.to(kafka_bootstrap)
    yield c
    c.close()


def assert_broker_serves(bootstrap):
    c = RawClient.to(bootstrap)
    try:
        resp = c.call(18, 3, api_versions())
        assert resp.error_code == ErrorCode.none
    finally:
        c.close()


def test_pipelined_requests_are_answered_in_order(client):
    cids = []
    data = b""
    for i in range(50):
        cids.append(1000 + i)
        body = api_versions() if i % 2 == 0 else metadata()
        data += request_bytes(18 if i % 2 == 0 else 3, 3 if i % 2 == 0 else 12, 1000 + i, body)
    client.send_raw(data)
    got = [struct.unpack_from(">i", client.read_frame())[0] for _ in cids]
    assert got == cids


def test_null_client_id_is_accepted(client):
    cid = client.send(18, 3, api_versions(), client_id=None)
    got, resp = client.read_response(18, 3)
    assert got == cid and resp.error_code == ErrorCode.none


def test_api_versions_lists_every_handled_api(client, kafka_broker):
    resp = client.call(18, 3, api_versions())
    advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    table = kafka_broker.kafka.channel.api_table
    assert advertised == {
        k: (
            s.min_version if s.advertised_min_version is None else s.advertised_min_version,
            s.max_version,
        )
        for k, s in table.items()
    }
    assert advertised[0][0] == 0  # Produce from v0, as Kafka 4 does for librdkafka's sake
    assert advertised[18] == (0, 4)
    assert kafka_broker.kafka.channel.connections  # connection recorded
    names = {c.client_software_name for c in kafka_broker.kafka.channel.connections}
    assert "raw-test" in names


def test_api_versions_above_ours_gets_v0_shaped_unsupported_version(client):
    raw = request_bytes(18, 99, 77, b"")
    client.send_raw(raw)
    frame = client.read_frame()
    cid, err, n = struct.unpack_from(">ihi", frame, 0)
    assert cid == 77
    assert err == ErrorCode.unsupported_version
    assert n > 5  # the api list, v0 layout (int32 count, no tagged fields)
    keys = [struct.unpack_from(">hhh", frame, 10 + 6 * i)[0] for i in range(n)]
    assert 18 in keys and 0 in keys


def test_unknown_api_key_closes_connection_and_broker_keeps_serving(client, kafka_bootstrap):
    client.send_raw(request_bytes(999, 0, 1, b""))
    assert client.is_closed()
    assert_broker_serves(kafka_bootstrap)


def test_unsupported_version_of_other_api_closes_connection(client, kafka_bootstrap):
    client.send_raw(request_bytes(3, 99, 1, b""))
    assert client.is_closed()
    assert_broker_serves(kafka_bootstrap)


def test_garbage_body_closes_connection_and_others_unaffected(client, kafka_bootstrap):
    other = RawClient.to(kafka_bootstrap)
    try:
        payload = struct.pack(">hhi", 3, 12, 5) + b"\x00\x03raw" + b"\x00" + b"\xff" * 40
        client.send_raw(struct.pack(">i", len(payload)) + payload)
        assert client.is_closed()
        assert other.call(18, 3, api_versions()).error_code == ErrorCode.none
    finally:
        other.close()


def test_truncated_frame_then_disconnect_leaves_broker_serving(client, kafka_bootstrap):
    client.send_raw(struct.pack(">i", 1000) + b"\x00\x12\x00\x03")
    client.close()
    assert_broker_serves(kafka_bootstrap)


def test_frame_over_socket_request_max_bytes_closes_connection(kafka_broker_factory):
    b = kafka_broker_factory(**{"socket.request.max.bytes": 1024})
    c = RawClient.to(b.bootstrap_servers)
    c.send_raw(struct.pack(">i", 4096) + b"\x00" * 100)
    assert c.is_closed()
    assert_broker_serves(b.bootstrap_servers)


def test_bad_crc_gets_corrupt_message(client, kafka_topic, kafka_broker):
    data = bytearray(batch())
    data[-1] ^= 0xFF
    resp = client.call(0, 9, produce(kafka_topic, bytes(data)))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.corrupt_message
    # nothing was appended
    assert kafka_broker.records(kafka_topic) == []


def test_legacy_magic_v1_is_rejected_with_unsupported_version(client, kafka_topic, kafka_broker):
    """v3+ produce requests may only carry magic 2 batches. Kafka 4 answers INVALID_RECORD;
    kafkalite answers UNSUPPORTED_VERSION as its spec asks (docs/status.md notes the difference)."""
    # offset, size, crc, magic=1, attributes, timestamp, key=-1, value "x"
    body = struct.pack(">bbqi", 1, 0, 0, -1) + struct.pack(">i", 1) + b"x"
    msg = struct.pack(">I", 0) + body
    legacy = struct.pack(">qi", 0, len(msg)) + msg
    resp = client.call(0, 9, produce(kafka_topic, legacy + b"\x00" * 60))
    r = resp.responses[0].partition_responses[0]
    assert r.error_code == ErrorCode.unsupported_version
    assert "magic version 2" in r.error_message
    assert kafka_broker.records(kafka_topic) == []


def test_acks_2_gets_invalid_required_acks(client, kafka_topic):
    resp = client.call(0, 9, produce(kafka_topic, batch(), acks=2))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.invalid_required_acks


def test_acks_0_gets_no_response(client, kafka_topic, kafka_broker):
    client.send(0, 9, produce(kafka_topic, batch(), acks=0))
    cid = client.send(18, 3, api_versions())
    got, _ = client.read_response(18, 3)
    assert got == cid  # the produce got no response; the next one is the ApiVersions
    assert len(kafka_broker.records(kafka_topic)) == 3


def test_produce_response_has_base_offset_and_log_start(client, kafka_topic):
    r1 = client.call(0, 9, produce(kafka_topic, batch(3))).responses[0].partition_responses[0]
    r2 = client.call(0, 9, produce(kafka_topic, batch(2))).responses[0].partition_responses[0]
    assert (r1.error_code, r1.base_offset, r1.log_start_offset) == (0, 0, 0)
    assert r2.base_offset == 3
    assert r1.log_append_time is None  # -1 on CreateTime topics


def test_message_too_large(kafka_broker_factory):
    b = kafka_broker_factory(**{"message.max.bytes": 2000})
    b.create_topic("big")
    c = RawClient.to(b.bootstrap_servers)
    big = build_batch([(b"k", b"v" * 5000)])
    resp = c.call(0, 9, produce("big", big))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.message_too_large
    c.close()


def test_fetch_beyond_end_is_offset_out_of_range_and_at_end_is_empty(client, kafka_topic):
    client.call(0, 9, produce(kafka_topic, batch(3)))
    beyond = client.call(1, 12, fetch(kafka_topic, 10)).responses[0].partitions[0]
    assert beyond.error_code == ErrorCode.offset_out_of_range
    at_end = client.call(1, 12, fetch(kafka_topic, 3)).responses[0].partitions[0]
    assert at_end.error_code == ErrorCode.none and not at_end.records
    assert at_end.high_watermark == 3


def test_invalid_topic_name_gets_error_17(client):
    resp = client.call(
        19,
        7,
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name="bad/name",
                    num_partitions=1,
                    replication_factor=1,
                    assignments=(),
                    configs=(),
                ),
            ),
            timeout=TIMEOUT,
            validate_only=False,
        ),
    )
    assert resp.topics[0].error_code == ErrorCode.invalid_topic_exception
    md = client.call(3, 12, metadata("bad/name", auto=True))
    assert md.topics[0].error_code == ErrorCode.invalid_topic_exception


def test_unknown_topic_without_auto_create(client):
    md = client.call(3, 12, metadata("never-created-topic", auto=False))
    assert md.topics[0].error_code == ErrorCode.unknown_topic_or_partition


def test_produce_to_unknown_partition(client, kafka_topic):
    resp = client.call(0, 9, produce(kafka_topic, batch(), partition=99))
    assert (
        resp.responses[0].partition_responses[0].error_code == ErrorCode.unknown_topic_or_partition
    )


def test_produce_v2_is_advertised_but_closes_the_connection(client, kafka_bootstrap):
    client.send_raw(request_bytes(0, 2, 1, b"\xff\xff\x00\x01\x00\x00\x75\x30\x00\x00\x00\x00"))
    assert client.is_closed()
    assert_broker_serves(kafka_bootstrap)


@pytest.mark.parametrize("version", [4, 7, 11, 12, 16])
def test_fetch_with_records_is_answered_for_flexible_and_legacy_versions(
    client, kafka_topic, version
):
    """Regression: a non-flexible response ends in an empty chunk after the
    sendfile range, which once made the writer spin forever."""
    from kafkalite.protocol import messages

    client.call(0, 9, produce(kafka_topic, batch(3)))
    req = messages.build(
        messages.request_type(1, version),
        {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": kafka_topic,
                    "topic_id": kafka_broker_topic_id(client, kafka_topic),
                    "partitions": [
                        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                    ],
                }
            ],
        },
    )
    resp = client.call(1, version, req)
    part = resp.responses[0].partitions[0]
    assert part.error_code == ErrorCode.none and part.high_watermark == 3
    assert len(part.records) > 61


def kafka_broker_topic_id(client, topic):
    md = client.call(3, 12, metadata(topic))
    return md.topics[0].topic_id


def test_idle_connection_is_closed_after_connections_max_idle_ms(kafka_broker_factory):
    b = kafka_broker_factory(**{"connections.max.idle.ms": 300})
    idle = RawClient.to(b.bootstrap_servers)
    busy = RawClient.to(b.bootstrap_servers)
    try:
        import time

        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:  # keep one connection active
            assert busy.call(18, 3, api_versions()).error_code == ErrorCode.none
            time.sleep(0.1)
        assert idle.is_closed(timeout=0.5)
        assert busy.call(18, 3, api_versions()).error_code == ErrorCode.none
    finally:
        idle.close()
        busy.close()
