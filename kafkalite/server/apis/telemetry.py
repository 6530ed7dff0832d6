"""Client telemetry (KIP-714): GetTelemetrySubscriptions (71), PushTelemetry (72), and
ListConfigResources (74), which lists CLIENT_METRICS subscriptions (v0) or any config
resource type (v1). The subscriptions and pushed values live in
:class:`kafkalite.server.client_metrics.ClientMetricsManager`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.client_metrics import ACCEPTED_COMPRESSION

if TYPE_CHECKING:
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.server.apis.request_types import (
        GetTelemetrySubscriptionsRequest,
        ListConfigResourcesRequest,
        PushTelemetryRequest,
    )
    from kafkalite.server.client_metrics import ClientMetricsManager
    from kafkalite.server.metadata_cache import MetadataCache

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


@dataclass(frozen=True, slots=True)
class TelemetryDeps:
    client_metrics: ClientMetricsManager
    metadata_cache: MetadataCache


def handle_get_telemetry_subscriptions(
    deps: TelemetryDeps, ctx: RequestContext, req: GetTelemetrySubscriptionsRequest
) -> dict[str, Any]:
    got = deps.client_metrics.get_subscriptions(ctx, req.client_instance_id)
    if got["error_code"] != ErrorCode.none:
        return get_telemetry_subscriptions_error_response(req, 0, got["error_code"])
    inst = got["instance"]
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "client_instance_id": inst.instance_id,
        "subscription_id": inst.subscription_id,
        "accepted_compression_types": ACCEPTED_COMPRESSION,
        "push_interval": inst.push_interval_ms,
        "telemetry_max_bytes": deps.client_metrics.telemetry_max_bytes,
        "delta_temporality": True,
        # the wire's "all metrics" is one empty string (Kafka stores "*")
        "requested_metrics": ["" if m == "*" else m for m in inst.metrics],
    }


def handle_push_telemetry(
    deps: TelemetryDeps, ctx: RequestContext, req: PushTelemetryRequest
) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": deps.client_metrics.push(ctx, req)}


def handle_list_config_resources(
    deps: TelemetryDeps, ctx: RequestContext, req: ListConfigResourcesRequest
) -> dict[str, Any]:
    """v0 lists the CLIENT_METRICS subscriptions; v1 the asked types (all when empty)."""
    if ctx.api_version == 0:
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "config_resources": [
                {"resource_name": n} for n in sorted(deps.client_metrics.subscriptions)
            ],
        }
    types = set(getattr(req, "resource_types", ())) or {
        TOPIC,
        BROKER,
        BROKER_LOGGER,
        CLIENT_METRICS,
        GROUP,
    }
    if not types <= {TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP}:
        return list_config_resources_error_response(req, 1, ErrorCode.unsupported_version)
    out: list[dict[str, Any]] = []
    cache = deps.metadata_cache
    if CLIENT_METRICS in types:
        out += [
            {"resource_name": n, "resource_type": CLIENT_METRICS}
            for n in sorted(deps.client_metrics.subscriptions)
        ]
    if TOPIC in types:
        out += [{"resource_name": n, "resource_type": TOPIC} for n in sorted(cache.topics)]
    for t in (BROKER, BROKER_LOGGER):
        if t in types:
            out += [{"resource_name": str(b), "resource_type": t} for b in sorted(cache.brokers)]
    # GROUP: groups with dynamic configs (none until group config resources land)
    return {"throttle_time": 0, "error_code": ErrorCode.none, "config_resources": out}


def get_telemetry_subscriptions_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": code,
        "client_instance_id": None,
        "subscription_id": 0,
        "accepted_compression_types": [],
        "push_interval": 0,
        "telemetry_max_bytes": 0,
        "delta_temporality": False,
        "requested_metrics": [],
    }


def push_telemetry_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code}


def list_config_resources_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "config_resources": []}
