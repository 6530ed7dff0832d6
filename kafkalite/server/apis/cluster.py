"""DescribeCluster (60) and DescribeLogDirs (35)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.server.broker import KafkaBroker
    from kafkalite.server.request_channel import RequestContext

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
BROKER_ENDPOINT_TYPE = 1
CONTROLLER_ENDPOINT_TYPE = 2


def handle_describe_cluster(broker: KafkaBroker, ctx: RequestContext, req: Any) -> dict[str, Any]:
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
            "cluster_id": broker.cluster_id,
            "controller_id": -1,
            "brokers": [],
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        }
    brokers = []
    for b in broker.metadata_cache.brokers.values():
        ep = b.endpoints.get(ctx.listener)
        if ep is not None:
            brokers.append({"broker_id": b.broker_id, "host": ep[0], "port": ep[1], "rack": b.rack})
    return {
        "throttle_time": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": endpoint_type,
        "cluster_id": broker.cluster_id,
        "controller_id": broker.metadata_cache.controller_id,
        "brokers": brokers,
        "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def handle_describe_log_dirs(broker: KafkaBroker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    wanted: set[tuple[str, int]] | None = None
    if req.topics is not None:
        wanted = {(t.topic, int(p)) for t in req.topics for p in t.partitions}
    by_dir: dict[str, dict[str, list[dict[str, Any]]]] = {
        str(d): {} for d in broker.config.log_dirs
    }
    for (topic, part), p in sorted(broker.replica_manager.partitions.items()):
        if p.log is None or (wanted is not None and (topic, part) not in wanted):
            continue
        d = str(p.log.dir.parent)
        lag = max(p.log.log_end_offset - p.high_watermark, 0) if p.is_leader else 0
        by_dir.setdefault(d, {}).setdefault(topic, []).append(
            {
                "partition_index": part,
                "partition_size": p.log.size_in_bytes,
                "offset_lag": lag,
                "is_future_key": False,
            }
        )
    results = []
    for d, topics in by_dir.items():
        try:
            st = os.statvfs(d)
            total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
            err = 0
        except OSError:
            total = usable = -1
            err = ErrorCode.kafka_storage_error
        results.append(
            {
                "error_code": err,
                "log_dir": d,
                "total_bytes": total,
                "usable_bytes": usable,
                "topics": [{"name": t, "partitions": ps} for t, ps in sorted(topics.items())],
            }
        )
    return {"throttle_time": 0, "error_code": 0, "results": results}
