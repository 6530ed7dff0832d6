"""Python fallback of kl_loadgen (confluent-kafka), used only when the C client cannot be built.

Same command line and the same JSON line as ``bench/loadgen/kl_loadgen.c``;
its figures are labelled "python client fallback" because at high rates the
client, not the broker, is what they measure.

    python -m bench.harness.pyclient produce|consume|e2e -b HOST:PORT -t TOPIC [flags]
"""

from __future__ import annotations

import argparse
import json
import resource
import struct
import threading
import time
from typing import Any

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

_STAMP = struct.Struct("<q")


class Hist:
    """Latencies in microseconds; percentiles by sorting (the fallback is slow anyway)."""

    def __init__(self) -> None:
        self.v: list[int] = []

    def add_ns(self, ns: int) -> None:
        self.v.append(max(0, ns // 1000))

    def json(self) -> dict[str, float]:
        v = sorted(self.v)
        n = len(v)

        def pct(q: float) -> float:
            return v[max(0, min(n - 1, int(q * n) - 1))] / 1000 if n else 0.0

        return {
            "n": n,
            "p50": pct(0.5),
            "p99": pct(0.99),
            "p999": pct(0.999),
            "max": v[-1] / 1000 if n else 0.0,
        }


def owned(args: argparse.Namespace, c: int) -> list[int]:
    return [p for p in range(args.partitions) if p % args.clients == c]


def payload_text(size: int) -> bytes:
    words = b"kafka broker partition offset record batch segment index leader fetch "
    return (words * (size // len(words) + 2))[: max(0, size - 8)]


class ProduceSide:
    def __init__(self, args: argparse.Namespace, props: dict[str, str]) -> None:
        self.args = args
        self.sent = self.delivered = self.errors = self.bytes = 0
        self.lat = Hist()
        self.warm_start = 0
        self.start = self.done = 0
        self.finished = threading.Event()
        conf = {
            "bootstrap.servers": args.b,
            "acks": args.a,
            "linger.ms": args.l,
            "compression.codec": args.z,
            "queue.buffering.max.messages": 2000000,
            "socket.nagle.disable": True,
            "log_level": 3,
            **props,
        }
        self.producers = [Producer(conf) for _ in range(args.clients)]
        self.parts = [owned(args, c) for c in range(args.clients)]

    def _dr(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors += 1
            return
        self.delivered += 1
        v = msg.value()
        self.bytes += len(v)
        stamp = _STAMP.unpack_from(v)[0]
        if stamp >= self.warm_start:
            self.lat.add_ns(time.monotonic_ns() - stamp)

    def run(self) -> None:
        a = self.args
        body = payload_text(a.s)
        self.start = time.monotonic_ns()
        self.warm_start = self.start + int(a.w * 1e9)
        end = self.start + int(a.d * 1e9) if a.d > 0 else None
        i = 0
        while a.n <= 0 or i < a.n:
            now = time.monotonic_ns()
            if end is not None and now >= end:
                break
            if a.r > 0:
                due = self.start + int(i * 1e9 / a.r)
                if due > now:
                    for p in self.producers:
                        p.poll(0)
                    time.sleep(min(due - now, 1_000_000) / 1e9)
                    continue
            c = i % a.clients
            parts = self.parts[c]
            part = parts[(i // a.clients) % len(parts)]
            value = _STAMP.pack(time.monotonic_ns()) + body
            while True:
                try:
                    self.producers[c].produce(a.t, value, partition=part, on_delivery=self._dr)
                    break
                except BufferError:
                    self.producers[c].poll(0.001)
            i += 1
            if a.r > 0 or i % 1024 == 0:
                for p in self.producers:
                    p.poll(0)
        self.sent = i
        for p in self.producers:
            p.flush(60)
        self.done = time.monotonic_ns()
        self.finished.set()

    def json(self) -> dict[str, Any]:
        s = max(1e-9, (self.done - self.start) / 1e9)
        return {
            "sent": self.sent,
            "delivered": self.delivered,
            "errors": self.errors,
            "seconds": s,
            "msg_per_s": self.delivered / s,
            "mb_per_s": self.bytes / s / 1e6,
            "delivery_ms": self.lat.json(),
        }


class ConsumeSide:
    def __init__(self, args: argparse.Namespace, props: dict[str, str], eof: bool) -> None:
        self.args = args
        self.received = self.bytes = self.errors = self.eofs = 0
        self.first = self.last = 0
        self.lat = Hist()
        self.consumers = []
        for c in range(args.clients):
            cons = Consumer(
                {
                    "bootstrap.servers": args.b,
                    "group.id": f"kl-bench-{time.time()}",
                    "enable.auto.commit": False,
                    "enable.partition.eof": eof,
                    "log_level": 3,
                    **props,
                }
            )
            cons.assign([TopicPartition(args.t, p, OFFSET_BEGINNING) for p in owned(args, c)])
            self.consumers.append(cons)

    def poll_all(self, warm_start: int) -> None:
        for cons in self.consumers:
            for m in cons.consume(10000, 0.01 if len(self.consumers) == 1 else 0):
                now = time.monotonic_ns()
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        self.eofs += 1
                    else:
                        self.errors += 1
                    continue
                v = m.value() or b""
                if not self.received:
                    self.first = now
                self.last = now
                self.received += 1
                self.bytes += len(v)
                stamp = _STAMP.unpack_from(v)[0] if len(v) >= 8 else -1
                if stamp >= warm_start:
                    self.lat.add_ns(now - stamp)


def prime(args: argparse.Namespace, c: ConsumeSide, p: ProduceSide) -> None:
    """One record per partition, consumed before the clock starts (as kl_loadgen does)."""
    blank = bytes(args.s)
    for part in range(args.partitions):
        p.producers[part % args.clients].produce(args.t, blank, partition=part)
    for prod in p.producers:
        prod.flush(60)
    deadline = time.monotonic() + 60
    while c.received < args.partitions and time.monotonic() < deadline:
        c.poll_all(1 << 62)
    c.received = c.bytes = c.errors = 0


def head(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "client": f"python client fallback (confluent-kafka {confluent_kafka.__version__}, librdkafka {confluent_kafka.libversion()[0]})",
        "mode": args.mode,
        "clients": args.clients,
        "partitions": args.partitions,
        "size": args.s,
        "acks": args.a,
        "linger_ms": args.l,
        "compression": args.z,
        "rate": args.r,
    }


def cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["produce", "consume", "e2e"])
    ap.add_argument("-b", required=True)
    ap.add_argument("-t", required=True)
    ap.add_argument("-P", dest="partitions", type=int, default=1)
    ap.add_argument("-s", type=int, default=100)
    ap.add_argument("-n", type=int, default=0)
    ap.add_argument("-d", type=float, default=0)
    ap.add_argument("-r", type=float, default=0)
    ap.add_argument("-a", default="1")
    ap.add_argument("-l", type=int, default=5)
    ap.add_argument("-z", default="none")
    ap.add_argument("-C", dest="clients", type=int, default=1)
    ap.add_argument("-w", type=float, default=0)
    ap.add_argument("-X", action="append", default=[])
    ap.add_argument("-q", action="store_true")
    args = ap.parse_args()
    props = dict(x.split("=", 1) for x in args.X)
    out = head(args)
    if args.mode == "produce":
        p = ProduceSide(args, props)
        p.run()
        out |= p.json()
    elif args.mode == "consume":
        c = ConsumeSide(args, props, eof=True)
        t0 = time.monotonic_ns()
        stop_ns = t0 + int(args.d * 1e9) if args.d > 0 else None
        while not (
            (args.n > 0 and c.received >= args.n)
            or (c.eofs >= args.partitions and c.received > 0)
            or (stop_ns is not None and time.monotonic_ns() >= stop_ns)
        ):
            c.poll_all(0)
        s = max(1e-9, (c.last - c.first) / 1e9)
        out |= {
            "received": c.received,
            "errors": c.errors,
            "seconds": s,
            "total_seconds": (time.monotonic_ns() - t0) / 1e9,
            "msg_per_s": c.received / s,
            "mb_per_s": c.bytes / s / 1e6,
            "age_ms": c.lat.json(),
        }
    else:
        c = ConsumeSide(args, props, eof=False)
        p = ProduceSide(args, props)
        prime(args, c, p)
        th = threading.Thread(target=p.run, daemon=True)
        th.start()
        while not p.start:
            time.sleep(0.001)
        warm = p.start + int(args.w * 1e9)
        deadline: float | None = None
        while True:
            c.poll_all(warm)
            if p.finished.is_set():
                deadline = deadline or time.monotonic() + 10
                if c.received >= p.delivered or time.monotonic() > deadline:
                    break
        th.join()
        out |= p.json() | {
            "received": c.received,
            "consume_errors": c.errors,
            "e2e_ms": c.lat.json(),
        }
    out["cpu_s"] = cpu()
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
