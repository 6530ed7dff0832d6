"""``kafkalite reassign-partitions``: Kafka's ``kafka-reassign-partitions.sh``
(ReassignPartitionsCommand) with its JSON files: ``--generate`` (a proposal for
``--topics-to-move-json-file`` over ``--broker-list``), ``--execute`` and ``--verify``
of a ``--reassignment-json-file``, ``--list``, ``--cancel``; ``--throttle`` sets
KIP-73's replication throttles, which ``--verify`` clears when the moves are done.
A ``log_dirs`` entry other than ``"any"`` moves that replica between its broker's log
dirs (AlterReplicaLogDirs, retried until the replica exists there, as Kafka's tool;
``--replica-alter-log-dirs-throttle`` bounds the copy), verified and cancelled through
DescribeLogDirs.

AlterPartitionReassignments / ListPartitionReassignments go through kafka-python's
admin: confluent-kafka 2.16's Python AdminClient has no reassignment calls.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from kafkalite.cli.common import CliError, add_bootstrap, admin, kadmin, result, timeout_kw

TP = tuple[str, int]
#: a replica on one broker (Kafka's TopicPartitionReplica)
TPR = tuple[str, int, int]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    g = p.add_mutually_exclusive_group(required=True)
    for action in ("generate", "execute", "verify", "list", "cancel"):
        g.add_argument(f"--{action}", action="store_true")
    p.add_argument("--topics-to-move-json-file")
    p.add_argument("--broker-list", help="--generate: 0,1,2")
    p.add_argument("--reassignment-json-file")
    p.add_argument("--throttle", type=int, default=-1, help="--execute: B/s between brokers")
    p.add_argument("--replica-alter-log-dirs-throttle", type=int, default=-1)
    p.add_argument("--additional", action="store_true")
    p.add_argument("--preserve-throttles", action="store_true")
    p.add_argument("--disable-rack-aware", action="store_true")
    p.add_argument("--timeout", type=int, default=10000)


def fmt_json(parts: dict[TP, list[int]]) -> str:
    """formatAsReassignmentJson: sorted by topic and partition, log dirs "any"."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
                for (t, p), r in sorted(parts.items())
            ],
        },
        separators=(",", ":"),
    )


def _read_json(path: str | None, flag: str) -> Any:
    if not path:
        raise CliError(f"{flag} is required", 2)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise CliError(f"{path} is not JSON: {e}") from None


def parse_reassignment(doc: Any) -> dict[TP, list[int]]:
    try:
        out: dict[TP, list[int]] = {}
        for x in doc["partitions"]:
            tp = (str(x["topic"]), int(x["partition"]))
            if tp in out:
                raise CliError(
                    f"Partition reassignment contains multiple entries for {tp[0]}-{tp[1]}"
                )
            reps = [int(r) for r in x["replicas"]]
            if len(set(reps)) != len(reps):
                raise CliError(
                    f"Partition replica lists may not contain duplicate entries: {tp[0]}-{tp[1]}"
                )
            dirs = x.get("log_dirs")
            if dirs is not None and len(dirs) != len(reps):
                raise CliError(
                    f"Size of replicas list {reps} is different from size of log dirs list "
                    f"{dirs} for partition {tp[0]}-{tp[1]}"
                )
            out[tp] = reps
    except (KeyError, TypeError, ValueError) as e:
        raise CliError(f"invalid reassignment JSON: {e}") from None
    if not out:
        raise CliError("Partition reassignment list cannot be empty.")
    return out


def parse_moves(doc: Any) -> dict[TPR, str]:
    """The replicas the JSON places in a given log dir (``log_dirs`` not ``"any"``)."""
    out: dict[TPR, str] = {}
    for x in doc["partitions"]:
        for b, d in zip(x["replicas"], x.get("log_dirs") or (), strict=False):
            if d != "any":
                out[(str(x["topic"]), int(x["partition"]), int(b))] = str(d)
    return out


def _tpr(r: TPR) -> str:
    return f"{r[0]}-{r[1]}-{r[2]}"


def _alter_log_dirs(args: argparse.Namespace, moves: dict[TPR, str]) -> set[TPR]:
    """AlterReplicaLogDirs to each replica's broker: the replicas whose move started
    (REPLICA_NOT_AVAILABLE, a replica not there yet, is left to a retry)."""
    from kafka import TopicPartitionReplica
    from kafka.errors import ReplicaNotAvailableError

    k = kadmin(args)
    try:
        res = k.alter_replica_log_dirs(
            {TopicPartitionReplica(t, p, b): d for (t, p, b), d in moves.items()}
        )
    except Exception as e:
        raise CliError(f"Failed to alter log dirs: {e}") from None
    finally:
        k.close()
    started = set()
    for r, err in res.items():
        tpr = (r.topic, r.partition, r.broker_id)
        if err is None or getattr(err, "errno", 0) == 0:
            started.add(tpr)
        elif err is not ReplicaNotAvailableError and not isinstance(err, ReplicaNotAvailableError):
            raise CliError(
                f"Failed to alter dir for {_tpr(tpr)}: {getattr(err, 'description', err)}"
            )
    return started


def _execute_moves(args: argparse.Namespace, moves: dict[TPR, str]) -> None:
    """Kafka's executeMoves: retry every 100 ms until each move started or --timeout."""
    deadline = time.monotonic() + args.timeout / 1000
    pending = dict(moves)
    while True:
        started = _alter_log_dirs(args, pending)
        for r in sorted(started, key=lambda r: (r[2], r[0], r[1])):
            print(
                f"Successfully started moving log directory to {pending[r]} for replica "
                f"{r[0]}-{r[1]} with broker {r[2]} "
            )
        for r in started:
            pending.pop(r, None)
        if not pending:
            return
        if time.monotonic() >= deadline:
            left = ",".join(_tpr(r) for r in sorted(pending, key=lambda r: (r[2], r[0], r[1])))
            raise CliError(
                f"Timed out before log directory move{'' if len(pending) == 1 else 's'} "
                f"could be started for: {left}"
            )
        time.sleep(0.1)


def _replica_dirs(
    args: argparse.Namespace, replicas: list[TPR]
) -> dict[TPR, tuple[str, str | None]]:
    """(current dir, future dir or None) of each replica found, from DescribeLogDirs on
    its broker (Kafka's describeReplicaLogDirs)."""
    brokers = sorted({b for _, _, b in replicas})
    k = kadmin(args)
    try:
        raw = k.describe_log_dirs(brokers=brokers)
    except Exception as e:
        raise CliError(f"describing log dirs failed: {e}") from None
    finally:
        k.close()
    wanted = set(replicas)
    cur: dict[TPR, str] = {}
    fut: dict[TPR, str] = {}
    for b in raw:
        for d in b["log_dirs"]:
            if d.get("error_code"):
                continue
            for t in d.get("topics", ()):
                for p in t["partitions"]:
                    r = (t["name"], int(p["partition_index"]), int(b["broker"]))
                    if r in wanted:
                        (fut if p["is_future_key"] else cur)[r] = d["log_dir"]
    return {r: (cur[r], fut.get(r)) for r in cur}


def _move_states(
    args: argparse.Namespace, moves: dict[TPR, str]
) -> tuple[list[str], bool, dict[TPR, str]]:
    """Kafka's replicaMoveStatesToString lines, whether a move is still going, and
    the active moves' current dirs (what --cancel moves them back to)."""
    dirs = _replica_dirs(args, list(moves))
    lines, active = [], {}
    for r in sorted(moves, key=lambda r: (r[2], r[0], r[1])):
        target, tp = moves[r], f"{r[0]}-{r[1]}"
        if r not in dirs:
            lines.append(
                f"Partition {tp} cannot be found in any live log directory on broker {r[2]}."
            )
            continue
        current, future = dirs[r]
        if future is not None:
            active[r] = current
            if future == target:
                lines.append(f"Reassignment of replica {_tpr(r)} is still in progress.")
            else:
                lines.append(
                    f"Partition {tp} on broker {r[2]} is being moved to log dir {future} "
                    f"instead of {target}."
                )
        elif current == target:
            lines.append(f"Reassignment of replica {_tpr(r)} completed successfully.")
        else:
            lines.append(
                f"Partition {tp} on broker {r[2]} is not being moved from log dir {current} "
                f"to {target}."
            )
    done = all(line.endswith("completed successfully.") for line in lines)
    return lines, not done, active


def _current(a: Any, topics: list[str]) -> dict[TP, list[int]]:
    from confluent_kafka import TopicCollection

    out: dict[TP, list[int]] = {}
    for t, f in a.describe_topics(TopicCollection(sorted(set(topics)))).items():
        d = result(f, f"topic {t}")
        for p in d.partitions:
            out[(t, p.id)] = [n.id for n in p.replicas]
    return out


def _brokers(a: Any) -> list[int]:
    return sorted(n.id for n in result(a.describe_cluster(**timeout_kw())).nodes)


def _ongoing(args: argparse.Namespace) -> dict[TP, dict[str, list[int]]]:
    k = kadmin(args)
    try:
        return {(tp.topic, tp.partition): v for tp, v in k.list_partition_reassignments().items()}
    except Exception as e:
        raise CliError(f"listing partition reassignments failed: {e}") from None
    finally:
        k.close()


def run(args: argparse.Namespace) -> int:
    a = admin(args)
    if args.generate:
        return _generate(a, args)
    if args.list:
        return _list(args)
    doc = _read_json(args.reassignment_json_file, "--reassignment-json-file")
    target = parse_reassignment(doc)
    moves = parse_moves(doc)
    if args.execute:
        return _execute(a, args, target, moves)
    if args.cancel:
        return _cancel(a, args, target, moves)
    return _verify(a, args, target, moves)


def _generate(a: Any, args: argparse.Namespace) -> int:
    doc = _read_json(args.topics_to_move_json_file, "--topics-to-move-json-file")
    if not args.broker_list:
        raise CliError("--broker-list is required with --generate", 2)
    try:
        topics = [str(t["topic"]) for t in doc["topics"]]
        brokers = [int(b) for b in args.broker_list.split(",") if b.strip()]
    except (KeyError, TypeError, ValueError) as e:
        raise CliError(f"invalid --topics-to-move-json-file or --broker-list: {e}") from None
    if len(set(brokers)) != len(brokers):
        raise CliError(f"Broker list contains duplicate entries: {args.broker_list}")
    if len(set(topics)) != len(topics):
        raise CliError("List of topics to reassign contains duplicate entries")
    live = set(_brokers(a))
    unknown = [b for b in brokers if b not in live]
    if unknown:
        raise CliError(f"The following brokers are not found: {','.join(map(str, unknown))}")
    current = _current(a, topics)
    proposed: dict[TP, list[int]] = {}
    for t in topics:
        parts = sorted(p for (tt, p) in current if tt == t)
        rf = len(current[(t, parts[0])]) if parts else 0
        if rf > len(brokers):
            raise CliError(
                f"Replication factor: {rf} larger than available brokers: {len(brokers)}."
            )
        # round robin from the first broker: Kafka's assignReplicasToBrokers starts at a
        # random one; a reproducible proposal is easier to review
        for p in parts:
            proposed[(t, p)] = [brokers[(p + j) % len(brokers)] for j in range(rf)]
    print(f"Current partition replica assignment\n{fmt_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{fmt_json(proposed)}")
    return 0


def _execute(
    a: Any, args: argparse.Namespace, target: dict[TP, list[int]], moves: dict[TPR, str]
) -> int:
    from kafka import TopicPartition as KTP

    live = set(_brokers(a))
    unknown = sorted({b for r in target.values() for b in r} - live)
    if unknown:
        raise CliError(f"Unknown broker id(s): {','.join(map(str, unknown))}")
    current = _current(a, [t for t, _ in target])
    missing = sorted(tp for tp in target if tp not in current)
    if missing:
        raise CliError("Topic or partition not found: " + ",".join(f"{t}-{p}" for t, p in missing))
    ongoing = _ongoing(args)
    if ongoing and not args.additional:
        raise CliError(
            "Cannot execute because there is an existing partition assignment.  Use "
            "--additional to override this and create a new partition assignment in "
            "addition to the existing one. The --additional flag can also be used to "
            "change the throttle by resubmitting the current reassignment."
        )
    print(
        "Current partition replica assignment\n\n"
        f"{fmt_json({tp: current[tp] for tp in target})}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback"
    )
    log_dir_throttle = args.replica_alter_log_dirs_throttle
    if args.throttle >= 0 or log_dir_throttle >= 0:
        print(
            "Warning: You must run --verify periodically, until the reassignment completes, "
            "to ensure the throttle is removed."
        )
    if args.throttle >= 0:
        _set_throttles(a, args.throttle, target, current)
        print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    if log_dir_throttle >= 0:
        _set_log_dir_throttle(a, log_dir_throttle, {b for _, _, b in moves})
        print(f"The replica-alter-dir throttle limit was set to {log_dir_throttle} B/s")
    k = kadmin(args)
    try:
        res = k.alter_partition_reassignments(
            {KTP(t, p): r for (t, p), r in target.items()}, timeout_ms=args.timeout
        )
    except Exception as e:
        raise CliError(f"Error reassigning partition(s): {e}") from None
    finally:
        k.close()
    errors = {(tp.topic, tp.partition): err for tp, err in res.items() if err is not None}
    if errors:
        raise CliError(
            "Error reassigning partition(s):\n"
            + "\n".join(
                f"{t}-{p}: {getattr(e, 'description', e)}" for (t, p), e in sorted(errors.items())
            )
        )
    parts = ",".join(f"{t}-{p}" for t, p in sorted(target))
    print(
        f"Successfully started partition reassignment{'' if len(target) == 1 else 's'} for {parts}"
    )
    if moves:
        _execute_moves(args, moves)
    return 0


def _set_log_dir_throttle(a: Any, rate: int, brokers: set[int]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    if not brokers:
        return
    _alter_configs(
        a,
        [
            ConfigResource(
                ConfigResource.Type.BROKER,
                str(b),
                incremental_configs=[
                    ConfigEntry(
                        "replica.alter.log.dirs.io.max.bytes.per.second",
                        str(rate),
                        incremental_operation=AlterConfigOpType.SET,
                    )
                ],
            )
            for b in sorted(brokers)
        ],
    )


def _alter_configs(a: Any, resources: list[Any]) -> None:
    # one resource per call: librdkafka takes at most one BROKER resource per request
    for one in resources:
        for res, f in a.incremental_alter_configs([one], **timeout_kw()).items():
            result(f, f"{res.name}")


def _set_throttles(
    a: Any, rate: int, target: dict[TP, list[int]], current: dict[TP, list[int]]
) -> None:
    """KIP-73: a rate on every broker of the move; the moving replicas listed on the
    topic (leader side: the current replicas, follower side: the new ones)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    brokers = sorted({b for tp in target for b in target[tp] + current[tp]})
    _alter_configs(
        a,
        [
            ConfigResource(
                ConfigResource.Type.BROKER,
                str(b),
                incremental_configs=[
                    ConfigEntry(k, str(rate), incremental_operation=AlterConfigOpType.SET)
                    for k in (
                        "leader.replication.throttled.rate",
                        "follower.replication.throttled.rate",
                    )
                ],
            )
            for b in brokers
        ],
    )
    by_topic: dict[str, tuple[list[str], list[str]]] = {}
    for (t, p), new in sorted(target.items()):
        lead, follow = by_topic.setdefault(t, ([], []))
        lead += [f"{p}:{b}" for b in current[(t, p)]]
        follow += [f"{p}:{b}" for b in new if b not in current[(t, p)]]
    _alter_configs(
        a,
        [
            ConfigResource(
                ConfigResource.Type.TOPIC,
                t,
                incremental_configs=[
                    ConfigEntry(
                        "leader.replication.throttled.replicas",
                        ",".join(lead),
                        incremental_operation=AlterConfigOpType.SET,
                    ),
                    ConfigEntry(
                        "follower.replication.throttled.replicas",
                        ",".join(follow) or "",
                        incremental_operation=AlterConfigOpType.SET,
                    ),
                ],
            )
            for t, (lead, follow) in by_topic.items()
        ],
    )


def _clear_throttles(a: Any, target: dict[TP, list[int]]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    brokers = sorted(set(_brokers(a)) | {b for r in target.values() for b in r})
    print(
        f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} {','.join(map(str, brokers))}"
    )
    rates = (
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    )
    _alter_configs(
        a,
        [
            ConfigResource(
                ConfigResource.Type.BROKER,
                str(b),
                incremental_configs=[
                    ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in rates
                ],
            )
            for b in brokers
        ],
    )
    topics = sorted({t for t, _ in target})
    print(
        f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}"
    )
    _alter_configs(
        a,
        [
            ConfigResource(
                ConfigResource.Type.TOPIC,
                t,
                incremental_configs=[
                    ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in (
                        "leader.replication.throttled.replicas",
                        "follower.replication.throttled.replicas",
                    )
                ],
            )
            for t in topics
        ],
    )


def _verify(
    a: Any, args: argparse.Namespace, target: dict[TP, list[int]], moves: dict[TPR, str]
) -> int:
    ongoing = _ongoing(args)
    current = _current(a, [t for t, _ in target])
    lines = ["Status of partition reassignment:"]
    for tp in sorted(target):
        label = f"{tp[0]}-{tp[1]}"
        if tp in ongoing:
            lines.append(f"Reassignment of partition {label} is still in progress.")
        elif current.get(tp) == target[tp]:
            lines.append(f"Reassignment of partition {label} is completed.")
        else:
            lines.append(
                f"There is no active reassignment of partition {label}, but replica set is "
                f"{','.join(map(str, current.get(tp, [])))} rather than "
                f"{','.join(map(str, target[tp]))}."
            )
    print("\n".join(lines))
    moving = False
    if moves:
        move_lines, moving, _ = _move_states(args, moves)
        print("\n".join(move_lines))
    if not ongoing and not moving and not args.preserve_throttles:
        _clear_throttles(a, target)
    return 0


def _list(args: argparse.Namespace) -> int:
    ongoing = _ongoing(args)
    if not ongoing:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for (t, p), v in sorted(ongoing.items()):
        line = f"{t}-{p}: replicas: {','.join(map(str, v['replicas']))}."
        if v["adding_replicas"]:
            line += f" adding: {','.join(map(str, v['adding_replicas']))}."
        if v["removing_replicas"]:
            line += f" removing: {','.join(map(str, v['removing_replicas']))}."
        print(line)
    return 0


def _cancel(
    a: Any, args: argparse.Namespace, target: dict[TP, list[int]], moves: dict[TPR, str]
) -> int:
    """Kafka's cancelAssignment: cancel the reassignments of the JSON's partitions that
    are in progress (AlterPartitionReassignments with null replicas), move the replicas
    of active log-dir moves back to their current dir, then clear the throttles."""
    from kafka import TopicPartition as KTP

    ongoing = _ongoing(args)
    cancelling = sorted(tp for tp in target if tp in ongoing)
    if cancelling:
        k = kadmin(args)
        try:
            res = k.alter_partition_reassignments({KTP(t, p): None for t, p in cancelling})
        except Exception as e:
            raise CliError(f"Error cancelling partition reassignment(s): {e}") from None
        finally:
            k.close()
        errors = {(tp.topic, tp.partition): e for tp, e in res.items() if e is not None}
        if errors:
            raise CliError(
                f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'} for:\n"
                + "\n".join(
                    f"{t}-{p}: {getattr(e, 'description', e)}"
                    for (t, p), e in sorted(errors.items())
                )
            )
        done = ",".join(f"{t}-{p}" for t, p in cancelling)
        plural = "" if len(cancelling) == 1 else "s"
        print(f"Successfully cancelled partition reassignment{plural} for: {done}")
    else:
        print("None of the specified partition reassignments are active.")
    active = _move_states(args, moves)[2] if moves else {}
    if active:
        _execute_moves(args, active)
    else:
        # no line end, as Kafka's tool (the throttle lines follow on the same line)
        print("None of the specified partition moves are active.", end="")
    if not args.preserve_throttles:
        _clear_throttles(a, target)
    return 0
