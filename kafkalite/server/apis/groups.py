"""Consumer group APIs: FindCoordinator (10), OffsetCommit (8), OffsetFetch (9),
JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup (14), DescribeGroups (15),
ListGroups (16), DeleteGroups (42), OffsetDelete (47), and the KIP-848 protocol's
ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

Each handler turns the request version's shape into plain arguments for the
GroupCoordinator and its result back into that version's response; the
group semantics live in :mod:`kafkalite.coordinator.group`.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.coordinator.group.consumer_coordinator import HeartbeatRequest as CgHeartbeat
from kafkalite.coordinator.group.group_coordinator import JoinRequest
from kafkalite.coordinator.group.group_metadata import OffsetAndMetadata, TopicPartition
from kafkalite.coordinator.group.txn_offsets import pending_of
from kafkalite.coordinator.share.share_state import group_of_share_key
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.coordinator.group.assignors import Assignment
    from kafkalite.coordinator.group.group_coordinator import GroupCoordinator
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.server.apis.request_types import (
        ConsumerGroupDescribeRequest,
        ConsumerGroupHeartbeatRequest,
        DeleteGroupsRequest,
        DescribeGroupsRequest,
        FindCoordinatorRequest,
        HeartbeatRequest,
        JoinGroupRequest,
        LeaveGroupRequest,
        ListGroupsRequest,
        OffsetCommitRequest,
        OffsetDeleteRequest,
        OffsetFetchRequest,
        SyncGroupRequest,
    )
    from kafkalite.server.metadata_cache import MetadataCache


OFFSET_DELETE = ApiKey.OFFSET_DELETE
COORDINATOR_TYPE_GROUP = 0
COORDINATOR_TYPE_TRANSACTION = 1
#: KIP-932: the share-state coordinator of key "group:topicId:partition"
COORDINATOR_TYPE_SHARE = 2
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
#: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: everything a group supports,
#: which is what a broker without an authorizer allows
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)


def _ms(v: Any) -> int:
    if isinstance(v, datetime.timedelta):
        return int(v / datetime.timedelta(milliseconds=1))
    return int(v)


@dataclass(frozen=True, slots=True)
class GroupDeps:
    coordinator: GroupCoordinator
    metadata_cache: MetadataCache
    clock_ms: Callable[[], int]
    #: FindCoordinator key_type 1: the transactional id's coordinator (creating
    #: __transaction_state on first use), a broker id or -1
    find_txn_coordinator: Callable[[str], Awaitable[int]] | None = None


def _coordinator(deps: GroupDeps) -> GroupCoordinator:
    return deps.coordinator


def _client_host(ctx: RequestContext) -> str:
    peer = getattr(ctx.connection, "peer", None)
    return f"/{peer[0]}" if peer else ""


# ---- FindCoordinator (10) ------------------------------------------------------------


async def handle_find_coordinator(
    deps: GroupDeps, ctx: RequestContext, req: FindCoordinatorRequest
) -> dict[str, Any]:
    version = ctx.api_version
    key_type = int(getattr(req, "key_type", COORDINATOR_TYPE_GROUP))
    # v4+ batches keys; the field each version has tells them apart for the type checker
    keys = list(req.coordinator_keys) if hasattr(req, "coordinator_keys") else [req.key]
    found = [await _find_coordinator(deps, ctx, key_type, k) for k in keys]
    if version >= 4:
        return {"throttle_time": 0, "coordinators": found}
    return {"throttle_time": 0, **{k: v for k, v in found[0].items() if k != "key"}}


async def _find_coordinator(
    deps: GroupDeps, ctx: RequestContext, key_type: int, key: str
) -> dict[str, Any]:
    def error(code: int, message: str | None = None) -> dict[str, Any]:
        return {
            "key": key,
            "node_id": -1,
            "host": "",
            "port": -1,
            "error_code": code,
            "error_message": message,
        }

    if key_type == COORDINATOR_TYPE_TRANSACTION:
        if deps.find_txn_coordinator is None:
            return error(ErrorCode.coordinator_not_available)
        if not key:
            return error(ErrorCode.invalid_request, "empty transactional id")
        leader = await deps.find_txn_coordinator(key)
    elif key_type == COORDINATOR_TYPE_SHARE:
        # kafkalite keeps share state with the group: the group's coordinator
        group_id = group_of_share_key(key)
        if group_id is None:
            return error(ErrorCode.invalid_request, f"invalid share coordinator key {key!r}")
        coordinator = _coordinator(deps)
        await coordinator.ensure_offsets_topic()
        leader = coordinator.coordinator_for(group_id)
    elif key_type != COORDINATOR_TYPE_GROUP:
        return error(ErrorCode.invalid_request, f"unsupported coordinator key type {key_type}")
    else:
        coordinator = _coordinator(deps)
        await coordinator.ensure_offsets_topic()
        leader = coordinator.coordinator_for(key)
    info = deps.metadata_cache.brokers.get(leader)
    endpoint = info.endpoints.get(ctx.listener) if info is not None else None
    if endpoint is None:
        return error(ErrorCode.coordinator_not_available)
    return {
        "key": key,
        "node_id": leader,
        "host": endpoint[0],
        "port": endpoint[1],
        "error_code": 0,
        "error_message": None,
    }


# ---- JoinGroup (11) / SyncGroup (14) / Heartbeat (12) / LeaveGroup (13) ----------------


async def handle_join_group(
    deps: GroupDeps, ctx: RequestContext, req: JoinGroupRequest
) -> dict[str, Any]:
    version = ctx.api_version
    session_ms = _ms(req.session_timeout)
    instance_id = getattr(req, "group_instance_id", None)
    r = await _coordinator(deps).handle_join_group(
        JoinRequest(
            group_id=req.group_id,
            member_id=req.member_id,
            group_instance_id=instance_id,
            require_known_member_id=version >= 4 and instance_id is None,
            supports_skip_assignment=version >= 9,
            client_id=ctx.client_id or "",
            client_host=_client_host(ctx),
            rebalance_timeout_ms=_ms(req.rebalance_timeout) if version >= 1 else session_ms,
            session_timeout_ms=session_ms,
            protocol_type=req.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        )
    )
    return {
        "throttle_time": 0,
        "error_code": r.error,
        "generation_id": r.generation_id,
        "protocol_type": r.protocol_type,
        # nullable from v7; older versions say "" for "none"
        "protocol_name": r.protocol_name if version >= 7 else (r.protocol_name or ""),
        "leader": r.leader_id,
        "skip_assignment": r.skip_assignment,
        "member_id": r.member_id,
        "members": [
            {"member_id": m, "group_instance_id": i, "metadata": md} for m, i, md in r.members
        ],
    }


async def handle_sync_group(
    deps: GroupDeps, ctx: RequestContext, req: SyncGroupRequest
) -> dict[str, Any]:
    r = await _coordinator(deps).handle_sync_group(
        req.group_id,
        int(req.generation_id),
        req.member_id,
        getattr(req, "group_instance_id", None),
        getattr(req, "protocol_type", None),
        getattr(req, "protocol_name", None),
        {a.member_id: bytes(a.assignment) for a in req.assignments},
    )
    return {
        "throttle_time": 0,
        "error_code": r.error,
        "protocol_type": r.protocol_type,
        "protocol_name": r.protocol_name,
        "assignment": r.assignment,
    }


def handle_heartbeat(deps: GroupDeps, ctx: RequestContext, req: HeartbeatRequest) -> dict[str, Any]:
    error = _coordinator(deps).handle_heartbeat(
        req.group_id, req.member_id, getattr(req, "group_instance_id", None), int(req.generation_id)
    )
    return {"throttle_time": 0, "error_code": error}


def handle_leave_group(
    deps: GroupDeps, ctx: RequestContext, req: LeaveGroupRequest
) -> dict[str, Any]:
    version = ctx.api_version
    if hasattr(req, "members"):  # v3+: batched members
        leaving = [(m.member_id, m.group_instance_id) for m in req.members]
    else:
        leaving = [(req.member_id, None)]
    error, member_errors = _coordinator(deps).handle_leave_group(req.group_id, leaving)
    if version < 3:
        # one member, one error: the member's unless the whole request failed
        return {
            "throttle_time": 0,
            "error_code": error or (member_errors[0] if member_errors else 0),
        }
    return {
        "throttle_time": 0,
        "error_code": error,
        "members": []
        if error
        else [
            {"member_id": m, "group_instance_id": i, "error_code": e}
            for (m, i), e in zip(leaving, member_errors, strict=True)
        ],
    }


# ---- OffsetCommit (8) / OffsetFetch (9) / OffsetDelete (47) ----------------------------


async def handle_offset_commit(
    deps: GroupDeps, ctx: RequestContext, req: OffsetCommitRequest
) -> dict[str, Any]:
    version = ctx.api_version
    cache = deps.metadata_cache
    now = deps.clock_ms()
    retention_ms = (
        _ms(req.retention_time) if version <= 4 and hasattr(req, "retention_time") else -1
    )
    errors: dict[tuple[int, int], int] = {}  # (topic index, partition index) -> error
    to_commit: dict[TopicPartition, OffsetAndMetadata] = {}
    where: dict[tuple[int, int], TopicPartition] = {}

    # the topic entry classes differ per version (v10 names topics by id): read alike
    topics_in: tuple[Any, ...] = req.topics
    # validate: topics and partitions must exist
    for ti, t in enumerate(topics_in):
        name = cache.topic_name(t.topic_id) if version >= 10 else t.name
        meta = cache.get_topic(name) if name is not None else None
        for p in t.partitions:
            idx = int(p.partition_index)
            if name is None:
                errors[(ti, idx)] = ErrorCode.unknown_topic_id
            elif meta is None or idx not in meta.partitions:
                errors[(ti, idx)] = ErrorCode.unknown_topic_or_partition
            else:
                tp = (name, idx)
                where[(ti, idx)] = tp
                to_commit[tp] = OffsetAndMetadata(
                    offset=int(p.committed_offset),
                    leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                    metadata=p.committed_metadata or "",
                    commit_timestamp=now,
                    expire_timestamp=now + retention_ms if retention_ms != -1 else -1,
                )

    # act
    if to_commit:
        results = await _coordinator(deps).handle_commit_offsets(
            req.group_id,
            req.member_id,
            getattr(req, "group_instance_id", None),
            int(req.generation_id_or_member_epoch),
            to_commit,
            version,
        )
        for key, tp in where.items():
            errors[key] = results[tp]

    # respond
    topics = []
    for ti, t in enumerate(topics_in):
        entry: dict[str, Any] = {"topic_id": t.topic_id} if version >= 10 else {"name": t.name}
        entry["partitions"] = [
            {
                "partition_index": int(p.partition_index),
                "error_code": errors[(ti, int(p.partition_index))],
            }
            for p in t.partitions
        ]
        topics.append(entry)
    return {"throttle_time": 0, "topics": topics}


def handle_offset_fetch(
    deps: GroupDeps, ctx: RequestContext, req: OffsetFetchRequest
) -> dict[str, Any]:
    version = ctx.api_version
    stable = bool(getattr(req, "require_stable", False))
    if hasattr(req, "groups"):  # v8+: batched groups
        groups = [
            _fetch_group(
                deps,
                version,
                g.group_id,
                g.topics,
                stable,
                getattr(g, "member_id", None),
                int(getattr(g, "member_epoch", -1)),
            )
            for g in req.groups
        ]
        return {"throttle_time": 0, "groups": groups}
    g = _fetch_group(deps, version, req.group_id, req.topics, stable)
    if version < 2:
        # no top-level error code yet: every partition carries the group's error
        for t in g["topics"]:
            for p in t["partitions"]:
                if g["error_code"]:
                    p["error_code"] = g["error_code"]
    return {"throttle_time": 0, "error_code": g["error_code"], "topics": g["topics"]}


def _fetch_group(
    deps: GroupDeps,
    version: int,
    group_id: str,
    topics: Any,
    require_stable: bool = False,
    member_id: str | None = None,
    member_epoch: int = -1,
) -> dict[str, Any]:
    cache = deps.metadata_cache
    # KIP-447: offsets a transaction wrote are UNSTABLE_OFFSET_COMMIT until its marker lands
    pending = pending_of(_coordinator(deps).manager) if require_stable else None
    use_ids = version >= 10

    def partition(idx: int, om: OffsetAndMetadata | None, error: int = 0) -> dict[str, Any]:
        if om is None:
            return {
                "partition_index": idx,
                "committed_offset": -1,
                "committed_leader_epoch": -1,
                "metadata": "",
                "error_code": error,
            }
        return {
            "partition_index": idx,
            "committed_offset": om.offset,
            "committed_leader_epoch": om.leader_epoch,
            "metadata": om.metadata,
            "error_code": 0,
        }

    def topic_key(name: str | None, topic_id: Any) -> dict[str, Any]:
        return {"topic_id": topic_id} if use_ids else {"name": name}

    if topics is None:
        error, committed = _coordinator(deps).handle_fetch_offsets(
            group_id, None, member_id, member_epoch
        )
        by_topic: dict[str, list[tuple[int, OffsetAndMetadata | None]]] = {}
        for (name, idx), om in sorted(committed.items()):
            by_topic.setdefault(name, []).append((idx, om))
        out = []
        for name, parts in by_topic.items():
            topic_id = None
            if use_ids:
                meta = cache.get_topic(name)
                if meta is None:
                    continue  # no id to name it by
                topic_id = meta.topic_id
            out.append(
                {**topic_key(name, topic_id), "partitions": [partition(i, om) for i, om in parts]}
            )
        return {"group_id": group_id, "error_code": error, "topics": [] if error else out}

    requested: list[tuple[str | None, Any, list[int]]] = []
    for t in topics:
        if use_ids:
            requested.append(
                (cache.topic_name(t.topic_id), t.topic_id, [int(i) for i in t.partition_indexes])
            )
        else:
            requested.append((t.name, None, [int(i) for i in t.partition_indexes]))
    wanted = [(name, i) for name, _, idxs in requested if name is not None for i in idxs]
    error, committed = _coordinator(deps).handle_fetch_offsets(
        group_id, wanted, member_id, member_epoch
    )
    if error and version >= 2:
        return {"group_id": group_id, "error_code": error, "topics": []}
    topics_out = []
    for req_name, req_id, idxs in requested:
        if req_name is None:
            found = [partition(i, None, ErrorCode.unknown_topic_id) for i in idxs]
        else:
            found = [
                partition(i, None, ErrorCode.unstable_offset_commit)
                if pending is not None and pending.is_pending(group_id, (req_name, i))
                else partition(i, committed.get((req_name, i)))
                for i in idxs
            ]
        topics_out.append({**topic_key(req_name, req_id), "partitions": found})
    return {"group_id": group_id, "error_code": error, "topics": topics_out}


async def handle_offset_delete(
    deps: GroupDeps, ctx: RequestContext, req: OffsetDeleteRequest
) -> dict[str, Any]:
    cache = deps.metadata_cache
    errors: dict[TopicPartition, int] = {}
    wanted: list[TopicPartition] = []
    for t in req.topics:
        meta = cache.get_topic(t.name)
        for p in t.partitions:
            tp = (t.name, int(p.partition_index))
            if meta is None or tp[1] not in meta.partitions:
                errors[tp] = ErrorCode.unknown_topic_or_partition
            else:
                wanted.append(tp)
    error, results = await _coordinator(deps).handle_delete_offsets(req.group_id, wanted)
    errors.update(results)
    return {
        "throttle_time": 0,
        "error_code": error,
        "topics": []
        if error
        else [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": int(p.partition_index),
                        "error_code": errors.get((t.name, int(p.partition_index)), 0),
                    }
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }


# ---- DescribeGroups (15) / ListGroups (16) / DeleteGroups (42) -------------------------


def handle_describe_groups(
    deps: GroupDeps, ctx: RequestContext, req: DescribeGroupsRequest
) -> dict[str, Any]:
    version = ctx.api_version
    ops = (
        GROUP_AUTHORIZED_OPERATIONS
        if getattr(req, "include_authorized_operations", False)
        else AUTHORIZED_OPERATIONS_OMITTED
    )
    out = []
    for group_id in req.groups:
        s = _coordinator(deps).handle_describe_group(group_id)
        error, message = s.error, None
        if error == ErrorCode.group_id_not_found:
            if version >= 6:
                message = s.message or f"Group {group_id} not found."
            else:
                error = 0  # before v6 a missing group is described as Dead, without an error
        out.append(
            {
                "error_code": error,
                "error_message": message,
                "group_id": group_id,
                "group_state": s.state,
                "protocol_type": s.protocol_type,
                "protocol_data": s.protocol,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in s.members
                ],
                "authorized_operations": ops,
            }
        )
    return {"throttle_time": 0, "groups": out}


def handle_list_groups(
    deps: GroupDeps, ctx: RequestContext, req: ListGroupsRequest
) -> dict[str, Any]:
    states = {s.lower() for s in getattr(req, "states_filter", ()) or ()}
    types = {t.lower() for t in getattr(req, "types_filter", ()) or ()}
    error, groups = _coordinator(deps).handle_list_groups(states, types)
    return {
        "throttle_time": 0,
        "error_code": error,
        "groups": [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type or "",
                "group_state": g.state_name,
                "group_type": g.group_type,
            }
            for g in groups
        ],
    }


async def handle_delete_groups(
    deps: GroupDeps, ctx: RequestContext, req: DeleteGroupsRequest
) -> dict[str, Any]:
    results = []
    for group_id in req.groups_names:
        error = await _coordinator(deps).handle_delete_group(group_id)
        results.append({"group_id": group_id, "error_code": error})
    return {"throttle_time": 0, "results": results}


# ---- ConsumerGroupHeartbeat (68) / ConsumerGroupDescribe (69) ---------------------------


def _assignment_in(topics: Any) -> Assignment | None:
    if topics is None:
        return None
    out: Assignment = {}
    for t in topics:
        if t.topic_id is not None:
            out.setdefault(t.topic_id, set()).update(int(p) for p in t.partitions)
    return out


def _assignment_out(a: Assignment, names: dict[Any, str] | None = None) -> list[dict[str, Any]]:
    out = []
    for tid in sorted(a, key=str):
        entry: dict[str, Any] = {"topic_id": tid, "partitions": sorted(a[tid])}
        if names is not None:
            entry["topic_name"] = names.get(tid, "")
        out.append(entry)
    return out


async def handle_consumer_group_heartbeat(
    deps: GroupDeps, ctx: RequestContext, req: ConsumerGroupHeartbeatRequest
) -> dict[str, Any]:
    rebalance = req.rebalance_timeout
    r = await _coordinator(deps).consumer.heartbeat_and_store(
        CgHeartbeat(
            group_id=req.group_id,
            member_id=req.member_id,
            member_epoch=int(req.member_epoch),
            instance_id=req.instance_id,
            rack_id=req.rack_id,
            rebalance_timeout_ms=_ms(rebalance),
            subscribed_topic_names=None
            if req.subscribed_topic_names is None
            else tuple(req.subscribed_topic_names),
            subscribed_topic_regex=getattr(req, "subscribed_topic_regex", None),
            server_assignor=req.server_assignor,
            owned=_assignment_in(req.topic_partitions),
            client_id=ctx.client_id or "",
            client_host=_client_host(ctx),
            api_version=ctx.api_version,
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
        else {"topic_partitions": _assignment_out(r.assignment)},
    }


def handle_consumer_group_describe(
    deps: GroupDeps, ctx: RequestContext, req: ConsumerGroupDescribeRequest
) -> dict[str, Any]:
    ops = (
        GROUP_AUTHORIZED_OPERATIONS
        if req.include_authorized_operations
        else AUTHORIZED_OPERATIONS_OMITTED
    )
    out = []
    for group_id in req.group_ids:
        d = _coordinator(deps).consumer.describe(group_id)
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
                        "member_id": m.member.member_id,
                        "instance_id": m.member.instance_id,
                        "rack_id": m.member.rack_id,
                        "member_epoch": m.member.member_epoch,
                        "client_id": m.member.client_id,
                        "client_host": m.member.client_host,
                        "subscribed_topic_names": list(m.member.subscribed_topic_names),
                        "subscribed_topic_regex": m.member.subscribed_topic_regex,
                        "assignment": {
                            "topic_partitions": _assignment_out(m.member.assigned, d.topic_names)
                        },
                        "target_assignment": {
                            "topic_partitions": _assignment_out(m.target, d.topic_names)
                        },
                        # v1: 0 for a classic member, 1 for a consumer-protocol one
                        "member_type": 0 if m.member.classic is not None else 1,
                    }
                    for m in d.members
                ],
                "authorized_operations": ops if not d.error else AUTHORIZED_OPERATIONS_OMITTED,
            }
        )
    return {"throttle_time": 0, "groups": out}


# ---- error responses -------------------------------------------------------------------


def find_coordinator_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """No coordinator for the key (v0-3) or for each key (v4+)."""
    none = {"node_id": -1, "host": "", "port": -1, "error_code": code, "error_message": None}
    if version < 4:
        return {"throttle_time": 0, **none}
    return {"throttle_time": 0, "coordinators": [{"key": k, **none} for k in req.coordinator_keys]}


def join_group_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """The top-level error, no generation; the member id is the request's."""
    return {
        "throttle_time": 0,
        "error_code": code,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None if version >= 7 else "",
        "leader": "",
        "skip_assignment": False,
        "member_id": req.member_id,
        "members": [],
    }


def sync_group_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """The top-level error, no assignment."""
    return {
        "throttle_time": 0,
        "error_code": code,
        "protocol_type": None,
        "protocol_name": None,
        "assignment": b"",
    }


def heartbeat_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code}


def leave_group_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """The top-level error and, from v3, each leaving member's."""
    members = req.members if version >= 3 else ()
    return {
        "throttle_time": 0,
        "error_code": code,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": code}
            for m in members
        ],
    }


def offset_commit_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """Every partition in error (topics by name, or by id from v10)."""
    return {
        "throttle_time": 0,
        "topics": [
            {
                "name": getattr(t, "name", None),
                "topic_id": getattr(t, "topic_id", None),
                "partitions": [
                    {"partition_index": int(p.partition_index), "error_code": code}
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }


def _offset_fetch_error_topics(topics: Any, code: int) -> list[dict[str, Any]]:
    return [
        {
            "name": getattr(t, "name", None),
            "topic_id": getattr(t, "topic_id", None),
            "partitions": [
                {
                    "partition_index": int(i),
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": None,
                    "error_code": code,
                }
                for i in t.partition_indexes
            ],
        }
        for t in topics or ()
    ]


def offset_fetch_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """The group's error (per group from v8) and every requested partition's."""
    if version < 8:
        return {
            "throttle_time": 0,
            "error_code": code,
            "topics": _offset_fetch_error_topics(req.topics, code),
        }
    return {
        "throttle_time": 0,
        "groups": [
            {
                "group_id": g.group_id,
                "error_code": code,
                "topics": _offset_fetch_error_topics(g.topics, code),
            }
            for g in req.groups
        ],
    }


def offset_delete_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """The group's error and every requested partition's."""
    return {
        "throttle_time": 0,
        "error_code": code,
        "topics": [
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


def describe_groups_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """Every requested group in error, with no state or members."""
    return {
        "throttle_time": 0,
        "groups": [
            {
                "error_code": code,
                "error_message": None,
                "group_id": g,
                "group_state": "",
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
                "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
            }
            for g in req.groups
        ],
    }


def list_groups_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "groups": []}


def consumer_group_heartbeat_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": code,
        "error_message": None,
        "member_id": None,
        "member_epoch": 0,
        "heartbeat_interval": 0,
        "assignment": None,
    }


def consumer_group_describe_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """Every requested group in error."""
    return {
        "throttle_time": 0,
        "groups": [
            {
                "error_code": code,
                "error_message": None,
                "group_id": g,
                "group_state": "",
                "group_epoch": -1,
                "assignment_epoch": -1,
                "assignor_name": "",
                "members": [],
                "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
            }
            for g in req.group_ids
        ],
    }


def delete_groups_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """Every requested group in error, none deleted."""
    return {
        "throttle_time": 0,
        "results": [{"group_id": g, "error_code": code} for g in req.groups_names],
    }


__all__ = [
    "OFFSET_DELETE",
    "consumer_group_describe_error_response",
    "consumer_group_heartbeat_error_response",
    "handle_consumer_group_describe",
    "handle_consumer_group_heartbeat",
    "delete_groups_error_response",
    "describe_groups_error_response",
    "find_coordinator_error_response",
    "handle_delete_groups",
    "handle_describe_groups",
    "handle_find_coordinator",
    "handle_heartbeat",
    "handle_join_group",
    "handle_leave_group",
    "handle_list_groups",
    "handle_offset_commit",
    "handle_offset_delete",
    "handle_offset_fetch",
    "handle_sync_group",
    "heartbeat_error_response",
    "join_group_error_response",
    "leave_group_error_response",
    "list_groups_error_response",
    "offset_commit_error_response",
    "offset_delete_error_response",
    "offset_fetch_error_response",
    "sync_group_error_response",
]
