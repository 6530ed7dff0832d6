"""ControlledShutdown (api key 7), versions 0-3 as Kafka 3.x defined them; flexible from v3.

A broker asks the controller to move leadership off it before it stops. v2 adds
the broker epoch. v0 requests use the v0 request header, which has no
client_id (see :func:`kafkalite.protocol.inter_broker.request_header_version`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkalite.protocol.inter_broker.wire import Reader, Writer

FIRST_FLEXIBLE = 3


@dataclass(slots=True)
class ControlledShutdownRequest:
    broker_id: int
    broker_epoch: int = -1  # v2+


@dataclass(slots=True)
class RemainingPartition:
    topic_name: str
    partition_index: int


@dataclass(slots=True)
class ControlledShutdownResponse:
    error_code: int
    remaining_partitions: list[RemainingPartition] = field(default_factory=list)


def encode_request(req: ControlledShutdownRequest, version: int) -> bytes:
    w = Writer(version >= FIRST_FLEXIBLE)
    w.int32(req.broker_id)
    if version >= 2:
        w.int64(req.broker_epoch)
    w.tagged_fields()
    return w.getvalue()


def decode_request(r: Reader, version: int) -> ControlledShutdownRequest:
    req = ControlledShutdownRequest(r.int32())
    if version >= 2:
        req.broker_epoch = r.int64()
    r.tagged_fields()
    return req


def encode_response(resp: ControlledShutdownResponse, version: int) -> bytes:
    w = Writer(version >= FIRST_FLEXIBLE)
    w.int16(resp.error_code)

    def write_partition(w: Writer, p: RemainingPartition) -> None:
        w.string(p.topic_name)
        w.int32(p.partition_index)
        w.tagged_fields()

    w.array(resp.remaining_partitions, write_partition)
    w.tagged_fields()
    return w.getvalue()


def decode_response(r: Reader, version: int) -> ControlledShutdownResponse:
    error_code = r.int16()

    def read_partition(r: Reader) -> RemainingPartition:
        p = RemainingPartition(r.string(), r.int32())
        r.tagged_fields()
        return p

    remaining = r.array(read_partition)
    r.tagged_fields()
    return ControlledShutdownResponse(error_code, remaining)
