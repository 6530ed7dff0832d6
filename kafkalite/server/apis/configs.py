"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44).

Topic configs use Kafka's names, defaults and validation (the log layer's
TOPIC_CONFIG_DEFS); the value a topic reports falls back from its override to
the broker's ``log.*`` setting to Kafka's default, with the matching source.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalite.log.log_config import TOPIC_CONFIG_DEFS
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.server.config import CONFIG_DEFS, ConfigError

if TYPE_CHECKING:
    from kafkalite.server.broker import KafkaBroker
    from kafkalite.server.request_channel import RequestContext

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

# config sources
SRC_TOPIC = 1
SRC_DYNAMIC_BROKER = 2
SRC_STATIC_BROKER = 4
SRC_DEFAULT = 5

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3

_BROKER_TYPE_CODES = {
    "bool": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "password": 9,
}


def handle_describe_configs(broker: KafkaBroker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    results = []
    for res in req.resources:
        rtype, name = int(res.resource_type), res.resource_name
        # null or empty both mean "all", as in Kafka's ConfigHelper
        keys = set(res.configuration_keys) if res.configuration_keys else None
        base = {"resource_type": rtype, "resource_name": name}
        try:
            if rtype == TOPIC:
                configs = _describe_topic(broker, name, keys, req)
            elif rtype == BROKER:
                _check_broker_name(broker, name)
                configs = _describe_broker(broker, keys, req)
            elif rtype == BROKER_LOGGER:
                _check_broker_name(broker, name)
                configs = []
            else:
                raise KafkaError(ErrorCode.invalid_request, f"unsupported resource type {rtype}")
            results.append({**base, "error_code": 0, "error_message": None, "configs": configs})
        except KafkaError as e:
            results.append(
                {**base, "error_code": e.code, "error_message": e.message, "configs": []}
            )
    return {"throttle_time": 0, "results": results}


def _check_broker_name(broker: KafkaBroker, name: str) -> None:
    if name not in ("", str(broker.broker_id)):
        raise KafkaError(
            ErrorCode.invalid_request, f"broker {name} is not this broker ({broker.broker_id})"
        )


def _describe_topic(
    broker: KafkaBroker, name: str, keys: set[str] | None, req: Any
) -> list[dict[str, Any]]:
    if name not in broker.metadata_cache.topics:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
    overrides = broker.admin.topic_configs.get(name, {})
    effective = broker.admin.log_config(name)
    out = []
    for d in TOPIC_CONFIG_DEFS.values():
        if keys is not None and d.name not in keys:
            continue
        value = d.render(getattr(effective, d.field))
        synonyms = []
        if d.name in overrides:
            source = SRC_TOPIC
            synonyms.append({"name": d.name, "value": value, "source": SRC_TOPIC})
        else:
            source = SRC_DEFAULT
        for syn in d.synonyms:
            if broker.config.is_explicit(syn.name):
                if source == SRC_DEFAULT:
                    source = SRC_STATIC_BROKER
                synonyms.append(
                    {
                        "name": syn.name,
                        "value": _render_broker(broker.config[syn.name]),
                        "source": SRC_STATIC_BROKER,
                    }
                )
        if not getattr(req, "include_synonyms", False):
            synonyms = []
        out.append(
            {
                "name": d.name,
                "value": value,
                "read_only": False,
                "config_source": source,
                "is_sensitive": False,
                "synonyms": synonyms,
                "config_type": int(d.type),
                "documentation": d.doc if getattr(req, "include_documentation", False) else None,
            }
        )
    return out


def _render_broker(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, list):
        return ",".join(v)
    return str(v)


def _describe_broker(broker: KafkaBroker, keys: set[str] | None, req: Any) -> list[dict[str, Any]]:
    out = []
    cfg = broker.config
    for d in CONFIG_DEFS.values():
        if keys is not None and d.name not in keys:
            continue
        if d.name in broker.dynamic_broker_configs:
            source = SRC_DYNAMIC_BROKER
        elif cfg.is_explicit(d.name):
            source = SRC_STATIC_BROKER
        else:
            source = SRC_DEFAULT
        out.append(
            {
                "name": d.name,
                "value": _render_broker(cfg[d.name]),
                "read_only": not d.dynamic,
                "config_source": source,
                "is_sensitive": d.type == "password",
                "synonyms": [],
                "config_type": _BROKER_TYPE_CODES.get(d.type, 0),
                "documentation": d.doc if getattr(req, "include_documentation", False) else None,
            }
        )
    return out


async def handle_alter_configs(
    broker: KafkaBroker, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    responses = []
    for res in req.resources:
        rtype, name = int(res.resource_type), res.resource_name
        try:
            new = {c.name: c.value for c in res.configs}
            await _apply(broker, rtype, name, lambda _old, new=new: dict(new), req.validate_only)
            responses.append(
                {
                    "error_code": 0,
                    "error_message": None,
                    "resource_type": rtype,
                    "resource_name": name,
                }
            )
        except KafkaError as e:
            responses.append(
                {
                    "error_code": e.code,
                    "error_message": e.message,
                    "resource_type": rtype,
                    "resource_name": name,
                }
            )
    return {"throttle_time": 0, "responses": responses}


async def handle_incremental_alter_configs(
    broker: KafkaBroker, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    responses = []
    for res in req.resources:
        rtype, name = int(res.resource_type), res.resource_name
        try:
            ops = [(c.name, int(c.config_operation), c.value) for c in res.configs]
            if len({n for n, _, _ in ops}) != len(ops):
                raise KafkaError(ErrorCode.invalid_request, "a config name appears twice")
            await _apply(
                broker,
                rtype,
                name,
                lambda old, ops=ops, rtype=rtype: _incremental(rtype, old, ops),
                req.validate_only,
            )
            responses.append(
                {
                    "error_code": 0,
                    "error_message": None,
                    "resource_type": rtype,
                    "resource_name": name,
                }
            )
        except KafkaError as e:
            responses.append(
                {
                    "error_code": e.code,
                    "error_message": e.message,
                    "resource_type": rtype,
                    "resource_name": name,
                }
            )
    return {"throttle_time": 0, "responses": responses}


def _incremental(
    rtype: int, old: dict[str, str], ops: list[tuple[str, int, str | None]]
) -> dict[str, Any]:
    out: dict[str, Any] = dict(old)
    for name, op, value in ops:
        if op == OP_SET:
            out[name] = value
        elif op == OP_DELETE:
            out.pop(name, None)
        elif op in (OP_APPEND, OP_SUBTRACT):
            d = TOPIC_CONFIG_DEFS.get(name) if rtype == TOPIC else None
            is_list = (d is not None and d.type.name == "LIST") or (
                rtype == BROKER and name in CONFIG_DEFS and CONFIG_DEFS[name].type == "list"
            )
            if not is_list:
                raise KafkaError(
                    ErrorCode.invalid_config,
                    f"Config value append/subtract is not allowed for config key: {name}",
                )
            current = out.get(name)
            if current is None and d is not None:
                current = d.render(d.default)
            items = [x for x in str(current or "").split(",") if x]
            change = [x for x in str(value or "").split(",") if x]
            if op == OP_APPEND:
                items += [x for x in change if x not in items]
            else:
                items = [x for x in items if x not in change]
            out[name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.invalid_request, f"unknown config operation {op}")
    return out


async def _apply(
    broker: KafkaBroker, rtype: int, name: str, change: Any, validate_only: bool
) -> None:
    if rtype == TOPIC:
        if name not in broker.metadata_cache.topics:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist."
            )
        new = change(broker.admin.topic_configs.get(name, {}))
        for k, v in new.items():
            if v is None:
                raise KafkaError(
                    ErrorCode.invalid_config, f"Null value not supported for topic configs: {k}"
                )
        broker.admin.validate_topic_configs(new)
        if not validate_only:
            await broker.admin.write_topic_config(name, {k: str(v) for k, v in new.items()})
    elif rtype == BROKER:
        _check_broker_name(broker, name)
        new = change(dict(broker.dynamic_broker_configs))
        try:
            for k in new:
                d = CONFIG_DEFS.get(k)
                if d is None:
                    raise ConfigError(k, "unknown configuration key")
                if not d.dynamic:
                    raise ConfigError(k, "cannot be updated dynamically")
        except ConfigError as e:
            raise KafkaError(ErrorCode.invalid_config, str(e)) from None
        if not validate_only:
            await broker.set_dynamic_broker_configs(new)
    elif rtype == BROKER_LOGGER:
        raise KafkaError(ErrorCode.invalid_request, "broker logger configs are not supported")
    else:
        raise KafkaError(ErrorCode.invalid_request, f"unsupported resource type {rtype}")
