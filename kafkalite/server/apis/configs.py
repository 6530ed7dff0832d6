"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44).

Topic configs use Kafka's names, defaults and validation (the log layer's
TOPIC_CONFIG_DEFS). Each reported value carries Kafka's config source, worked
out as Kafka's ConfigHelper does: the synonyms of a config are listed from the
highest layer down (topic override, dynamic per-broker, dynamic cluster
default, static file, Kafka default), leading entries for other names are
dropped, and the first one left is the source. Passwords are never returned.

Changes are validated in full before anything is written: a bad value gets
INVALID_CONFIG with a message and leaves every config as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from kafkalite.coordinator.group import group_configs
from kafkalite.coordinator.group.group_configs import GROUP
from kafkalite.log.errors import ConfigError as LogConfigError
from kafkalite.log.log_config import TOPIC_CONFIG_DEFS, LogConfig
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.server.config import CONFIG_DEFS, ConfigError, broker_synonyms

if TYPE_CHECKING:
    from kafkalite.coordinator.group.group_configs import GroupConfigs
    from kafkalite.coordinator.group.group_coordinator import GroupCoordinator
    from kafkalite.coordinator.group.group_metadata_manager import GroupConfig
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.server.admin_manager import AdminManager
    from kafkalite.server.apis.request_types import (
        AlterConfigsRequest,
        DescribeConfigsRequest,
        IncrementalAlterConfigsRequest,
    )
    from kafkalite.server.config import BrokerConfig
    from kafkalite.server.dynamic_broker_config import DynamicBrokerConfig
    from kafkalite.server.metadata_cache import MetadataCache

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

# config sources (DescribeConfigsResponse.ConfigSource)
SRC_TOPIC = 1
SRC_DYNAMIC_BROKER = 2
SRC_DYNAMIC_DEFAULT_BROKER = 3
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

Synonym = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ConfigDeps:
    broker_id: int
    config: BrokerConfig
    metadata_cache: MetadataCache
    admin: AdminManager
    dynamic_config: DynamicBrokerConfig
    #: GROUP resources: the coordinator's group configs and its broker bounds
    group_coordinator: GroupCoordinator | None = None


def _group_store(deps: ConfigDeps, name: str) -> tuple[GroupConfigs, GroupConfig]:
    gc = deps.group_coordinator
    if gc is None or gc.group_config_store is None:
        raise KafkaError(ErrorCode.invalid_request, f"Unsupported resource type: {GROUP}")
    if not name:
        raise KafkaError(ErrorCode.invalid_request, "Group name must not be empty")
    return gc.group_config_store, gc.config


# ---- DescribeConfigs ---------------------------------------------------------
def handle_describe_configs(
    deps: ConfigDeps, ctx: RequestContext, req: DescribeConfigsRequest
) -> dict[str, Any]:
    include_synonyms = bool(getattr(req, "include_synonyms", False))
    include_docs = bool(getattr(req, "include_documentation", False))
    results = []
    for res in req.resources:
        rtype, name = int(res.resource_type), res.resource_name
        # null or empty both mean "all", as in Kafka's ConfigHelper
        keys = set(res.configuration_keys) if res.configuration_keys else None
        base = {"resource_type": rtype, "resource_name": name}
        try:
            if rtype == TOPIC:
                if name not in deps.metadata_cache.topics:
                    raise KafkaError(
                        ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist."
                    )
                configs = topic_config_entries(
                    deps.config,
                    deps.admin.topic_configs.get(name, {}),
                    deps.admin.log_config(name),
                    include_synonyms=include_synonyms,
                    include_docs=include_docs,
                    keys=keys,
                )
            elif rtype == BROKER:
                per_broker = _broker_resource(deps, name)
                configs = _describe_broker(
                    deps.config, per_broker, keys, include_synonyms, include_docs
                )
            elif rtype == GROUP:
                store, bounds = _group_store(deps, name)
                configs = store.describe(
                    name,
                    bounds,
                    keys,
                    include_synonyms,
                    include_docs,
                    lambda key: SRC_STATIC_BROKER if deps.config.is_explicit(key) else SRC_DEFAULT,
                )
            elif rtype == BROKER_LOGGER:
                if not name:
                    raise KafkaError(ErrorCode.invalid_request, "Broker id must not be empty")
                _broker_resource(deps, name)
                configs = []  # loggers are not exposed (see docs/status.md)
            else:
                raise KafkaError(ErrorCode.invalid_request, f"Unsupported resource type: {rtype}")
            results.append({**base, "error_code": 0, "error_message": None, "configs": configs})
        except KafkaError as e:
            results.append(
                {**base, "error_code": e.code, "error_message": e.message, "configs": []}
            )
    return {"throttle_time": 0, "results": results}


def _broker_resource(deps: ConfigDeps, name: str) -> bool:
    """True for this broker's id, False for "" (the cluster-wide dynamic defaults)."""
    if not name:
        return False
    try:
        broker_id = int(name)
    except ValueError:
        raise KafkaError(
            ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if broker_id != deps.broker_id:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {deps.broker_id} or empty string, but received {name}",
        )
    return True


def render_broker_value(v: Any) -> str | None:
    """Kafka's ConfigDef.convertToString."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ",".join(v)
    if isinstance(v, float):
        return repr(v).replace("e+", "E").replace("e-", "E-")
    return str(v)


def _config_synonyms(
    cfg: BrokerConfig, name: str, names: tuple[str, ...], sensitive: bool
) -> list[Synonym]:
    """Kafka's ConfigHelper.configSynonyms: every layer that sets one of ``names``."""
    out: list[Synonym] = []

    def add(n: str, value: Any, source: int) -> None:
        out.append(
            {
                "name": n,
                "value": None if sensitive else render_broker_value(value),
                "source": source,
            }
        )

    for n in names:
        if cfg.has_dynamic(n, per_broker=True):
            add(n, cfg.dynamic_value(n, per_broker=True), SRC_DYNAMIC_BROKER)
    for n in names:
        if cfg.has_dynamic(n, per_broker=False):
            add(n, cfg.dynamic_value(n, per_broker=False), SRC_DYNAMIC_DEFAULT_BROKER)
    for n in names:
        if cfg.is_static(n):
            add(n, cfg.static_value(n), SRC_STATIC_BROKER)
    for n in names:
        d = CONFIG_DEFS.get(n)
        if d is not None and d.default is not None:
            add(n, d.default, SRC_DEFAULT)
    # drop leading entries for other names (Kafka: "drop listener overrides ...")
    while out and out[0]["name"] != name:
        out.pop(0)
    return out


def topic_config_entries(
    cfg: BrokerConfig,
    overrides: Mapping[str, str],
    effective: LogConfig,
    *,
    include_synonyms: bool = False,
    include_docs: bool = False,
    keys: set[str] | None = None,
) -> list[dict[str, Any]]:
    """Every topic config with value and source (DescribeConfigs and CreateTopics)."""
    out = []
    for d in TOPIC_CONFIG_DEFS.values():
        if keys is not None and d.name not in keys:
            continue
        value = d.render(getattr(effective, d.field))
        synonyms: list[Synonym] = []
        if d.name in overrides:
            synonyms.append({"name": d.name, "value": value, "source": SRC_TOPIC})
        if d.synonyms:
            primary = d.synonyms[0].name
            synonyms += _config_synonyms(cfg, primary, broker_synonyms(primary), False)
        out.append(
            {
                "name": d.name,
                "value": value,
                "read_only": False,
                "config_source": synonyms[0]["source"] if synonyms else SRC_DEFAULT,
                "is_sensitive": False,
                "synonyms": synonyms if include_synonyms else [],
                "config_type": int(d.type),
                "documentation": d.doc if include_docs else None,
            }
        )
    return out


def _describe_broker(
    cfg: BrokerConfig,
    per_broker: bool,
    keys: set[str] | None,
    include_synonyms: bool,
    include_docs: bool,
) -> list[dict[str, Any]]:
    out = []
    for d in CONFIG_DEFS.values():
        if keys is not None and d.name not in keys:
            continue
        if per_broker:
            value = cfg[d.name]
        elif cfg.has_dynamic(d.name, per_broker=False):
            value = cfg.dynamic_value(d.name, per_broker=False)
        else:
            continue  # "" describes only the cluster-wide dynamic defaults
        sensitive = d.type == "password"
        synonyms = _config_synonyms(cfg, d.name, broker_synonyms(d.name), sensitive)
        if not per_broker:
            synonyms = [s for s in synonyms if s["source"] == SRC_DYNAMIC_DEFAULT_BROKER]
        out.append(
            {
                "name": d.name,
                "value": None if sensitive else render_broker_value(value),
                "read_only": not d.dynamic,
                "config_source": synonyms[0]["source"] if synonyms else SRC_DEFAULT,
                "is_sensitive": sensitive,
                "synonyms": synonyms if include_synonyms else [],
                "config_type": _BROKER_TYPE_CODES.get(d.type, 0),
                "documentation": d.doc if include_docs else None,
            }
        )
    return out


# ---- AlterConfigs / IncrementalAlterConfigs -------------------------------------
Change = Callable[[dict[str, str]], dict[str, Any]]


def _replace_all(new: dict[str, Any], _old: dict[str, str]) -> dict[str, Any]:
    """AlterConfigs: the request's set replaces the whole config."""
    return dict(new)


def _incremental_change(
    rtype: int, ops: list[tuple[str, int, str | None]], old: dict[str, str]
) -> dict[str, Any]:
    return _incremental(rtype, old, ops)


async def handle_alter_configs(
    deps: ConfigDeps, ctx: RequestContext, req: AlterConfigsRequest
) -> dict[str, Any]:
    responses = []
    for res in req.resources:
        rtype, name = int(res.resource_type), res.resource_name
        try:
            new = {c.name: c.value for c in res.configs}
            await _apply(deps, rtype, name, partial(_replace_all, new), req.validate_only)
            responses.append(_alter_result(rtype, name))
        except KafkaError as e:
            responses.append(_alter_result(rtype, name, e))
    return {"throttle_time": 0, "responses": responses}


async def handle_incremental_alter_configs(
    deps: ConfigDeps, ctx: RequestContext, req: IncrementalAlterConfigsRequest
) -> dict[str, Any]:
    responses = []
    for res in req.resources:
        rtype, name = int(res.resource_type), res.resource_name
        try:
            ops = [(c.name, int(c.config_operation), c.value) for c in res.configs]
            if len({n for n, _, _ in ops}) != len(ops):
                raise KafkaError(
                    ErrorCode.invalid_request,
                    "Error due to duplicate config keys",
                )
            await _apply(
                deps,
                rtype,
                name,
                partial(_incremental_change, rtype, ops),
                req.validate_only,
            )
            responses.append(_alter_result(rtype, name))
        except KafkaError as e:
            responses.append(_alter_result(rtype, name, e))
    return {"throttle_time": 0, "responses": responses}


def _alter_result(rtype: int, name: str, e: KafkaError | None = None) -> dict[str, Any]:
    return {
        "error_code": 0 if e is None else e.code,
        "error_message": None if e is None else e.message,
        "resource_type": rtype,
        "resource_name": name,
    }


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
            raise KafkaError(ErrorCode.invalid_request, f"Unknown alter configs operation {op}")
    return out


async def _apply(
    deps: ConfigDeps, rtype: int, name: str, change: Change, validate_only: bool
) -> None:
    """Validate the whole new config set, then (unless validate_only) write it."""
    if rtype == TOPIC:
        if name not in deps.metadata_cache.topics:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist."
            )
        new = change(deps.admin.topic_configs.get(name, {}))
        for k, v in new.items():
            if v is None:
                raise KafkaError(
                    ErrorCode.invalid_config, f"Null value not supported for topic configs: {k}"
                )
        deps.admin.validate_topic_configs(new)
        if not validate_only:
            await deps.admin.write_topic_config(name, {k: str(v) for k, v in new.items()})
    elif rtype == BROKER:
        per_broker = _broker_resource(deps, name)
        dynamic = deps.dynamic_config
        layer = dynamic.per_broker if per_broker else dynamic.cluster_default
        new = change(dict(layer))
        _validate_broker_configs(deps, new, per_broker)
        if not validate_only:
            await dynamic.set({k: str(v) for k, v in new.items()}, per_broker=per_broker)
    elif rtype == GROUP:
        store, bounds = _group_store(deps, name)
        new = change(dict(store.get(name)))
        valid = group_configs.validate(new, bounds)
        if not validate_only:
            await store.write(name, valid)
    elif rtype == BROKER_LOGGER:
        raise KafkaError(ErrorCode.invalid_request, "broker logger configs are not supported")
    else:
        raise KafkaError(ErrorCode.invalid_request, f"Unsupported resource type: {rtype}")


def _validate_broker_configs(deps: ConfigDeps, new: dict[str, Any], per_broker: bool) -> None:
    """Every key dynamic, every value valid, and the topic defaults they imply consistent."""
    try:
        candidate = deps.dynamic_config.candidate(new, per_broker=per_broker)
        props = {
            k: render_broker_value(v)
            for k, v in candidate.items()
            if v is not None and candidate.is_explicit(k)
        }
        LogConfig.from_broker_properties(props)
    except ConfigError as e:
        raise KafkaError(ErrorCode.invalid_config, str(e)) from None
    except LogConfigError as e:
        raise KafkaError(ErrorCode.invalid_config, str(e)) from None


# ---- error responses ----------------------------------------------------------------
def describe_configs_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """Every requested resource in error, with no configs."""
    return {
        "throttle_time": 0,
        "results": [
            {
                "error_code": code,
                "error_message": None,
                "resource_type": int(r.resource_type),
                "resource_name": r.resource_name,
                "configs": [],
            }
            for r in req.resources
        ],
    }


def alter_configs_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """Every resource of an AlterConfigs or IncrementalAlterConfigs request in error."""
    return {
        "throttle_time": 0,
        "responses": [
            {
                "error_code": code,
                "error_message": None,
                "resource_type": int(r.resource_type),
                "resource_name": r.resource_name,
            }
            for r in req.resources
        ],
    }
