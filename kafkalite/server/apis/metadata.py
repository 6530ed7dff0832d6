"""Metadata (3): brokers, cluster id, controller, topics, partitions, leaders.

Written by :mod:`kafkalite.protocol.metadata_response`; known topics come as
bytes cached per version in the metadata cache.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.common import structs
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.metadata_response import (
    BrokerEntry,
    encode_metadata_response,
    encode_topic,
)
from kafkalite.security.authorizer.acl import AclOperation, ResourceType
from kafkalite.server.authorization import AuthHelper, cluster_operations
from kafkalite.server.topic_names import validate_topic_name

if TYPE_CHECKING:
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.server.admin_manager import AdminManager
    from kafkalite.server.apis.request_types import MetadataRequest
    from kafkalite.server.config import BrokerConfig
    from kafkalite.server.metadata_cache import MetadataCache

_ZERO_UUID = uuid.UUID(int=0)
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
TOPIC = ResourceType.TOPIC


@dataclass(frozen=True, slots=True)
class MetadataDeps:
    metadata_cache: MetadataCache
    config: BrokerConfig
    admin: AdminManager
    #: ACL checks and authorized operations (no authorizer: everything allowed)
    auth: AuthHelper = AuthHelper(None)


def handle_metadata(deps: MetadataDeps, ctx: RequestContext, req: MetadataRequest) -> Any:
    cache = deps.metadata_cache
    version = ctx.api_version
    requested = req.topics  # None = all topics (v1+); empty = none
    if version == 0 and not requested:
        requested = None
    allow_auto = getattr(req, "allow_auto_topic_creation", True)

    names: list[str | None]
    unknown_ids: list[uuid.UUID] = []
    by_id: dict[str, uuid.UUID] = {}  # names the request gave as topic ids
    if requested is None:
        names = list(sorted(cache.topics))
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
                name = by_id_name = resolved
                by_id[by_id_name] = tid
            names.append(name)

    auth = deps.auth
    denied: list[str] = []
    if auth.authorizer is not None:
        # Describe on each topic: all-topics requests just do not see the others
        described = [
            n
            for n in names
            if n is None or auth.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, n)
        ]
        if requested is not None:
            denied = [n for n in names if n is not None and n not in described]
        names = described

    to_create = []
    if requested is not None and allow_auto and deps.config["auto.create.topics.enable"]:
        may_create_all = auth.authorizer is None or auth.cluster(ctx, AclOperation.CREATE)
        for n in names:
            if n is not None and n not in cache.topics and validate_topic_name(n) is None:
                if may_create_all or auth.allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC, n):
                    to_create.append(n)
                else:
                    denied.append(n)  # Kafka: no Create, TOPIC_AUTHORIZATION_FAILED
        if denied:
            names = [n for n in names if n not in denied]
    with_ops = version >= 8 and getattr(req, "include_topic_authorized_operations", False)
    cluster_ops = AUTHORIZED_OPERATIONS_OMITTED
    if 8 <= version <= 10 and getattr(req, "include_cluster_authorized_operations", False):
        cluster_ops = cluster_operations(auth, ctx)

    def respond(create_errors: dict[str, int] | None = None) -> list[bytes]:
        errors: dict[int, int] = ctx.stats.errors if ctx.stats is not None else {}
        topics = [_topic_entry(deps, version, n, create_errors, errors) for n in names]
        if with_ops:
            topics = [
                t if n is None else _with_operations(t, version, auth.operations(ctx, TOPIC, n))
                for t, n in zip(topics, names, strict=True)
            ]
        # a topic asked for by id is answered by id: its name is not revealed (Kafka)
        topics += [
            encode_topic(version, ErrorCode.topic_authorization_failed, None, by_id[n], False, [])
            if n in by_id
            else _error_entry(version, ErrorCode.topic_authorization_failed, n, errors)
            for n in denied
        ]
        topics += [
            encode_topic(version, ErrorCode.unknown_topic_id, None, tid, False, [])
            for tid in unknown_ids
        ]
        if unknown_ids:
            code = int(ErrorCode.unknown_topic_id)
            errors[code] = errors.get(code, 0) + len(unknown_ids)
        return encode_metadata_response(
            version,
            _brokers(deps, ctx),
            cache.cluster_id,
            cache.controller_id,
            topics,
            throttle_time_ms=ctx.throttle_ms,
            cluster_authorized_operations=cluster_ops,
        )

    if to_create:
        return _after(deps.admin.auto_create_topics(to_create), respond)
    return respond()


async def _after(coro: Any, fn: Any) -> Any:
    return fn(await coro)


def _brokers(deps: MetadataDeps, ctx: RequestContext) -> list[BrokerEntry]:
    out = []
    for b in deps.metadata_cache.brokers.values():
        ep = b.endpoints.get(ctx.listener)
        if ep is None:
            continue
        out.append((b.broker_id, ep[0], ep[1], b.rack))
    return out


def _topic_entry(
    deps: MetadataDeps,
    version: int,
    name: str | None,
    create_errors: dict[str, int] | None = None,
    errors: dict[int, int] | None = None,
) -> bytes:
    """The topic's entry: cached bytes for a known topic, else its error; its error code
    is counted in ``errors`` (RequestMetrics' ErrorsPerSec)."""
    if errors is None:
        errors = {}
    if name is None:
        return _error_entry(version, ErrorCode.invalid_topic_exception, name, errors)
    cached = deps.metadata_cache.encoded_topic(name, version)
    if cached is not None:
        errors[0] = errors.get(0, 0) + 1
        return cached
    if validate_topic_name(name) is not None:
        return _error_entry(version, ErrorCode.invalid_topic_exception, name, errors)
    if create_errors and name in create_errors:
        # e.g. a '.'/'_' collision found while auto-creating (Kafka: INVALID_TOPIC_EXCEPTION)
        return _error_entry(version, create_errors[name], name, errors)
    if name in deps.admin.creating:
        return _error_entry(version, ErrorCode.leader_not_available, name, errors)
    return _error_entry(version, ErrorCode.unknown_topic_or_partition, name, errors)


def _with_operations(entry: bytes, version: int, ops: int) -> bytes:
    """``entry`` (v8+) with its topic_authorized_operations, the field before the
    entry's tagged fields (v9+) or at its end (v8)."""
    end = len(entry) - 1 if version >= 9 else len(entry)
    return entry[: end - 4] + structs.I32.pack(ops) + entry[end:]


def _error_entry(
    version: int, error: int, name: str | None, errors: dict[int, int] | None = None
) -> bytes:
    if errors is not None:
        errors[int(error)] = errors.get(int(error), 0) + 1
    return encode_topic(version, error, name, _ZERO_UUID, False, [])


def metadata_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """Every requested topic in error, without brokers (Kafka's
    ``MetadataRequest.getErrorResponse``); a request for all topics names none."""
    return {
        "throttle_time": 0,
        "brokers": [],
        "cluster_id": None,
        "controller_id": -1,
        "topics": [
            {
                # the response's name is not nullable before v12: "" as in Kafka
                "name": getattr(t, "name", None) or "",
                "topic_id": getattr(t, "topic_id", None) or _ZERO_UUID,
                "error_code": code,
                "is_internal": False,
                "partitions": [],
            }
            for t in req.topics or ()
        ],
        "cluster_authorized_operations": -(2**31),
    }
