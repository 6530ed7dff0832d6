"""LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6), ControlledShutdown (7), and the
admin APIs the controller answers: ElectLeaders (43), AlterPartitionReassignments (45),
ListPartitionReassignments (46).

The broker side of the controller's requests. Kio has no schemas for them
(Kafka 4 removed them), so :class:`ControllerRequestChannel` decodes them with
:mod:`kafkalite.protocol.inter_broker` and every other API with kio as usual.

Admission (:mod:`kafkalite.server.controller_identity`), before anything is
applied: a request without a valid authenticator (the HMAC of the cluster's
inter-broker secret, in a request-header tag; only flexible versions can carry
one) gets CLUSTER_AUTHORIZATION_FAILED, checked by the channel before the body
is decoded; then a request on a listener that is not the controller's gets
CLUSTER_AUTHORIZATION_FAILED; one addressed to an earlier incarnation of this
broker (broker epoch = czxid of its /brokers/ids/<id> znode) STALE_BROKER_EPOCH,
as in Kafka's ZooKeeper mode; one whose controller id and epoch are not those of
the live controller in the metadata store STALE_CONTROLLER_EPOCH. A refused
request changes nothing and logs one line.

Then per partition, as Kafka's ReplicaManager: a LeaderAndIsr partition state whose
leader epoch is not newer than the broker's (-1 for a partition it does not host)
is ignored with STALE_CONTROLLER_EPOCH, one that does not list this broker as a
replica gets UNKNOWN_TOPIC_OR_PARTITION, and a StopReplica with an older leader
epoch gets FENCED_LEADER_EPOCH. Topic names that could not be directories (Kafka's
topic rules) get INVALID_TOPIC_EXCEPTION and never reach the log manager. The
accepted parts are applied by ``ReplicaManager.become_leader_or_follower`` /
``stop_replicas`` and ``MetadataCache.update_metadata``.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.network.api_spec import RequestContext
from kafkalite.network.connection import Connection
from kafkalite.network.request_channel import RequestChannel
from kafkalite.network.responses import CloseConnection
from kafkalite.protocol import inter_broker as ib
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.headers import MalformedRequest, parse_request_header
from kafkalite.protocol.kafka_uuid import ZERO_UUID
from kafkalite.server.controller_identity import (
    CLUSTER_AUTHORIZATION_FAILED,
    ControllerRequestGate,
    Rejection,
    log_rejection,
)
from kafkalite.server.topic_names import validate_topic_name

if TYPE_CHECKING:
    from kafkalite.controller.kafka_controller import KafkaController
    from kafkalite.replica.replica_manager import ReplicaManager
    from kafkalite.server.apis.request_types import (
        AlterPartitionReassignmentsRequest,
        ElectLeadersRequest,
        ListPartitionReassignmentsRequest,
    )
    from kafkalite.server.metadata_cache import MetadataCache

TopicPartition = tuple[str, int]

_KEY_VERSION = struct.Struct(">hh")
_I32 = struct.Struct(">i")

STALE_CONTROLLER_EPOCH = int(ErrorCode.stale_controller_epoch)
STALE_BROKER_EPOCH = int(ErrorCode.stale_broker_epoch)
INVALID_TOPIC = int(ErrorCode.invalid_topic_exception)
UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.unknown_topic_or_partition)
#: the requests a follower sends (Kafka requires CLUSTER_ACTION for them with a replica
#: id), and their first flexible version (the authenticator is a header tag)
_FOLLOWER_APIS = frozenset({1, 23})
_FOLLOWER_API_FIRST_FLEXIBLE = {1: 12, 23: 4}

#: RequestContext.extra key: why the channel refused the request's authenticator
_UNAUTHENTICATED = "controller_request_unauthenticated"


@dataclass(frozen=True, slots=True)
class ControllerRequestDeps:
    broker_id: int
    #: Kafka's broker epoch (czxid of /brokers/ids/<id>): changes when the broker
    #: registers again after a session expiry, so it is read per request
    broker_epoch: Callable[[], int]
    controller_gate: ControllerRequestGate
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    controller: KafkaController


class ControllerRequestChannel(RequestChannel):
    """A RequestChannel that also understands the controller APIs kio lacks."""

    #: set by the broker; without one every controller request is refused
    gate: ControllerRequestGate | None = None

    def handle(
        self, conn: Connection, frame: bytes | memoryview
    ) -> tuple[Any, Callable[[Any], Any], bool] | None:
        if len(frame) >= 4:
            api_key, version = _KEY_VERSION.unpack_from(frame, 0)
            if api_key in ib.CONTROLLER_APIS and api_key in self.api_table:
                sasl = conn.sasl
                if sasl is not None and not sasl.open and sasl.admits(api_key) != 0:
                    # not authenticated on a SASL listener: as any other request, close
                    raise CloseConnection(sasl.refusal(api_key))
                # bytes already (only a Produce is handed a view): bytes() returns it as is
                return self._handle_controller_request(conn, bytes(frame), api_key, version)
            if api_key in _FOLLOWER_APIS and not conn.broker_peer:
                self._authenticate_follower(conn, frame, api_key, version)
        return super().handle(conn, frame)

    def _authenticate_follower(
        self, conn: Connection, frame: bytes | memoryview, api_key: int, version: int
    ) -> None:
        """A replica fetcher signs its Fetch and OffsetForLeaderEpoch requests like the
        controller's (the header tag): a valid one marks the connection a broker's.
        Requests without tags (every client's) cost one byte check."""
        gate = self.gate
        if gate is None or version < _FOLLOWER_API_FIRST_FLEXIBLE[api_key]:
            return
        try:
            pos = parse_request_header(frame).size
            if pos >= len(frame) or frame[pos] == 0:
                return  # no tagged fields: not signed
            presented, body = ib.read_header_authenticator(frame, pos)
        except (MalformedRequest, ib.InterBrokerCodecError):
            return  # the ordinary path reports it
        if presented is not None and (
            gate.check_authenticator(api_key, version, presented, memoryview(frame)[body:], True)
            is None
        ):
            conn.broker_peer = True

    def _handle_controller_request(
        self, conn: Connection, frame: bytes, api_key: int, version: int
    ) -> tuple[Any, Callable[[Any], Any], bool]:
        received = time.perf_counter()
        spec = self.api_table[api_key]
        self.requests_total[api_key] = self.requests_total.get(api_key, 0) + 1
        if not spec.min_version <= version <= spec.max_version:
            raise CloseConnection(
                f"unsupported version {version} of {spec.name} (supported {spec.min_version}-{spec.max_version})"
            )
        flexible = ib.is_flexible(api_key, version)
        presented: bytes | None = None
        if ib.request_header_version(api_key, version) == 0:  # ControlledShutdown v0
            if len(frame) < 8:
                raise MalformedRequest("request shorter than its header")
            correlation_id, client_id, pos = _I32.unpack_from(frame, 4)[0], None, 8
        else:
            hdr = parse_request_header(frame)
            correlation_id, client_id, pos = hdr.correlation_id, hdr.client_id, hdr.size
            if flexible:
                try:
                    presented, pos = ib.read_header_authenticator(frame, pos)
                except ib.InterBrokerCodecError as e:
                    raise MalformedRequest(f"{spec.name} request header: {e}") from None
        # first of all; the body is still decoded (bounded codec) for the error response
        gate = self.gate
        unauthenticated = (
            Rejection(CLUSTER_AUTHORIZATION_FAILED, "no controller request gate")
            if gate is None
            else gate.check_authenticator(
                api_key, version, presented, memoryview(frame)[pos:], flexible
            )
        )
        try:
            request = ib.decode_request(api_key, version, frame, pos)
        except ib.InterBrokerCodecError as e:
            raise MalformedRequest(f"cannot decode {spec.name} v{version}: {e}") from None
        ctx = RequestContext(conn, api_key, version, correlation_id, client_id, flexible)
        if unauthenticated is not None:
            ctx.extra[_UNAUTHENTICATED] = unauthenticated
            # a connection is exempt from the broker-wide request queue for carrying the
            # controller's requests; one that sends an unsigned one is a client's
            conn.control_plane = False
        result = spec.handler(ctx, request)
        framer = self._framer(
            correlation_id,
            flexible,
            api_key,
            version,
            self.stats_of(api_key) if self.record_metrics else None,
            received,
            received - conn.last_active,
            time.perf_counter(),
        )

        def encode(result: Any) -> Any:
            return None if result is None else framer(ib.encode_response(api_key, version, result))

        return result, encode, spec.serial


def _stale_broker_epoch(deps: ControllerRequestDeps, request_epoch: int) -> bool:
    """-1 means the controller did not say; a newer epoch than ours can precede our own
    registration news, so only an older one is stale (Kafka's rule)."""
    return request_epoch != -1 and request_epoch < deps.broker_epoch()


async def _admit(
    deps: ControllerRequestDeps,
    ctx: RequestContext,
    controller_id: int,
    controller_epoch: int,
    broker_epoch: int,
) -> int:
    """0, or the error the whole request gets (Kafka's order: authorization, broker
    epoch, controller epoch); a refusal is logged once and changes nothing."""
    gate = deps.controller_gate
    rejection: Rejection | None = ctx.extra.get(_UNAUTHENTICATED)
    if rejection is None:
        rejection = gate.check_listener(ctx.api_key, ctx.listener)
    if rejection is None and _stale_broker_epoch(deps, broker_epoch):
        rejection = Rejection(
            STALE_BROKER_EPOCH,
            f"broker epoch {broker_epoch} is older than ours ({deps.broker_epoch()})",
        )
    if rejection is None and controller_epoch < deps.metadata_cache.controller_epoch:
        rejection = Rejection(
            STALE_CONTROLLER_EPOCH,
            f"controller epoch {controller_epoch} is older than "
            f"{deps.metadata_cache.controller_epoch}",
        )
    if rejection is None:
        rejection = await gate.check_controller(controller_id, controller_epoch)
    if rejection is None:
        return 0
    log_rejection(
        ib.CONTROLLER_APIS[ctx.api_key].name, ctx.connection.peer, ctx.listener, rejection
    )
    return rejection.error_code


def _path_error(topic: str, partition: int) -> int:
    """A partition that could not be a log directory: a topic name that breaks Kafka's
    rules (``../x``, ``a/b``, NUL ...) or a negative index."""
    if validate_topic_name(topic) is not None:
        return INVALID_TOPIC
    if partition < 0:
        return UNKNOWN_TOPIC_OR_PARTITION
    return 0


# ---- LeaderAndIsr ---------------------------------------------------------------


def _leader_and_isr_response(
    req: ib.LeaderAndIsrRequest, errors: dict[TopicPartition, int], version: int, error: int = 0
) -> ib.LeaderAndIsrResponse:
    resp = ib.LeaderAndIsrResponse(error)
    for t in req.topic_states:
        parts = [
            ib.LeaderAndIsrPartitionError(
                s.partition_index,
                int(errors.get((t.topic_name, s.partition_index), error)),
                t.topic_name,
            )
            for s in t.partition_states
        ]
        if version >= 5:
            resp.topics.append(ib.LeaderAndIsrTopicError(t.topic_id, parts))
        else:
            resp.partition_errors.extend(parts)
    return resp


async def handle_leader_and_isr(
    deps: ControllerRequestDeps, ctx: RequestContext, req: ib.LeaderAndIsrRequest
) -> ib.LeaderAndIsrResponse:
    error = await _admit(deps, ctx, req.controller_id, req.controller_epoch, req.broker_epoch)
    if error:
        return _leader_and_isr_response(req, {}, ctx.api_version, error)
    errors: dict[TopicPartition, int] = {}
    states: list[dict[str, Any]] = []
    me = deps.broker_id
    for t in req.topic_states:
        for s in t.partition_states:
            tp = (t.topic_name, s.partition_index)
            if path_error := _path_error(*tp):
                errors[tp] = path_error
                continue
            if me not in s.replicas:
                # Kafka: "itself is not in assigned replica list"
                errors[tp] = UNKNOWN_TOPIC_OR_PARTITION
                continue
            if tp in deps.replica_manager.offline_partitions:
                # its log dir failed: how the controller learns the replica is offline
                errors[tp] = int(ErrorCode.kafka_storage_error)
                continue
            current = deps.replica_manager.get_partition(tp)
            topic_id = t.topic_id
            if topic_id == ZERO_UUID and current is not None:  # v0-4: no topic ids
                topic_id = current.topic_id
            # Kafka answers a leader epoch that is not newer with this code; a partition
            # the broker does not host yet has leader epoch -1
            current_epoch = (
                current.leader_epoch if current is not None and current.topic_id == topic_id else -1
            )
            if s.leader_epoch <= current_epoch:
                errors[tp] = STALE_CONTROLLER_EPOCH
                continue
            states.append(
                {
                    "topic": t.topic_name,
                    "partition": s.partition_index,
                    "topic_id": topic_id,
                    "leader": s.leader,
                    "leader_epoch": s.leader_epoch,
                    "isr": s.isr,
                    "replicas": s.replicas,
                    "adding_replicas": s.adding_replicas,
                    "removing_replicas": s.removing_replicas,
                    "is_new": s.is_new,
                    "controller_epoch": s.controller_epoch,
                    "partition_epoch": s.partition_epoch,
                }
            )
    if states:
        errors.update(
            await deps.replica_manager.become_leader_or_follower(
                req.controller_id,
                req.controller_epoch,
                states,
                {ll.broker_id: (ll.host_name, ll.port) for ll in req.live_leaders},
            )
        )
    return _leader_and_isr_response(req, errors, ctx.api_version)


# ---- UpdateMetadata ---------------------------------------------------------------


def _endpoint_text(e: ib.UpdateMetadataEndpoint) -> str:
    listener = e.listener or ib.SECURITY_PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT")
    host = f"[{e.host}]" if ":" in e.host else e.host
    return f"{listener}://{host}:{e.port}"


async def handle_update_metadata(
    deps: ControllerRequestDeps, ctx: RequestContext, req: ib.UpdateMetadataRequest
) -> ib.UpdateMetadataResponse:
    error = await _admit(deps, ctx, req.controller_id, req.controller_epoch, req.broker_epoch)
    if error:
        return ib.UpdateMetadataResponse(error)
    cache = deps.metadata_cache
    states: list[dict[str, Any]] = []
    deleted: list[str] = []
    for t in req.topic_states:
        if any(s.leader == ib.LEADER_DURING_DELETE for s in t.partition_states):
            deleted.append(t.topic_name)
            continue
        topic_id = t.topic_id
        if topic_id == ZERO_UUID:  # v0-6: keep the id the cache already has
            known = cache.get_topic(t.topic_name)
            topic_id = known.topic_id if known is not None else ZERO_UUID
        for s in t.partition_states:
            states.append(
                {
                    "topic": t.topic_name,
                    "partition": s.partition_index,
                    "topic_id": topic_id,
                    "leader": s.leader,
                    "leader_epoch": s.leader_epoch,
                    "isr": s.isr,
                    "replicas": s.replicas,
                    "offline_replicas": s.offline_replicas,
                    "controller_epoch": s.controller_epoch,
                    "partition_epoch": s.zk_version,
                }
            )
    live = [
        {"id": b.id, "endpoints": [_endpoint_text(e) for e in b.endpoints], "rack": b.rack}
        for b in req.live_brokers
    ]
    await deps.metadata_cache.update_metadata(
        req.controller_id, req.controller_epoch, states, live, deleted
    )
    return ib.UpdateMetadataResponse(0)


# ---- StopReplica ------------------------------------------------------------------


async def handle_stop_replica(
    deps: ControllerRequestDeps, ctx: RequestContext, req: ib.StopReplicaRequest
) -> ib.StopReplicaResponse:
    all_tps = [
        (t.topic_name, p.partition_index) for t in req.topic_states for p in t.partition_states
    ]
    error = await _admit(deps, ctx, req.controller_id, req.controller_epoch, req.broker_epoch)
    if error:
        return ib.StopReplicaResponse(
            error, [ib.StopReplicaPartitionError(t, p, error) for t, p in all_tps]
        )
    deps.metadata_cache.controller_epoch = req.controller_epoch
    errors: dict[TopicPartition, int] = {}
    by_delete: dict[bool, list[TopicPartition]] = {False: [], True: []}
    for t in req.topic_states:
        for p in t.partition_states:
            tp = (t.topic_name, p.partition_index)
            if path_error := _path_error(*tp):
                errors[tp] = path_error
                continue
            current = deps.replica_manager.get_partition(tp)
            if (
                current is not None
                and p.leader_epoch not in (ib.NO_EPOCH, ib.EPOCH_DURING_DELETE)
                and p.leader_epoch < current.leader_epoch
            ):
                errors[tp] = int(ErrorCode.fenced_leader_epoch)
                continue
            by_delete[p.delete_partition].append(tp)
    for delete, tps in by_delete.items():
        if tps:
            errors.update(
                await deps.replica_manager.stop_replicas(req.controller_epoch, tps, delete)
            )
    return ib.StopReplicaResponse(
        0, [ib.StopReplicaPartitionError(t, p, int(errors.get((t, p), 0))) for t, p in all_tps]
    )


# ---- ControlledShutdown -------------------------------------------------------------


async def handle_controlled_shutdown(
    deps: ControllerRequestDeps, ctx: RequestContext, req: ib.ControlledShutdownRequest
) -> ib.ControlledShutdownResponse:
    """Validate, then run ``shutdownBroker`` as an event on the controller's queue.

    CLUSTER_AUTHORIZATION_FAILED without a valid authenticator or on a listener that
    is not the inter-broker (or control-plane) one, NOT_CONTROLLER if this broker is
    not the active controller, BROKER_NOT_AVAILABLE for an unregistered deps, STALE_BROKER_EPOCH for an
    earlier incarnation; otherwise error 0 and the partitions the broker still leads
    (with another live replica), which makes it retry.
    """
    rejection: Rejection | None = ctx.extra.get(_UNAUTHENTICATED)
    if rejection is None:
        rejection = deps.controller_gate.check_listener(ctx.api_key, ctx.listener)
    if rejection is not None:
        log_rejection("ControlledShutdown", ctx.connection.peer, ctx.listener, rejection)
        return ib.ControlledShutdownResponse(rejection.error_code)
    error, remaining = await deps.controller.controlled_shutdown(req.broker_id, req.broker_epoch)
    return ib.ControlledShutdownResponse(error, [ib.RemainingPartition(t, p) for t, p in remaining])


# ---- ElectLeaders, Alter/ListPartitionReassignments (kio schemas) ---------------------

NOT_CONTROLLER = int(ErrorCode.not_controller)


def _by_topic(results: dict[TopicPartition, tuple[int, str | None]]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for (topic, partition), (code, message) in sorted(results.items()):
        out.setdefault(topic, []).append((partition, code, message))
    return out


async def handle_elect_leaders(
    deps: ControllerRequestDeps, ctx: RequestContext, req: ElectLeadersRequest
) -> dict[str, Any]:
    """Preferred (0) or unclean (1) election, run as a controller event; only the
    active controller answers (others: NOT_CONTROLLER, which makes clients retry there)."""
    election_type = int(getattr(req, "election_type", 0))
    partitions: list[TopicPartition] | None = (
        None
        if req.topic_partitions is None
        else [(t.topic, int(p)) for t in req.topic_partitions for p in t.partitions]
    )
    results = None
    if election_type in (0, 1):
        results = await deps.controller.elect_leaders(partitions, election_type)
    if election_type not in (0, 1):
        code, top = int(ErrorCode.invalid_request), 0
        results = {tp: (code, f"unknown election type {election_type}") for tp in partitions or []}
    elif results is None:
        top = NOT_CONTROLLER
        results = {tp: (NOT_CONTROLLER, None) for tp in partitions or []}
    else:
        top = 0
    return {
        "throttle_time": 0,
        "error_code": top if partitions is None else 0,
        "replica_election_results": [
            {
                "topic": topic,
                "partition_result": [
                    {"partition_id": p, "error_code": code, "error_message": message}
                    for p, code, message in parts
                ],
            }
            for topic, parts in _by_topic(results).items()
        ],
    }


async def handle_alter_partition_reassignments(
    deps: ControllerRequestDeps, ctx: RequestContext, req: AlterPartitionReassignmentsRequest
) -> dict[str, Any]:
    wanted: dict[TopicPartition, list[int] | None] = {
        (t.name, int(p.partition_index)): (
            None if p.replicas is None else [int(r) for r in p.replicas]
        )
        for t in req.topics
        for p in t.partitions
    }
    refused: list[tuple[TopicPartition, int, str]] = []
    if not getattr(req, "allow_replication_factor_change", True):  # v1 (KIP-860)
        for tp, replicas in list(wanted.items()):
            t = deps.metadata_cache.get_topic(tp[0])
            current = None if t is None else t.partitions.get(tp[1])
            if replicas is not None and current is not None:
                if len(replicas) != len(current.replicas):
                    del wanted[tp]
                    refused.append(
                        (
                            tp,
                            ErrorCode.invalid_replication_factor,
                            f"The replication factor is changed from {len(current.replicas)} "
                            f"to {len(replicas)} but AllowReplicationFactorChange is false",
                        )
                    )
    results = await deps.controller.alter_partition_reassignments(wanted) if wanted else {}
    if results is None:
        return {"throttle_time": 0, "error_code": NOT_CONTROLLER, "responses": []}
    for tp, code, message in refused:
        results[tp] = (code, message)
    return {
        "throttle_time": 0,
        "error_code": 0,
        "responses": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": p, "error_code": code, "error_message": message}
                    for p, code, message in parts
                ],
            }
            for topic, parts in _by_topic(results).items()
        ],
    }


async def handle_list_partition_reassignments(
    deps: ControllerRequestDeps, ctx: RequestContext, req: ListPartitionReassignmentsRequest
) -> dict[str, Any]:
    ongoing = deps.controller.list_partition_reassignments()
    if ongoing is None:
        return {"throttle_time": 0, "error_code": NOT_CONTROLLER, "topics": []}
    if req.topics is not None:
        asked = {(t.name, int(p)) for t in req.topics for p in t.partition_indexes}
        ongoing = {tp: v for tp, v in ongoing.items() if tp in asked}
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), (replicas, adding, removing) in sorted(ongoing.items()):
        topics.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "replicas": replicas,
                "adding_replicas": adding,
                "removing_replicas": removing,
            }
        )
    return {
        "throttle_time": 0,
        "error_code": 0,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }


# ---- error responses of the client APIs above -------------------------------------------
def elect_leaders_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """The top-level error (v1+) and every requested partition's."""
    return {
        "throttle_time": 0,
        "error_code": code,
        "replica_election_results": [
            {
                "topic": t.topic,
                "partition_result": [
                    {"partition_id": int(p), "error_code": code, "error_message": None}
                    for p in t.partitions
                ],
            }
            for t in req.topic_partitions or ()
        ],
    }


def alter_partition_reassignments_error_response(
    req: Any, version: int, code: int
) -> dict[str, Any]:
    """The top-level error and every requested partition's."""
    return {
        "throttle_time": 0,
        "error_code": code,
        "error_message": None,
        "responses": [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": int(p.partition_index), "error_code": code}
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }


def list_partition_reassignments_error_response(
    req: Any, version: int, code: int
) -> dict[str, Any]:
    """The top-level error, with no reassignments."""
    return {"throttle_time": 0, "error_code": code, "error_message": None, "topics": []}
