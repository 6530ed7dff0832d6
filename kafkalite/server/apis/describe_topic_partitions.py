"""DescribeTopicPartitions (75, KIP-966): topics and partitions, paginated by a cursor.

Newer admin clients describe topics with it instead of Metadata. Topics are
answered in name order from the request's cursor; a response stops after
``min(response_partition_limit, max.request.partition.size.limit)`` partitions
and names where to resume in ``next_cursor`` (Kafka's
``DescribeTopicPartitionsRequestHandler`` and ``KRaftMetadataCache``). kafkalite
has no eligible leader replicas (KIP-966's ELR needs KRaft): those lists are empty,
as on a Kafka cluster with ELR disabled.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.topic_names import INTERNAL_TOPICS, validate_topic_name

if TYPE_CHECKING:
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.server.apis.request_types import DescribeTopicPartitionsRequest
    from kafkalite.server.config import BrokerConfig
    from kafkalite.server.metadata_cache import MetadataCache, TopicMetadata

_ZERO_UUID = uuid.UUID(int=0)
#: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: every
#: operation a topic supports, Kafka's answer without an authorizer
TOPIC_AUTHORIZED_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


@dataclass(frozen=True, slots=True)
class DescribeTopicPartitionsDeps:
    metadata_cache: MetadataCache
    config: BrokerConfig


def handle_describe_topic_partitions(
    deps: DescribeTopicPartitionsDeps, ctx: RequestContext, req: DescribeTopicPartitionsRequest
) -> dict[str, Any]:
    cache = deps.metadata_cache
    cursor = req.cursor
    start_topic = cursor.topic_name if cursor is not None else ""
    fetch_all = not req.topics
    # validate
    if fetch_all:
        names = {n for n in cache.topics if n >= start_topic}
    else:
        names = {t.name for t in req.topics if t.name >= start_topic}
        if cursor is not None and cursor.topic_name not in names:
            # Kafka throws InvalidRequestException: the error response, every topic in error
            return describe_topic_partitions_error_response(req, 0, ErrorCode.invalid_request)
    if cursor is not None and cursor.partition_index < 0:
        return describe_topic_partitions_error_response(req, 0, ErrorCode.invalid_request)
    # respond: at most `remaining` partitions, then a cursor
    remaining = max(
        min(int(deps.config["max.request.partition.size.limit"]), req.response_partition_limit), 1
    )
    topics: list[dict[str, Any]] = []
    next_cursor = None
    for name in sorted(names):
        if remaining == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        t = cache.get_topic(name)
        if t is None:
            if not fetch_all:
                err = (
                    ErrorCode.unknown_topic_or_partition
                    if validate_topic_name(name) is None
                    else ErrorCode.invalid_topic_exception
                )
                topics.append(_topic(err, name, _ZERO_UUID, []))
            continue
        first = cursor.partition_index if cursor is not None and name == start_topic else 0
        count = len(t.partitions)
        upper = min(count, first + remaining)
        partitions = _partitions(cache, t, first, upper)
        topics.append(_topic(ErrorCode.none, name, t.topic_id, partitions))
        if upper < count:
            next_cursor = {"topic_name": name, "partition_index": upper}
            break
        remaining -= len(partitions)
    return {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor}


def _partitions(cache: MetadataCache, t: TopicMetadata, first: int, upper: int) -> list[Any]:
    alive = cache.brokers
    out = []
    for i in range(first, upper):
        p = t.partitions.get(i)
        if p is None:
            continue
        out.append(
            {
                "error_code": ErrorCode.none,
                "partition_index": i,
                "leader_id": p.leader if p.leader in alive else -1,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": list(p.replicas),
                "isr_nodes": list(p.isr),
                "eligible_leader_replicas": [],
                "last_known_elr": [],
                "offline_replicas": [
                    r for r in p.replicas if r not in alive or r in p.offline_replicas
                ],
            }
        )
    return out


def _topic(code: int, name: str, topic_id: uuid.UUID, partitions: list[Any]) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": topic_id,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": partitions,
        "topic_authorized_operations": TOPIC_AUTHORIZED_OPERATIONS,
    }


def describe_topic_partitions_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """Every requested topic in error (``DescribeTopicPartitionsRequest.getErrorResponse``)."""
    return {
        "throttle_time": 0,
        "topics": [
            {
                "error_code": code,
                "name": t.name,
                "topic_id": _ZERO_UUID,
                "is_internal": False,
                "partitions": [],
                "topic_authorized_operations": -(2**31),
            }
            for t in req.topics
        ],
        "next_cursor": None,
    }
