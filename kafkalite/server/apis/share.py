"""Share groups (KIP-932): ShareGroupHeartbeat (76), ShareGroupDescribe (77),
ShareFetch (78), ShareAcknowledge (79), DescribeShareGroupOffsets (90),
AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92).

The coordinator side lives in :mod:`kafkalite.coordinator.share`; these handlers
translate between kio's requests (topics by id for the data APIs, by name for the
admin ones) and it. See docs/share-groups.md.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.coordinator.share.share_coordinator import ShareHeartbeatRequest
from kafkalite.coordinator.share.share_partition import ShareError
from kafkalite.coordinator.share.share_partition_manager import FetchOutcome, PartitionResult
from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.apis.groups import (
    AUTHORIZED_OPERATIONS_OMITTED,
    GROUP_AUTHORIZED_OPERATIONS,
    _client_host,
    _ms,
    consumer_group_describe_error_response,
)

if TYPE_CHECKING:
    from kafkalite.common.types import TopicPartition
    from kafkalite.coordinator.group.group_coordinator import GroupCoordinator
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.server.apis.request_types import (
        AlterShareGroupOffsetsRequest,
        DeleteShareGroupOffsetsRequest,
        DescribeShareGroupOffsetsRequest,
        ShareAcknowledgeRequest,
        ShareFetchRequest,
        ShareGroupDescribeRequest,
        ShareGroupHeartbeatRequest,
    )
    from kafkalite.server.metadata_cache import MetadataCache


@dataclass(frozen=True, slots=True)
class ShareDeps:
    coordinator: GroupCoordinator
    metadata_cache: MetadataCache


# ---- ShareGroupHeartbeat (76) ----------------------------------------------------------
async def handle_share_group_heartbeat(
    deps: ShareDeps, ctx: RequestContext, req: ShareGroupHeartbeatRequest
) -> dict[str, Any]:
    r = await deps.coordinator.share.heartbeat(
        ShareHeartbeatRequest(
            group_id=req.group_id,
            member_id=req.member_id,
            member_epoch=int(req.member_epoch),
            rack_id=req.rack_id,
            subscribed_topic_names=None
            if req.subscribed_topic_names is None
            else tuple(req.subscribed_topic_names),
            client_id=ctx.client_id or "",
            client_host=_client_host(ctx),
        )
    )
    return {
        "throttle_time": 0,
        "error_code": r.error,
        "error_message": r.message,
        "member_id": r.member_id,
        "member_epoch": r.member_epoch,
        "heartbeat_interval": r.heartbeat_interval_ms,
        "assignment": None
        if r.assignment is None
        else {
            "topic_partitions": [
                {"topic_id": tid, "partitions": sorted(ps)}
                for tid, ps in sorted(r.assignment.items(), key=lambda kv: str(kv[0]))
            ]
        },
    }


def share_group_heartbeat_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": code,
        "error_message": None,
        "member_id": None,
        "member_epoch": 0,
        "heartbeat_interval": 0,
        "assignment": None,
    }


# ---- ShareGroupDescribe (77) -----------------------------------------------------------
def handle_share_group_describe(
    deps: ShareDeps, ctx: RequestContext, req: ShareGroupDescribeRequest
) -> dict[str, Any]:
    ops = (
        GROUP_AUTHORIZED_OPERATIONS
        if req.include_authorized_operations
        else AUTHORIZED_OPERATIONS_OMITTED
    )
    out = []
    for group_id in req.group_ids:
        d = deps.coordinator.share.describe(group_id)
        out.append(
            {
                "error_code": d.error,
                "error_message": d.message,
                "group_id": group_id,
                "group_state": d.state,
                "group_epoch": d.group_epoch,
                "assignment_epoch": d.assignment_epoch,
                "assignor_name": d.assignor_name,
                "members": [
                    {
                        "member_id": m.member_id,
                        "rack_id": m.rack_id,
                        "member_epoch": m.member_epoch,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "subscribed_topic_names": list(m.subscribed_topic_names),
                        "assignment": {
                            "topic_partitions": [
                                {
                                    "topic_id": tid,
                                    "topic_name": d.topic_names.get(tid, ""),
                                    "partitions": sorted(ps),
                                }
                                for tid, ps in m.assigned.items()
                            ]
                        },
                    }
                    for m in d.members
                ],
                "authorized_operations": ops if d.error == 0 else AUTHORIZED_OPERATIONS_OMITTED,
            }
        )
    return {"throttle_time": 0, "groups": out}


#: a share group's describe entry has the fields of a consumer group's (KIP-932 reuses
#: ConsumerGroupDescribe's shape): every requested group in error
share_group_describe_error_response = consumer_group_describe_error_response


# ---- ShareFetch (78) / ShareAcknowledge (79) --------------------------------------------
#: KIP-1206 (ShareFetch v2 ``share_acquire_mode``): 0 batch_optimized, where max_records
#: is a soft bound the broker may exceed to hand out whole batches, and 1 record_limit,
#: a hard bound. kafkalite acquires record by record, never past max_records, which
#: keeps both modes' promises (v1 is batch_optimized).
SHARE_ACQUIRE_MODE_BATCH_OPTIMIZED, SHARE_ACQUIRE_MODE_RECORD_LIMIT = 0, 1
SHARE_ACQUIRE_MODES = (SHARE_ACQUIRE_MODE_BATCH_OPTIMIZED, SHARE_ACQUIRE_MODE_RECORD_LIMIT)
AckList = list[
    tuple[tuple[uuid.UUID, int], "TopicPartition | None", list[tuple[int, int, tuple[int, ...]]]]
]


def _acks(deps: ShareDeps, topics: Any) -> AckList:
    out: AckList = []
    for t in topics:
        tid = t.topic_id
        name = None if tid is None else deps.metadata_cache.topic_name(tid)
        for p in t.partitions:
            idx = int(p.partition_index)
            tp = None
            if name is not None:
                meta = deps.metadata_cache.topics.get(name)
                if meta is not None and idx in meta.partitions:
                    tp = (name, idx)
            batches = [
                (
                    int(b.first_offset),
                    int(b.last_offset),
                    tuple(int(x) for x in b.acknowledge_types),
                )
                for b in p.acknowledgement_batches
            ]
            out.append(((tid or uuid.UUID(int=0), idx), tp, batches))
    return out


def _leader(r: PartitionResult) -> dict[str, int]:
    return {"leader_id": r.leader_id, "leader_epoch": r.leader_epoch}


def _by_topic(results: list[PartitionResult]) -> dict[uuid.UUID, list[PartitionResult]]:
    out: dict[uuid.UUID, list[PartitionResult]] = {}
    for r in results:
        out.setdefault(r.topic_id, []).append(r)
    return out


def _share_request_error(req: Any) -> tuple[int, str] | None:
    if not req.group_id:
        return int(ErrorCode.invalid_request), "Group id can't be empty."
    if not req.member_id:
        return int(ErrorCode.invalid_request), "Member id can't be empty."
    return None


async def handle_share_fetch(
    deps: ShareDeps, ctx: RequestContext, req: ShareFetchRequest
) -> dict[str, Any]:
    lock_ms = 0
    bad = _share_request_error(req)
    mode = int(getattr(req, "share_acquire_mode", SHARE_ACQUIRE_MODE_BATCH_OPTIMIZED))
    if bad is None and mode not in SHARE_ACQUIRE_MODES:
        bad = int(ErrorCode.invalid_request), f"Unknown share acquire mode id: {mode}"
    if bad is not None:
        outcome = FetchOutcome(bad[0], bad[1])
    else:
        try:
            outcome = await deps.coordinator.share.partitions.share_fetch(
                req.group_id or "",
                req.member_id or "",
                int(req.share_session_epoch),
                _acks(deps, req.topics),
                [
                    (t.topic_id, int(p))
                    for t in req.forgotten_topics_data
                    if t.topic_id is not None
                    for p in t.partitions
                ],
                _ms(req.max_wait),
                int(req.max_records),
                int(req.max_bytes),
                allow_renew=ctx.api_version >= 2 and bool(getattr(req, "is_renew_ack", False)),
                connection=ctx.connection,
            )
        except ShareError as e:
            outcome = FetchOutcome(e.code, e.message)
    lock_ms = outcome.lock_timeout_ms
    responses = [
        {
            "topic_id": tid,
            "partitions": [
                {
                    "partition_index": r.partition,
                    "error_code": r.error,
                    "error_message": r.message,
                    "acknowledge_error_code": r.ack_error or 0,
                    "acknowledge_error_message": r.ack_message,
                    "current_leader": _leader(r),
                    "records": r.records,
                    "acquired_records": [
                        {
                            "first_offset": a.first_offset,
                            "last_offset": a.last_offset,
                            "delivery_count": a.delivery_count,
                        }
                        for a in r.acquired
                    ],
                }
                for r in parts
            ],
        }
        for tid, parts in _by_topic(outcome.partitions).items()
    ]
    out: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": outcome.error,
        "error_message": outcome.message,
        "acquisition_lock_timeout": lock_ms,
        "responses": responses if outcome.error == 0 else [],
        "node_endpoints": [],
    }
    if ctx.api_version >= 2:
        out["is_renew_ack"] = bool(getattr(req, "is_renew_ack", False))
    return out


def share_fetch_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": code,
        "error_message": None,
        "acquisition_lock_timeout": 0,
        "responses": [],
        "node_endpoints": [],
    }


async def handle_share_acknowledge(
    deps: ShareDeps, ctx: RequestContext, req: ShareAcknowledgeRequest
) -> dict[str, Any]:
    bad = _share_request_error(req)
    if bad is not None:
        outcome = FetchOutcome(bad[0], bad[1])
    else:
        outcome = await deps.coordinator.share.partitions.share_acknowledge(
            req.group_id or "",
            req.member_id or "",
            int(req.share_session_epoch),
            _acks(deps, req.topics),
            allow_renew=ctx.api_version >= 2 and bool(getattr(req, "is_renew_ack", False)),
        )
    out: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": outcome.error,
        "error_message": outcome.message,
        "responses": [
            {
                "topic_id": tid,
                "partitions": [
                    {
                        "partition_index": r.partition,
                        "error_code": r.error,
                        "error_message": r.message,
                        "current_leader": _leader(r),
                    }
                    for r in parts
                ],
            }
            for tid, parts in _by_topic(outcome.partitions).items()
        ]
        if outcome.error == 0
        else [],
        "node_endpoints": [],
    }
    if ctx.api_version >= 2:
        out["acquisition_lock_timeout"] = deps.coordinator.share.partitions.settings_for(
            req.group_id or ""
        )().lock_duration_ms
    return out


def share_acknowledge_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": code,
        "error_message": None,
        "responses": [],
        "node_endpoints": [],
    }


# ---- admin: DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91),
# ---- DeleteShareGroupOffsets (92) ---------------------------------------------------------
def _group_error(deps: ShareDeps, group_id: str) -> tuple[int, str | None]:
    gc = deps.coordinator
    error = gc._validate_group_status(group_id)
    if error:
        return error, None
    container = gc.manager.get_group(group_id)
    if container is None or container.share is None or container.share.dead:
        if container is not None and container.share is None:
            return int(ErrorCode.group_id_not_found), f"Group {group_id} is not a share group."
        return int(ErrorCode.group_id_not_found), f"Group {group_id} not found."
    return 0, None


async def handle_describe_share_group_offsets(
    deps: ShareDeps, ctx: RequestContext, req: DescribeShareGroupOffsetsRequest
) -> dict[str, Any]:
    cache = deps.metadata_cache
    share = deps.coordinator.share
    groups = []
    #: rows whose partition's log is on another broker: their lag waits for its leader's HW
    remote: dict[int, list[tuple[dict[str, Any], str, int, uuid.UUID, str]]] = {}
    for g in req.groups:
        error, message = _group_error(deps, g.group_id)
        if error:
            groups.append(
                {
                    "group_id": g.group_id,
                    "topics": [],
                    "error_code": error,
                    "error_message": message,
                }
            )
            continue
        group = share.share_group(g.group_id)
        assert group is not None
        wanted: list[tuple[str, list[int]]]
        if g.topics is None:
            # every partition with state, as Kafka answers a null topic list
            seen: dict[str, set[int]] = {}
            for tid, p in group.snapshots:
                name = cache.topic_name(tid)
                if name is not None:
                    seen.setdefault(name, set()).add(p)
            for gid, tp in share.partitions.partitions:
                if gid == g.group_id:
                    seen.setdefault(tp[0], set()).add(tp[1])
            wanted = [(n, sorted(ps)) for n, ps in sorted(seen.items())]
        else:
            wanted = [(t.topic_name, [int(p) for p in t.partitions]) for t in g.topics]
        topics = []
        for name, parts in wanted:
            meta = cache.topics.get(name)
            tid = meta.topic_id if meta is not None else uuid.UUID(int=0)
            rows = []
            for p in parts:
                if meta is None or p not in meta.partitions:
                    rows.append(
                        {
                            "partition_index": p,
                            "start_offset": -1,
                            "leader_epoch": -1,
                            "lag": -1,
                            "error_code": int(ErrorCode.unknown_topic_or_partition),
                            "error_message": None,
                        }
                    )
                    continue
                start, epoch, lag = share.partitions.describe_offsets(g.group_id, (name, p), tid)
                row = {
                    "partition_index": p,
                    "start_offset": start,
                    "leader_epoch": epoch,
                    "lag": lag,
                    "error_code": 0,
                    "error_message": None,
                }
                rows.append(row)
                leader = meta.partitions[p].leader
                if lag == -1 and start >= 0 and leader >= 0:
                    remote.setdefault(leader, []).append((row, name, p, tid, g.group_id))
            topics.append({"topic_name": name, "topic_id": tid, "partitions": rows})
        groups.append(
            {"group_id": g.group_id, "topics": topics, "error_code": 0, "error_message": None}
        )
    sender = share.partitions.remote
    if remote and sender is not None:
        asked = [
            sender.high_watermarks(b, [(n, p) for _, n, p, _, _ in rs]) for b, rs in remote.items()
        ]
        for rs, hws in zip(remote.values(), await asyncio.gather(*asked), strict=True):
            for row, name, p, tid, group_id in rs:
                hw = hws.get((name, p))
                if hw is not None:
                    row["lag"] = share.partitions.describe_offsets(group_id, (name, p), tid, hw)[2]
    return {"throttle_time": 0, "groups": groups}


def describe_share_group_offsets_error_response(
    req: Any, version: int, code: int
) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "groups": [
            {"group_id": g.group_id, "topics": [], "error_code": code, "error_message": None}
            for g in req.groups
        ],
    }


def _non_empty(deps: ShareDeps, group_id: str) -> tuple[int, str | None]:
    error, message = _group_error(deps, group_id)
    if error:
        return error, message
    group = deps.coordinator.share.share_group(group_id)
    if group is not None and not group.is_empty:
        return int(ErrorCode.non_empty_group), "The group has active members."
    return 0, None


async def handle_alter_share_group_offsets(
    deps: ShareDeps, ctx: RequestContext, req: AlterShareGroupOffsetsRequest
) -> dict[str, Any]:
    error, message = _non_empty(deps, req.group_id)
    cache = deps.metadata_cache
    responses = []
    for t in req.topics:
        meta = cache.topics.get(t.topic_name)
        rows = []
        for p in t.partitions:
            idx = int(p.partition_index)
            if error:
                code, msg = error, message
            elif meta is None or idx not in meta.partitions:
                code, msg = int(ErrorCode.unknown_topic_or_partition), None
            elif int(p.start_offset) < -1:
                code, msg = int(ErrorCode.invalid_request), "Invalid start offset."
            else:
                try:
                    code = await deps.coordinator.share.partitions.alter_offset(
                        req.group_id, (t.topic_name, idx), meta.topic_id, int(p.start_offset)
                    )
                    msg = None
                except ShareError as e:
                    code, msg = e.code, e.message
            rows.append({"partition_index": idx, "error_code": code, "error_message": msg})
        responses.append(
            {
                "topic_name": t.topic_name,
                "topic_id": meta.topic_id if meta is not None else uuid.UUID(int=0),
                "partitions": rows,
            }
        )
    return {
        "throttle_time": 0,
        "error_code": error,
        "error_message": message,
        "responses": responses,
    }


def alter_share_group_offsets_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": None, "responses": []}


async def handle_delete_share_group_offsets(
    deps: ShareDeps, ctx: RequestContext, req: DeleteShareGroupOffsetsRequest
) -> dict[str, Any]:
    error, message = _group_error(deps, req.group_id)
    if error:
        return {"throttle_time": 0, "error_code": error, "error_message": message, "responses": []}
    cache = deps.metadata_cache
    group = deps.coordinator.share.share_group(req.group_id)
    assert group is not None
    subscribed = group.subscribed_topics()
    responses = []
    keys: list[tuple[TopicPartition, uuid.UUID]] = []
    for t in req.topics:
        meta = cache.topics.get(t.topic_name)
        if meta is None:
            code: int = int(ErrorCode.unknown_topic_or_partition)
        elif t.topic_name in subscribed:
            code = int(ErrorCode.group_subscribed_to_topic)
        else:
            code = 0
            keys += [((t.topic_name, p), meta.topic_id) for p in meta.partitions]
        responses.append(
            {
                "topic_name": t.topic_name,
                "topic_id": meta.topic_id if meta is not None else uuid.UUID(int=0),
                "error_code": code,
                "error_message": None,
            }
        )
    if keys:
        err = await deps.coordinator.share.partitions.delete_offsets(req.group_id, keys)
        if err:
            for r in responses:
                if r["error_code"] == 0:
                    r["error_code"] = err
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "responses": responses}


def delete_share_group_offsets_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": None, "responses": []}
