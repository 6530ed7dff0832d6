"""``kafkalite topics``: Kafka's ``kafka-topics.sh`` (TopicCommand) on confluent-kafka's
AdminClient: list, describe (with the replication reports and --topics-with-overrides),
create, alter --partitions, delete. ``--topic`` is a regular expression, as in Kafka.

Output lines are TopicCommand's: ``Topic: T<TAB>TopicId: ...<TAB>PartitionCount: N...``
and one ``<TAB>Topic: T<TAB>Partition: P<TAB>Leader: L...`` line per partition.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from kafkalite.cli.common import (
    CliError,
    add_bootstrap,
    admin,
    error_text,
    kadmin,
    result,
    timeout_kw,
    topic_id,
)

#: the internal topics --exclude-internal hides (Kafka's Topic.isInternal)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    g = p.add_mutually_exclusive_group(required=True)
    for action in ("list", "describe", "create", "alter", "delete"):
        g.add_argument(f"--{action}", action="store_true")
    p.add_argument("--topic", help="a topic name, or a regular expression (not with --create)")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--replica-assignment", help="0:1,1:2 (broker ids per partition, by ,)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", default=[])
    p.add_argument("--if-exists", action="store_true")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--exclude-internal", action="store_true")
    p.add_argument("--under-replicated-partitions", action="store_true")
    p.add_argument("--under-min-isr-partitions", action="store_true")
    p.add_argument("--at-min-isr-partitions", action="store_true")
    p.add_argument("--unavailable-partitions", action="store_true")
    p.add_argument("--topics-with-overrides", action="store_true")


def _fail(msg: str) -> CliError:
    return CliError(f"Error while executing topic command : {msg}")


def _topics(a: Any, args: argparse.Namespace) -> list[str]:
    """The existing topics the --topic pattern (or all) selects, sorted."""
    md = a.list_topics(timeout=timeout_kw()["request_timeout"])
    names = sorted(md.topics)
    if args.exclude_internal:
        names = [n for n in names if n not in INTERNAL_TOPICS]
    if args.topic:
        try:
            pat = re.compile(args.topic)
        except re.error:
            pat = re.compile(re.escape(args.topic))
        names = [n for n in names if n == args.topic or pat.fullmatch(n)]
        if not names and not args.if_exists:
            raise _fail(f"Topic '{args.topic}' does not exist as expected")
    return names


def run(args: argparse.Namespace) -> int:
    a = admin(args)
    if args.create:
        return _create(a, args)
    if args.alter:
        return _alter(a, args)
    if args.delete:
        return _delete(a, args)
    names = _topics(a, args)
    if args.list:
        for n in names:
            print(n)
        return 0
    return _describe(a, args, names)


def _configs(kv: list[str]) -> dict[str, str]:
    out = {}
    for item in kv:
        k, sep, v = item.partition("=")
        if not sep:
            raise CliError(f"--config needs KEY=VALUE, not {item!r}", 2)
        out[k.strip()] = v.strip()
    return out


def _assignment(spec: str) -> list[list[int]]:
    try:
        return [[int(b) for b in part.split(":")] for part in spec.split(",")]
    except ValueError:
        raise CliError(f"invalid --replica-assignment {spec!r}", 2) from None


def _create(a: Any, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic

    if not args.topic:
        raise CliError("--topic is required with --create", 2)
    kw: dict[str, Any] = {"config": _configs(args.config)}
    if args.replica_assignment:
        kw["replica_assignment"] = _assignment(args.replica_assignment)
    else:
        kw["num_partitions"] = args.partitions if args.partitions is not None else -1
        kw["replication_factor"] = (
            args.replication_factor if args.replication_factor is not None else -1
        )
    f = a.create_topics([NewTopic(args.topic, **kw)], **timeout_kw())[args.topic]
    try:
        f.result(timeout=timeout_kw()["request_timeout"])
    except Exception as e:
        text = error_text(e)
        if args.if_not_exists and "TOPIC_ALREADY_EXISTS" in text:
            return 0
        raise _fail(text) from None
    print(f"Created topic {args.topic}.")
    return 0


def _alter(a: Any, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewPartitions

    if args.partitions is None:
        raise CliError("--alter needs --partitions (use `kafkalite configs` for configs)", 2)
    if args.topic is None:
        raise CliError("--topic is required with --alter", 2)
    names = _topics(a, args)
    assignment = _assignment(args.replica_assignment) if args.replica_assignment else None
    reqs = []
    for n in names:
        if assignment is not None:
            have = len(a.list_topics(n, timeout=5).topics[n].partitions)
            reqs.append(NewPartitions(n, args.partitions, assignment[have:]))
        else:
            reqs.append(NewPartitions(n, args.partitions))
    if not reqs:
        return 0
    failed = False
    for n, f in a.create_partitions(reqs, **timeout_kw()).items():
        try:
            result(f, n)
        except CliError as e:
            print(f"Error while executing topic command : {e}", file=sys.stderr)
            failed = True
    return 1 if failed else 0


def _delete(a: Any, args: argparse.Namespace) -> int:
    if not args.topic:
        raise CliError("--topic is required with --delete", 2)
    names = _topics(a, args)
    if not names:
        return 0
    for n, f in a.delete_topics(names, **timeout_kw()).items():
        try:
            result(f)
        except CliError as e:
            raise _fail(f"{n}: {e}") from None
    return 0


def _ids(nodes: Any) -> str:
    return ",".join(str(n.id) for n in nodes)


def _describe(a: Any, args: argparse.Namespace, names: list[str]) -> int:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import ConfigResource, ConfigSource

    if not names:
        return 0
    descs = {n: result(f, n) for n, f in a.describe_topics(TopicCollection(names)).items()}
    res = {n: ConfigResource(ConfigResource.Type.TOPIC, n) for n in names}
    futures = a.describe_configs(list(res.values()), **timeout_kw())
    configs: dict[str, dict[str, Any]] = {}
    for n in res:
        fut = next(f for k, f in futures.items() if k.name == n)
        configs[n] = result(fut, n)
    live = {n.id for n in result(a.describe_cluster(**timeout_kw())).nodes}
    reassigning = _reassignments(args)
    reports = (
        args.under_replicated_partitions
        or args.under_min_isr_partitions
        or args.at_min_isr_partitions
        or args.unavailable_partitions
    )
    for n in names:
        d, cfg = descs[n], configs[n]
        parts = sorted(d.partitions, key=lambda p: p.id)
        overrides = [
            f"{e.name}={e.value}"
            for e in sorted(cfg.values(), key=lambda e: e.name)
            if e.source != ConfigSource.DEFAULT_CONFIG.value
        ]
        min_isr = int(cfg["min.insync.replicas"].value) if "min.insync.replicas" in cfg else 1
        if not reports and (not args.topics_with_overrides or overrides):
            first = reassigning.get((n, parts[0].id)) if parts else None
            rf = len(parts[0].replicas) if parts else 0
            if first is not None:
                rf -= len(first[1])  # Kafka: replicas minus removing replicas
            print(
                f"Topic: {n}\tTopicId: {topic_id(d.topic_id)}\tPartitionCount: {len(parts)}\t"
                f"ReplicationFactor: {rf}\tConfigs: {','.join(overrides)}"
            )
        if args.topics_with_overrides:
            continue
        for p in parts:
            has_leader = p.leader is not None and p.leader.id >= 0
            move = reassigning.get((n, p.id))
            rf = len(p.replicas) - (len(move[1]) if move else 0)
            show = not reports or (
                (args.under_replicated_partitions and rf - len(p.isr) > 0)
                or (args.unavailable_partitions and (not has_leader or p.leader.id not in live))
                or (args.under_min_isr_partitions and (not has_leader or len(p.isr) < min_isr))
                or (args.at_min_isr_partitions and len(p.isr) == min_isr)
            )
            if not show:
                continue
            line = (
                f"\tTopic: {n}\tPartition: {p.id}\t"
                f"Leader: {p.leader.id if has_leader else 'none'}\t"
                f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}"
            )
            if move:
                line += f"\tAdding Replicas: {','.join(map(str, move[0]))}"
                line += f"\tRemoving Replicas: {','.join(map(str, move[1]))}"
            print(line + "\tElr: N/A\tLastKnownElr: N/A")
    return 0


def _reassignments(args: argparse.Namespace) -> dict[tuple[str, int], tuple[list[int], list[int]]]:
    """In-flight reassignments (adding, removing replicas); {} if the broker cannot say,
    as TopicCommand does."""
    try:
        k = kadmin(args)
    except Exception:
        return {}
    try:
        out = k.list_partition_reassignments()
        return {
            (tp.topic, tp.partition): (list(v["adding_replicas"]), list(v["removing_replicas"]))
            for tp, v in out.items()
        }
    except Exception:
        return {}
    finally:
        k.close()
