"""Inter-broker controller codecs (LeaderAndIsr, StopReplica, UpdateMetadata,
ControlledShutdown): byte-exact against hand-built bytes for a flexible and a
non-flexible version of each, and round trips for every version."""

from __future__ import annotations

import struct
import uuid

import pytest

from kafkalite.protocol import inter_broker as ib

TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


# ---- hand encoding ------------------------------------------------------------------
def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s16(s: str | None) -> bytes:  # legacy (nullable) string
    return i16(-1) if s is None else i16(len(s)) + s.encode()


def cs(s: str | None) -> bytes:  # compact (nullable) string; lengths here fit one byte
    return b"\x00" if s is None else bytes([len(s) + 1]) + s.encode()


def a32(*items: bytes) -> bytes:  # legacy array of pre-encoded items
    return i32(len(items)) + b"".join(items)


def ca(*items: bytes) -> bytes:  # compact array of pre-encoded items
    return bytes([len(items) + 1]) + b"".join(items)


def ints32(*xs: int) -> bytes:
    return a32(*(i32(x) for x in xs))


def cints(*xs: int) -> bytes:
    return ca(*(i32(x) for x in xs))


TAGS = b"\x00"  # an empty tagged-field section


def check(api_key: int, version: int, obj: object, raw: bytes, *, response: bool) -> None:
    enc = ib.encode_response if response else ib.encode_request
    dec = ib.decode_response if response else ib.decode_request
    assert enc(api_key, version, obj) == raw
    assert dec(api_key, version, raw) == obj


# ---- LeaderAndIsr -------------------------------------------------------------------
def lair_state(**kw: object) -> ib.LeaderAndIsrPartitionState:
    base: dict[str, object] = dict(
        partition_index=0,
        controller_epoch=5,
        leader=1,
        leader_epoch=3,
        isr=[1, 2],
        partition_epoch=4,
        replicas=[1, 2, 3],
    )
    base.update(kw)
    return ib.LeaderAndIsrPartitionState(**base)  # type: ignore[arg-type]


def test_leader_and_isr_v7_request_flexible():
    req = ib.LeaderAndIsrRequest(
        controller_id=1,
        controller_epoch=5,
        topic_states=[
            ib.LeaderAndIsrTopicState(
                "t",
                [lair_state(adding_replicas=[3], is_new=True, leader_recovery_state=1)],
                TOPIC_ID,
            )
        ],
        live_leaders=[ib.LeaderAndIsrLiveLeader(1, "h", 9092)],
        broker_epoch=77,
        type=2,
        is_kraft_controller=False,
    )
    partition = (
        i32(0) + i32(5) + i32(1) + i32(3) + cints(1, 2) + i32(4) + cints(1, 2, 3)
        + cints(3) + cints() + b"\x01" + i8(1) + TAGS
    )  # fmt: skip
    raw = (
        i32(1) + b"\x00" + i32(5) + i64(77) + i8(2)
        + ca(cs("t") + TOPIC_ID.bytes + ca(partition) + TAGS)
        + ca(i32(1) + cs("h") + i32(9092) + TAGS)
        + TAGS
    )  # fmt: skip
    check(4, 7, req, raw, response=False)


def test_leader_and_isr_v1_request_lists_topic_in_each_partition():
    req = ib.LeaderAndIsrRequest(
        controller_id=2,
        controller_epoch=9,
        topic_states=[
            ib.LeaderAndIsrTopicState("a", [lair_state(), lair_state(partition_index=1)]),
            ib.LeaderAndIsrTopicState("b", [lair_state(is_new=True)]),
        ],
        live_leaders=[ib.LeaderAndIsrLiveLeader(1, "host1", 9093)],
    )

    def state(topic: str, p: int, is_new: bool) -> bytes:
        return (
            s16(topic) + i32(p) + i32(5) + i32(1) + i32(3) + ints32(1, 2) + i32(4)
            + ints32(1, 2, 3) + (b"\x01" if is_new else b"\x00")
        )  # fmt: skip

    raw = (
        i32(2) + i32(9)
        + a32(state("a", 0, False), state("a", 1, False), state("b", 0, True))
        + a32(i32(1) + s16("host1") + i32(9093))
    )  # fmt: skip
    check(4, 1, req, raw, response=False)


def test_leader_and_isr_responses():
    v7 = ib.LeaderAndIsrResponse(
        0,
        topics=[
            ib.LeaderAndIsrTopicError(
                TOPIC_ID,
                [ib.LeaderAndIsrPartitionError(0, 0), ib.LeaderAndIsrPartitionError(1, 11)],
            )
        ],
    )
    raw7 = (
        i16(0)
        + ca(TOPIC_ID.bytes + ca(i32(0) + i16(0) + TAGS, i32(1) + i16(11) + TAGS) + TAGS)
        + TAGS
    )
    check(4, 7, v7, raw7, response=True)
    v3 = ib.LeaderAndIsrResponse(11, [ib.LeaderAndIsrPartitionError(2, 11, "t")])
    check(4, 3, v3, i16(11) + a32(s16("t") + i32(2) + i16(11)), response=True)


# ---- StopReplica --------------------------------------------------------------------
def test_stop_replica_v4_request_flexible_per_partition_delete():
    req = ib.StopReplicaRequest(
        controller_id=1,
        controller_epoch=3,
        topic_states=[
            ib.StopReplicaTopicState(
                "t",
                [
                    ib.StopReplicaPartitionState(0, -2, True),
                    ib.StopReplicaPartitionState(1, 7, False),
                ],
            )
        ],
        broker_epoch=12,
    )
    raw = (
        i32(1) + b"\x00" + i32(3) + i64(12)
        + ca(cs("t") + ca(i32(0) + i32(-2) + b"\x01" + TAGS, i32(1) + i32(7) + b"\x00" + TAGS) + TAGS)
        + TAGS
    )  # fmt: skip
    check(5, 4, req, raw, response=False)


def test_stop_replica_v1_and_v0_requests():
    parts = [ib.StopReplicaPartitionState(0, -1, True), ib.StopReplicaPartitionState(2, -1, True)]
    req = ib.StopReplicaRequest(
        1, 3, [ib.StopReplicaTopicState("t", parts)], broker_epoch=12, delete_partitions=True
    )
    raw1 = i32(1) + i32(3) + i64(12) + b"\x01" + a32(s16("t") + ints32(0, 2))
    check(5, 1, req, raw1, response=False)
    req.broker_epoch = -1
    raw0 = i32(1) + i32(3) + b"\x01" + a32(s16("t") + i32(0), s16("t") + i32(2))
    check(5, 0, req, raw0, response=False)


def test_stop_replica_responses():
    resp = ib.StopReplicaResponse(0, [ib.StopReplicaPartitionError("t", 0, 74)])
    check(5, 4, resp, i16(0) + ca(cs("t") + i32(0) + i16(74) + TAGS) + TAGS, response=True)
    check(5, 0, resp, i16(0) + a32(s16("t") + i32(0) + i16(74)), response=True)


# ---- UpdateMetadata -----------------------------------------------------------------
def um_state(**kw: object) -> ib.UpdateMetadataPartitionState:
    base: dict[str, object] = dict(
        partition_index=0,
        controller_epoch=2,
        leader=1,
        leader_epoch=0,
        isr=[1],
        zk_version=0,
        replicas=[1, 2],
    )
    base.update(kw)
    return ib.UpdateMetadataPartitionState(**base)  # type: ignore[arg-type]


def test_update_metadata_v8_request_flexible():
    req = ib.UpdateMetadataRequest(
        controller_id=1,
        controller_epoch=2,
        topic_states=[ib.UpdateMetadataTopicState("t", [um_state(offline_replicas=[2])], TOPIC_ID)],
        live_brokers=[
            ib.UpdateMetadataBroker(
                1, [ib.UpdateMetadataEndpoint(9092, "h", "PLAINTEXT", 0)], rack=None
            ),
            ib.UpdateMetadataBroker(2, [ib.UpdateMetadataEndpoint(9093, "g", "SSL", 1)], "r1"),
        ],
        broker_epoch=40,
    )
    state = i32(0) + i32(2) + i32(1) + i32(0) + cints(1) + i32(0) + cints(1, 2) + cints(2) + TAGS
    raw = (
        i32(1) + b"\x00" + i32(2) + i64(40)
        + ca(cs("t") + TOPIC_ID.bytes + ca(state) + TAGS)
        + ca(
            i32(1) + ca(i32(9092) + cs("h") + cs("PLAINTEXT") + i16(0) + TAGS) + cs(None) + TAGS,
            i32(2) + ca(i32(9093) + cs("g") + cs("SSL") + i16(1) + TAGS) + cs("r1") + TAGS,
        )
        + TAGS
    )  # fmt: skip
    check(6, 8, req, raw, response=False)


def test_update_metadata_v5_request_not_flexible():
    req = ib.UpdateMetadataRequest(
        1,
        2,
        [ib.UpdateMetadataTopicState("t", [um_state(), um_state(partition_index=1, leader=-2)])],
        [ib.UpdateMetadataBroker(1, [ib.UpdateMetadataEndpoint(9092, "h", "INTERNAL", 0)], "r")],
        broker_epoch=40,
    )

    def state(p: int, leader: int) -> bytes:
        return i32(p) + i32(2) + i32(leader) + i32(0) + ints32(1) + i32(0) + ints32(1, 2) + ints32()

    raw = (
        i32(1) + i32(2) + i64(40)
        + a32(s16("t") + a32(state(0, 1), state(1, -2)))
        + a32(i32(1) + a32(i32(9092) + s16("h") + s16("INTERNAL") + i16(0)) + s16("r"))
    )  # fmt: skip
    check(6, 5, req, raw, response=False)


def test_update_metadata_v0_request_single_host_port():
    req = ib.UpdateMetadataRequest(
        1,
        2,
        [ib.UpdateMetadataTopicState("t", [um_state()])],
        [ib.UpdateMetadataBroker(1, [ib.UpdateMetadataEndpoint(9092, "h", "PLAINTEXT", 0)])],
    )
    state = s16("t") + i32(0) + i32(2) + i32(1) + i32(0) + ints32(1) + i32(0) + ints32(1, 2)
    raw = i32(1) + i32(2) + a32(state) + a32(i32(1) + s16("h") + i32(9092))
    check(6, 0, req, raw, response=False)


def test_update_metadata_responses():
    check(6, 8, ib.UpdateMetadataResponse(11), i16(11) + TAGS, response=True)
    check(6, 5, ib.UpdateMetadataResponse(0), i16(0), response=True)


# ---- ControlledShutdown ---------------------------------------------------------------
def test_controlled_shutdown_requests_and_responses():
    check(7, 3, ib.ControlledShutdownRequest(2, 99), i32(2) + i64(99) + TAGS, response=False)
    check(7, 1, ib.ControlledShutdownRequest(2), i32(2), response=False)
    resp = ib.ControlledShutdownResponse(0, [ib.RemainingPartition("t", 1)])
    check(7, 3, resp, i16(0) + ca(cs("t") + i32(1) + TAGS) + TAGS, response=True)
    check(7, 0, resp, i16(0) + a32(s16("t") + i32(1)), response=True)


def test_controlled_shutdown_v0_uses_the_header_without_client_id():
    frame = ib.request_frame(7, 0, 42, "ignored", ib.ControlledShutdownRequest(3))
    assert frame == i32(12) + i16(7) + i16(0) + i32(42) + i32(3)
    frame = ib.request_frame(7, 1, 42, "c", ib.ControlledShutdownRequest(3))
    assert frame == i32(15) + i16(7) + i16(1) + i32(42) + s16("c") + i32(3)
    frame = ib.request_frame(7, 3, 42, None, ib.ControlledShutdownRequest(3, 8))
    assert frame == i32(24) + i16(7) + i16(3) + i32(42) + i16(-1) + TAGS + i32(3) + i64(8) + TAGS


def test_response_frame_skips_flexible_header_tags():
    body = ib.encode_response(6, 8, ib.UpdateMetadataResponse(0))
    assert ib.parse_response_frame(6, 8, i32(7) + TAGS + body) == (7, ib.UpdateMetadataResponse(0))
    assert ib.parse_response_frame(6, 5, i32(7) + i16(11)) == (7, ib.UpdateMetadataResponse(11))


# ---- every version ---------------------------------------------------------------------
def _requests(version_key: int) -> object:
    if version_key == 4:
        return ib.LeaderAndIsrRequest(
            1,
            5,
            [
                ib.LeaderAndIsrTopicState("a", [lair_state(), lair_state(partition_index=1)]),
                ib.LeaderAndIsrTopicState("b", [lair_state(is_new=True)], TOPIC_ID),
            ],
            [ib.LeaderAndIsrLiveLeader(1, "h", 1)],
        )
    if version_key == 5:
        return ib.StopReplicaRequest(
            1, 2, [ib.StopReplicaTopicState("t", [ib.StopReplicaPartitionState(3)])]
        )
    if version_key == 6:
        return ib.UpdateMetadataRequest(
            1,
            2,
            [ib.UpdateMetadataTopicState("t", [um_state()], TOPIC_ID)],
            [ib.UpdateMetadataBroker(1, [ib.UpdateMetadataEndpoint(1, "h", "PLAINTEXT", 0)], "r")],
        )
    return ib.ControlledShutdownRequest(1, 5)


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(k, v) for k, api in ib.CONTROLLER_APIS.items() for v in range(api.max_version + 1)],
)
def test_every_version_round_trips(api_key, version):
    raw = ib.encode_request(api_key, version, _requests(api_key))
    again = ib.encode_request(api_key, version, ib.decode_request(api_key, version, raw))
    assert again == raw


def test_versions_and_flexibility_follow_kafka_3():
    ranges = {k: (a.min_version, a.max_version) for k, a in ib.CONTROLLER_APIS.items()}
    assert ranges == {4: (0, 7), 5: (0, 4), 6: (0, 8), 7: (0, 3)}
    first_flexible = {4: 4, 5: 2, 6: 6, 7: 3}
    for key, (lo, hi) in ranges.items():
        for v in range(lo, hi + 1):
            assert ib.is_flexible(key, v) == (v >= first_flexible[key])


def test_garbage_is_a_codec_error_not_a_crash():
    raw = ib.encode_request(4, 7, _requests(4))
    with pytest.raises(ib.InterBrokerCodecError):
        ib.decode_request(4, 7, raw[:-5])
    with pytest.raises(ib.InterBrokerCodecError):
        ib.decode_request(4, 7, raw + b"\x00")
    with pytest.raises(ib.InterBrokerCodecError):
        ib.decode_request(6, 5, i32(1) + i32(2) + i64(0) + i32(1 << 30))  # absurd array length
    with pytest.raises(ib.InterBrokerCodecError):
        ib.encode_request(4, 8, _requests(4))  # not a Kafka 3.x version


def test_unknown_tagged_fields_are_skipped():
    raw = i16(0) + b"\x01" + b"\x05\x02ab"  # one tagged field (tag 5, 2 bytes)
    assert ib.decode_response(6, 8, raw) == ib.UpdateMetadataResponse(0)
