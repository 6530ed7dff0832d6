"""DescribeCluster (60), DescribeLogDirs (35) and AlterReplicaLogDirs (34)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.authorizer.acl import (
    ResourceType,
    operations_bitfield,
    supported_operations,
)

if TYPE_CHECKING:
    from kafkalite.log.log_manager import LogManager
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.replica.replica_manager import ReplicaManager
    from kafkalite.server.apis.request_types import (
        AlterReplicaLogDirsRequest,
        DescribeClusterRequest,
        DescribeLogDirsRequest,
    )
    from kafkalite.server.config import BrokerConfig
    from kafkalite.server.metadata_cache import MetadataCache

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
CLUSTER_OPERATIONS = operations_bitfield(supported_operations(ResourceType.CLUSTER))
BROKER_ENDPOINT_TYPE = 1
CONTROLLER_ENDPOINT_TYPE = 2


@dataclass(frozen=True, slots=True)
class ClusterDeps:
    metadata_cache: MetadataCache
    log_manager: LogManager
    replica_manager: ReplicaManager
    config: BrokerConfig


def handle_describe_cluster(
    deps: ClusterDeps, ctx: RequestContext, req: DescribeClusterRequest
) -> dict[str, Any]:
    endpoint_type = int(getattr(req, "endpoint_type", BROKER_ENDPOINT_TYPE))
    if endpoint_type != BROKER_ENDPOINT_TYPE:
        # Kafka: an unknown type is UNSUPPORTED_ENDPOINT_TYPE, a controller (2) request
        # sent to a broker MISMATCHED_ENDPOINT_TYPE (INVALID_REQUEST on v0)
        if ctx.api_version == 0:
            code = ErrorCode.invalid_request
        elif endpoint_type == CONTROLLER_ENDPOINT_TYPE:
            code = ErrorCode.mismatched_endpoint_type
        else:
            code = ErrorCode.unsupported_endpoint_type
        message = (
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
            "type CONTROLLER"
            if endpoint_type == CONTROLLER_ENDPOINT_TYPE
            else f"Unsupported endpoint type {endpoint_type}"
        )
        return {
            "throttle_time": 0,
            "error_code": code,
            "error_message": message,
            "endpoint_type": endpoint_type,
            "cluster_id": deps.metadata_cache.cluster_id,
            "controller_id": -1,
            "brokers": [],
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        }
    brokers = []
    for b in deps.metadata_cache.brokers.values():
        ep = b.endpoints.get(ctx.listener)
        if ep is not None:
            # is_fenced (v2): a registered broker is never fenced in ZooKeeper mode
            brokers.append(
                {
                    "broker_id": b.broker_id,
                    "host": ep[0],
                    "port": ep[1],
                    "rack": b.rack,
                    "is_fenced": False,
                }
            )
    return {
        "throttle_time": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": endpoint_type,
        "cluster_id": deps.metadata_cache.cluster_id,
        "controller_id": deps.metadata_cache.controller_id,
        "brokers": brokers,
        # without an authorizer every operation the cluster supports, as Kafka (an
        # authorizer's real set is filled in by kafkalite.server.authorization)
        "cluster_authorized_operations": CLUSTER_OPERATIONS
        if getattr(req, "include_cluster_authorized_operations", False)
        else AUTHORIZED_OPERATIONS_OMITTED,
    }


def handle_describe_log_dirs(
    deps: ClusterDeps, ctx: RequestContext, req: DescribeLogDirsRequest
) -> dict[str, Any]:
    """Every configured log dir with its logs (Kafka's ReplicaManager.describeLogDirs).

    An offline dir (I/O error, or failed at start-up) is reported with
    KAFKA_STORAGE_ERROR and nothing else, as Kafka does.
    """
    wanted: set[tuple[str, int]] | None = None
    if req.topics is not None:
        wanted = {(t.topic, int(p)) for t in req.topics for p in t.partitions}
    lm = deps.log_manager
    results = []
    for d, logs in lm.logs_by_dir().items():
        if d in lm.offline_dirs:
            results.append(_log_dir_error(d, ErrorCode.kafka_storage_error))
            continue
        try:
            st = os.statvfs(d)
        except OSError:
            results.append(_log_dir_error(d, ErrorCode.kafka_storage_error))
            continue
        topics: dict[str, list[dict[str, Any]]] = {}
        # a replica moving here (AlterReplicaLogDirs): its future log, as Kafka reports it
        for tp, fut in sorted(lm.future_logs.items()):
            current = lm.get_log(*tp)
            if fut.dest != d or current is None or (wanted is not None and tp not in wanted):
                continue
            topics.setdefault(tp[0], []).append(
                {
                    "partition_index": tp[1],
                    "partition_size": fut.copied_bytes,
                    # Kafka: the current log's end offset minus the future log's
                    "offset_lag": max(current.log_end_offset - fut.copied_end_offset, 0),
                    "is_future_key": True,
                }
            )
        for lg in sorted(logs, key=lambda x: x.topic_partition):
            if wanted is not None and lg.topic_partition not in wanted:
                continue
            topics.setdefault(lg.topic, []).append(
                {
                    "partition_index": lg.partition,
                    "partition_size": lg.size_in_bytes,
                    # Kafka: max(HW - LEO, 0) for a current (non-future) log
                    "offset_lag": max(lg.high_watermark - lg.log_end_offset, 0),
                    "is_future_key": False,
                }
            )
        results.append(
            {
                "error_code": 0,
                "log_dir": str(d),
                "total_bytes": st.f_blocks * st.f_frsize,
                "usable_bytes": st.f_bavail * st.f_frsize,
                "topics": [{"name": t, "partitions": ps} for t, ps in sorted(topics.items())],
                "is_cordoned": False,  # v5 (KIP-1066): kafkalite cannot cordon a log dir
            }
        )
    return {"throttle_time": 0, "error_code": 0, "results": results}


def handle_alter_replica_log_dirs(
    deps: ClusterDeps, ctx: RequestContext, req: AlterReplicaLogDirsRequest
) -> dict[str, Any]:
    """Move replicas between this broker's log dirs (Kafka's
    ReplicaManager.alterReplicaLogDirs): LOG_DIR_NOT_FOUND for a path not in log.dirs,
    KAFKA_STORAGE_ERROR for an offline one, REPLICA_NOT_AVAILABLE for a partition not
    hosted here; otherwise the move starts and the answer is NONE."""
    moves: dict[tuple[str, int], str] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                moves[(t.name, int(p))] = d.path
    cfg = deps.config
    results = deps.replica_manager.alter_replica_log_dirs(
        moves, lambda: float(cfg["replica.alter.log.dirs.io.max.bytes.per.second"])
    )
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), (code, _message) in results.items():
        by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": code})
    return {
        "throttle_time": 0,
        "results": [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()],
    }


def alter_replica_log_dirs_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """Every requested partition in error (``AlterReplicaLogDirsRequest.getErrorResponse``)."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                by_topic.setdefault(t.name, []).append(
                    {"partition_index": int(p), "error_code": code}
                )
    return {
        "throttle_time": 0,
        "results": [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()],
    }


def _log_dir_error(d: Path, code: int) -> dict[str, Any]:
    return {
        "error_code": code,
        "log_dir": str(d),
        "total_bytes": -1,
        "usable_bytes": -1,
        "topics": [],
    }


def describe_cluster_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """The top-level error, with no cluster, controller or brokers."""
    return {
        "throttle_time": 0,
        "error_code": code,
        "error_message": None,
        "endpoint_type": BROKER_ENDPOINT_TYPE,
        "cluster_id": "",
        "controller_id": -1,
        "brokers": [],
        "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def describe_log_dirs_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """The top-level error (v3+), with no log dirs: before v3 the response has no field
    for it, as in Kafka's ``DescribeLogDirsRequest.getErrorResponse``."""
    return {"throttle_time": 0, "error_code": code, "results": []}
