"""Produce (0): validate acks and records, append on the leader, answer per partition.

The request comes from :mod:`kafkalite.protocol.produce`'s parser (records are
views into the request frame) and the response is written by its encoder: no
kio entity per partition on this path.
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.network.responses import CloseConnection
from kafkalite.protocol.compression import parse_compression_type
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.produce import PartitionResponse, ProduceRequest, encode_produce_response
from kafkalite.protocol.record_batch import InvalidRecordBatch, ValidatedRecords
from kafkalite.protocol.record_validator import (
    BatchCheck,
    CheckedBatch,
    TopicLimits,
    WritableBuffer,
    check_client_batch,
    check_request_records,
)
from kafkalite.replica.replica_manager import ProduceResult
from kafkalite.replica.topic_stats import (
    BYTES_IN,
    BYTES_REJECTED,
    FAILED_PRODUCE,
    MESSAGES_IN,
    TOTAL_PRODUCE,
)
from kafkalite.security.authorizer.acl import AclOperation, ResourceType
from kafkalite.server.topic_names import INTERNAL_TOPICS

if TYPE_CHECKING:
    from kafkalite.log.log_config import LogConfig
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.replica.replica_manager import ReplicaManager
    from kafkalite.server.append_sequencer import AppendSequencer
    from kafkalite.server.authorization import AuthHelper
    from kafkalite.server.metadata_cache import MetadataCache
    from kafkalite.server.txn_verifier import TxnVerifier

log = logging.getLogger(__name__)

VALID_ACKS = (-1, 0, 1)
_ZERO_UUID = uuid.UUID(int=0)
#: the client id of Kafka's admin tools, which may append to internal topics (AdminUtils)
ADMIN_CLIENT_ID = "__admin_client"
TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ProduceDeps:
    """What Produce uses (bound once into the API table: no lookups per request)."""

    clock_ms: Callable[[], int]
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    append_sequencer: AppendSequencer
    #: KIP-890 verification of transactional batches (None: not verified)
    txn_verifier: TxnVerifier | None = None
    #: the ACL checks (None: no authorizer, nothing to check)
    authz: AuthHelper | None = None


def handle_produce(deps: ProduceDeps, ctx: RequestContext, req: ProduceRequest) -> Any:
    acks = req.acks
    timeout_ms = req.timeout_ms
    entries: dict[TP, WritableBuffer] = {}
    validated: dict[TP, ValidatedRecords] = {}
    results: dict[TP, ProduceResult] = {}
    record_errors: dict[TP, list[tuple[int, str]]] = {}
    pending: dict[TP, BatchCheck] = {}  # batches checked in slices, after this dispatch
    #: bytes of each partition's records (BytesInPerSec / BytesRejectedPerSec)
    sizes: dict[TP, int] = {}
    order: list[tuple[str, list[int]]] = []
    now = deps.clock_ms()
    denied: set[str] = set()
    authz = deps.authz
    if authz is not None:
        # KafkaApis: Write on the transactional id, then on each topic, before anything
        if req.transactional_id is not None and not authz.allowed(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id
        ):
            return produce_error_response(
                req, ctx.api_version, ErrorCode.transactional_id_authorization_failed
            )
        denied = {
            td.name
            for td in req.topic_data
            if not authz.allowed(ctx, AclOperation.WRITE, ResourceType.TOPIC, td.name)
        }

    def outcome(tp: TP, result: CheckedBatch | Exception) -> None:
        """A batch check's verdict: the batch to append, or the partition's error."""
        if isinstance(result, CheckedBatch):
            entries[tp] = result.records
            h = result.header  # the log need not parse it and check its CRC again
            validated[tp] = ValidatedRecords(
                [(0, result.size)], [h], h.last_offset_delta + 1, h.max_timestamp, result.size, True
            )
        elif isinstance(result, InvalidRecordBatch):
            results[tp] = ProduceResult(result.error_code, error_message=str(result) or None)
            errors = getattr(result, "record_errors", None)
            if errors is not None:
                record_errors[tp] = errors
        else:
            log.error("checking a produced batch for %s failed", tp, exc_info=result)
            results[tp] = ProduceResult(ErrorCode.unknown_server_error, error_message=repr(result))

    # validate
    unknown_ids: set[str] = set()
    for td in req.topic_data:
        name = td.name
        if td.topic_id is not None:  # v13+: topics by id (KIP-516)
            name = deps.metadata_cache.topic_name(td.topic_id) or ""
            if not name:  # a key no topic can have: answered UNKNOWN_TOPIC_ID
                name = f"<unknown topic id {td.topic_id}>"
                unknown_ids.add(name)
            td.name = name
        order.append((name, [p.index for p in td.partition_data]))
        for pd in td.partition_data:
            tp = (name, pd.index)
            if acks not in VALID_ACKS:
                results[tp] = ProduceResult(ErrorCode.invalid_required_acks)
            elif name in unknown_ids:
                results[tp] = ProduceResult(ErrorCode.unknown_topic_id)
            elif denied and name in denied:
                results[tp] = ProduceResult(ErrorCode.topic_authorization_failed)
            elif name not in deps.metadata_cache.topics:
                results[tp] = ProduceResult(ErrorCode.unknown_topic_or_partition)
            elif name in INTERNAL_TOPICS and ctx.client_id != ADMIN_CLIENT_ID:
                # Kafka's ReplicaManager: only the coordinators write them (or its admin tools)
                results[tp] = ProduceResult(ErrorCode.invalid_topic_exception)
            else:
                records = pd.records or b""
                sizes[tp] = len(records)
                try:
                    size = check_request_records(records, ctx.api_version)
                    # a trailing partial batch is dropped, as Kafka's log trims it; the copy
                    # is the log's (offsets are assigned in place) and the check's. A large
                    # request's batch is a writable view of a buffer the request owns
                    # (Connection._hand_over): appended from where it is, not copied
                    view = memoryview(records)[:size]
                    data = bytearray(view) if view.readonly else view
                    cfg = _leader_config(deps, tp)
                    if cfg is None:
                        # the append answers UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER
                        entries[tp] = data
                        continue
                    checked = check_client_batch(data, size, _limits(cfg, tp), now)
                    if isinstance(checked, CheckedBatch):
                        outcome(tp, checked)
                    else:
                        pending[tp] = checked  # a large batch: the rest after this dispatch
                except InvalidRecordBatch as e:
                    outcome(tp, e)

    # act, then respond: now, or when acks=all completes (respond runs then)
    def respond(done: dict[TP, ProduceResult]) -> bytes | None:
        results.update(done)
        _count(deps, ctx, results, validated, sizes)
        if acks == 0:
            if any(r.error for r in results.values()):
                # the only way to tell an acks=0 producer something went wrong (as Kafka does)
                raise CloseConnection(
                    "acks=0 produce failed; closing so the client refreshes metadata"
                )
            return None
        hints, endpoints = _leader_hints(deps, ctx, req, order, results)
        return encode_produce_response(
            ctx.api_version,
            [
                (
                    td.topic_id if td.topic_id is not None else name,
                    [_partition((name, i), results[(name, i)], record_errors) for i in parts],
                )
                for td, (name, parts) in zip(req.topic_data, order, strict=True)
            ],
            ctx.throttle_ms,
            current_leaders=hints,
            node_endpoints=endpoints,
        )

    sequencer = deps.append_sequencer

    def act() -> Any:
        if not pending and not sequencer.busy(entries):
            if not entries:
                return respond({})
            return deps.replica_manager.append_records(
                timeout_ms, acks, entries, respond, validated=validated
            )

        def append(outcomes: dict[Any, CheckedBatch | Exception]) -> Any:
            for tp, result in outcomes.items():
                outcome(tp, result)
            if not entries:
                return respond({})
            return deps.replica_manager.append_records(
                timeout_ms, acks, entries, respond, validated=validated
            )

        # appends to these partitions wait for the slices, and for earlier deferred requests
        return sequencer.defer([*entries, *pending], pending, append)

    verifier = deps.txn_verifier
    # transactions V2 (Produce v12+): the first batch adds the partition to the transaction
    add = ctx.api_version >= 12
    if req.transactional_id is None or verifier is None or not (verifier.enabled or add):
        return act()
    # KIP-890: a producer's first batch of a transaction on a partition is verified first
    first, pid, epoch = _first_transactional_batches(deps, entries, validated)
    if not first:
        return act()

    def refuse(errors: dict[TP, int]) -> None:
        for tp, code in errors.items():
            if code:
                results[tp] = ProduceResult(code)
                entries.pop(tp, None)
                validated.pop(tp, None)

    verdict = verifier.verify(req.transactional_id, pid, epoch, first, add=add)
    if isinstance(verdict, dict):
        refuse(verdict)  # this broker is the coordinator: appended in this same step
        return act()

    async def verified() -> Any:
        refuse(await verdict)
        r = act()
        return await r if inspect.isawaitable(r) else r

    return verified()


def _count(
    deps: ProduceDeps,
    ctx: RequestContext,
    results: dict[TP, ProduceResult],
    validated: dict[TP, ValidatedRecords],
    sizes: dict[TP, int],
) -> None:
    """BrokerTopicMetrics and the request's error counts: a few additions per partition."""
    stats = deps.replica_manager.topic_stats
    if ctx.stats is None:  # kafkalite.request.metrics.enabled=false
        return
    errors = ctx.stats.errors
    topics = stats.topics
    for tp, r in results.items():
        s = topics.get(tp[0]) or stats.of(tp[0])
        s[TOTAL_PRODUCE] += 1
        code = r.error
        errors[code] = errors.get(code, 0) + 1
        if code:
            s[FAILED_PRODUCE] += 1
            if code in _REJECTED:
                s[BYTES_REJECTED] += sizes.get(tp, 0)
            continue
        v = validated.get(tp)
        if v is not None:
            s[MESSAGES_IN] += v.record_count
            s[BYTES_IN] += v.size
        else:
            s[BYTES_IN] += sizes.get(tp, 0)


#: errors about the produced records themselves: their bytes count as rejected
_REJECTED = frozenset(
    int(c)
    for c in (
        ErrorCode.corrupt_message,
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.invalid_record,
        ErrorCode.invalid_timestamp,
        ErrorCode.unsupported_compression_type,
        ErrorCode.unsupported_version,
    )
)


def _first_transactional_batches(
    deps: ProduceDeps, entries: dict[TP, WritableBuffer], validated: dict[TP, ValidatedRecords]
) -> tuple[list[TP], int, int]:
    """Partitions where this request's transactional batch would open the producer's
    transaction (none open there yet), with the producer id and epoch."""
    first: list[TP] = []
    pid = epoch = -1
    rm = deps.replica_manager
    for tp in entries:
        v = validated.get(tp)
        if v is None or not v.headers:
            continue
        h = v.headers[0]
        if not h.is_transactional or h.is_control or h.producer_id < 0:
            continue
        p = rm.get_partition(tp)
        if p is None or p.log is None or not p.is_leader:
            continue
        if h.producer_id not in p.log.producer_state.ongoing:
            first.append(tp)
            pid, epoch = h.producer_id, h.producer_epoch
    return first, pid, epoch


def _leader_config(deps: ProduceDeps, tp: TP) -> LogConfig | None:
    """The partition's log config when this broker leads it (LogValidator runs on the
    leader); None otherwise."""
    p = deps.replica_manager.get_partition(tp)
    if p is None or p.log is None or not p.is_leader:
        return None
    return p.log.config


def _limits(cfg: LogConfig, tp: TP) -> TopicLimits:
    codec = cfg.compression_type
    target = None if codec == "producer" else parse_compression_type(codec)
    level = None
    if target is not None:
        level = {
            1: None if cfg.compression_gzip_level < 0 else cfg.compression_gzip_level,
            3: cfg.compression_lz4_level,
            4: cfg.compression_zstd_level,
        }.get(int(target))
    compact = cfg.compact
    return TopicLimits(
        cfg.max_message_bytes,
        cfg.log_append_time,
        cfg.message_timestamp_before_max_ms,
        cfg.message_timestamp_after_max_ms,
        compact,
        None if target is None else int(target),
        level,
        f"{tp[0]}-{tp[1]}" if compact else "",
    )


def _leader_hints(
    deps: ProduceDeps,
    ctx: RequestContext,
    req: ProduceRequest,
    order: list[tuple[str, list[int]]],
    results: dict[TP, ProduceResult],
) -> tuple[
    dict[tuple[str | uuid.UUID, int], tuple[int, int]] | None,
    list[tuple[int, str, int, str | None]],
]:
    """KIP-951 (v10+), as KafkaApis: a partition answered NOT_LEADER_OR_FOLLOWER or
    FENCED_LEADER_EPOCH names the leader and epoch this broker knows, and the leader's
    endpoint on the request's listener, so the producer retries there without a Metadata
    round trip. Nothing is looked up when no partition failed that way."""
    if ctx.api_version < 10 or not any(r.error in _LEADER_HINT_ERRORS for r in results.values()):
        return None, []
    cache = deps.metadata_cache
    hints: dict[tuple[str | uuid.UUID, int], tuple[int, int]] = {}
    leaders: set[int] = set()
    for td, (name, parts) in zip(req.topic_data, order, strict=True):
        key = td.topic_id if td.topic_id is not None else name
        t = cache.get_topic(name)
        for i in parts:
            r = results.get((name, i))
            if r is None or r.error not in _LEADER_HINT_ERRORS or t is None:
                continue
            pm = t.partitions.get(i)
            if pm is None or pm.leader < 0:
                continue
            hints[(key, i)] = (pm.leader, pm.leader_epoch)
            leaders.add(pm.leader)
    endpoints = []
    for b in sorted(leaders):
        info = cache.brokers.get(b)
        ep = info.endpoints.get(ctx.listener) if info is not None else None
        if info is not None and ep is not None:
            endpoints.append((b, ep[0], ep[1], info.rack))
    return hints, endpoints


#: errors whose partition response names the current leader (KIP-951)
_LEADER_HINT_ERRORS = frozenset(
    {int(ErrorCode.not_leader_or_follower), int(ErrorCode.fenced_leader_epoch)}
)


def _partition(
    tp: TP,
    r: ProduceResult,
    record_errors: dict[TP, list[tuple[int, str]]],
) -> PartitionResponse:
    return (
        tp[1],
        r.error,
        r.base_offset,
        r.log_append_time,
        r.log_start_offset,
        record_errors.get(tp, ()),
        r.error_message,
    )


def produce_error_response(req: ProduceRequest, version: int, code: int) -> dict[str, Any] | None:
    """Every partition of ``req`` in error (encoded by kio: errors are not the hot path).

    acks=0 gets no response, so None: the connection is closed instead (Kafka's
    ``ProduceRequest.getErrorResponse``).
    """
    if int(req.acks) == 0:
        return None
    return {
        "throttle_time": 0,
        "responses": [
            {
                "name": t.name,
                "topic_id": getattr(t, "topic_id", None) or _ZERO_UUID,
                "partition_responses": [
                    {
                        "index": int(p.index),
                        "error_code": code,
                        "base_offset": -1,
                        "log_append_time": -1,
                        "log_start_offset": -1,
                        "record_errors": [],
                        "error_message": None,
                    }
                    for p in t.partition_data
                ],
            }
            for t in req.topic_data
        ],
    }
