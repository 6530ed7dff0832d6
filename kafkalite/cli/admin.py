"""``kafkalite``: the admin CLI.

kafkalite topics --bootstrap-server HOST:PORT --list | --create --topic T [--partitions N]
                 [--replication-factor R] [--config k=v ...] | --delete --topic T | --describe [--topic T]
kafkalite configs --bootstrap-server HOST:PORT --entity-type topics --entity-name T
                 [--describe | --alter --add-config k=v[,k=v] | --delete-config k[,k]]
kafkalite groups --bootstrap-server HOST:PORT --list | --describe --group G [--members]
                 | --reset-offsets --group G --topic T (--to-earliest|--to-latest|--to-offset N
                 |--to-datetime ISO) [--execute]
kafkalite dump-log FILE [--print-data-log] [--verify-index-only]
kafkalite version
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

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


def _configs(args: argparse.Namespace) -> int:
    if args.entity_type not in ("topics", "topic"):
        print("only --entity-type topics is supported by this tool", file=sys.stderr)
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

    c = sub.add_parser("configs", help="describe and alter topic configs")
    c.add_argument("--bootstrap-server", required=True)
    c.add_argument("--entity-type", required=True)
    c.add_argument("--entity-name", required=True)
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
