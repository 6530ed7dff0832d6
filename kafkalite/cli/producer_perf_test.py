"""``kafkalite producer-perf-test``: Kafka's ``kafka-producer-perf-test.sh``
(ProducerPerformance) on confluent-kafka's Producer: ``--num-records`` records of
``--record-size`` random bytes (or lines of ``--payload-file``) at ``--throughput``
records/s (-1: unthrottled); a progress line every 5 s and the total line with
latency percentiles, in Kafka's format."""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from kafkalite.cli.common import CliError, add_bootstrap, client_config, load_properties
from kafkalite.cli.console_producer import kv_pairs

REPORTING_INTERVAL = 5.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p, required=False)
    p.add_argument("--topic", required=True)
    p.add_argument("--num-records", type=int, required=True)
    size = p.add_mutually_exclusive_group(required=True)
    size.add_argument("--record-size", type=int)
    size.add_argument("--payload-file")
    p.add_argument("--payload-delimiter", default="\n")
    p.add_argument("--throughput", type=float, required=True, help="records/s; -1 unthrottled")
    p.add_argument("--producer-props", nargs="+", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--producer.config", dest="producer_config")
    p.add_argument("--transactional-id")
    p.add_argument("--transaction-duration-ms", type=int, default=3000)
    p.add_argument("--print-metrics", action="store_true", help="accepted; prints nothing more")


class Stats:
    """ProducerPerformance.Stats: windows and totals of latency and bytes."""

    def __init__(self) -> None:
        self.start = self.window_start = time.monotonic()
        self.count = self.bytes = 0
        self.total_latency = self.max_latency = 0.0
        self.latencies: list[int] = []
        self.w_count = self.w_bytes = 0
        self.w_total = self.w_max = 0.0

    def record(self, latency_ms: float, size: int) -> None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency_ms
        self.max_latency = max(self.max_latency, latency_ms)
        self.latencies.append(int(latency_ms))
        self.w_count += 1
        self.w_bytes += size
        self.w_total += latency_ms
        self.w_max = max(self.w_max, latency_ms)
        if time.monotonic() - self.window_start >= REPORTING_INTERVAL:
            self.print_window()

    def print_window(self) -> None:
        elapsed = max(time.monotonic() - self.window_start, 1e-9)
        avg = self.w_total / max(self.w_count, 1)
        print(
            f"{self.w_count} records sent, {self.w_count / elapsed:.1f} records/sec "
            f"({self.w_bytes / elapsed / (1024 * 1024):.2f} MB/sec), {avg:.1f} ms avg latency, "
            f"{self.w_max:.1f} ms max latency.",
            flush=True,
        )
        self.window_start = time.monotonic()
        self.w_count = self.w_bytes = 0
        self.w_total = self.w_max = 0.0

    def total_line(self) -> str:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        lat = sorted(self.latencies) or [0]

        def pct(q: float) -> int:
            return lat[min(int(q * len(lat)), len(lat) - 1)]

        avg = self.total_latency / max(self.count, 1)
        return (
            f"{self.count} records sent, {self.count / elapsed:.1f} records/sec "
            f"({self.bytes / elapsed / (1024 * 1024):.2f} MB/sec), {avg:.2f} ms avg latency, "
            f"{self.max_latency:.2f} ms max latency, {pct(0.5)} ms 50th, {pct(0.95)} ms 95th, "
            f"{pct(0.99)} ms 99th, {pct(0.999)} ms 99.9th."
        )


def _payloads(args: argparse.Namespace) -> list[bytes]:
    if args.payload_file:
        try:
            with open(args.payload_file, encoding="utf-8") as f:
                items = [x for x in f.read().split(args.payload_delimiter) if x]
        except OSError as e:
            raise CliError(f"cannot read {args.payload_file}: {e.strerror}") from None
        if not items:
            raise CliError(f"File is empty: {args.payload_file}")
        print(f"Number of messages read: {len(items)}")
        return [x.encode() for x in items]
    if args.record_size is None or args.record_size < 0:
        raise CliError("--record-size must be a positive number", 2)
    # Kafka fills the payload with random uppercase letters
    rnd = random.Random(0)
    return [bytes(rnd.randrange(65, 91) for _ in range(args.record_size))]


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import Producer

    props = {
        **load_properties(args.producer_config),
        **kv_pairs(args.producer_props, "--producer-props"),
    }
    if not args.bootstrap_server:
        args.bootstrap_server = props.pop("bootstrap.servers", None)
        if not args.bootstrap_server:
            raise CliError(
                "--bootstrap-server (or bootstrap.servers in --producer-props) is required", 2
            )
        from kafkalite.cli.common import probe

        probe(args.bootstrap_server)
    props.pop("bootstrap.servers", None)
    if args.transactional_id:
        props["transactional.id"] = args.transactional_id
    payloads = _payloads(args)
    p = Producer(client_config(args, **props))
    stats = Stats()
    errors: list[str] = []
    if args.transactional_id:
        p.init_transactions(30)
        p.begin_transaction()
        txn_start = time.monotonic()

    def callback(sent: float, size: int) -> Any:
        def done(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err.str())
            else:
                stats.record((time.monotonic() - sent) * 1000, size)

        return done

    start = time.monotonic()
    for i in range(args.num_records):
        value = payloads[i % len(payloads)] if args.payload_file else payloads[0]
        while True:
            try:
                p.produce(args.topic, value, on_delivery=callback(time.monotonic(), len(value)))
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
        if errors:
            break
        if (
            args.transactional_id
            and (time.monotonic() - txn_start) * 1000 >= args.transaction_duration_ms
        ):
            p.commit_transaction(30)
            p.begin_transaction()
            txn_start = time.monotonic()
        if args.throughput > 0:
            ahead = (i + 1) / args.throughput - (time.monotonic() - start)
            if ahead > 0:
                p.poll(0)
                time.sleep(ahead)
    if args.transactional_id and not errors:
        p.commit_transaction(30)
    p.flush(60)
    if errors:
        raise CliError(f"Error when sending message to topic {args.topic}: {errors[0]}")
    print(stats.total_line())
    return 0
