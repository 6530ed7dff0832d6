"""Metadata (3): brokers, cluster id, controller, topics, partitions, leaders."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.topic_names import validate_topic_name

if TYPE_CHECKING:
    from kafkalite.server.broker import KafkaBroker
    from kafkalite.server.request_channel import RequestContext

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def handle_metadata(broker: KafkaBroker, ctx: RequestContext, req: Any) -> Any:
    cache = broker.metadata_cache
    version = ctx.api_version
    requested = req.topics  # None = all topics (v1+); empty = none
    if version == 0 and not requested:
        requested = None
    allow_auto = getattr(req, "allow_auto_topic_creation", True)

    names: list[str | None]
    unknown_ids: list[uuid.UUID] = []
    if requested is None:
        names = sorted(cache.topics)
    else:
        names = []
        for t in requested:
            name = getattr(t, "name", None)
            tid = getattr(t, "topic_id", None)
            if name is None and tid is not None and tid.int != 0:
                resolved = cache.topic_name(tid)
                if resolved is None:
                    unknown_ids.append(tid)
                    continue
                name = resolved
            names.append(name)

    to_create = []
    if requested is not None and allow_auto and broker.config["auto.create.topics.enable"]:
        for n in names:
            if n is not None and n not in cache.topics and validate_topic_name(n) is None:
                to_create.append(n)

    def respond(create_errors: dict[str, int] | None = None) -> dict[str, Any]:
        topics = [_topic_entry(broker, ctx, n, create_errors) for n in names]
        topics += [
            {
                "error_code": ErrorCode.unknown_topic_id,
                "name": None,
                "topic_id": tid,
                "partitions": [],
            }
            for tid in unknown_ids
        ]
        return {
            "throttle_time": 0,
            "brokers": _brokers(broker, ctx),
            "cluster_id": broker.cluster_id,
            "controller_id": cache.controller_id,
            "topics": topics,
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        }

    if to_create:
        return _after(broker.admin.auto_create_topics(to_create), respond)
    return respond()


async def _after(coro: Any, fn: Any) -> Any:
    return fn(await coro)


def _brokers(broker: KafkaBroker, ctx: RequestContext) -> list[dict[str, Any]]:
    out = []
    for b in broker.metadata_cache.brokers.values():
        ep = b.endpoints.get(ctx.listener)
        if ep is None:
            continue
        out.append({"node_id": b.broker_id, "host": ep[0], "port": ep[1], "rack": b.rack})
    return out


def _topic_entry(
    broker: KafkaBroker,
    ctx: RequestContext,
    name: str | None,
    create_errors: dict[str, int] | None = None,
) -> dict[str, Any]:
    cache = broker.metadata_cache
    base = {
        "name": name,
        "topic_id": uuid.UUID(int=0),
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }
    if name is None:
        return {**base, "error_code": ErrorCode.invalid_topic_exception}
    t = cache.get_topic(name)
    if t is None:
        if validate_topic_name(name) is not None:
            return {**base, "error_code": ErrorCode.invalid_topic_exception}
        if create_errors and name in create_errors:
            # e.g. a '.'/'_' collision found while auto-creating (Kafka: INVALID_TOPIC_EXCEPTION)
            return {**base, "error_code": create_errors[name]}
        if name in broker.admin.creating:
            return {**base, "error_code": ErrorCode.leader_not_available}
        return {**base, "error_code": ErrorCode.unknown_topic_or_partition}
    alive = cache.brokers
    parts = []
    for p in sorted(t.partitions.values(), key=lambda p: p.partition):
        leader = p.leader if p.leader in alive else -1
        # dead brokers' replicas, and live ones in a failed log dir (from the controller)
        offline = [r for r in p.replicas if r not in alive or r in p.offline_replicas]
        err = ErrorCode.none if leader >= 0 else ErrorCode.leader_not_available
        parts.append(
            {
                "error_code": err,
                "partition_index": p.partition,
                "leader_id": leader,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": p.replicas,
                "isr_nodes": p.isr,
                "offline_replicas": offline,
            }
        )
    return {
        **base,
        "error_code": ErrorCode.none,
        "topic_id": t.topic_id,
        "is_internal": t.is_internal,
        "partitions": parts,
    }
