"""``kafkalite delete-records``: Kafka's ``kafka-delete-records.sh``: moves each
partition's log start offset to the ``offset`` of ``--offset-json-file``
(``{"partitions": [{"topic": "t", "partition": 0, "offset": 3}], "version": 1}``;
offset -1 is the high watermark)."""

from __future__ import annotations

import argparse
import json

from kafkalite.cli.common import CliError, add_bootstrap, admin, error_text, timeout_kw


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    p.add_argument("--offset-json-file", required=True)


def parse(text: str) -> list[tuple[str, int, int]]:
    try:
        doc = json.loads(text)
        out = [(str(x["topic"]), int(x["partition"]), int(x["offset"])) for x in doc["partitions"]]
    except (ValueError, KeyError, TypeError) as e:
        raise CliError(f"Invalid offset json file: {e}") from None
    if doc.get("version", 1) != 1:
        raise CliError(f"Not supported version field value {doc.get('version')}")
    seen: set[tuple[str, int]] = set()
    dups = {f"{t}-{p}" for t, p, _ in out if (t, p) in seen or seen.add((t, p))}  # type: ignore[func-returns-value]
    if dups:
        raise CliError(
            f"Offset json file contains duplicate topic partitions: {','.join(sorted(dups))}"
        )
    return out


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import TopicPartition

    try:
        with open(args.offset_json_file, encoding="utf-8") as f:
            wanted = parse(f.read())
    except OSError as e:
        raise CliError(f"cannot read {args.offset_json_file}: {e.strerror}") from None
    a = admin(args)
    print("Executing records delete operation")
    futures = a.delete_records([TopicPartition(t, p, o) for t, p, o in wanted], **timeout_kw())
    print("Records delete operation completed:")
    failed = False
    for tp, f in sorted(futures.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        try:
            r = f.result(timeout=timeout_kw()["request_timeout"])
            print(f"partition: {tp.topic}-{tp.partition}\tlow_watermark: {r.low_watermark}")
        except Exception as e:
            failed = True
            print(f"partition: {tp.topic}-{tp.partition}\terror: {error_text(e)}")
    return 1 if failed else 0
