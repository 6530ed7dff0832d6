"""Codecs for the controller APIs Kafka 4 removed and kio therefore lacks.

LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6) and ControlledShutdown (7),
at the version ranges Kafka 3.x supported at the end, with flexible versions
(compact encodings and tagged fields) where Kafka made them flexible. Each
module holds version-independent dataclasses and hand-written encoders and
decoders; this module maps api keys to them and frames whole requests and
responses for the controller's channel manager.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkalite.common import structs
from kafkalite.protocol.inter_broker import (
    controlled_shutdown,
    leader_and_isr,
    stop_replica,
    update_metadata,
)
from kafkalite.protocol.inter_broker.authenticator import (
    AUTHENTICATOR_TAG,
    authenticator,
    header_tagged_fields,
    read_header_authenticator,
)
from kafkalite.protocol.inter_broker.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    RemainingPartition,
)
from kafkalite.protocol.inter_broker.leader_and_isr import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionError,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
    LeaderAndIsrTopicState,
)
from kafkalite.protocol.inter_broker.stop_replica import (
    EPOCH_DURING_DELETE,
    NO_EPOCH,
    StopReplicaPartitionError,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    StopReplicaTopicState,
)
from kafkalite.protocol.inter_broker.update_metadata import (
    LEADER_DURING_DELETE,
    SECURITY_PROTOCOL_NAMES,
    SECURITY_PROTOCOLS,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    UpdateMetadataTopicState,
)
from kafkalite.protocol.inter_broker.wire import InterBrokerCodecError, Reader

__all__ = [
    "AUTHENTICATOR_TAG",
    "CONTROLLED_SHUTDOWN",
    "CONTROLLER_APIS",
    "EPOCH_DURING_DELETE",
    "LEADER_AND_ISR",
    "LEADER_DURING_DELETE",
    "NO_EPOCH",
    "SECURITY_PROTOCOLS",
    "SECURITY_PROTOCOL_NAMES",
    "STOP_REPLICA",
    "UPDATE_METADATA",
    "ControlledShutdownRequest",
    "ControlledShutdownResponse",
    "InterBrokerApi",
    "InterBrokerCodecError",
    "LeaderAndIsrLiveLeader",
    "LeaderAndIsrPartitionError",
    "LeaderAndIsrPartitionState",
    "LeaderAndIsrRequest",
    "LeaderAndIsrResponse",
    "LeaderAndIsrTopicError",
    "LeaderAndIsrTopicState",
    "RemainingPartition",
    "StopReplicaPartitionError",
    "StopReplicaPartitionState",
    "StopReplicaRequest",
    "StopReplicaResponse",
    "StopReplicaTopicState",
    "UpdateMetadataBroker",
    "UpdateMetadataEndpoint",
    "UpdateMetadataPartitionState",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
    "UpdateMetadataTopicState",
    "authenticator",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "frame_with_body",
    "header_tagged_fields",
    "is_flexible",
    "parse_response_frame",
    "read_header_authenticator",
    "request_frame",
    "request_header",
    "request_header_version",
]

LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6
CONTROLLED_SHUTDOWN = 7

_HEADER = struct.Struct(">hhi")


@dataclass(frozen=True, slots=True)
class InterBrokerApi:
    key: int
    name: str
    min_version: int
    max_version: int
    first_flexible: int
    encode_request: Callable[[Any, int], bytes]
    decode_request: Callable[[Reader, int], Any]
    encode_response: Callable[[Any, int], bytes]
    decode_response: Callable[[Reader, int], Any]


def _api(key: int, name: str, max_version: int, module: Any) -> InterBrokerApi:
    return InterBrokerApi(
        key,
        name,
        0,
        max_version,
        module.FIRST_FLEXIBLE,
        module.encode_request,
        module.decode_request,
        module.encode_response,
        module.decode_response,
    )


CONTROLLER_APIS: dict[int, InterBrokerApi] = {
    LEADER_AND_ISR: _api(LEADER_AND_ISR, "LeaderAndIsr", 7, leader_and_isr),
    STOP_REPLICA: _api(STOP_REPLICA, "StopReplica", 4, stop_replica),
    UPDATE_METADATA: _api(UPDATE_METADATA, "UpdateMetadata", 8, update_metadata),
    CONTROLLED_SHUTDOWN: _api(CONTROLLED_SHUTDOWN, "ControlledShutdown", 3, controlled_shutdown),
}


def _lookup(api_key: int, version: int) -> InterBrokerApi:
    api = CONTROLLER_APIS.get(api_key)
    if api is None:
        raise InterBrokerCodecError(f"api key {api_key} is not an inter-broker controller API")
    if not api.min_version <= version <= api.max_version:
        raise InterBrokerCodecError(f"{api.name} v{version} is not supported")
    return api


def is_flexible(api_key: int, version: int) -> bool:
    return version >= _lookup(api_key, version).first_flexible


def request_header_version(api_key: int, version: int) -> int:
    """0: no client_id (ControlledShutdown v0 only); 1: client_id; 2: client_id + tags."""
    if api_key == CONTROLLED_SHUTDOWN and version == 0:
        return 0
    return 2 if is_flexible(api_key, version) else 1


def encode_request(api_key: int, version: int, request: Any) -> bytes:
    return _lookup(api_key, version).encode_request(request, version)


def encode_response(api_key: int, version: int, response: Any) -> bytes:
    return _lookup(api_key, version).encode_response(response, version)


def _decode(
    api_key: int, version: int, buf: bytes | memoryview, offset: int, *, response: bool
) -> Any:
    api = _lookup(api_key, version)
    r = Reader(buf, offset, version >= api.first_flexible)
    obj = (api.decode_response if response else api.decode_request)(r, version)
    if r.pos != len(buf):
        raise InterBrokerCodecError(
            f"{len(buf) - r.pos} trailing bytes after {api.name} v{version}"
        )
    return obj


def decode_request(api_key: int, version: int, buf: bytes | memoryview, offset: int = 0) -> Any:
    """Decode a request body that ends where ``buf`` ends."""
    return _decode(api_key, version, buf, offset, response=False)


def decode_response(api_key: int, version: int, buf: bytes | memoryview, offset: int = 0) -> Any:
    """Decode a response body that ends where ``buf`` ends."""
    return _decode(api_key, version, buf, offset, response=True)


def request_header(
    api_key: int,
    version: int,
    correlation_id: int,
    client_id: str | None,
    authenticator: bytes | None = None,
) -> bytes:
    """The request header of the version this API version needs (see request_header_version),
    with the controller's authenticator in its tagged fields when given (v2 only)."""
    header = bytearray(_HEADER.pack(api_key, version, correlation_id))
    header_version = request_header_version(api_key, version)
    if authenticator is not None and header_version != 2:
        raise InterBrokerCodecError(
            f"{CONTROLLER_APIS[api_key].name} v{version} is not flexible: no header tags"
        )
    if header_version >= 1:
        if client_id is None:
            header += structs.I16.pack(-1)
        else:
            raw = client_id.encode()
            header += structs.I16.pack(len(raw)) + raw
    if header_version == 2:
        header += header_tagged_fields(authenticator)
    return bytes(header)


def request_frame(
    api_key: int,
    version: int,
    correlation_id: int,
    client_id: str | None,
    request: Any,
    *,
    secret: bytes | None = None,
    target_broker_id: int = -1,
) -> bytes:
    """A whole size-prefixed request: header of the right version, then the body; signed
    for ``target_broker_id`` when a ``secret`` is given (see authenticator)."""
    body = encode_request(api_key, version, request)
    mac = (
        None if secret is None else authenticator(secret, api_key, version, target_broker_id, body)
    )
    return frame_with_body(request_header(api_key, version, correlation_id, client_id, mac), body)


def frame_with_body(header: bytes, body: bytes) -> bytes:
    return structs.I32.pack(len(header) + len(body)) + header + body


def parse_response_frame(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation_id, response) from a response frame without its size prefix."""
    if len(frame) < 4:
        raise InterBrokerCodecError("response shorter than its header")
    (correlation_id,) = structs.I32.unpack_from(frame, 0)
    pos = 4
    if is_flexible(api_key, version):
        r = Reader(frame, pos, True)
        r.tagged_fields()
        pos = r.pos
    return correlation_id, decode_response(api_key, version, frame, pos)
