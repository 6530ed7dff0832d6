"""``kafkalite console-consumer``: Kafka's ``kafka-console-consumer.sh`` with its
DefaultMessageFormatter (``--property print.key=true print.headers=true
print.timestamp=true print.partition=true print.offset=true key.separator=...``):
``--from-beginning``, ``--partition`` with ``--offset``, ``--max-messages``,
``--timeout-ms``, ``--group``, ``--include`` (a regular expression), ``--isolation-level``.

Without ``--group`` it reads by assignment and commits nothing (Kafka's tool joins a
random ``console-consumer-NNNNN`` group instead; the records printed are the same).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Any

from kafkalite.cli.common import CliError, add_bootstrap, client_config, load_properties
from kafkalite.cli.console_producer import kv_pairs, unescape

FORMATTER_DEFAULTS = {
    "print.timestamp": "false",
    "print.key": "false",
    "print.offset": "false",
    "print.partition": "false",
    "print.headers": "false",
    "print.value": "true",
    "key.separator": "\t",
    "line.separator": "\n",
    "headers.separator": ",",
    "null.literal": "null",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--topic")
    what.add_argument("--include", help="regular expression of topics to read")
    p.add_argument("--partition", type=int)
    p.add_argument(
        "--offset", default="latest", help="earliest, latest or an offset (with --partition)"
    )
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("--max-messages", type=int)
    p.add_argument("--timeout-ms", type=int, help="exit after this long without a record")
    p.add_argument("--group")
    p.add_argument("--property", action="append", nargs="+", default=[], metavar="KEY=VALUE")
    p.add_argument("--formatter-property", action="append", nargs="+", default=[])
    p.add_argument("--consumer-property", action="append", nargs="+", default=[])
    p.add_argument("--consumer.config", dest="consumer_config")
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"))
    p.add_argument("--skip-message-on-error", action="store_true")


class Formatter:
    """Kafka's DefaultMessageFormatter."""

    def __init__(self, props: dict[str, str]) -> None:
        p = {**FORMATTER_DEFAULTS, **props}
        on = {k: p[k].lower() == "true" for k in p if k.startswith("print.")}
        self.ts, self.key, self.offset = on["print.timestamp"], on["print.key"], on["print.offset"]
        self.partition, self.headers, self.value = (
            on["print.partition"],
            on["print.headers"],
            on["print.value"],
        )
        self.sep = unescape(p["key.separator"])
        self.line_sep = unescape(p["line.separator"])
        self.h_sep = unescape(p["headers.separator"])
        self.null = p["null.literal"]

    def _text(self, b: bytes | None) -> str:
        return self.null if b is None else b.decode("utf-8", "replace")

    def format(self, m: Any) -> str:
        fields: list[str] = []
        if self.ts:
            kind, ts = m.timestamp()
            fields.append(
                {1: f"CreateTime:{ts}", 2: f"LogAppendTime:{ts}"}.get(kind, "NO_TIMESTAMP")
            )
        if self.partition:
            fields.append(f"Partition:{m.partition()}")
        if self.offset:
            fields.append(f"Offset:{m.offset()}")
        if self.headers:
            hs = m.headers() or []
            fields.append(
                self.h_sep.join(f"{k}:{self._text(v)}" for k, v in hs) if hs else "NO_HEADERS"
            )
        if self.key:
            fields.append(self._text(m.key()))
        if self.value:
            fields.append(self._text(m.value()))
        return self.sep.join(fields) + self.line_sep


def _start(args: argparse.Namespace) -> int:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END

    if args.from_beginning:
        return int(OFFSET_BEGINNING)
    o = str(args.offset).lower()
    if o == "earliest":
        return int(OFFSET_BEGINNING)
    if o == "latest":
        return int(OFFSET_END)
    try:
        n = int(o)
    except ValueError:
        raise CliError(
            f"--offset must be earliest, latest or a number, not {args.offset!r}", 2
        ) from None
    if n < 0:
        raise CliError("--offset must not be negative", 2)
    return n


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, TopicPartition

    if args.partition is not None and args.group:
        raise CliError("Options group and partition cannot be specified together.", 2)
    if str(args.offset) != "latest" and args.partition is None:
        raise CliError("The partition is required when offset is specified.", 2)
    if args.partition is not None and not args.topic:
        raise CliError("--partition needs --topic", 2)
    conf: dict[str, Any] = {
        "group.id": args.group or f"console-consumer-{random.randint(0, 99999)}",
        "enable.auto.commit": bool(args.group),
        "auto.offset.reset": "earliest" if args.from_beginning else "latest",
        "enable.partition.eof": False,
    }
    if args.isolation_level:
        conf["isolation.level"] = args.isolation_level
    conf.update(load_properties(args.consumer_config))
    conf.update(kv_pairs(args.consumer_property, "--consumer-property"))
    fmt = Formatter(
        {
            **kv_pairs(args.property, "--property"),
            **kv_pairs(args.formatter_property, "--formatter-property"),
        }
    )
    c = Consumer(client_config(args, **conf))
    count = 0
    try:
        if args.group:
            c.subscribe([args.topic] if args.topic else [f"^{args.include}"])
        else:
            md = c.list_topics(timeout=15)
            if args.topic:
                if args.topic not in md.topics or md.topics[args.topic].error is not None:
                    raise CliError(f"topic {args.topic} does not exist")
                topics = [args.topic]
            else:
                import re

                pat = re.compile(args.include)
                topics = sorted(t for t in md.topics if pat.fullmatch(t))
            start = _start(args)
            parts = [
                TopicPartition(t, p, start)
                for t in topics
                for p in sorted(md.topics[t].partitions)
                if args.partition is None or p == args.partition
            ]
            if args.partition is not None and not parts:
                raise CliError(f"partition {args.partition} of {args.topic} does not exist")
            c.assign(parts)
        idle_since = time.monotonic()
        out = sys.stdout
        while args.max_messages is None or count < args.max_messages:
            m = c.poll(0.2)
            if m is None:
                if (
                    args.timeout_ms is not None
                    and (time.monotonic() - idle_since) * 1000 >= args.timeout_ms
                ):
                    break
                continue
            err = m.error()
            if err is not None:
                if args.skip_message_on_error:
                    continue
                raise CliError(f"Error processing message: {err.str()}")
            idle_since = time.monotonic()
            out.write(fmt.format(m))
            count += 1
        out.flush()
    except KeyboardInterrupt:
        pass
    finally:
        c.close()
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0
