"""``kafkalite configs`` for topics, brokers (each or ``--entity-default``), broker
loggers and groups, as ``kafka-configs.sh`` (ConfigCommand) prints them:

    Dynamic configs for topic T are:
      retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000}

``--describe`` shows the entity's dynamic overrides only, ``--all`` every config.
The requests go through kafkalite's small wire client rather than confluent-kafka:
its Python ConfigEntry keys synonyms by name, which drops the per-source synonyms
(``DYNAMIC_BROKER_CONFIG`` and ``DEFAULT_CONFIG`` of one name) this output shows.
A broker's own configs are asked of that broker, as Kafka's admin client does.
"""

from __future__ import annotations

import argparse
from typing import Any

from kafkalite.cli.common import CliError
from kafkalite.cli.wire_client import WireClient

METADATA, LIST_GROUPS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 3, 16, 32, 44
#: ConfigResource.Type codes
RESOURCE = {"topics": 2, "brokers": 4, "broker-loggers": 8, "groups": 32}
#: DescribeConfigsResponse config sources, by code (Kafka's ConfigEntry.ConfigSource names)
SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
_ALIASES = {
    "topic": "topics",
    "broker": "brokers",
    "group": "groups",
    "broker-logger": "broker-loggers",
}


def _entity(args: argparse.Namespace) -> tuple[str, list[str | None] | None]:
    """(entity type, [names] or None for all); None in names = the default entity."""
    types = [_ALIASES.get(t, t) for t in args.entity_type or []]
    names: list[str | None] = list(args.entity_names or [])
    for flag, etype in (("topic", "topics"), ("broker", "brokers"), ("group", "groups")):
        if getattr(args, flag, None) is not None:
            types.append(etype)
            names.append(getattr(args, flag))
    if getattr(args, "broker_defaults", False):
        types.append("brokers")
        names.append(None)
    if len(set(types)) != 1:
        raise CliError(
            "give one --entity-type: topics, brokers, broker-loggers, groups, clients, users, ips",
            2,
        )
    etype = types[0]
    if etype not in RESOURCE:
        raise CliError(f"Invalid entity type: {etype}", 2)
    if len(names) > 1:
        raise CliError("give at most one --entity-name or --entity-default", 2)
    if None in names and etype != "brokers":
        raise CliError(f"--entity-default is only for brokers (and quotas), not {etype}", 2)
    if etype == "brokers" and names and names[0] is not None and not str(names[0]).isdigit():
        raise CliError(
            f"The entity name for brokers must be a valid integer broker id, found: {names[0]}", 2
        )
    return etype, (names or None)


class _Brokers:
    """The bootstrap connection and, on demand, one to any broker by id."""

    def __init__(self, bootstrap: str) -> None:
        self.boot = WireClient(bootstrap, timeout=15.0)
        md = self.boot.call(METADATA, self.boot.version_for(METADATA, 9), {"topics": None})
        self.addr = {int(b.node_id): f"{b.host}:{b.port}" for b in md.brokers}
        self.topics = sorted(t.name for t in md.topics)
        self._open: dict[int, WireClient] = {}

    def to(self, node: int | None) -> WireClient:
        if node is None:
            return self.boot
        if node not in self.addr:
            raise CliError(f"broker {node} is not in the cluster (brokers: {sorted(self.addr)})")
        if node not in self._open:
            self._open[node] = WireClient(self.addr[node], timeout=15.0)
        return self._open[node]

    def groups(self) -> list[str]:
        out: set[str] = set()
        for node in self.addr:
            c = self.to(node)
            r = c.call(LIST_GROUPS, c.version_for(LIST_GROUPS, 4), {"states_filter": []})
            out |= {g.group_id for g in r.groups}
        return sorted(out)

    def close(self) -> None:
        for c in [self.boot, *self._open.values()]:
            c.close()


def _split_configs(items: list[str]) -> list[tuple[str, str]]:
    """``k=v,k2=[a,b]``: kafka-configs.sh's --add-config (brackets group list values)."""
    out: list[tuple[str, str]] = []
    for item in items:
        depth, cur, parts = 0, "", []
        for ch in item:
            if ch == "[":
                depth += 1
            elif ch == "]":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        parts.append(cur)
        for p in parts:
            if not p.strip():
                continue
            k, sep, v = p.partition("=")
            if not sep:
                raise CliError(f"--add-config needs KEY=VALUE, not {p!r}", 2)
            v = v.strip()
            if v.startswith("[") and v.endswith("]"):
                v = v[1:-1]
            out.append((k.strip(), v))
    return out


def run(args: argparse.Namespace) -> int:
    etype, names = _entity(args)
    if args.alter == bool(args.describe):
        raise CliError("Command must include exactly one action: --describe, --alter", 2)
    b = _Brokers(args.bootstrap_server)
    try:
        if args.alter:
            if not names:
                raise CliError("--alter needs --entity-name (or --entity-default)", 2)
            return _alter(b, etype, names[0], args)
        if names is None:
            if etype == "topics":
                names = list(b.topics)
            elif etype == "groups":
                names = list(b.groups())
            else:
                names = (
                    [*map(str, sorted(b.addr)), None]
                    if etype == "brokers"
                    else [*map(str, sorted(b.addr))]
                )
        failed = False
        for n in names:
            failed |= _describe(b, etype, n, args.all) != 0
        return 1 if failed else 0
    finally:
        b.close()


def _target(b: _Brokers, etype: str, name: str | None) -> WireClient:
    if etype in ("brokers", "broker-loggers") and name is not None:
        return b.to(int(name))
    return b.boot


def _describe(b: _Brokers, etype: str, name: str | None, describe_all: bool) -> int:
    c = _target(b, etype, name)
    r = c.call(
        DESCRIBE_CONFIGS,
        c.version_for(DESCRIBE_CONFIGS, 4),
        {
            "resources": [
                {
                    "resource_type": RESOURCE[etype],
                    "resource_name": name or "",
                    "configuration_keys": None,
                }
            ],
            "include_synonyms": True,
            "include_documentation": False,
        },
    )
    res = r.results[0]
    if res.error_code:
        raise CliError(f"{res.error_code.name}: {res.error_message or ''}".rstrip(": "))
    if name is None:
        print(f"Default configs for {etype} in the cluster are:")
    else:
        print(f"{'All' if describe_all else 'Dynamic'} configs for {etype[:-1]} {name} are:")
    dynamic = {
        "topics": 1,
        "brokers": 2 if name is not None else 3,
        "groups": 8,
        "broker-loggers": None,
    }[etype]
    for e in sorted(res.configs, key=lambda e: e.name):
        if not describe_all and dynamic is not None and int(e.config_source) != dynamic:
            continue
        syn = ", ".join(
            f"{SOURCES.get(int(s.source), s.source)}:{s.name}={_v(s.value)}"
            for s in e.synonyms or ()
        )
        print(
            f"  {e.name}={_v(e.value)} sensitive={str(bool(e.is_sensitive)).lower()} "
            f"synonyms={{{syn}}}"
        )
    return 0


def _v(v: Any) -> str:
    return "null" if v is None else str(v)


def _alter(b: _Brokers, etype: str, name: str | None, args: argparse.Namespace) -> int:
    ops: list[dict[str, Any]] = []
    adds = list(args.add_config or [])
    if getattr(args, "add_config_file", None):
        from kafkalite.cli.common import load_properties

        adds += [f"{k}={v}" for k, v in load_properties(args.add_config_file).items()]
    for k, v in _split_configs(adds):
        ops.append({"name": k, "config_operation": 0, "value": v})
    for item in args.delete_config or []:
        for k in item.split(","):
            if k.strip():
                ops.append({"name": k.strip(), "config_operation": 1, "value": None})
    if not ops:
        raise CliError("--alter needs --add-config or --delete-config", 2)
    c = _target(b, etype, name)
    r = c.call(
        INCREMENTAL_ALTER_CONFIGS,
        c.version_for(INCREMENTAL_ALTER_CONFIGS, 1),
        {
            "resources": [
                {"resource_type": RESOURCE[etype], "resource_name": name or "", "configs": ops}
            ],
            "validate_only": False,
        },
    )
    res = r.responses[0]
    if res.error_code:
        raise CliError(f"{res.error_code.name}: {res.error_message or ''}".rstrip(": "))
    if name is None:
        print(f"Completed updating default config for {etype} in the cluster.")
    else:
        print(f"Completed updating config for {etype[:-1]} {name}.")
    return 0
