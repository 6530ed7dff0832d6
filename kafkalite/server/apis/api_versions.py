"""ApiVersions (18): generated from the API table; records the client software."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server import features

if TYPE_CHECKING:
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.server.apis.request_types import ApiVersionsRequest


def handle_api_versions(
    api_versions: Callable[[], list[dict[str, int]]], ctx: RequestContext, req: ApiVersionsRequest
) -> dict[str, Any]:
    """``api_versions``: the channel's advertised table (RequestChannel.api_versions_list)."""
    # validate: v3+ carries client software name/version (KIP-511)
    name = getattr(req, "client_software_name", None)
    version = getattr(req, "client_software_version", None)
    if ctx.api_version >= 3 and name is not None:
        if not _valid_software_field(name) or not _valid_software_field(version or ""):
            return {"error_code": ErrorCode.invalid_request, "api_keys": [], "throttle_time": 0}
        # act: remember who is talking, for logs and DescribeClientQuotas-style views
        ctx.connection.client_software_name = name
        ctx.connection.client_software_version = version
    # respond
    return {
        "error_code": ErrorCode.none,
        "api_keys": api_versions(),
        "throttle_time": 0,
        # KIP-584 features (tagged fields, v3+): kafkalite.server.features
        "supported_features": features.supported_features(ctx.api_version),
        "finalized_features_epoch": features.FINALIZED_EPOCH,
        "finalized_features": features.finalized_features(),
        "zk_migration_ready": False,
    }


def _valid_software_field(s: str) -> bool:
    return (
        bool(s) and all(c.isalnum() or c in ".-" for c in s) and s[0].isalnum() and s[-1].isalnum()
    )


def api_versions_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """The top-level error, with no API list (Kafka's ``ApiVersionsRequest.getErrorResponse``)."""
    return {"error_code": code, "api_keys": [], "throttle_time": 0}
