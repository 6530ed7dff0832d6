"""``kafkalite consumer-perf-test``: Kafka's ``kafka-consumer-perf-test.sh``
(ConsumerPerformance) on confluent-kafka's Consumer: reads ``--messages`` records of
``--topic`` in a group and prints Kafka's CSV header and result line (start.time,
end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec)."""

from __future__ import annotations

import argparse
import datetime
import random
import sys
import time
from typing import Any

from kafkalite.cli.common import CliError, add_bootstrap, client_config, load_properties
from kafkalite.cli.console_producer import kv_pairs


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--messages", type=int, required=True)
    p.add_argument("--group", default=f"perf-consumer-{random.randint(0, 99999)}")
    p.add_argument(
        "--timeout", type=int, default=10000, help="ms without a record before giving up"
    )
    p.add_argument("--from-latest", action="store_true")
    p.add_argument("--fetch-size", type=int)
    p.add_argument("--consumer.config", dest="consumer_config")
    p.add_argument("--consumer-property", nargs="+", action="append", default=[])
    p.add_argument("--date-format", default="yyyy-MM-dd HH:mm:ss:SSS")
    p.add_argument("--hide-header", action="store_true")
    p.add_argument("--show-detailed-stats", action="store_true", help="accepted; totals only")
    p.add_argument("--print-metrics", action="store_true", help="accepted; prints nothing more")


def java_date(ms: float, pattern: str) -> str:
    """The SimpleDateFormat patterns the tool's default uses (yyyy MM dd HH mm ss SSS)."""
    d = datetime.datetime.fromtimestamp(ms / 1000)
    out = pattern
    for java, value in (
        ("yyyy", f"{d.year:04d}"),
        ("SSS", f"{d.microsecond // 1000:03d}"),
        ("MM", f"{d.month:02d}"),
        ("dd", f"{d.day:02d}"),
        ("HH", f"{d.hour:02d}"),
        ("mm", f"{d.minute:02d}"),
        ("ss", f"{d.second:02d}"),
    ):
        out = out.replace(java, value)
    return out


HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer

    conf: dict[str, Any] = {
        "group.id": args.group,
        "auto.offset.reset": "latest" if args.from_latest else "earliest",
        "enable.auto.commit": True,
    }
    if args.fetch_size:
        conf["max.partition.fetch.bytes"] = args.fetch_size
    conf.update(load_properties(args.consumer_config))
    conf.update(kv_pairs(args.consumer_property, "--consumer-property"))
    joined: list[float] = []
    c = Consumer(client_config(args, **conf))
    start = time.time()
    c.subscribe([args.topic], on_assign=lambda _c, _p: joined.append(time.time()))
    count = size = 0
    last = time.monotonic()
    while count < args.messages:
        batch = c.consume(min(500, args.messages - count), 0.2)
        if not batch:
            if (time.monotonic() - last) * 1000 >= args.timeout:
                print(
                    f"WARNING: Exiting before consuming the expected number of messages: timeout "
                    f"({args.timeout} ms) exceeded. You can use the --timeout option to increase "
                    "the timeout.",
                    file=sys.stderr,
                )
                break
            continue
        last = time.monotonic()
        for m in batch:
            err = m.error()
            if err is not None:
                c.close()
                raise CliError(f"consume failed: {err.str()}")
            count += 1
            size += len(m.value() or b"") + len(m.key() or b"")
    end = time.time()
    c.close()
    elapsed = max(end - start, 1e-9)
    join_ms = int(((joined[0] if joined else start) - start) * 1000)
    fetch_s = max((end - start) - join_ms / 1000, 1e-9)
    mb = size / (1024 * 1024)
    if not args.hide_header:
        print(HEADER)
    start_s = java_date(start * 1000, args.date_format)
    end_s = java_date(end * 1000, args.date_format)
    print(
        f"{start_s}, {end_s}, {mb:.4f}, {mb / elapsed:.4f}, {count}, {count / elapsed:.4f}, "
        f"{join_ms}, {int(fetch_s * 1000)}, {mb / fetch_s:.4f}, {count / fetch_s:.4f}"
    )
    return 0 if count >= args.messages else 1
