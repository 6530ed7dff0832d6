"""``kafkalite get-offsets``: Kafka's ``kafka-get-offsets.sh`` (GetOffsetShell):
``topic:partition:offset`` lines for ``--time`` latest (-1), earliest (-2),
max-timestamp (-3) or a timestamp in ms, for the topics ``--topic`` (a regular
expression), ``--partitions`` (``0,2-4``) or ``--topic-partitions`` (``t:0-2,u``) select.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from kafkalite.cli.common import CliError, add_bootstrap, admin, error_text, timeout_kw
from kafkalite.cli.topics import INTERNAL_TOPICS

_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    p.add_argument("--topic", help="regular expression (all topics if omitted)")
    p.add_argument("--partitions", help="0,2,5-7 (with --topic)")
    p.add_argument("--topic-partitions", help="t1:0-2,t2,t3.*:1 (not with --topic)")
    p.add_argument(
        "--time", default="latest", help="-1/latest, -2/earliest, -3/max-timestamp, or ms"
    )
    p.add_argument("--exclude-internal-topics", action="store_true")


def _ranges(spec: str) -> list[tuple[int, int]]:
    out = []
    for part in spec.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)?(?:(-)(\d+)?)?", part)
        if not part or not m:
            raise CliError(f"Invalid partition specification: {part}", 2)
        lo = int(m[1]) if m[1] else 0
        hi = (int(m[3]) - 1 if m[3] else 2**31) if m[2] else lo
        if m[2] and not m[1] and not m[3]:
            raise CliError(f"Invalid partition specification: {part}", 2)
        out.append((lo, hi))
    return out


def _filters(
    args: argparse.Namespace,
) -> list[tuple[re.Pattern[str], list[tuple[int, int]] | None]]:
    if args.topic_partitions:
        if args.topic or args.partitions:
            raise CliError("--topic-partitions cannot be used with --topic or --partitions", 2)
        out: list[tuple[re.Pattern[str], list[tuple[int, int]] | None]] = []
        for spec in args.topic_partitions.split(","):
            # t:0-2 or t; a bare partition range after a comma belongs to the last topic
            if re.fullmatch(r"\d+(-\d*)?|-\d+", spec.strip()) and out:
                pat, rs = out[-1]
                out[-1] = (pat, (rs or []) + _ranges(spec))
                continue
            t, _, ps = spec.partition(":")
            out.append((re.compile(t or ".*"), _ranges(ps) if ps else None))
        return out
    return [(re.compile(args.topic or ".*"), _ranges(args.partitions) if args.partitions else None)]


def _spec(t: str) -> Any:
    from confluent_kafka.admin import OffsetSpec

    n = _TIMES.get(t.lower())
    if n is None:
        try:
            n = int(t)
        except ValueError:
            raise CliError(
                f"Malformed time argument {t}. Please use -1 or latest / -2 or earliest / -3 or max-timestamp, or a specified long format timestamp",
                2,
            ) from None
    if n == -1:
        return OffsetSpec.latest()
    if n in (-2, -4):
        return OffsetSpec.earliest()
    if n == -3:
        return OffsetSpec.max_timestamp()
    if n < 0:
        raise CliError(f"--time {t} is not supported by kafkalite (no tiered storage)", 2)
    return OffsetSpec.for_timestamp(n)


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import TopicPartition

    a = admin(args)
    spec = _spec(str(args.time))
    filters = _filters(args)
    md = a.list_topics(timeout=timeout_kw()["request_timeout"])
    tps = []
    for t in sorted(md.topics):
        if args.exclude_internal_topics and t in INTERNAL_TOPICS:
            continue
        for pat, ranges in filters:
            if pat.fullmatch(t):
                tps += [
                    TopicPartition(t, p)
                    for p in sorted(md.topics[t].partitions)
                    if ranges is None or any(lo <= p <= hi for lo, hi in ranges)
                ]
                break
    if (
        not tps
        and args.topic
        and not any(pat.fullmatch(t) for t in md.topics for pat, _ in filters)
    ):
        raise CliError("Could not match any topic-partitions with the specified filters")
    if not tps:
        return 0
    futures = a.list_offsets({tp: spec for tp in tps}, **timeout_kw())
    rows = []
    for tp, f in futures.items():
        try:
            r = f.result(timeout=timeout_kw()["request_timeout"])
        except Exception as e:
            print(
                f"Skip getting offsets for topic-partition {tp.topic}-{tp.partition} due to error: {error_text(e)}",
                file=sys.stderr,
            )
            continue
        if r.offset >= 0:
            rows.append((tp.topic, tp.partition, r.offset))
    for t, p, o in sorted(rows):
        print(f"{t}:{p}:{o}")
    return 0
