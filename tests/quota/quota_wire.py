"""AlterClientQuotas / DescribeClientQuotas built with kio (no Python client has a quota
admin call), over the raw wire client of the group tests."""

from __future__ import annotations

from typing import Any

from tests.coordinator.wire import Wire

ALTER, DESCRIBE = 49, 48
Entity = dict[str, str | None]  # {"user": "alice", "client-id": None (default)}


def entity_wire(entity: Entity) -> list[dict[str, Any]]:
    return [{"entity_type": t, "entity_name": n} for t, n in entity.items()]


async def alter(
    w: Wire,
    entity: Entity,
    set_: dict[str, float] | None = None,
    remove: list[str] = (),  # type: ignore[assignment]
    validate_only: bool = False,
    version: int = 1,
) -> Any:
    ops = [{"key": k, "value": float(v), "remove": False} for k, v in (set_ or {}).items()]
    ops += [{"key": k, "value": 0.0, "remove": True} for k in remove]
    resp = await w.call(
        ALTER,
        version,
        {
            "entries": [{"entity": entity_wire(entity), "ops": ops}],
            "validate_only": validate_only,
        },
    )
    return resp.entries[0]


async def describe(
    w: Wire, components: list[tuple[str, int, str | None]], strict: bool = False, version: int = 1
) -> Any:
    return await w.call(
        DESCRIBE,
        version,
        {
            "components": [
                {"entity_type": t, "match_type": m, "match": n} for t, m, n in components
            ],
            "strict": strict,
        },
    )


def entries(resp: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    """A describe response as ``{((type, name), ...): {key: value}}``."""
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: float(v.value) for v in entry.values
        }
        for entry in resp.entries
    }
