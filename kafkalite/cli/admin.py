"""``kafkalite``: the admin CLI.

kafkalite topics --bootstrap-server HOST:PORT --list | --create --topic T [--partitions N]
                 [--replication-factor R] [--config k=v ...] | --delete --topic T | --describe [--topic T]
kafkalite configs --bootstrap-server HOST:PORT --entity-type topics --entity-name T
                 [--describe | --alter --add-config k=v[,k=v] | --delete-config k[,k]]
kafkalite configs --bootstrap-server HOST:PORT --entity-type clients|users
                 (--entity-name X | --entity-default) [--entity-type ... --entity-name ...]
                 [--describe | --alter --add-config producer_byte_rate=N[,k=v] | --delete-config k]
                 (also --client X / --user X / --client-defaults / --user-defaults, as kafka-configs.sh)
                 users also: --add-config 'SCRAM-SHA-256=[iterations=8192,password=P]'
                 | --delete-config SCRAM-SHA-256 (--describe shows mechanism and iterations)
kafkalite groups --bootstrap-server HOST:PORT --list | --describe --group G [--members]
                 | --reset-offsets --group G --topic T (--to-earliest|--to-latest|--to-offset N
                 |--to-datetime ISO) [--execute]
kafkalite dump-log FILE [--print-data-log] [--verify-index-only]
kafkalite transactions --bootstrap-server HOST:PORT list | describe --transactional-id ID |
                 describe-producers --topic T --partition P | abort --topic T --partition P --start-offset N
kafkalite version
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kafkalite.cli import scram_configs, transactions
from kafkalite.cli.wire_client import WireClient

TOPIC_RESOURCE = 2


def _topics(args: argparse.Namespace) -> int:
    c = WireClient(args.bootstrap_server)
    try:
        if args.create:
            configs = [
                dict(zip(("name", "value"), kv.split("=", 1), strict=True))
                for kv in args.config or []
            ]
            v = c.version_for(19, 7)
            r = c.call(
                19,
                v,
                {
                    "topics": [
                        {
                            "name": args.topic,
                            "num_partitions": args.partitions,
                            "replication_factor": args.replication_factor,
                            "assignments": [],
                            "configs": configs,
                        }
                    ],
                    "timeout": 30000,
                    "validate_only": False,
                },
            )
            t = r.topics[0]
            if t.error_code:
                print(
                    f"Error while creating topic {args.topic}: {t.error_code.name} {t.error_message or ''}",
                    file=sys.stderr,
                )
                return 1
            print(f"Created topic {args.topic}.")
        elif args.delete:
            v = c.version_for(20, 5)
            r = c.call(20, v, {"topic_names": [args.topic], "timeout": 30000})
            code = r.responses[0].error_code
            if code:
                print(f"Error while deleting topic {args.topic}: {code.name}", file=sys.stderr)
                return 1
            print(f"Deleted topic {args.topic}.")
        else:
            v = c.version_for(3, 12)
            topics = None if not args.topic else [{"name": args.topic, "topic_id": None}]
            md = c.call(3, v, {"topics": topics, "allow_auto_topic_creation": False})
            for t in sorted(md.topics, key=lambda t: t.name or ""):
                if args.list:
                    print(t.name)
                    continue
                if t.error_code:
                    print(f"Topic: {t.name}\tError: {t.error_code.name}")
                    continue
                print(
                    f"Topic: {t.name}\tTopicId: {t.topic_id}\tPartitionCount: {len(t.partitions)}\t"
                    f"ReplicationFactor: {len(t.partitions[0].replica_nodes) if t.partitions else 0}"
                )
                for p in sorted(t.partitions, key=lambda p: p.partition_index):
                    print(
                        f"\tTopic: {t.name}\tPartition: {p.partition_index}\tLeader: {p.leader_id}\t"
                        f"Replicas: {','.join(map(str, p.replica_nodes))}\tIsr: {','.join(map(str, p.isr_nodes))}"
                    )
        return 0
    finally:
        c.close()


#: kafka-configs.sh's quota entity types and their protocol names
_QUOTA_TYPES = {"clients": "client-id", "users": "user", "ips": "ip"}
_DESCRIBE_CLIENT_QUOTAS, _ALTER_CLIENT_QUOTAS = 48, 49
_MATCH_EXACT, _MATCH_DEFAULT, _MATCH_ANY = 0, 1, 2


class _EntityName(argparse.Action):
    """--entity-name X / --entity-default: one list, in order, paired with --entity-type."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        names = list(getattr(namespace, "entity_names", None) or [])
        names.append(None if option_string == "--entity-default" else values)
        namespace.entity_names = names


def _quota_entity(args: argparse.Namespace) -> list[tuple[str, str | None, bool]]:
    """``[(protocol type, name or None for the default, named)]``; ``named`` False: no
    name given (describe all of that type). Raises ValueError on a bad combination."""
    out: list[tuple[str, str | None, bool]] = []
    types = list(args.entity_type or [])
    names = list(args.entity_names or [])
    for i, t in enumerate(types):
        if t not in _QUOTA_TYPES:
            raise ValueError(f"--entity-type {t} cannot be combined with quota entity types")
        if i < len(names):
            out.append((_QUOTA_TYPES[t], names[i], True))
        else:
            out.append((_QUOTA_TYPES[t], None, False))
    if args.user is not None or args.user_defaults:
        out.append(("user", args.user, True))
    if args.client is not None or args.client_defaults:
        out.append(("client-id", args.client, True))
    if not out:
        raise ValueError("an --entity-type clients|users (or --client/--user) is required")
    if len({t for t, _, _ in out}) != len(out):
        raise ValueError("an entity type may be given once")
    return sorted(out, key=lambda e: e[0] != "user")  # user first, as Kafka prints it


def _describe_entity(entity: Any) -> str:
    parts = []
    for e in entity:
        what = "user-principal" if e.entity_type == "user" else e.entity_type
        parts.append(
            f"the default {what}" if e.entity_name is None else f"{what} '{e.entity_name}'"
        )
    return ", ".join(parts)


def _quota_configs(args: argparse.Namespace) -> int:
    try:
        entity = _quota_entity(args)
    except ValueError as bad:
        print(f"Error: {bad}", file=sys.stderr)
        return 2
    c = WireClient(args.bootstrap_server)
    # a user's SCRAM credentials (kafka-configs.sh's SCRAM-SHA-256=[...] entries)
    user = entity[0][1] if len(entity) == 1 and entity[0][0] == "user" else None
    adds = scram_configs.split_configs(args.add_config)
    dels = scram_configs.split_configs(args.delete_config)
    scram_adds = [a for a in adds if scram_configs.is_scram(a)]
    scram_dels = [d for d in dels if scram_configs.is_scram(d)]
    try:
        if args.alter and user is not None and (scram_adds or scram_dels):
            try:
                code, message = scram_configs.alter(c, user, scram_adds, scram_dels)
            except ValueError as bad:
                print(f"Error: {bad}", file=sys.stderr)
                return 2
            if code:
                print(f"Error: {message}", file=sys.stderr)
                return 1
            args.add_config = [a for a in adds if not scram_configs.is_scram(a)]
            args.delete_config = [d for d in dels if not scram_configs.is_scram(d)]
            if not args.add_config and not args.delete_config:
                print(f"Completed updating config for user {user}.")
                return 0
        elif scram_adds or scram_dels:
            print("Error: SCRAM credentials belong to one named user", file=sys.stderr)
            return 2
        if args.alter:
            if any(not named for _, _, named in entity):
                print("Error: --alter needs --entity-name or --entity-default", file=sys.stderr)
                return 2
            ops: list[dict[str, Any]] = []
            for kv in ",".join(args.add_config or []).split(","):
                if kv:
                    k, _, v = kv.partition("=")
                    try:
                        value = float(v)
                    except ValueError:
                        print(f"Error: {k} needs a number, not {v!r}", file=sys.stderr)
                        return 2
                    ops.append({"key": k.strip(), "value": value, "remove": False})
            for k in ",".join(args.delete_config or []).split(","):
                if k:
                    ops.append({"key": k.strip(), "value": 0.0, "remove": True})
            wire_entity = [{"entity_type": t, "entity_name": n} for t, n, _ in entity]
            r = c.call(
                _ALTER_CLIENT_QUOTAS,
                c.version_for(_ALTER_CLIENT_QUOTAS, 1),
                {"entries": [{"entity": wire_entity, "ops": ops}], "validate_only": False},
            )
            res = r.entries[0]
            if res.error_code:
                print(f"Error: {res.error_code.name} {res.error_message or ''}", file=sys.stderr)
                return 1
            print(f"Completed updating config for {_describe_entity(res.entity)}.")
            return 0
        components = [
            {
                "entity_type": t,
                "match_type": (_MATCH_EXACT if n is not None else _MATCH_DEFAULT)
                if named
                else _MATCH_ANY,
                "match": n,
            }
            for t, n, named in entity
        ]
        r = c.call(
            _DESCRIBE_CLIENT_QUOTAS,
            c.version_for(_DESCRIBE_CLIENT_QUOTAS, 1),
            {"components": components, "strict": True},
        )
        if r.error_code:
            print(f"Error: {r.error_code.name} {r.error_message or ''}", file=sys.stderr)
            return 1
        for e in r.entries or ():
            values = ", ".join(f"{v.key}={float(v.value)}" for v in e.values)
            print(f"Quota configs for {_describe_entity(e.entity)} are {values}")
        if [t for t, _, _ in entity] == ["user"] and (entity[0][1] or not entity[0][2]):
            name = entity[0][1]  # None: every user
            for line in scram_configs.describe_lines(c, None if name is None else [name]):
                print(line)
        return 0
    finally:
        c.close()


def _configs(args: argparse.Namespace) -> int:
    types = list(args.entity_type or [])
    if (
        any(t in _QUOTA_TYPES for t in types)
        or args.client is not None
        or args.user is not None
        or args.client_defaults
        or args.user_defaults
    ):
        return _quota_configs(args)
    if types not in (["topics"], ["topic"]) or len(args.entity_names or []) != 1:
        print(
            "--entity-type topics --entity-name T, or --entity-type clients|users",
            file=sys.stderr,
        )
        return 2
    args.entity_name = args.entity_names[0]
    if args.entity_name is None:
        print("topics have no default entity", file=sys.stderr)
        return 2
    c = WireClient(args.bootstrap_server)
    try:
        if args.alter:
            ops: list[dict[str, Any]] = []
            for kv in ",".join(args.add_config or []).split(","):
                if kv:
                    k, v = kv.split("=", 1)
                    ops.append({"name": k, "config_operation": 0, "value": v})
            for k in ",".join(args.delete_config or []).split(","):
                if k:
                    ops.append({"name": k, "config_operation": 1, "value": None})
            r = c.call(
                44,
                c.version_for(44, 1),
                {
                    "resources": [
                        {
                            "resource_type": TOPIC_RESOURCE,
                            "resource_name": args.entity_name,
                            "configs": ops,
                        }
                    ],
                    "validate_only": False,
                },
            )
            res = r.responses[0]
            if res.error_code:
                print(f"Error: {res.error_code.name} {res.error_message or ''}", file=sys.stderr)
                return 1
            print(f"Completed updating config for topic {args.entity_name}.")
            return 0
        r = c.call(
            32,
            c.version_for(32, 4),
            {
                "resources": [
                    {
                        "resource_type": TOPIC_RESOURCE,
                        "resource_name": args.entity_name,
                        "configuration_keys": None,
                    }
                ],
                "include_synonyms": False,
                "include_documentation": False,
            },
        )
        res = r.results[0]
        if res.error_code:
            print(f"Error: {res.error_code.name} {res.error_message or ''}", file=sys.stderr)
            return 1
        print(f"All configs for topic {args.entity_name} are:")
        for e in res.configs:
            print(f"  {e.name}={e.value}")
        return 0
    finally:
        c.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kafkalite", description="kafkalite admin tool")
    sub = ap.add_subparsers(dest="cmd", required=True)

    t = sub.add_parser("topics", help="list, describe, create and delete topics")
    t.add_argument("--bootstrap-server", required=True)
    g = t.add_mutually_exclusive_group(required=True)
    g.add_argument("--list", action="store_true")
    g.add_argument("--describe", action="store_true")
    g.add_argument("--create", action="store_true")
    g.add_argument("--delete", action="store_true")
    t.add_argument("--topic")
    t.add_argument("--partitions", type=int, default=-1)
    t.add_argument("--replication-factor", type=int, default=-1)
    t.add_argument("--config", action="append", metavar="KEY=VALUE")

    c = sub.add_parser("configs", help="describe and alter topic configs and client quotas")
    c.add_argument("--bootstrap-server", required=True)
    c.add_argument("--entity-type", action="append", help="topics, clients or users")
    c.add_argument("--entity-name", action=_EntityName, dest="entity_names")
    c.add_argument("--entity-default", action=_EntityName, nargs=0, dest="entity_names")
    c.add_argument("--client")
    c.add_argument("--user")
    c.add_argument("--client-defaults", action="store_true")
    c.add_argument("--user-defaults", action="store_true")
    c.add_argument("--describe", action="store_true")
    c.add_argument("--alter", action="store_true")
    c.add_argument("--add-config", action="append")
    c.add_argument("--delete-config", action="append")

    from kafkalite.cli import groups

    gp = sub.add_parser("groups", help="list, describe and reset offsets of consumer groups")
    groups.add_arguments(gp)

    d = sub.add_parser("dump-log", help="print the batches and records of a segment file")
    try:
        from kafkalite.cli import dump_log
    except ImportError:  # pragma: no cover - the module ships with kafkalite
        dump_log = None  # type: ignore[assignment]
    if dump_log is not None and hasattr(dump_log, "add_arguments"):
        dump_log.add_arguments(d)
    else:
        d.add_argument("files", nargs="+")

    x = sub.add_parser("transactions", help="list, describe and abort transactions")
    transactions.add_arguments(x)

    sub.add_parser("version", help="print the kafkalite version")

    args, rest = ap.parse_known_args(argv)
    if args.cmd == "topics":
        if (args.create or args.delete) and not args.topic:
            ap.error("--topic is required with --create/--delete")
        return _topics(args)
    if args.cmd == "configs":
        return _configs(args)
    if args.cmd == "groups":
        return groups.run(args)
    if args.cmd == "transactions":
        return transactions.run(args)
    if args.cmd == "dump-log":
        if dump_log is None or not hasattr(dump_log, "main"):
            print("dump-log is not available in this build", file=sys.stderr)
            return 2
        return int(dump_log.main(list(argv if argv is not None else sys.argv[1:])[1:]))
    if args.cmd == "version":
        from importlib.metadata import version

        print(version("kafkalite"))
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
