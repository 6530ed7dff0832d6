"""LeaderAndIsr (api key 4), versions 0-7 as Kafka 3.x defined them; flexible from v4.

The controller tells each replica the leader, ISR, replica set and epochs of its
partitions. v1 adds ``is_new``; v2 the broker epoch and grouping by topic (v0-1
list the topic name in every partition state); v3 adding/removing replicas; v5
topic ids and the request type, and the response reports errors by topic id;
v6 the leader recovery state; v7 the KRaft-controller flag.

One model serves every version, like Kafka's generated ``*Data`` classes: fields
a version lacks are left at their defaults. Decoding v0-1 groups consecutive
partitions of the same topic, so re-encoding yields the same bytes.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kafkalite.protocol.inter_broker.wire import Reader, Writer
from kafkalite.protocol.kafka_uuid import ZERO_UUID

FIRST_FLEXIBLE = 4


@dataclass(slots=True)
class LeaderAndIsrPartitionState:
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    #: the state znode's version (ZkVersion in Kafka before 3.1)
    partition_epoch: int
    replicas: list[int]
    adding_replicas: list[int] = field(default_factory=list)  # v3+
    removing_replicas: list[int] = field(default_factory=list)  # v3+
    is_new: bool = False  # v1+
    leader_recovery_state: int = 0  # v6+


@dataclass(slots=True)
class LeaderAndIsrTopicState:
    topic_name: str
    partition_states: list[LeaderAndIsrPartitionState]
    topic_id: uuid.UUID = ZERO_UUID  # v5+


@dataclass(slots=True)
class LeaderAndIsrLiveLeader:
    broker_id: int
    host_name: str
    port: int


@dataclass(slots=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    topic_states: list[LeaderAndIsrTopicState]
    live_leaders: list[LeaderAndIsrLiveLeader]
    broker_epoch: int = -1  # v2+
    type: int = 0  # v5+: 0 unknown, 1 incremental, 2 full
    is_kraft_controller: bool = False  # v7+


@dataclass(slots=True)
class LeaderAndIsrPartitionError:
    partition_index: int
    error_code: int
    topic_name: str = ""  # v0-4


@dataclass(slots=True)
class LeaderAndIsrTopicError:
    topic_id: uuid.UUID
    partition_errors: list[LeaderAndIsrPartitionError]


@dataclass(slots=True)
class LeaderAndIsrResponse:
    error_code: int
    partition_errors: list[LeaderAndIsrPartitionError] = field(default_factory=list)  # v0-4
    topics: list[LeaderAndIsrTopicError] = field(default_factory=list)  # v5+


# ---- request -------------------------------------------------------------------


def _write_partition_state(
    w: Writer, s: LeaderAndIsrPartitionState, version: int, topic: str | None
) -> None:
    if topic is not None:  # v0-1
        w.string(topic)
    w.int32(s.partition_index)
    w.int32(s.controller_epoch)
    w.int32(s.leader)
    w.int32(s.leader_epoch)
    w.int32_array(s.isr)
    w.int32(s.partition_epoch)
    w.int32_array(s.replicas)
    if version >= 3:
        w.int32_array(s.adding_replicas)
        w.int32_array(s.removing_replicas)
    if version >= 1:
        w.boolean(s.is_new)
    if version >= 6:
        w.int8(s.leader_recovery_state)
    w.tagged_fields()


def _read_partition_state(r: Reader, version: int) -> LeaderAndIsrPartitionState:
    s = LeaderAndIsrPartitionState(
        partition_index=r.int32(),
        controller_epoch=r.int32(),
        leader=r.int32(),
        leader_epoch=r.int32(),
        isr=r.int32_array(),
        partition_epoch=r.int32(),
        replicas=r.int32_array(),
    )
    if version >= 3:
        s.adding_replicas = r.int32_array()
        s.removing_replicas = r.int32_array()
    if version >= 1:
        s.is_new = r.boolean()
    if version >= 6:
        s.leader_recovery_state = r.int8()
    r.tagged_fields()
    return s


def _write_live_leader(w: Writer, b: LeaderAndIsrLiveLeader) -> None:
    w.int32(b.broker_id)
    w.string(b.host_name)
    w.int32(b.port)
    w.tagged_fields()


def _read_live_leader(r: Reader) -> LeaderAndIsrLiveLeader:
    b = LeaderAndIsrLiveLeader(r.int32(), r.string(), r.int32())
    r.tagged_fields()
    return b


def encode_request(req: LeaderAndIsrRequest, version: int) -> bytes:
    w = Writer(version >= FIRST_FLEXIBLE)
    w.int32(req.controller_id)
    if version >= 7:
        w.boolean(req.is_kraft_controller)
    w.int32(req.controller_epoch)
    if version >= 2:
        w.int64(req.broker_epoch)
    if version >= 5:
        w.int8(req.type)
    if version <= 1:
        w.array_length(sum(len(t.partition_states) for t in req.topic_states))
        for t in req.topic_states:
            for s in t.partition_states:
                _write_partition_state(w, s, version, t.topic_name)
    else:

        def write_topic(w: Writer, t: LeaderAndIsrTopicState) -> None:
            w.string(t.topic_name)
            if version >= 5:
                w.uuid(t.topic_id)
            w.array(t.partition_states, lambda w, s: _write_partition_state(w, s, version, None))
            w.tagged_fields()

        w.array(req.topic_states, write_topic)
    w.array(req.live_leaders, _write_live_leader)
    w.tagged_fields()
    return w.getvalue()


def decode_request(r: Reader, version: int) -> LeaderAndIsrRequest:
    controller_id = r.int32()
    is_kraft = r.boolean() if version >= 7 else False
    controller_epoch = r.int32()
    broker_epoch = r.int64() if version >= 2 else -1
    type_ = r.int8() if version >= 5 else 0
    topics: list[LeaderAndIsrTopicState] = []
    if version <= 1:
        for _ in range(r.array_length()):
            name = r.string()
            s = _read_partition_state(r, version)
            if topics and topics[-1].topic_name == name:
                topics[-1].partition_states.append(s)
            else:
                topics.append(LeaderAndIsrTopicState(name, [s]))
    else:

        def read_topic(r: Reader) -> LeaderAndIsrTopicState:
            name = r.string()
            topic_id = r.uuid() if version >= 5 else ZERO_UUID
            states = r.array(lambda r: _read_partition_state(r, version))
            r.tagged_fields()
            return LeaderAndIsrTopicState(name, states, topic_id)

        topics = r.array(read_topic)
    live = r.array(_read_live_leader)
    r.tagged_fields()
    return LeaderAndIsrRequest(
        controller_id, controller_epoch, topics, live, broker_epoch, type_, is_kraft
    )


# ---- response ------------------------------------------------------------------


def encode_response(resp: LeaderAndIsrResponse, version: int) -> bytes:
    w = Writer(version >= FIRST_FLEXIBLE)
    w.int16(resp.error_code)
    if version <= 4:

        def write_error(w: Writer, e: LeaderAndIsrPartitionError) -> None:
            w.string(e.topic_name)
            w.int32(e.partition_index)
            w.int16(e.error_code)
            w.tagged_fields()

        w.array(resp.partition_errors, write_error)
    else:

        def write_partition(w: Writer, e: LeaderAndIsrPartitionError) -> None:
            w.int32(e.partition_index)
            w.int16(e.error_code)
            w.tagged_fields()

        def write_topic(w: Writer, t: LeaderAndIsrTopicError) -> None:
            w.uuid(t.topic_id)
            w.array(t.partition_errors, write_partition)
            w.tagged_fields()

        w.array(resp.topics, write_topic)
    w.tagged_fields()
    return w.getvalue()


def decode_response(r: Reader, version: int) -> LeaderAndIsrResponse:
    resp = LeaderAndIsrResponse(r.int16())
    if version <= 4:

        def read_error(r: Reader) -> LeaderAndIsrPartitionError:
            name = r.string()
            e = LeaderAndIsrPartitionError(r.int32(), r.int16(), name)
            r.tagged_fields()
            return e

        resp.partition_errors = r.array(read_error)
    else:

        def read_partition(r: Reader) -> LeaderAndIsrPartitionError:
            e = LeaderAndIsrPartitionError(r.int32(), r.int16())
            r.tagged_fields()
            return e

        def read_topic(r: Reader) -> LeaderAndIsrTopicError:
            t = LeaderAndIsrTopicError(r.uuid(), r.array(read_partition))
            r.tagged_fields()
            return t

        resp.topics = r.array(read_topic)
    r.tagged_fields()
    return resp
