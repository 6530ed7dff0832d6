"""``kafkalite leader-election``: Kafka's ``kafka-leader-election.sh``
(LeaderElectionCommand): ``--election-type preferred|unclean`` for ``--topic`` [and
``--partition``], ``--all-topic-partitions`` or ``--path-to-json-file``
(``{"partitions": [{"topic": "t", "partition": 0}]}``), through ElectLeaders."""

from __future__ import annotations

import argparse
import json
import sys

from kafkalite.cli.common import CliError, add_bootstrap, admin, error_text, result


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    p.add_argument(
        "--election-type", required=True, type=str.lower, choices=("preferred", "unclean")
    )
    p.add_argument("--topic")
    p.add_argument("--partition", type=int)
    p.add_argument("--all-topic-partitions", action="store_true")
    p.add_argument("--path-to-json-file")


def _partitions(args: argparse.Namespace) -> list[tuple[str, int]] | None:
    given = sum(bool(x) for x in (args.topic, args.all_topic_partitions, args.path_to_json_file))
    if given != 1:
        raise CliError(
            "One and only one of the following options is required: "
            "--all-topic-partitions, --topic, --path-to-json-file",
            2,
        )
    if args.partition is not None and not args.topic:
        raise CliError("Option --partition is only allowed if --topic is used", 2)
    if args.topic and args.partition is None:
        raise CliError("Missing required option(s): --partition", 2)
    if args.topic:
        return [(args.topic, args.partition)]
    if args.path_to_json_file:
        try:
            with open(args.path_to_json_file, encoding="utf-8") as f:
                doc = json.load(f)
            return [(str(x["topic"]), int(x["partition"])) for x in doc["partitions"]]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CliError(f"Invalid --path-to-json-file: {e}") from None
    return None


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import ElectionType, TopicPartition

    parts = _partitions(args)
    etype = ElectionType.PREFERRED if args.election_type == "preferred" else ElectionType.UNCLEAN
    name = "PREFERRED" if args.election_type == "preferred" else "UNCLEAN"
    a = admin(args)
    tps = None if parts is None else [TopicPartition(t, p) for t, p in parts]
    # no timeout kwargs: confluent-kafka 2.16 elect_leaders fails on any (SystemError)
    res = result(a.elect_leaders(etype, tps), "Error while making request", timeout=30)
    done, noop, failed = [], [], []
    for tp in sorted(res, key=lambda tp: (tp.topic, tp.partition)):
        err = res[tp]
        label = f"{tp.topic}-{tp.partition}"
        if err is None:
            done.append(label)
        elif err.name() == "ELECTION_NOT_NEEDED":
            noop.append(label)
        else:
            failed.append((label, error_text(Exception(err))))
    if done:
        print(f"Successfully completed leader election ({name}) for partitions {', '.join(done)}")
    if noop:
        print(f"Valid replica already elected for partitions {', '.join(noop)}")
    for label, e in failed:
        print(f"Error completing leader election ({name}) for partition: {label}: {e}")
    if failed:
        print(f"{len(failed)} replica(s) could not be elected", file=sys.stderr)
        return 1
    return 0
