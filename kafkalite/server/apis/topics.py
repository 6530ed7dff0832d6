"""CreateTopics (19), DeleteTopics (20), CreatePartitions (37)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.server.admin_limits import (
    POLICY_VIOLATION,
    TOO_MANY_PARTITIONS,
    create_partitions_partitions,
    create_topics_partitions,
)
from kafkalite.server.admin_manager import AdminManager, CreateTopicResult
from kafkalite.server.apis.configs import topic_config_entries

if TYPE_CHECKING:
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.quota.managers import QuotaManagers
    from kafkalite.server.apis.request_types import (
        CreatePartitionsRequest,
        CreateTopicsRequest,
        DeleteTopicsRequest,
    )
    from kafkalite.server.config import BrokerConfig
    from kafkalite.server.metadata_cache import MetadataCache


@dataclass(frozen=True, slots=True)
class TopicDeps:
    config: BrokerConfig
    metadata_cache: MetadataCache
    admin: AdminManager
    #: controller_mutation_rate (KIP-599)
    quotas: QuotaManagers | None = None


#: the first versions whose clients handle THROTTLING_QUOTA_EXCEEDED (KIP-599): the
#: quota is strict for them (a topic is refused while the quota is exceeded) and
#: permissive for older ones (everything goes through, the response is throttled)
STRICT_CREATE_TOPICS, STRICT_DELETE_TOPICS, STRICT_CREATE_PARTITIONS = 6, 5, 3
THROTTLED = int(ErrorCode.throttling_quota_exceeded)
THROTTLED_MESSAGE = "The throttling quota has been exceeded."


class _MutationQuota:
    """One request's view of the controller mutation quota (Kafka's
    ``StrictControllerMutationQuota`` / ``PermissiveControllerMutationQuota``)."""

    def __init__(self, deps: TopicDeps, ctx: RequestContext, strict: bool) -> None:
        q = deps.quotas
        self.manager = q.controller_mutation if q is not None and q.configs.entries else None
        # the quota user: the principal (SASL / mTLS), ANONYMOUS on PLAINTEXT
        self.user, self.client = ctx.connection.principal.name, ctx.client_id or ""
        self.strict = strict
        self.ctx = ctx

    def admit(self, partitions: int) -> bool:
        """Record ``partitions`` mutations; False: refused (strict and already exceeded)."""
        m = self.manager
        if m is None or not m.enabled:
            return True
        if self.strict and m.exceeded(self.user, self.client):
            return False
        m.record(self.user, self.client, partitions)
        return True

    def finish(self, response: dict[str, Any]) -> dict[str, Any]:
        """The response with the throttle time it owes; the connection muted for it."""
        m = self.manager
        if m is not None and m.enabled:
            ms = m.throttle_ms(self.user, self.client)
            if ms > 0:
                response["throttle_time"] = ms
                self.ctx.connection.throttle(ms)
        return response


def _new_topic_partitions(t: Any, default_partitions: int) -> int:
    """Partitions a CreateTopics entry asks for (its assignments, its count or the default)."""
    if t.assignments:
        return len(t.assignments)
    n = int(t.num_partitions)
    return default_partitions if n == -1 else n


def _ms(td: Any) -> int:
    return int(td.total_seconds() * 1000)


async def handle_create_topics(
    deps: TopicDeps, ctx: RequestContext, req: CreateTopicsRequest
) -> dict[str, Any]:
    if deps.metadata_cache.controller_id < 0:
        return {
            "throttle_time": 0,
            "topics": [
                {"name": t.name, "error_code": ErrorCode.not_controller} for t in req.topics
            ],
        }
    limit = int(deps.config["kafkalite.max.partitions.per.request"])
    default_partitions = int(deps.config["num.partitions"])
    quota = _MutationQuota(deps, ctx, ctx.api_version >= STRICT_CREATE_TOPICS)
    if create_topics_partitions(req.topics, default_partitions) > limit:
        results = [
            CreateTopicResult(t.name, POLICY_VIOLATION, TOO_MANY_PARTITIONS) for t in req.topics
        ]
    else:
        admitted: list[Any] = []
        refused: set[int] = set()
        asked: list[Any] = list(req.topics)
        for i, t in enumerate(asked):
            n = _new_topic_partitions(t, default_partitions)
            if req.validate_only or quota.admit(n):
                admitted.append(t)
            else:
                refused.add(i)
        done: list[CreateTopicResult] = (
            await deps.admin.create_topics(
                admitted, validate_only=req.validate_only, timeout_ms=_ms(req.timeout)
            )
            if admitted
            else []
        )
        created = iter(done)
        # one result per request entry, in order (the admin manager answers each it is given)
        results = [
            CreateTopicResult(t.name, THROTTLED, THROTTLED_MESSAGE)
            if i in refused
            else next(created)
            for i, t in enumerate(asked)
        ]
    out = []
    for r in results:
        entry: dict[str, Any] = {
            "name": r.name,
            "topic_id": r.topic_id,
            "error_code": r.error,
            "error_message": r.message,
            "topic_config_error_code": 0,
            "num_partitions": r.num_partitions,
            "replication_factor": r.replication_factor,
        }
        if r.log_config is not None and r.error == 0:
            entry["configs"] = [
                {
                    "name": c["name"],
                    "value": c["value"],
                    "read_only": c["read_only"],
                    "is_sensitive": c["is_sensitive"],
                    "config_source": c["config_source"],
                }
                for c in topic_config_entries(deps.config, r.overrides or {}, r.log_config)
            ]
        else:
            entry["configs"] = None if r.error else []
        out.append(entry)
    return quota.finish({"throttle_time": 0, "topics": out})


async def handle_delete_topics(
    deps: TopicDeps, ctx: RequestContext, req: DeleteTopicsRequest
) -> dict[str, Any]:
    cache = deps.metadata_cache
    names: list[str] = []
    responses: list[dict[str, Any]] = []
    entries: list[tuple[str | None, Any]]
    if hasattr(req, "topics"):  # v6+: names or topic ids
        entries = [(t.name, t.topic_id) for t in req.topics]
    else:
        entries = [(n, None) for n in req.topic_names]
    resolved: list[tuple[str | None, Any, int]] = []
    quota = _MutationQuota(deps, ctx, ctx.api_version >= STRICT_DELETE_TOPICS)
    for name, tid in entries:
        if name is None:  # v6+ names a topic by id
            name = None if tid is None else cache.topic_name(tid)
            if name is None:
                resolved.append((None, tid, ErrorCode.unknown_topic_id))
                continue
        topic = cache.get_topic(name)
        if topic is not None and not quota.admit(len(topic.partitions)):
            resolved.append((name, tid, THROTTLED))
            continue
        resolved.append((name, tid, 0))
        names.append(name)
    errors = await deps.admin.delete_topics(names, _ms(req.timeout)) if names else {}
    for name, tid, err in resolved:
        code = err or errors.get(name or "", 0)
        t = cache.get_topic(name) if name else None
        responses.append(
            {
                "name": name,
                "topic_id": tid or (t.topic_id if t else None),
                "error_code": code,
                "error_message": THROTTLED_MESSAGE if code == THROTTLED else None,
            }
        )
    return quota.finish({"throttle_time": 0, "responses": responses})


async def handle_create_partitions(
    deps: TopicDeps, ctx: RequestContext, req: CreatePartitionsRequest
) -> dict[str, Any]:
    results = []
    limit = int(deps.config["kafkalite.max.partitions.per.request"])
    cache = deps.metadata_cache

    def current_count(name: str) -> int | None:
        topic = cache.get_topic(name)
        return None if topic is None else len(topic.partitions)

    if create_partitions_partitions(req.topics, current_count) > limit:
        return {
            "throttle_time": 0,
            "results": [
                {
                    "name": t.name,
                    "error_code": POLICY_VIOLATION,
                    "error_message": TOO_MANY_PARTITIONS,
                }
                for t in req.topics
            ],
        }
    quota = _MutationQuota(deps, ctx, ctx.api_version >= STRICT_CREATE_PARTITIONS)
    for t in req.topics:
        current = current_count(t.name)
        added = int(t.count) - current if current is not None else 0
        if not req.validate_only and added > 0 and not quota.admit(added):
            results.append(
                {"name": t.name, "error_code": THROTTLED, "error_message": THROTTLED_MESSAGE}
            )
            continue
        try:
            await deps.admin.create_partitions(
                t.name,
                int(t.count),
                t.assignments,
                validate_only=req.validate_only,
                timeout_ms=_ms(req.timeout),
            )
            results.append({"name": t.name, "error_code": 0, "error_message": None})
        except KafkaError as e:
            results.append({"name": t.name, "error_code": e.code, "error_message": e.message})
    return quota.finish({"throttle_time": 0, "results": results})


def create_topics_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """Every requested topic in error, nothing created."""
    return {
        "throttle_time": 0,
        "topics": [
            {
                "name": t.name,
                "topic_id": None,
                "error_code": code,
                "error_message": None,
                "num_partitions": -1,
                "replication_factor": -1,
                "configs": None,
            }
            for t in req.topics
        ],
    }


def delete_topics_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """Every requested topic (by name, or by id from v6) in error."""
    if version >= 6:
        entries = [(t.name, t.topic_id) for t in req.topics]
    else:
        entries = [(n, None) for n in req.topic_names]
    return {
        "throttle_time": 0,
        "responses": [
            {"name": name, "topic_id": tid, "error_code": code, "error_message": None}
            for name, tid in entries
        ],
    }


def create_partitions_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """Every requested topic in error, no partition added."""
    return {
        "throttle_time": 0,
        "results": [
            {"name": t.name, "error_code": code, "error_message": None} for t in req.topics
        ],
    }
