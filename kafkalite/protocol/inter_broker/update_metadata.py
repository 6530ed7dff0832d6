"""UpdateMetadata (api key 6), versions 0-8 as Kafka 3.x defined them; flexible from v6.

The controller pushes live brokers and partition states into every broker's
metadata cache, which is what clients then see in Metadata responses. v1 allows
several endpoints per broker (v0 has one host/port); v2 adds the rack; v3 the
listener name; v4 offline replicas; v5 the broker epoch and grouping by topic
(v0-4 list the topic name in every partition state); v7 topic ids; v8 the
KRaft-controller flag. A partition whose topic is being deleted is sent with
leader -2 (``LEADER_DURING_DELETE``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kafkalite.protocol.inter_broker.wire import Reader, Writer
from kafkalite.protocol.kafka_uuid import ZERO_UUID

FIRST_FLEXIBLE = 6

LEADER_DURING_DELETE = -2

#: Kafka's SecurityProtocol ids, used by v1+ endpoints
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
SECURITY_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOLS.items()}


@dataclass(slots=True)
class UpdateMetadataPartitionState:
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    replicas: list[int]
    offline_replicas: list[int] = field(default_factory=list)  # v4+


@dataclass(slots=True)
class UpdateMetadataTopicState:
    topic_name: str
    partition_states: list[UpdateMetadataPartitionState]
    topic_id: uuid.UUID = ZERO_UUID  # v7+


@dataclass(slots=True)
class UpdateMetadataEndpoint:
    port: int
    host: str
    listener: str = ""  # v3+; older versions name the listener after its protocol
    security_protocol: int = 0


@dataclass(slots=True)
class UpdateMetadataBroker:
    id: int
    endpoints: list[UpdateMetadataEndpoint]  # v0 carries exactly one host/port
    rack: str | None = None  # v2+


@dataclass(slots=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    topic_states: list[UpdateMetadataTopicState]
    live_brokers: list[UpdateMetadataBroker]
    broker_epoch: int = -1  # v5+
    is_kraft_controller: bool = False  # v8+


@dataclass(slots=True)
class UpdateMetadataResponse:
    error_code: int


def _write_partition_state(
    w: Writer, s: UpdateMetadataPartitionState, version: int, topic: str | None
) -> None:
    if topic is not None:  # v0-4
        w.string(topic)
    w.int32(s.partition_index)
    w.int32(s.controller_epoch)
    w.int32(s.leader)
    w.int32(s.leader_epoch)
    w.int32_array(s.isr)
    w.int32(s.zk_version)
    w.int32_array(s.replicas)
    if version >= 4:
        w.int32_array(s.offline_replicas)
    w.tagged_fields()


def _read_partition_state(r: Reader, version: int) -> UpdateMetadataPartitionState:
    s = UpdateMetadataPartitionState(
        partition_index=r.int32(),
        controller_epoch=r.int32(),
        leader=r.int32(),
        leader_epoch=r.int32(),
        isr=r.int32_array(),
        zk_version=r.int32(),
        replicas=r.int32_array(),
    )
    if version >= 4:
        s.offline_replicas = r.int32_array()
    r.tagged_fields()
    return s


def _write_broker(w: Writer, b: UpdateMetadataBroker, version: int) -> None:
    w.int32(b.id)
    if version == 0:
        if len(b.endpoints) != 1:
            raise ValueError("UpdateMetadata v0 carries exactly one endpoint per broker")
        w.string(b.endpoints[0].host)
        w.int32(b.endpoints[0].port)
    else:

        def write_endpoint(w: Writer, e: UpdateMetadataEndpoint) -> None:
            w.int32(e.port)
            w.string(e.host)
            if version >= 3:
                w.string(e.listener)
            w.int16(e.security_protocol)
            w.tagged_fields()

        w.array(b.endpoints, write_endpoint)
    if version >= 2:
        w.nullable_string(b.rack)
    w.tagged_fields()


def _read_broker(r: Reader, version: int) -> UpdateMetadataBroker:
    broker_id = r.int32()
    if version == 0:
        host = r.string()
        endpoints = [UpdateMetadataEndpoint(r.int32(), host, "PLAINTEXT", 0)]
    else:

        def read_endpoint(r: Reader) -> UpdateMetadataEndpoint:
            port, host = r.int32(), r.string()
            listener = r.string() if version >= 3 else ""
            protocol = r.int16()
            if version < 3:
                listener = SECURITY_PROTOCOL_NAMES.get(protocol, str(protocol))
            r.tagged_fields()
            return UpdateMetadataEndpoint(port, host, listener, protocol)

        endpoints = r.array(read_endpoint)
    rack = r.nullable_string() if version >= 2 else None
    r.tagged_fields()
    return UpdateMetadataBroker(broker_id, endpoints, rack)


def encode_request(req: UpdateMetadataRequest, version: int) -> bytes:
    w = Writer(version >= FIRST_FLEXIBLE)
    w.int32(req.controller_id)
    if version >= 8:
        w.boolean(req.is_kraft_controller)
    w.int32(req.controller_epoch)
    if version >= 5:
        w.int64(req.broker_epoch)
    if version <= 4:
        w.array_length(sum(len(t.partition_states) for t in req.topic_states))
        for t in req.topic_states:
            for s in t.partition_states:
                _write_partition_state(w, s, version, t.topic_name)
    else:

        def write_topic(w: Writer, t: UpdateMetadataTopicState) -> None:
            w.string(t.topic_name)
            if version >= 7:
                w.uuid(t.topic_id)
            w.array(t.partition_states, lambda w, s: _write_partition_state(w, s, version, None))
            w.tagged_fields()

        w.array(req.topic_states, write_topic)
    w.array(req.live_brokers, lambda w, b: _write_broker(w, b, version))
    w.tagged_fields()
    return w.getvalue()


def decode_request(r: Reader, version: int) -> UpdateMetadataRequest:
    controller_id = r.int32()
    is_kraft = r.boolean() if version >= 8 else False
    controller_epoch = r.int32()
    broker_epoch = r.int64() if version >= 5 else -1
    topics: list[UpdateMetadataTopicState] = []
    if version <= 4:
        for _ in range(r.array_length()):
            name = r.string()
            s = _read_partition_state(r, version)
            if topics and topics[-1].topic_name == name:
                topics[-1].partition_states.append(s)
            else:
                topics.append(UpdateMetadataTopicState(name, [s]))
    else:

        def read_topic(r: Reader) -> UpdateMetadataTopicState:
            name = r.string()
            topic_id = r.uuid() if version >= 7 else ZERO_UUID
            states = r.array(lambda r: _read_partition_state(r, version))
            r.tagged_fields()
            return UpdateMetadataTopicState(name, states, topic_id)

        topics = r.array(read_topic)
    brokers = r.array(lambda r: _read_broker(r, version))
    r.tagged_fields()
    return UpdateMetadataRequest(
        controller_id, controller_epoch, topics, brokers, broker_epoch, is_kraft
    )


def encode_response(resp: UpdateMetadataResponse, version: int) -> bytes:
    w = Writer(version >= FIRST_FLEXIBLE)
    w.int16(resp.error_code)
    w.tagged_fields()
    return w.getvalue()


def decode_response(r: Reader, version: int) -> UpdateMetadataResponse:
    resp = UpdateMetadataResponse(r.int16())
    r.tagged_fields()
    return resp
