"""Fetch (1): consumers and followers; long polling, sessions, zero-copy records."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.network.responses import FileRange
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.fetch_request import FIRST_TOPIC_ID, FetchRequest
from kafkalite.protocol.fetch_response import (
    FetchPartitionData,
    FetchTopicData,
    encode_fetch_response,
)
from kafkalite.replica.replica_manager import FetchParams, FetchPartitionResult, PartitionFetchInfo
from kafkalite.replica.topic_stats import BYTES_OUT, FAILED_FETCH, TOTAL_FETCH
from kafkalite.security.authorizer.acl import AclOperation, ResourceType
from kafkalite.server.fetch_session import (
    FINAL_EPOCH,
    CachedPartition,
    FetchSession,
    new_context,
)

if TYPE_CHECKING:
    from kafkalite.log.log_manager import LogManager
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.quota.managers import QuotaManagers
    from kafkalite.replica.replica_manager import ReplicaManager
    from kafkalite.server.authorization import AuthHelper
    from kafkalite.server.fetch_session import FetchSessionCache
    from kafkalite.server.metadata_cache import MetadataCache

TopicPartition = tuple[str, int]
_ZERO_UUID = uuid.UUID(int=0)
_UNSUPPORTED_COMPRESSION = int(ErrorCode.unsupported_compression_type)
#: the first Fetch version whose clients can read zstd (KIP-110)
FIRST_ZSTD_FETCH = 10
#: the first Fetch version with the consumer's rack_id (KIP-392)
FIRST_RACK_ID = 11


@dataclass(frozen=True, slots=True)
class FetchDeps:
    """What Fetch uses (bound once into the API table: no lookups per request)."""

    clock_ms: Callable[[], int]
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    log_manager: LogManager
    fetch_sessions: FetchSessionCache
    #: fetch.max.bytes, read once: it bounds every response
    fetch_max_bytes: int
    #: consumer_byte_rate (followers are not client-quota'd)
    quotas: QuotaManagers | None = None
    #: the ACL checks (None: no authorizer, nothing to check)
    authz: AuthHelper | None = None


def handle_fetch(deps: FetchDeps, ctx: RequestContext, req: FetchRequest) -> Any:
    version = ctx.api_version
    cache = deps.metadata_cache
    replica_id = req.replica_id
    if replica_id >= 0 and not getattr(ctx.connection, "broker_peer", False):
        # a follower's fetch moves the leader's view of its log (and so the HW): only a
        # broker (its request signed with the inter-broker secret) may send one, as
        # Kafka's CLUSTER_ACTION rule; others get TOPIC_AUTHORIZATION_FAILED per partition
        return fetch_error_response(req, version, ErrorCode.topic_authorization_failed)
    authz = deps.authz
    if (
        authz is not None
        and replica_id >= 0
        and not authz.cluster(ctx, AclOperation.CLUSTER_ACTION)
    ):
        return fetch_error_response(req, version, ErrorCode.topic_authorization_failed)
    epoch = req.session_epoch
    uses_topic_ids = version >= FIRST_TOPIC_ID
    # Kafka's KafkaApis: the response is bounded by fetch.max.bytes whatever the request asks
    max_bytes = min(req.max_bytes, deps.fetch_max_bytes)
    quotas = deps.quotas
    fetch_quota = None
    if quotas is not None and replica_id < 0 and quotas.fetch.enabled:
        fetch_quota = quotas.fetch
        # nor by more than the consumer_byte_rate allows over its window
        allowed = fetch_quota.max_value_in_window(
            ctx.connection.principal.name, ctx.client_id or ""
        )
        if allowed is not None:
            max_bytes = max(min(max_bytes, int(allowed)), 1)
    params = FetchParams(
        replica_id=replica_id,
        max_wait_ms=req.max_wait_ms,
        min_bytes=min(req.min_bytes, max_bytes),
        max_bytes=max_bytes,
        isolation_level=req.isolation_level if replica_id < 0 else 0,
        # KIP-392: a v11+ consumer carries client metadata (its rack, maybe empty)
        client_rack=req.rack_id if replica_id < 0 and version >= FIRST_RACK_ID else None,
    )

    # validate: resolve names (v13+ uses topic ids) and the session
    requested: list[tuple[TopicPartition, PartitionFetchInfo]] = []
    ids: dict[str, uuid.UUID] = {}
    unknown_ids: dict[uuid.UUID, list[int]] = {}
    for t in req.topics:
        if uses_topic_ids:
            tid = t.topic_id
            assert tid is not None
            name = cache.topic_name(tid)
            if name is None:
                unknown_ids[tid] = [p.partition for p in t.partitions]
                continue
        else:
            name = t.topic
            assert name is not None
        known = cache.topics.get(name)
        ids[name] = known.topic_id if known is not None else _ZERO_UUID
        for p in t.partitions:
            requested.append(
                (
                    (name, p.partition),
                    PartitionFetchInfo(
                        p.fetch_offset,
                        p.partition_max_bytes,
                        p.log_start_offset,
                        p.current_leader_epoch,
                    ),
                )
            )
    forgotten: list[TopicPartition] = []
    for f in req.forgotten_topics_data:
        fname = cache.topic_name(f.topic_id) if f.topic_id is not None else f.topic
        if fname is not None:
            forgotten.extend((fname, p) for p in f.partitions)

    context = new_context(
        deps.fetch_sessions,
        req.session_id,
        epoch,
        is_follower=replica_id >= 0,
        uses_topic_ids=uses_topic_ids,
        # a sessionless fetch (epoch -1) caches nothing
        requested=[]
        if epoch == FINAL_EPOCH
        else [
            (
                tp,
                CachedPartition(
                    info.fetch_offset,
                    info.max_bytes,
                    info.log_start_offset,
                    info.current_leader_epoch,
                ),
            )
            for tp, info in requested
        ],
        forgotten=forgotten,
        now_ms=deps.clock_ms(),
    )
    if context.kind == "error":
        return encode_fetch_response(version, [], error_code=context.error, session_id=0)
    session = context.session
    incremental = context.kind == "incremental"
    new_session_id = context.response_session_id
    if incremental and session is not None:
        to_fetch = [
            (
                tp,
                PartitionFetchInfo(
                    cp.fetch_offset, cp.max_bytes, cp.log_start_offset, cp.current_leader_epoch
                ),
            )
            for tp, cp in session.partitions.items()
        ]
        for tp, _ in to_fetch:
            if tp[0] not in ids:
                known = cache.get_topic(tp[0])
                ids[tp[0]] = known.topic_id if known is not None else _ZERO_UUID
    else:
        to_fetch = requested
    denied: list[TopicPartition] = []
    if authz is not None and replica_id < 0:
        # Read on each topic (KafkaApis): the others answer TOPIC_AUTHORIZATION_FAILED
        readable: dict[str, bool] = {}
        for tp, _ in to_fetch:
            if tp[0] not in readable:
                readable[tp[0]] = authz.allowed(ctx, AclOperation.READ, ResourceType.TOPIC, tp[0])
        if not all(readable.values()):
            denied = [tp for tp, _ in to_fetch if not readable[tp[0]]]
            to_fetch = [x for x in to_fetch if readable[x[0][0]]]

    # a consumer too old for zstd cannot read a topic that recompresses to it
    # (Kafka's maybeConvertFetchedData); a "producer" topic serves its batches as they are
    zstd_refused: set[str] = set()
    if replica_id < 0 and version < FIRST_ZSTD_FETCH:
        for tp, _ in to_fetch:
            lg = deps.log_manager.get_log(*tp)
            if lg is not None and lg.config.compression_type == "zstd":
                zstd_refused.add(tp[0])

    # act, then respond: now, or when the parked fetch completes (respond runs then)
    def respond(results: list[tuple[TopicPartition, FetchPartitionResult]]) -> list[Any]:
        throttle_ms = ctx.throttle_ms
        if fetch_quota is not None:
            size = sum(r.size for _, r in results)
            user, client = ctx.connection.principal.name, ctx.client_id or ""
            ms = fetch_quota.record_and_get_throttle_ms(user, client, size)
            if ms > 0:
                # over the quota: an empty response now, the client fetches the same
                # offsets again after the throttle (Kafka's getThrottledResponse)
                fetch_quota.unrecord(user, client, size)
                throttle_ms = max(throttle_ms, ms)
                ctx.connection.throttle(throttle_ms)
                return encode_fetch_response(
                    version, [], throttle_time_ms=throttle_ms, session_id=new_session_id
                )
        _count(deps, ctx, replica_id, results, zstd_refused)
        by_topic: dict[str, FetchTopicData] = {}
        order: list[FetchTopicData] = []
        leaders: set[int] = set()
        for tp, r in results:
            if incremental and session is not None and not _has_news(session, tp, r):
                continue
            if session is not None:
                cp = session.partitions.get(tp)
                if cp is not None:
                    cp.high_watermark = r.high_watermark
                    cp.last_stable_offset = r.last_stable_offset
                    cp.response_log_start_offset = r.log_start_offset
            td = by_topic.get(tp[0])
            if td is None:
                td = FetchTopicData(tp[0], ids.get(tp[0], _ZERO_UUID))
                by_topic[tp[0]] = td
                order.append(td)
            if tp[0] in zstd_refused:
                td.partitions.append(
                    FetchPartitionData(tp[1], ErrorCode.unsupported_compression_type, records=b"")
                )
                continue
            td.partitions.append(
                FetchPartitionData(
                    partition_index=tp[1],
                    error_code=r.error,
                    high_watermark=r.high_watermark,
                    last_stable_offset=r.last_stable_offset,
                    log_start_offset=r.log_start_offset,
                    aborted_transactions=r.aborted_transactions
                    if params.isolation_level == 1
                    else None,
                    preferred_read_replica=r.preferred_read_replica,
                    records=_wire(r.records),
                    current_leader=_leader_hint(cache, tp, r.error, version, leaders),
                )
            )
        denied_topics: dict[str, FetchTopicData] = {}
        for tp in denied:
            td = denied_topics.get(tp[0])
            if td is None:
                td = denied_topics[tp[0]] = FetchTopicData(tp[0], ids.get(tp[0], _ZERO_UUID))
                order.append(td)
            td.partitions.append(
                FetchPartitionData(tp[1], ErrorCode.topic_authorization_failed, records=b"")
            )
        for tid, parts in unknown_ids.items():
            order.append(
                FetchTopicData(
                    "",
                    tid,
                    [FetchPartitionData(p, ErrorCode.unknown_topic_id, records=b"") for p in parts],
                )
            )
        return encode_fetch_response(
            version,
            order,
            throttle_time_ms=throttle_ms,
            session_id=new_session_id,
            node_endpoints=_endpoints(cache, leaders, ctx.listener),
        )

    return deps.replica_manager.fetch_messages(params, to_fetch, respond)


#: errors whose partition response names the current leader from v16 (KIP-951)
_LEADER_HINT_ERRORS = frozenset(
    {int(ErrorCode.not_leader_or_follower), int(ErrorCode.fenced_leader_epoch)}
)
FIRST_LEADER_HINT = 16


def _leader_hint(
    cache: MetadataCache, tp: TopicPartition, error: int, version: int, leaders: set[int]
) -> tuple[int, int] | None:
    """KIP-951, as KafkaApis: a partition answered NOT_LEADER_OR_FOLLOWER or
    FENCED_LEADER_EPOCH carries the leader and epoch this broker knows (its endpoint
    goes in ``node_endpoints``), so the client retries there without a Metadata
    round trip. None when not applicable or no leader is known."""
    if version < FIRST_LEADER_HINT or error not in _LEADER_HINT_ERRORS:
        return None
    t = cache.get_topic(tp[0])
    pm = t.partitions.get(tp[1]) if t is not None else None
    if pm is None or pm.leader < 0:
        return None
    leaders.add(pm.leader)
    return pm.leader, pm.leader_epoch


def _endpoints(
    cache: MetadataCache, leaders: set[int], listener: str
) -> list[tuple[int, str, int, str | None]]:
    out = []
    for b in sorted(leaders):
        info = cache.brokers.get(b)
        ep = info.endpoints.get(listener) if info is not None else None
        if info is not None and ep is not None:
            out.append((b, ep[0], ep[1], info.rack))
    return out


def _count(
    deps: FetchDeps,
    ctx: RequestContext,
    replica_id: int,
    results: list[tuple[TopicPartition, FetchPartitionResult]],
    zstd_refused: set[str],
) -> None:
    """BrokerTopicMetrics (consumers per topic, followers as replication bytes) and the
    request's error counts: a few additions per partition."""
    stats = deps.replica_manager.topic_stats
    if ctx.stats is None:  # kafkalite.request.metrics.enabled=false
        return
    errors = ctx.stats.errors
    if replica_id >= 0:
        n = 0
        for _tp, r in results:
            n += r.size
            errors[r.error] = errors.get(r.error, 0) + 1
        stats.replication_bytes_out += n
        return
    topics = stats.topics
    for tp, r in results:
        s = topics.get(tp[0]) or stats.of(tp[0])
        s[TOTAL_FETCH] += 1
        code = _UNSUPPORTED_COMPRESSION if tp[0] in zstd_refused else r.error
        errors[code] = errors.get(code, 0) + 1
        if code:
            s[FAILED_FETCH] += 1
        else:
            s[BYTES_OUT] += r.size


def _has_news(session: FetchSession, tp: TopicPartition, r: FetchPartitionResult) -> bool:
    cp = session.partitions.get(tp)
    if cp is None:
        return True
    return bool(
        r.size
        or r.error
        or r.preferred_read_replica >= 0
        or r.high_watermark != cp.high_watermark
        or r.last_stable_offset != cp.last_stable_offset
        or r.log_start_offset != cp.response_log_start_offset
    )


def _wire(records: Any) -> Any:
    # Kafka never sends null records (librdkafka rejects a size of -1): empty instead
    if records is None:
        return b""
    if isinstance(records, bytes | bytearray | memoryview):
        return records
    # the slice's file object keeps the descriptor open while the range is queued
    return FileRange(records.fileno(), records.position, records.size, records.file)


#: errors about the request's fetch session: top level, with no partitions
_SESSION_ERRORS = frozenset(
    {int(ErrorCode.fetch_session_id_not_found), int(ErrorCode.invalid_fetch_session_epoch)}
)


def fetch_error_response(req: FetchRequest, version: int, code: int) -> dict[str, Any]:
    """Every requested partition in error, the top-level code 0 (clients act on partition
    errors); a session error is top level only. Encoded by kio: not the hot path."""
    if code in _SESSION_ERRORS:
        return {"throttle_time": 0, "error_code": code, "session_id": 0, "responses": []}
    return {
        "throttle_time": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                # a kio request (tests) has only the one its version uses
                "topic": getattr(t, "topic", None),
                "topic_id": getattr(t, "topic_id", None),
                "partitions": [
                    {
                        "partition_index": int(p.partition),
                        "error_code": code,
                        "high_watermark": -1,
                        "last_stable_offset": -1,
                        "log_start_offset": -1,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": b"",
                    }
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }
