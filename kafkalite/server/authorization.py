"""Every API's ACL checks, as Kafka's ``KafkaApis`` makes them (docs/security.md).

With ``authorizer.class.name`` empty the API table is built without any of
this (nothing to check, nothing to pay). With an authorizer, each client API's
handler is wrapped by :func:`authorize_api`, which does what KafkaApis does
before and after the work:

- a request about one resource (a group's JoinGroup, a transactional id's
  EndTxn, a cluster-wide admin API) that the principal may not touch is answered
  with the API's error response carrying the authorization error;
- a request about several (topics of a ListOffsets, groups of a DeleteGroups,
  resources of a DescribeConfigs) is split: the handler sees only the allowed
  ones and the others are answered with the error, merged into its response;
- listings (ListGroups, ListTransactions, OffsetFetch of all topics) drop what the
  principal may not Describe.

Produce, Fetch and Metadata check in their handlers (they write their own bytes),
through the same :class:`AuthHelper`.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.authorizer.acl import (
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    operations_bitfield,
    supported_operations,
)

if TYPE_CHECKING:
    from kafkalite.network.api_spec import ErrorResponseBuilder, RequestContext
    from kafkalite.security.authorizer.authorizer import AclAuthorizer
    from kafkalite.server.metadata_cache import MetadataCache

__all__ = ["AuthHelper", "authorize_api", "controller_api_allowed"]

log = logging.getLogger(__name__)

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
CLUSTER = ResourceType.CLUSTER
TXN = ResourceType.TRANSACTIONAL_ID
Op = AclOperation

TOPIC_AUTH = int(ErrorCode.topic_authorization_failed)
GROUP_AUTH = int(ErrorCode.group_authorization_failed)
CLUSTER_AUTH = int(ErrorCode.cluster_authorization_failed)
TXN_AUTH = int(ErrorCode.transactional_id_authorization_failed)
NOT_ATTEMPTED = int(ErrorCode.operation_not_attempted)

#: DescribeConfigs/AlterConfigs resource types: (ACL resource, error)
_CONFIG_RESOURCES = {
    2: (TOPIC, TOPIC_AUTH),
    4: (CLUSTER, CLUSTER_AUTH),
    8: (CLUSTER, CLUSTER_AUTH),  # broker loggers
    32: (GROUP, GROUP_AUTH),
}


class AuthHelper:
    """Kafka's ``AuthHelper``: decisions for a request's principal and host."""

    def __init__(self, authorizer: AclAuthorizer | None, cache: MetadataCache | None = None):
        self.authorizer = authorizer
        self.cache = cache

    def allowed(
        self, ctx: RequestContext, op: AclOperation, rtype: ResourceType, name: str
    ) -> bool:
        a = self.authorizer
        if a is None:
            return True
        return a.authorize(ctx.principal, ctx.connection.peer[0], op, rtype, name)

    def allowed_any(self, ctx: RequestContext, op: AclOperation, rtype: ResourceType) -> bool:
        a = self.authorizer
        if a is None:
            return True
        return a.authorize_any(ctx.principal, ctx.connection.peer[0], op, rtype)

    def cluster(self, ctx: RequestContext, op: AclOperation) -> bool:
        return self.allowed(ctx, op, CLUSTER, CLUSTER_NAME)

    def operations(self, ctx: RequestContext, rtype: ResourceType, name: str) -> int:
        """The authorized-operations bit set; without an authorizer every supported one."""
        a = self.authorizer
        if a is None:
            return operations_bitfield(supported_operations(rtype))
        return operations_bitfield(
            a.authorized_operations(ctx.principal, ctx.connection.peer[0], rtype, name)
        )

    def topic_name(self, item: Any) -> str | None:
        name = _name(item)
        if name is None and self.cache is not None:
            tid = getattr(item, "topic_id", None)
            if tid is not None:
                return self.cache.topic_name(tid)
        return name


def controller_api_allowed(helper: AuthHelper, ctx: RequestContext) -> bool:
    """LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown: ClusterAction."""
    return helper.cluster(ctx, Op.CLUSTER_ACTION)


# ---- plumbing -------------------------------------------------------------------------
def _name(item: Any) -> str | None:
    if isinstance(item, str):
        return item
    for attr in ("name", "topic"):
        v = getattr(item, attr, None)
        if v is not None:
            return str(v)
    return None


def _then(result: Any, fn: Callable[[Any], Any]) -> Any:
    if inspect.isawaitable(result):

        async def later() -> Any:
            return fn(await result)

        return later()
    return fn(result)


Call = Callable[[Any], Any]


def _split(
    req: Any,
    version: int,
    field: str,
    resp_field: str,
    verdict: Callable[[Any], int],
    call: Call,
    errors: ErrorResponseBuilder,
) -> Any:
    """Handle the items ``verdict`` passes (0) and answer the others with their code."""
    items = getattr(req, field) or ()
    ok: list[Any] = []
    bad: dict[int, list[Any]] = {}
    for item in items:
        code = verdict(item)
        if code:
            bad.setdefault(code, []).append(item)
        else:
            ok.append(item)
    if not bad:
        return call(req)
    denied: list[Any] = []
    for code, its in bad.items():
        resp = errors(dataclasses.replace(req, **{field: tuple(its)}), version, code)
        denied += list((resp or {}).get(resp_field) or ())

    def merge(resp: Any) -> Any:
        if isinstance(resp, dict):
            resp[resp_field] = list(resp.get(resp_field) or ()) + denied
        return resp

    if not ok:
        first = errors(dataclasses.replace(req, **{field: ()}), version, 0) or {}
        if "error_code" in first:
            first["error_code"] = 0
        return merge(first)
    return _then(call(dataclasses.replace(req, **{field: tuple(ok)})), merge)


def _filter(resp_field: str, keep: Callable[[dict[str, Any]], bool]) -> Callable[[Any], Any]:
    def fn(resp: Any) -> Any:
        if isinstance(resp, dict):
            resp[resp_field] = [x for x in resp.get(resp_field) or () if keep(x)]
        return resp

    return fn


# ---- the rules, per API -----------------------------------------------------------------
Rule = Callable[["AuthHelper", "RequestContext", Any, Call, "ErrorResponseBuilder"], Any]


def _deny(errors: ErrorResponseBuilder, req: Any, version: int, code: int) -> Any:
    return errors(req, version, code)


def _topic_rule(op: AclOperation, field: str = "topics", resp: str = "topics") -> Rule:
    def rule(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
        return _split(
            req,
            ctx.api_version,
            field,
            resp,
            lambda t: 0 if h.allowed(ctx, op, TOPIC, h.topic_name(t) or "") else TOPIC_AUTH,
            call,
            e,
        )

    return rule


def _cluster_rule(op: AclOperation) -> Rule:
    def rule(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
        if not h.cluster(ctx, op):
            return _deny(e, req, ctx.api_version, CLUSTER_AUTH)
        return call(req)

    return rule


def _group_rule(op: AclOperation) -> Rule:
    def rule(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
        if not h.allowed(ctx, op, GROUP, req.group_id):
            return _deny(e, req, ctx.api_version, GROUP_AUTH)
        return call(req)

    return rule


def _group_then_topics(group_op: AclOperation, topic_op: AclOperation) -> Rule:
    topics = _topic_rule(topic_op)

    def rule(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
        if not h.allowed(ctx, group_op, GROUP, req.group_id):
            return _deny(e, req, ctx.api_version, GROUP_AUTH)
        return topics(h, ctx, req, call, e)

    return rule


def _group_then_topics_in(group_op: AclOperation, topic_op: AclOperation, resp: str) -> Rule:
    """Share APIs: the group first (GROUP_AUTHORIZATION_FAILED for the whole request),
    then each topic (by name or id) answered TOPIC_AUTHORIZATION_FAILED on its own."""
    topics = _topic_rule(topic_op, resp=resp)

    def rule(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
        if not h.allowed(ctx, group_op, GROUP, req.group_id):
            return _deny(e, req, ctx.api_version, GROUP_AUTH)
        return topics(h, ctx, req, call, e)

    return rule


def _describe_share_group_offsets(
    h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any
) -> Any:
    """Describe on each group; the groups the principal may not see get GROUP_AUTH."""
    return _split(
        req,
        ctx.api_version,
        "groups",
        "groups",
        lambda g: 0 if h.allowed(ctx, Op.DESCRIBE, GROUP, g.group_id) else GROUP_AUTH,
        call,
        e,
    )


def _txn_write(h: AuthHelper, ctx: RequestContext, req: Any) -> bool:
    return h.allowed(ctx, Op.WRITE, TXN, req.transactional_id)


def _end_txn(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
    if not _txn_write(h, ctx, req):
        return _deny(e, req, ctx.api_version, TXN_AUTH)
    return call(req)


def _add_offsets_to_txn(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
    if not _txn_write(h, ctx, req):
        return _deny(e, req, ctx.api_version, TXN_AUTH)
    if not h.allowed(ctx, Op.READ, GROUP, req.group_id):
        return _deny(e, req, ctx.api_version, GROUP_AUTH)
    return call(req)


def _txn_offset_commit(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
    if not _txn_write(h, ctx, req):
        return _deny(e, req, ctx.api_version, TXN_AUTH)
    return _group_then_topics(Op.READ, Op.READ)(h, ctx, req, call, e)


def _init_producer_id(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
    if req.transactional_id is not None:
        if not _txn_write(h, ctx, req):
            return _deny(e, req, ctx.api_version, TXN_AUTH)
    elif not (h.cluster(ctx, Op.IDEMPOTENT_WRITE) or h.allowed_any(ctx, Op.WRITE, TOPIC)):
        # KIP-679: an idempotent producer needs IdempotentWrite or Write on some topic
        return _deny(e, req, ctx.api_version, CLUSTER_AUTH)
    return call(req)


def _add_partitions_to_txn(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
    v = ctx.api_version
    if v >= 4:  # batched, sent by brokers (KIP-890)
        return _cluster_rule(Op.CLUSTER_ACTION)(h, ctx, req, call, e)
    if not h.allowed(ctx, Op.WRITE, TXN, req.v3_and_below_transactional_id):
        return _deny(e, req, v, TXN_AUTH)
    topics = req.v3_and_below_topics
    bad = [t for t in topics if not h.allowed(ctx, Op.WRITE, TOPIC, t.name)]
    if not bad:
        return call(req)
    # Kafka: the unauthorized topics fail, the others are not attempted
    ok = [t for t in topics if t not in bad]
    resp = e(dataclasses.replace(req, v3_and_below_topics=tuple(bad)), v, TOPIC_AUTH) or {}
    rest = e(dataclasses.replace(req, v3_and_below_topics=tuple(ok)), v, NOT_ATTEMPTED) or {}
    key = "results_by_topic_v3_and_below"
    resp[key] = list(resp.get(key) or ()) + list(rest.get(key) or ())
    return resp


def _find_coordinator(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
    key_type = int(getattr(req, "key_type", 0))
    if key_type not in (0, 1):
        return call(req)
    rtype, code = (GROUP, GROUP_AUTH) if key_type == 0 else (TXN, TXN_AUTH)
    if ctx.api_version < 4:
        if not h.allowed(ctx, Op.DESCRIBE, rtype, req.key):
            return _deny(e, req, ctx.api_version, code)
        return call(req)
    return _split(
        req,
        ctx.api_version,
        "coordinator_keys",
        "coordinators",
        lambda k: 0 if h.allowed(ctx, Op.DESCRIBE, rtype, k) else code,
        call,
        e,
    )


def _with_group_ops(h: AuthHelper, ctx: RequestContext, include: bool) -> Callable[[Any], Any]:
    def fn(resp: Any) -> Any:
        if include and isinstance(resp, dict):
            for g in resp.get("groups") or ():
                if not g.get("error_code"):
                    g["authorized_operations"] = h.operations(ctx, GROUP, g["group_id"])
        return resp

    return fn


def _describe_groups(field: str) -> Rule:
    def rule(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
        include = bool(getattr(req, "include_authorized_operations", False))
        return _then(
            _split(
                req,
                ctx.api_version,
                field,
                "groups",
                lambda g: 0 if h.allowed(ctx, Op.DESCRIBE, GROUP, g) else GROUP_AUTH,
                call,
                e,
            ),
            _with_group_ops(h, ctx, include),
        )

    return rule


def _list_groups(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
    if h.cluster(ctx, Op.DESCRIBE):
        return call(req)
    return _then(
        call(req), _filter("groups", lambda g: h.allowed(ctx, Op.DESCRIBE, GROUP, g["group_id"]))
    )


def _delete_groups(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
    return _split(
        req,
        ctx.api_version,
        "groups_names",
        "results",
        lambda g: 0 if h.allowed(ctx, Op.DELETE, GROUP, g) else GROUP_AUTH,
        call,
        e,
    )


def _offset_fetch(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
    v = ctx.api_version

    def topic_ok(name: str) -> bool:
        return h.allowed(ctx, Op.DESCRIBE, TOPIC, name)

    if v < 8:
        if not h.allowed(ctx, Op.DESCRIBE, GROUP, req.group_id):
            return _deny(e, req, v, GROUP_AUTH)
        if req.topics is None:
            return _then(call(req), _filter("topics", lambda t: topic_ok(t["name"])))
        return _topic_rule(Op.DESCRIBE)(h, ctx, req, call, e)
    # v8+: per group, then per topic of each group
    groups, bad_groups, denied_topics = [], [], {}
    for g in req.groups:
        if not h.allowed(ctx, Op.DESCRIBE, GROUP, g.group_id):
            bad_groups.append(g)
            continue
        if g.topics is not None:
            bad = [t for t in g.topics if not topic_ok(h.topic_name(t) or "")]
            if bad:
                denied_topics[g.group_id] = bad
                g = dataclasses.replace(g, topics=tuple(t for t in g.topics if t not in bad))
        groups.append(g)
    extra = []
    if bad_groups:
        extra = list(e(dataclasses.replace(req, groups=tuple(bad_groups)), v, GROUP_AUTH)["groups"])
    denied_by_group = {}
    for gid, ts in denied_topics.items():
        g = next(x for x in req.groups if x.group_id == gid)
        err = e(
            dataclasses.replace(req, groups=(dataclasses.replace(g, topics=tuple(ts)),)),
            v,
            TOPIC_AUTH,
        )
        denied_by_group[gid] = list(err["groups"][0]["topics"])

    def merge(resp: Any) -> Any:
        if not isinstance(resp, dict):
            return resp
        out = []
        for g in resp.get("groups") or ():
            gid = g.get("group_id")
            if g.get("topics") is not None and gid in denied_topics:
                g["topics"] = list(g["topics"]) + denied_by_group[gid]
            elif gid not in denied_topics and g.get("topics") is not None:
                requested = next((x for x in req.groups if x.group_id == gid), None)
                if requested is not None and requested.topics is None:
                    g["topics"] = [t for t in g["topics"] if topic_ok(t["name"])]
            out.append(g)
        resp["groups"] = out + extra
        return resp

    if not groups:
        return merge({"throttle_time": 0, "groups": []})
    return _then(call(dataclasses.replace(req, groups=tuple(groups))), merge)


def _configs(op: AclOperation, resp_field: str) -> Rule:
    def rule(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
        def verdict(r: Any) -> int:
            target = _CONFIG_RESOURCES.get(int(r.resource_type))
            if target is None:
                return 0  # the handler refuses unknown types
            rtype, code = target
            name = CLUSTER_NAME if rtype == CLUSTER else r.resource_name
            return 0 if h.allowed(ctx, op, rtype, name) else code

        return _split(req, ctx.api_version, "resources", resp_field, verdict, call, e)

    return rule


def _delete_topics(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
    field = "topics" if ctx.api_version >= 6 else "topic_names"
    cache = h.cache

    def verdict(t: Any) -> int:
        name = h.topic_name(t)
        if name is None:
            return 0  # an unknown id: the handler answers UNKNOWN_TOPIC_ID
        if h.allowed(ctx, Op.DELETE, TOPIC, name):
            return 0
        if h.allowed(ctx, Op.DESCRIBE, TOPIC, name) and (
            cache is not None and name not in cache.topics
        ):
            return 0  # may know it does not exist: UNKNOWN_TOPIC_OR_PARTITION
        return TOPIC_AUTH

    return _split(req, ctx.api_version, field, "responses", verdict, call, e)


def _create_topics(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
    def hide_configs(resp: Any) -> Any:
        """v5+: a created topic's configs only with DescribeConfigs on it (Kafka)."""
        if isinstance(resp, dict) and ctx.api_version >= 5:
            for t in resp.get("topics") or ():
                if not t.get("error_code") and not h.allowed(
                    ctx, Op.DESCRIBE_CONFIGS, TOPIC, t["name"]
                ):
                    t["topic_config_error_code"] = TOPIC_AUTH
                    t["num_partitions"] = t["replication_factor"] = -1
                    t["configs"] = None
        return resp

    if h.cluster(ctx, Op.CREATE):
        return _then(call(req), hide_configs)
    return _then(_topic_rule(Op.CREATE)(h, ctx, req, call, e), hide_configs)


def _offset_for_leader_epoch(
    h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any
) -> Any:
    if int(getattr(req, "replica_id", -1)) >= 0 and h.cluster(ctx, Op.CLUSTER_ACTION):
        return call(req)
    return _topic_rule(Op.DESCRIBE)(h, ctx, req, call, e)


def _consumer_group_heartbeat(
    h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any
) -> Any:
    if not h.allowed(ctx, Op.READ, GROUP, req.group_id):
        return _deny(e, req, ctx.api_version, GROUP_AUTH)
    for t in req.subscribed_topic_names or ():
        if not h.allowed(ctx, Op.DESCRIBE, TOPIC, t):
            return _deny(e, req, ctx.api_version, TOPIC_AUTH)
    return call(req)


def _describe_transactions(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
    return _split(
        req,
        ctx.api_version,
        "transactional_ids",
        "transaction_states",
        lambda t: 0 if h.allowed(ctx, Op.DESCRIBE, TXN, t) else TXN_AUTH,
        call,
        e,
    )


def _list_transactions(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
    return _then(
        call(req),
        _filter(
            "transaction_states",
            lambda t: h.allowed(ctx, Op.DESCRIBE, TXN, t["transactional_id"]),
        ),
    )


def _describe_log_dirs(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
    if not h.cluster(ctx, Op.DESCRIBE):
        return e(req, ctx.api_version, CLUSTER_AUTH)
    return call(req)


def _with_cluster_ops(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
    """DescribeCluster: no check; the cluster's operations when asked (0 without
    Describe on the cluster, as Kafka)."""
    if not getattr(req, "include_cluster_authorized_operations", False):
        return call(req)

    def fn(resp: Any) -> Any:
        if isinstance(resp, dict) and not resp.get("error_code"):
            resp["cluster_authorized_operations"] = cluster_operations(h, ctx)
        return resp

    return _then(call(req), fn)


def cluster_operations(h: AuthHelper, ctx: RequestContext) -> int:
    return h.operations(ctx, CLUSTER, CLUSTER_NAME) if h.cluster(ctx, Op.DESCRIBE) else 0


def _describe_topic_partitions(
    h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any
) -> Any:
    """Describe on each named topic (29); a request for every topic leaves the others out."""
    if getattr(req, "topics", None):
        return _topic_rule(Op.DESCRIBE)(h, ctx, req, call, e)
    return _then(
        call(req), _filter("topics", lambda t: h.allowed(ctx, Op.DESCRIBE, TOPIC, t["name"]))
    )


_RULES: dict[int, Rule] = {
    ApiKey.LIST_OFFSETS: _topic_rule(Op.DESCRIBE),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.DELETE_RECORDS: _topic_rule(Op.DELETE),
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.CREATE_PARTITIONS: _topic_rule(Op.ALTER, resp="results"),
    ApiKey.OFFSET_COMMIT: _group_then_topics(Op.READ, Op.READ),
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _group_rule(Op.READ),
    ApiKey.HEARTBEAT: _group_rule(Op.READ),
    ApiKey.LEAVE_GROUP: _group_rule(Op.READ),
    ApiKey.SYNC_GROUP: _group_rule(Op.READ),
    ApiKey.DESCRIBE_GROUPS: _describe_groups("groups"),
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.OFFSET_DELETE: _group_then_topics(Op.DELETE, Op.READ),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: _describe_groups("group_ids"),
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
    ApiKey.END_TXN: _end_txn,
    ApiKey.WRITE_TXN_MARKERS: _cluster_rule(Op.CLUSTER_ACTION),
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.DESCRIBE_PRODUCERS: _topic_rule(Op.READ),
    ApiKey.DESCRIBE_TRANSACTIONS: _describe_transactions,
    ApiKey.LIST_TRANSACTIONS: _list_transactions,
    ApiKey.DESCRIBE_CONFIGS: _configs(Op.DESCRIBE_CONFIGS, "results"),
    ApiKey.ALTER_CONFIGS: _configs(Op.ALTER_CONFIGS, "responses"),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _configs(Op.ALTER_CONFIGS, "responses"),
    ApiKey.DESCRIBE_LOG_DIRS: _describe_log_dirs,
    ApiKey.DESCRIBE_CLUSTER: _with_cluster_ops,
    ApiKey.ELECT_LEADERS: _cluster_rule(Op.ALTER),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _cluster_rule(Op.ALTER),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _cluster_rule(Op.DESCRIBE),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _cluster_rule(Op.DESCRIBE_CONFIGS),
    ApiKey.ALTER_CLIENT_QUOTAS: _cluster_rule(Op.ALTER_CONFIGS),
    # APIs other issues add (Kafka's rules; keyed by number so this table needs no
    # ApiKey names): AlterReplicaLogDirs, DescribeUserScramCredentials,
    # AlterUserScramCredentials, DescribeQuorum, UpdateFeatures, ListConfigResources,
    # DescribeTopicPartitions
    34: _cluster_rule(Op.ALTER),
    50: _cluster_rule(Op.DESCRIBE),
    51: _cluster_rule(Op.ALTER),
    55: _cluster_rule(Op.DESCRIBE),
    57: _cluster_rule(Op.ALTER),
    74: _cluster_rule(Op.DESCRIBE_CONFIGS),
    75: _describe_topic_partitions,
    # share groups (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch,
    # ShareAcknowledge, Describe/Alter/DeleteShareGroupOffsets
    76: _consumer_group_heartbeat,
    77: _describe_groups("group_ids"),
    78: _group_then_topics_in(Op.READ, Op.READ, "responses"),
    79: _group_then_topics_in(Op.READ, Op.READ, "responses"),
    90: _describe_share_group_offsets,
    91: _group_then_topics_in(Op.READ, Op.READ, "responses"),
    92: _group_then_topics_in(Op.DELETE, Op.READ, "responses"),
    # the share-state coordinator's inter-broker APIs (83–87): ClusterAction, as Kafka
    83: _cluster_rule(Op.CLUSTER_ACTION),
    84: _cluster_rule(Op.CLUSTER_ACTION),
    85: _cluster_rule(Op.CLUSTER_ACTION),
    86: _cluster_rule(Op.CLUSTER_ACTION),
    87: _cluster_rule(Op.CLUSTER_ACTION),
}

#: checked in their handlers (Produce, Fetch, Metadata; the ACL APIs) or never
#: (ApiVersions, SaslHandshake, SaslAuthenticate, GetTelemetrySubscriptions, PushTelemetry)
IN_HANDLER = frozenset(
    {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.API_VERSIONS, 29, 30, 31}
    | {17, 36, 71, 72}
)


def _super_users_only(h: AuthHelper, ctx: RequestContext, req: Any, call: Call, e: Any) -> Any:
    """An API without a rule here (a bug: test_every_api_has_an_authorization_rule says
    so): only a super user may use it, everyone else gets CLUSTER_AUTHORIZATION_FAILED."""
    a = h.authorizer
    if a is not None and str(ctx.principal) not in a.super_users:
        return _deny(e, req, ctx.api_version, CLUSTER_AUTH)
    return call(req)


def authorize_api(
    helper: AuthHelper,
    api_key: int,
    handler: Callable[[Any, Any], Any],
    errors: ErrorResponseBuilder,
) -> Callable[[Any, Any], Any]:
    """``handler`` behind the API's ACL rule (itself for the in-handler ones)."""
    rule = _RULES.get(api_key)
    if rule is None:
        if api_key in IN_HANDLER:
            return handler
        log.warning(
            "API %d has no authorization rule: only super users may use it (add its KafkaApis "
            "checks to kafkalite.server.authorization._RULES, its row to docs/security.md)",
            api_key,
        )
        rule = _super_users_only

    def authorized(ctx: RequestContext, req: Any) -> Any:
        return rule(helper, ctx, req, lambda r: handler(ctx, r), errors)

    return authorized
