"""``kafkalite log-dirs --describe``: Kafka's ``kafka-log-dirs.sh`` (LogDirsCommand):
each broker's log directories and the size, offset lag and future flag of every
replica in them, as Kafka's JSON (``{"version":1,"brokers":[{"broker":0,"logDirs":
[{"logDir":...,"error":null,"partitions":[{"partition":"t-0","size":N,
"offsetLag":0,"isFuture":false}]}]}]}``). DescribeLogDirs through kafka-python's admin
(confluent-kafka's Python AdminClient has no describe_log_dirs)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from kafkalite.cli.common import CliError, add_bootstrap, admin, kadmin, result, timeout_kw

#: DescribeLogDirs error codes -> the Java exception class Kafka's JSON names
_ERRORS = {
    57: "org.apache.kafka.common.errors.KafkaStorageException",
    58: "org.apache.kafka.common.errors.LogDirNotFoundException",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    p.add_argument("--describe", action="store_true", required=True)
    p.add_argument("--broker-list", help="0,1,2 (all brokers if omitted)")
    p.add_argument("--topic-list", help="t1,t2 (all topics if omitted)")


def run(args: argparse.Namespace) -> int:
    a = admin(args)
    cluster = sorted(n.id for n in result(a.describe_cluster(**timeout_kw())).nodes)
    k = kadmin(args)
    try:
        wanted = cluster
        if args.broker_list:
            try:
                wanted = sorted({int(x) for x in args.broker_list.split(",") if x.strip()})
            except ValueError:
                raise CliError(f"invalid --broker-list {args.broker_list!r}", 2) from None
            missing = [b for b in wanted if b not in cluster]
            if missing:
                raise CliError(
                    "ERROR: The given brokers do not exist from --broker-list: "
                    f"{','.join(map(str, missing))}. Current existent brokers: "
                    f"{','.join(map(str, cluster))}"
                )
        topics = {t.strip() for t in (args.topic_list or "").split(",") if t.strip()}
        print("Querying brokers for log directories information")
        raw = k.describe_log_dirs(brokers=wanted)
    finally:
        k.close()
    print(f"Received log directory information from brokers {','.join(map(str, wanted))}")
    print(json.dumps(render(raw, topics), separators=(",", ":")))
    return 0


def render(raw: list[dict[str, Any]], topics: set[str]) -> dict[str, Any]:
    brokers = []
    for b in sorted(raw, key=lambda b: b["broker"]):
        dirs = []
        for d in b["log_dirs"]:
            parts = [
                {
                    "partition": f"{t['name']}-{p['partition_index']}",
                    "size": p["partition_size"],
                    "offsetLag": p["offset_lag"],
                    "isFuture": p["is_future_key"],
                }
                for t in d.get("topics", ())
                if not topics or t["name"] in topics
                for p in t["partitions"]
            ]
            code = d.get("error_code", 0)
            dirs.append(
                {
                    "partitions": parts,
                    "error": _ERRORS.get(code, f"error code {code}") if code else None,
                    "logDir": d["log_dir"],
                }
            )
        brokers.append({"broker": b["broker"], "logDirs": dirs})
    return {"brokers": brokers, "version": 1}
