"""DescribeClientQuotas (48) and AlterClientQuotas (49), on any broker (ZooKeeper mode:
each broker reads and writes ``/config/users`` and ``/config/clients`` itself)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.quota.entities import DEFAULT, IP, ClientQuotaConfigs, QuotaEntity
from kafkalite.quota.quota_store import (
    ClientQuotaStore,
    FilterComponent,
    QuotaRequestError,
    describe,
    parse_entity,
    parse_ip_entity,
)

if TYPE_CHECKING:
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.server.apis.request_types import (
        AlterClientQuotasRequest,
        DescribeClientQuotasRequest,
    )


@dataclass(frozen=True, slots=True)
class ClientQuotaDeps:
    configs: ClientQuotaConfigs
    store: ClientQuotaStore


def handle_describe_client_quotas(
    deps: ClientQuotaDeps, ctx: RequestContext, req: DescribeClientQuotasRequest
) -> dict[str, Any]:
    components = [
        FilterComponent(c.entity_type, int(c.match_type), c.match) for c in req.components
    ]
    try:
        found = describe(deps.configs, components, bool(req.strict))
    except QuotaRequestError as e:
        return describe_client_quotas_error_response(req, ctx.api_version, e.code, e.message)
    return {
        "throttle_time": 0,
        "error_code": 0,
        "error_message": None,
        "entries": [
            {
                "entity": _wire_entity(entity),
                "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
            }
            for entity, values in found
        ],
    }


def _wire_entity(entity: QuotaEntity | str) -> list[dict[str, Any]]:
    if isinstance(entity, str):  # an ip entity
        return [{"entity_type": IP, "entity_name": None if entity == DEFAULT else entity}]
    return [{"entity_type": t, "entity_name": n} for t, n in entity.describe()]


async def handle_alter_client_quotas(
    deps: ClientQuotaDeps, ctx: RequestContext, req: AlterClientQuotasRequest
) -> dict[str, Any]:
    out = []
    for entry in req.entries:
        wire_entity = [
            {"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity
        ]
        code, message = 0, None
        try:
            components = [(e.entity_type, e.entity_name) for e in entry.entity]
            ops = [(op.key, None if op.remove else float(op.value)) for op in entry.ops]
            ip = parse_ip_entity(components)
            if ip is not None:
                await deps.store.alter_ip(ip, ops, bool(req.validate_only))
            else:
                entity = parse_entity(components)
                await deps.store.alter(entity, ops, bool(req.validate_only))
        except QuotaRequestError as e:
            code, message = e.code, e.message
        out.append({"error_code": code, "error_message": message, "entity": wire_entity})
    return {"throttle_time": 0, "entries": out}


def describe_client_quotas_error_response(
    req: Any, version: int, code: int, message: str | None = None
) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": message, "entries": None}


def alter_client_quotas_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """Every entry in error, nothing changed."""
    return {
        "throttle_time": 0,
        "entries": [
            {
                "error_code": code,
                "error_message": None,
                "entity": [
                    {"entity_type": e.entity_type, "entity_name": e.entity_name}
                    for e in entry.entity
                ],
            }
            for entry in req.entries
        ],
    }
