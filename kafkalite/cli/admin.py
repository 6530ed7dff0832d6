"""``kafkalite <tool>``: Kafka's command-line tools with their flags and output
(``kafkalite topics`` is ``kafka-topics.sh``...; docs/cli.md lists them).

The dispatcher: :data:`TOOLS` maps a tool to its module under ``kafkalite.cli``
(``add_arguments(parser)``, ``run(args) -> exit code``); ``configs`` (topics, brokers,
groups in ``resource_configs``; client quotas here), ``dump-log`` and ``version`` are
wired below. :func:`main` turns every failure into one line on stderr and an exit
code: 0 done, 1 refused or unreachable, 2 usage.

``configs --entity-type users`` also takes SCRAM credentials
(``--add-config 'SCRAM-SHA-256=[iterations=8192,password=P]'``, ``--delete-config
SCRAM-SHA-256``; ``--describe`` shows mechanism and iterations: ``scram_configs``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from kafkalite.cli import scram_configs, wire_client
from kafkalite.cli.common import CliError, client_security, probe, tool_properties
from kafkalite.cli.wire_client import WireClient

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
    from kafkalite.cli import resource_configs

    return resource_configs.run(args)


#: ``kafkalite <tool>``: module (under kafkalite.cli) with ``add_arguments(parser)`` and
#: ``run(args) -> exit code``, and its help line. A new tool is one row here.
TOOLS: dict[str, tuple[str, str]] = {
    "topics": ("topics", "kafka-topics.sh: list, describe, create, alter and delete topics"),
    "consumer-groups": (
        "consumer_groups",
        "kafka-consumer-groups.sh: list, describe, delete, reset offsets",
    ),
    "groups": ("groups", "list, describe and reset offsets of groups of both protocols"),
    "console-producer": ("console_producer", "kafka-console-producer.sh: stdin to a topic"),
    "console-consumer": ("console_consumer", "kafka-console-consumer.sh: a topic to stdout"),
    "get-offsets": ("get_offsets", "kafka-get-offsets.sh: partition offsets by time"),
    "delete-records": ("delete_records", "kafka-delete-records.sh: move log start offsets"),
    "log-dirs": ("log_dirs", "kafka-log-dirs.sh: replicas and sizes per log dir (JSON)"),
    "reassign-partitions": (
        "reassign_partitions",
        "kafka-reassign-partitions.sh: generate, execute, verify",
    ),
    "leader-election": ("leader_election", "kafka-leader-election.sh: preferred or unclean"),
    "broker-api-versions": ("broker_api_versions", "kafka-broker-api-versions.sh"),
    "producer-perf-test": ("producer_perf_test", "kafka-producer-perf-test.sh"),
    "consumer-perf-test": ("consumer_perf_test", "kafka-consumer-perf-test.sh"),
    "transactions": ("transactions", "kafka-transactions.sh: list, describe, abort"),
    "acls": ("acls", "kafka-acls.sh: add, remove and list ACLs"),
}


def _parser() -> tuple[argparse.ArgumentParser, dict[str, Any]]:
    ap = argparse.ArgumentParser(prog="kafkalite", description="kafkalite admin tools")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="<tool>")
    modules: dict[str, Any] = {}
    for name, (mod, help_) in TOOLS.items():
        m = importlib.import_module(f"kafkalite.cli.{mod}")
        modules[name] = m
        m.add_arguments(sub.add_parser(name, help=help_, description=help_))

    c = sub.add_parser("configs", help="kafka-configs.sh: topic, broker, group configs; quotas")
    c.add_argument("--bootstrap-server", required=True)
    c.add_argument("--command-config")
    c.add_argument(
        "--entity-type",
        action="append",
        help="topics, brokers, broker-loggers, groups, clients, users",
    )
    c.add_argument("--entity-name", action=_EntityName, dest="entity_names")
    c.add_argument("--entity-default", action=_EntityName, nargs=0, dest="entity_names")
    c.add_argument("--topic", help="= --entity-type topics --entity-name T")
    c.add_argument("--broker", help="= --entity-type brokers --entity-name B")
    c.add_argument("--broker-defaults", action="store_true")
    c.add_argument("--group", help="= --entity-type groups --entity-name G")
    c.add_argument("--client")
    c.add_argument("--user")
    c.add_argument("--client-defaults", action="store_true")
    c.add_argument("--user-defaults", action="store_true")
    c.add_argument("--describe", action="store_true")
    c.add_argument(
        "--all", action="store_true", help="--describe: every config, not only overrides"
    )
    c.add_argument("--alter", action="store_true")
    c.add_argument("--add-config", action="append")
    c.add_argument("--add-config-file")
    c.add_argument("--delete-config", action="append")

    d = sub.add_parser("dump-log", help="print the batches and records of a segment file")
    try:
        from kafkalite.cli import dump_log
    except ImportError:  # pragma: no cover - the module ships with kafkalite
        dump_log = None  # type: ignore[assignment]
    if dump_log is not None and hasattr(dump_log, "add_arguments"):
        dump_log.add_arguments(d)
    else:
        d.add_argument("files", nargs="+")
    modules["dump-log"] = dump_log

    sub.add_parser("version", help="print the kafkalite version")
    return ap, modules


def main(argv: list[str] | None = None) -> int:
    """Run one tool; every failure is one line on stderr and a non-zero exit code."""
    argv = list(argv if argv is not None else sys.argv[1:])
    ap, modules = _parser()
    try:
        args, _rest = ap.parse_known_args(argv)
    except SystemExit as e:  # usage errors (2) and --help (0), without leaving main()
        return int(e.code or 0)
    try:
        if getattr(args, "bootstrap_server", None):
            probe(args.bootstrap_server)
        # every tool's own wire client honours the properties file too (TLS, SASL)
        wire_client.configure(client_security(tool_properties(args)))
        if args.cmd == "configs":
            return _configs(args)
        if args.cmd == "dump-log":
            dump_log = modules["dump-log"]
            if dump_log is None or not hasattr(dump_log, "main"):
                print("dump-log is not available in this build", file=sys.stderr)
                return 2
            return int(dump_log.main(argv[1:]))
        if args.cmd == "version":
            from importlib.metadata import version

            print(version("kafkalite"))
            return 0
        return int(modules[args.cmd].run(args))
    except CliError as e:
        msg = str(e)
        print(msg if msg.startswith("Error") else f"Error: {msg}", file=sys.stderr)
        return e.code
    except BrokenPipeError:  # `kafkalite console-consumer ... | head`
        sys.stderr.close()
        return 0
    except (OSError, ConnectionError) as e:
        print(f"Error: connection to the broker failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # one line, as for every other failure; the traceback on demand
        if os.environ.get("KAFKALITE_CLI_DEBUG"):
            raise
        print(
            f"Error: {type(e).__name__}: {e} (KAFKALITE_CLI_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
