"""StopReplica (api key 5), versions 0-4 as Kafka 3.x defined them; flexible from v2.

The controller tells a broker to stop replicating partitions and, for topic
deletion, to delete them. v1 adds the broker epoch and groups partitions by
topic; v3 moves the delete flag into each partition and adds its leader epoch
(KIP-570: -1 = no epoch, -2 = the topic is being deleted); v4 the
KRaft-controller flag.

For v0-2 the single ``delete_partitions`` flag is what goes on the wire; decoding
those versions copies it into every partition state (leader epoch -1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkalite.protocol.inter_broker.wire import Reader, Writer

FIRST_FLEXIBLE = 2

#: leader epoch sentinels of StopReplica v3+ partition states
NO_EPOCH = -1
EPOCH_DURING_DELETE = -2


@dataclass(slots=True)
class StopReplicaPartitionState:
    partition_index: int
    leader_epoch: int = NO_EPOCH
    delete_partition: bool = False


@dataclass(slots=True)
class StopReplicaTopicState:
    topic_name: str
    partition_states: list[StopReplicaPartitionState]


@dataclass(slots=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    topic_states: list[StopReplicaTopicState]
    broker_epoch: int = -1  # v1+
    delete_partitions: bool = False  # v0-2
    is_kraft_controller: bool = False  # v4+


@dataclass(slots=True)
class StopReplicaPartitionError:
    topic_name: str
    partition_index: int
    error_code: int


@dataclass(slots=True)
class StopReplicaResponse:
    error_code: int
    partition_errors: list[StopReplicaPartitionError] = field(default_factory=list)


def encode_request(req: StopReplicaRequest, version: int) -> bytes:
    w = Writer(version >= FIRST_FLEXIBLE)
    w.int32(req.controller_id)
    if version >= 4:
        w.boolean(req.is_kraft_controller)
    w.int32(req.controller_epoch)
    if version >= 1:
        w.int64(req.broker_epoch)
    if version <= 2:
        w.boolean(req.delete_partitions)
    if version == 0:
        w.array_length(sum(len(t.partition_states) for t in req.topic_states))
        for t in req.topic_states:
            for p in t.partition_states:
                w.string(t.topic_name)
                w.int32(p.partition_index)
    elif version <= 2:

        def write_topic_v1(w: Writer, t: StopReplicaTopicState) -> None:
            w.string(t.topic_name)
            w.int32_array([p.partition_index for p in t.partition_states])
            w.tagged_fields()

        w.array(req.topic_states, write_topic_v1)
    else:

        def write_partition(w: Writer, p: StopReplicaPartitionState) -> None:
            w.int32(p.partition_index)
            w.int32(p.leader_epoch)
            w.boolean(p.delete_partition)
            w.tagged_fields()

        def write_topic(w: Writer, t: StopReplicaTopicState) -> None:
            w.string(t.topic_name)
            w.array(t.partition_states, write_partition)
            w.tagged_fields()

        w.array(req.topic_states, write_topic)
    w.tagged_fields()
    return w.getvalue()


def decode_request(r: Reader, version: int) -> StopReplicaRequest:
    controller_id = r.int32()
    is_kraft = r.boolean() if version >= 4 else False
    controller_epoch = r.int32()
    broker_epoch = r.int64() if version >= 1 else -1
    delete = r.boolean() if version <= 2 else False
    topics: list[StopReplicaTopicState] = []
    if version == 0:
        for _ in range(r.array_length()):
            name = r.string()
            p = StopReplicaPartitionState(r.int32(), NO_EPOCH, delete)
            if topics and topics[-1].topic_name == name:
                topics[-1].partition_states.append(p)
            else:
                topics.append(StopReplicaTopicState(name, [p]))
    elif version <= 2:

        def read_topic_v1(r: Reader) -> StopReplicaTopicState:
            name = r.string()
            parts = [StopReplicaPartitionState(i, NO_EPOCH, delete) for i in r.int32_array()]
            r.tagged_fields()
            return StopReplicaTopicState(name, parts)

        topics = r.array(read_topic_v1)
    else:

        def read_partition(r: Reader) -> StopReplicaPartitionState:
            p = StopReplicaPartitionState(r.int32(), r.int32(), r.boolean())
            r.tagged_fields()
            return p

        def read_topic(r: Reader) -> StopReplicaTopicState:
            t = StopReplicaTopicState(r.string(), r.array(read_partition))
            r.tagged_fields()
            return t

        topics = r.array(read_topic)
    r.tagged_fields()
    return StopReplicaRequest(
        controller_id, controller_epoch, topics, broker_epoch, delete, is_kraft
    )


def encode_response(resp: StopReplicaResponse, version: int) -> bytes:
    w = Writer(version >= FIRST_FLEXIBLE)
    w.int16(resp.error_code)

    def write_error(w: Writer, e: StopReplicaPartitionError) -> None:
        w.string(e.topic_name)
        w.int32(e.partition_index)
        w.int16(e.error_code)
        w.tagged_fields()

    w.array(resp.partition_errors, write_error)
    w.tagged_fields()
    return w.getvalue()


def decode_response(r: Reader, version: int) -> StopReplicaResponse:
    error_code = r.int16()

    def read_error(r: Reader) -> StopReplicaPartitionError:
        e = StopReplicaPartitionError(r.string(), r.int32(), r.int16())
        r.tagged_fields()
        return e

    errors = r.array(read_error)
    r.tagged_fields()
    return StopReplicaResponse(error_code, errors)
