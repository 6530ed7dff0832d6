"""Hostile request frames against a real broker over TCP (issue 13, items 1 and 5).

Each test sends the smallest frame that showed a class of problem: the broker
answers it with Kafka's error code, or closes the connection with one warning
line (Kafka's SocketServer closes on a body it cannot parse), never aborts or
logs a traceback, and keeps serving another client.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import struct
import time

import pytest
from kio.schema.alter_configs.v0.request import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
)
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.heartbeat.v4.request import HeartbeatRequest

from kafkalite.protocol import messages
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import build_batch
from tests.server.raw_client import RawClient, api_versions, produce, request_bytes


def assert_broker_serves(bootstrap: str) -> None:
    c = RawClient.to(bootstrap)
    try:
        assert c.call(18, 3, api_versions()).error_code == ErrorCode.none
    finally:
        c.close()


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def send_and_expect_close(bootstrap: str, frame: bytes) -> None:
    c = RawClient.to(bootstrap)
    try:
        c.send_raw(frame)
        assert c.is_closed()
    finally:
        c.close()


def header(api_key: int, version: int, flexible: bool, correlation_id: int = 1) -> bytes:
    """Request header with a null client_id."""
    return struct.pack(">hhih", api_key, version, correlation_id, -1) + (
        b"\x00" if flexible else b""
    )


def sized(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_19_byte_metadata_frame_with_compact_count_2_32_minus_2_closes_connection(
    kafka_bootstrap, caplog
):
    # kio's native reader allocated 32 GiB for this count and Rust aborted the process
    frame = sized(header(3, 12, True) + b"\xff\xff\xff\xff\x0f" + b"\x01\x00\x00")
    assert len(frame) == 23 and len(frame) - 4 == 19
    with caplog.at_level(logging.WARNING):
        send_and_expect_close(kafka_bootstrap, frame)
    assert_broker_serves(kafka_bootstrap)
    assert any("4294967294 elements in 3 bytes" in r.getMessage() for r in caplog.records)
    assert tracebacks(caplog) == []


def test_legacy_array_count_0x7fffffff_closes_connection(kafka_bootstrap, caplog):
    # kio reserved 17 GB for it before failing: refused by the boundary, not by kio
    frame = sized(header(3, 4, False) + b"\x7f\xff\xff\xff" + b"\x01")
    with caplog.at_level(logging.WARNING):
        send_and_expect_close(kafka_bootstrap, frame)
    assert_broker_serves(kafka_bootstrap)
    assert any("2147483647 elements in 1 bytes" in r.getMessage() for r in caplog.records)
    assert tracebacks(caplog) == []


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        (15, 5, b"\x00\x00\x00"),  # DescribeGroups v5: groups compact null
        (15, 0, b"\xff\xff\xff\xff"),  # DescribeGroups v0: groups -1
        (10, 4, b"\x00\x00\x00"),  # FindCoordinator v4: coordinator_keys compact null
        (19, 2, b"\xff\xff\xff\xff" + bytes(5)),  # CreateTopics v2: topics -1
        (44, 1, b"\x00\x00\x00"),  # IncrementalAlterConfigs v1: resources compact null
    ],
    ids=[
        "DescribeGroups-v5",
        "DescribeGroups-v0",
        "FindCoordinator-v4",
        "CreateTopics-v2",
        "IncrementalAlterConfigs-v1",
    ],
)
def test_null_non_nullable_array_closes_connection_without_traceback(
    kafka_bootstrap, caplog, api_key, version, body
):
    # these reached handlers that iterated None (TypeError, a traceback per request);
    # Kafka's readers throw "non-nullable field ... was serialized as null" and it closes
    flexible = messages.is_flexible_request(api_key, version)
    with caplog.at_level(logging.WARNING):
        send_and_expect_close(kafka_bootstrap, sized(header(api_key, version, flexible) + body))
    assert_broker_serves(kafka_bootstrap)
    assert any("was null" in r.getMessage() for r in caplog.records)
    assert tracebacks(caplog) == []


def test_null_nullable_array_is_answered(kafka_bootstrap):
    # OffsetFetch v7: topics null (nullable from v2) asks for every committed offset
    c = RawClient.to(kafka_bootstrap)
    try:
        c.send_raw(sized(header(9, 7, True, 3) + b"\x02g" + b"\x00" + b"\x00" + b"\x00"))
        cid, resp = c.read_response(9, 7)
        assert cid == 3  # answered (NOT_COORDINATOR until __consumer_offsets exists)
        assert resp.topics == ()
    finally:
        c.close()


def test_compact_string_longer_than_32767_bytes_closes_connection(kafka_bootstrap, caplog):
    n = 32768  # Kafka: "string field groupId had invalid length 32768"
    length = bytes([(n + 1) & 0x7F | 0x80, ((n + 1) >> 7) & 0x7F | 0x80, (n + 1) >> 14])
    body = length + b"g" * n + b"\x00\x00\x00\x01" + b"\x01\x01\x00"  # Heartbeat v4
    with caplog.at_level(logging.WARNING):
        send_and_expect_close(kafka_bootstrap, sized(header(12, 4, True) + body))
    assert_broker_serves(kafka_bootstrap)
    assert any("invalid length 32768" in r.getMessage() for r in caplog.records)
    assert tracebacks(caplog) == []


def test_unknown_tagged_field_in_body_is_skipped_and_answered(kafka_bootstrap):
    # Kafka's generated readers skip tags they do not know; kio raised on them
    body = messages.encode(
        HeartbeatRequest(group_id="no-such-group", generation_id=1, member_id="m")
    )
    tagged = body[:-1] + b"\x01" + b"\x63\x02hi"  # tag 99, 2 bytes
    c = RawClient.to(kafka_bootstrap)
    try:
        c.send_raw(sized(header(12, 4, True, 7) + tagged))
        cid, _resp = c.read_response(12, 4)
        assert cid == 7
    finally:
        c.close()


def test_client_id_that_is_not_utf8_is_answered_as_kafka_does(kafka_bootstrap):
    # Java decodes it with U+FFFD replacement; the request is served
    payload = struct.pack(">hhih", 18, 0, 5, 2) + b"\xff\xfe"
    c = RawClient.to(kafka_bootstrap)
    try:
        c.send_raw(sized(payload))
        cid, resp = c.read_response(18, 0)
        assert (cid, resp.error_code) == (5, ErrorCode.none)
    finally:
        c.close()


def test_error_message_echoing_a_32767_byte_name_is_answered(kafka_bootstrap, caplog):
    # AlterConfigs v0 (legacy strings): the error message quoted the 32767-byte topic name,
    # and a legacy string cannot hold more than 32767 bytes: writing the response failed
    name = "t" * 32767
    req = AlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=2,
                resource_name=name,
                configs=(AlterableConfig(name="cleanup.policy", value="delete"),),
            ),
        ),
        validate_only=False,
    )
    c = RawClient.to(kafka_bootstrap)
    try:
        with caplog.at_level(logging.WARNING):
            resp = c.call(33, 0, req)
    finally:
        c.close()
    (r,) = resp.responses
    assert r.resource_name == name
    assert r.error_code != ErrorCode.none
    assert r.error_message is not None and len(r.error_message.encode()) <= 32767
    assert tracebacks(caplog) == []


def _fetch_v12(topic: str, offset: int, partition_max_bytes: int, max_bytes: int) -> FetchRequest:
    return FetchRequest(
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(
                    FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=partition_max_bytes
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


@pytest.mark.parametrize(
    ("partition_max_bytes", "max_bytes"), [(-1, 1 << 20), (-(2**31), 1 << 20), (1 << 20, -1)]
)
def test_negative_fetch_max_bytes_answers_unknown_server_error_as_kafka_does(
    kafka_bootstrap, kafka_topic, caplog, partition_max_bytes, max_bytes
):
    # Kafka's LogSegment.read throws IllegalArgumentException("Invalid max size") and the
    # fetch answers that partition UNKNOWN_SERVER_ERROR; at the log end there is nothing to read
    c = RawClient.to(kafka_bootstrap)
    try:
        assert c.call(0, 9, produce(kafka_topic, build_batch([(b"k", b"v")]))).responses
        with caplog.at_level(logging.WARNING):
            resp = c.call(1, 12, _fetch_v12(kafka_topic, 0, partition_max_bytes, max_bytes))
            (p,) = resp.responses[0].partitions
            assert p.error_code == ErrorCode.unknown_server_error
            at_end = c.call(1, 12, _fetch_v12(kafka_topic, 1, partition_max_bytes, max_bytes))
            (p,) = at_end.responses[0].partitions
            assert p.error_code == ErrorCode.none and not p.records
    finally:
        c.close()
    assert_broker_serves(kafka_bootstrap)
    assert tracebacks(caplog) == []


def _broken_handler(_ctx, _req):
    raise RuntimeError("a bug in a handler")


async def _broken_async_handler(_ctx, _req):
    raise RuntimeError("a bug in a handler")


@pytest.mark.parametrize("handler", [_broken_handler, _broken_async_handler], ids=["sync", "async"])
def test_handler_exception_is_answered_unknown_server_error_with_one_traceback_per_cause(
    kafka_broker_factory, caplog, handler
):
    # Kafka's KafkaApis.handleError: the API's error response, the connection kept
    b = kafka_broker_factory()
    table = b.kafka.channel.api_table
    table[12] = dataclasses.replace(table[12], handler=handler)
    req = HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    c = RawClient.to(b.bootstrap_servers)
    try:
        with caplog.at_level(logging.WARNING):
            for _ in range(3):
                assert c.call(12, 4, req).error_code == ErrorCode.unknown_server_error
    finally:
        c.close()
    assert_broker_serves(b.bootstrap_servers)
    with_traceback = [r for r in caplog.records if r.exc_info]
    assert len(with_traceback) == 1
    closes = [r for r in caplog.records if "a bug in a handler" in r.getMessage()]
    assert len(closes) == 3
    assert all("Heartbeat v4 failed: RuntimeError" in r.getMessage() for r in closes)


def test_handler_exception_closes_the_connection_when_the_request_has_no_response(
    kafka_broker_factory, caplog
):
    # acks=0 Produce: closing is the only way to tell the client (Kafka does the same)
    b = kafka_broker_factory()
    table = b.kafka.channel.api_table
    table[0] = dataclasses.replace(table[0], handler=_broken_handler)
    frame = request_bytes(0, 9, 1, produce("t", build_batch([(b"k", b"v")]), acks=0))
    with caplog.at_level(logging.WARNING):
        send_and_expect_close(b.bootstrap_servers, frame)
    assert_broker_serves(b.bootstrap_servers)
    closes = [r for r in caplog.records if "a bug in a handler" in r.getMessage()]
    assert len(closes) == 1 and "Produce v9 failed: RuntimeError" in closes[0].getMessage()


def join_group_v5(c: RawClient, req: object, client_id: str = "raw") -> object:
    """JoinGroup v5, again while the group coordinator is not ready (__consumer_offsets)."""
    from kio.schema.find_coordinator.v1.request import FindCoordinatorRequest

    for _ in range(100):
        c.send(11, 5, req, client_id=client_id)
        _cid, resp = c.read_response(11, 5)
        if resp.error_code not in (
            ErrorCode.not_coordinator,
            ErrorCode.coordinator_not_available,
            ErrorCode.coordinator_load_in_progress,
        ):
            return resp
        c.call(10, 1, FindCoordinatorRequest(key=req.group_id, key_type=0))  # type: ignore[attr-defined]
        time.sleep(0.1)
    raise AssertionError("the group coordinator never became ready")


def test_join_group_repeating_a_protocol_name_is_answered(kafka_bootstrap, caplog):
    # the name was counted twice for one member, so no protocol was "supported by every
    # member": completing the join raised, and the JoinGroup was never answered
    from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol

    req = JoinGroupRequest(
        group_id="repeated-protocol",
        session_timeout=datetime.timedelta(seconds=10),
        rebalance_timeout=datetime.timedelta(seconds=1),
        member_id="",
        group_instance_id="static-1",
        protocol_type="consumer",
        protocols=(
            JoinGroupRequestProtocol(name="range", metadata=b""),
            JoinGroupRequestProtocol(name="range", metadata=b"x"),
        ),
    )
    c = RawClient.to(kafka_bootstrap)
    try:
        with caplog.at_level(logging.WARNING):
            resp = join_group_v5(c, req)
    finally:
        c.close()
    assert resp.error_code == ErrorCode.none
    assert resp.protocol_name == "range"
    assert tracebacks(caplog) == []


def test_member_id_from_a_32767_byte_client_id_fits_a_string(kafka_bootstrap, caplog):
    # the member id is "<client id>-<uuid>": 32804 bytes, which no response could carry
    from kio.schema.describe_groups.v3.request import DescribeGroupsRequest
    from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol

    client_id = "c" * 32767
    req = JoinGroupRequest(
        group_id="long-client-id",
        session_timeout=datetime.timedelta(seconds=10),
        rebalance_timeout=datetime.timedelta(seconds=1),
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),),
    )
    c = RawClient.to(kafka_bootstrap)
    try:
        with caplog.at_level(logging.WARNING):
            resp = join_group_v5(c, req, client_id)
            assert resp.error_code == ErrorCode.member_id_required  # KIP-394: join again
            assert len(resp.member_id.encode()) <= 32767
            assert resp.member_id.startswith("ccc")
            described = c.call(
                15,
                3,
                DescribeGroupsRequest(
                    groups=("long-client-id",), include_authorized_operations=False
                ),
            )
            assert described.groups[0].group_id == "long-client-id"
    finally:
        c.close()
    assert tracebacks(caplog) == []
