"""The frame fuzzer for as long as asked, against a broker process, with a canary.

    python -m bench.fuzz_bench [--minutes 30] [--connections 4] [--seed 1]
                               [--bootstrap HOST:PORT --broker-log PATH]
                               [--exclude-api 19,37]

Starts ``kafkalite-server`` as its own process (``bench.harness.brokers``) so that
a crash is a process death (it is restarted on the same data and counted) and
its RSS can be read from /proc; ``--bootstrap`` fuzzes a running broker instead
(RSS if it listens on this machine, tracebacks if ``--broker-log`` names its log).

Every registered attack class of ``kafkalite.testing.fuzz`` runs from
``--connections`` connections. Meanwhile a canary producer (confluent-kafka,
acks=all, idempotent) writes a numbered record every few milliseconds to its
own topic and a canary consumer reads them back: at the end every acknowledged
record must have been consumed exactly once. Prints frames per class, crashes,
tracebacks in the broker's log, peak RSS, canary acked/consumed/lost/duplicated
and the longest canary stall (the longest gap between two acknowledgements, or
between two consumed records).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition  # noqa: E402

from bench.harness import procstat  # noqa: E402
from bench.harness.admin import create_topics  # noqa: E402
from bench.harness.brokers import External, Kafkalite  # noqa: E402
from kafkalite.testing.fuzz import (  # noqa: E402
    FuzzReport,
    FuzzTarget,
    NamePools,
    read_api_versions,
    run_fuzz,
)

CANARY_TOPIC = "fuzz-canary"
FUZZ_TOPICS = ["fuzz-0", "fuzz-1"]


def log(msg: str) -> None:
    print(f"[fuzz {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Canary:
    """A producer numbering its records and a consumer checking each arrives exactly once."""

    def __init__(self, bootstrap: str, interval_s: float = 0.005) -> None:
        self.bootstrap = bootstrap
        self.interval_s = interval_s
        self.stop = threading.Event()
        self.acked: set[int] = set()
        self.failed = 0
        self.consumed: collections.Counter[int] = collections.Counter()
        self.max_ack_gap = 0.0
        #: wall-clock time the longest gap ended, to find it in the broker's log
        self.max_ack_gap_at = ""
        self.max_consume_gap = 0.0
        self._last_ack = 0.0
        self._last_consumed = 0.0
        self.sent = 0
        self.threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]

    def start(self) -> None:
        now = time.monotonic()
        self._last_ack = self._last_consumed = now
        for t in self.threads:
            t.start()

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failed += 1
            return
        seq = int(msg.value() or b"-1")
        self.acked.add(seq)
        now = time.monotonic()
        if now - self._last_ack > self.max_ack_gap:
            self.max_ack_gap = now - self._last_ack
            self.max_ack_gap_at = time.strftime("%H:%M:%S")
        self._last_ack = now

    def _produce(self) -> None:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "message.timeout.ms": 600_000,
                "log_level": 3,
            }
        )
        while not self.stop.is_set():
            try:
                p.produce(
                    CANARY_TOPIC,
                    str(self.sent).encode(),
                    partition=0,
                    on_delivery=self._on_delivery,
                )
                self.sent += 1
            except BufferError:
                pass
            p.poll(self.interval_s)
        p.flush(120)

    def _consume(self) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "fuzz-canary",
                "enable.auto.commit": False,
                "log_level": 3,
            }
        )
        c.assign([TopicPartition(CANARY_TOPIC, 0, 0)])
        idle_since: float | None = None
        while True:
            msg = c.poll(0.2)
            now = time.monotonic()
            if msg is None or msg.error() is not None:
                if self.stop.is_set() and self.producer_done():
                    idle_since = idle_since or now
                    if now - idle_since > 10:  # drained: nothing new for 10 s
                        break
                continue
            idle_since = None
            self.consumed[int(msg.value() or b"-1")] += 1
            self.max_consume_gap = max(self.max_consume_gap, now - self._last_consumed)
            self._last_consumed = now
        c.close()

    def producer_done(self) -> bool:
        return not self.threads[0].is_alive()

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(180)

    def summary(self) -> dict[str, Any]:
        consumed = set(self.consumed)
        return {
            "produced": self.sent,
            "acked": len(self.acked),
            "failed": self.failed,
            "consumed": len(consumed),
            "lost": len(self.acked - consumed),
            "duplicated": sum(1 for n in self.consumed.values() if n > 1),
            "longest ack gap s": round(self.max_ack_gap, 3),
            "ending at": self.max_ack_gap_at,
            "longest consume gap s": round(self.max_consume_gap, 3),
        }


class Watch:
    """Restarts the broker when it dies and samples its RSS."""

    def __init__(self, broker: Kafkalite | External) -> None:
        self.broker = broker
        self.crashes: list[str] = []
        self.peak_rss = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        b = self.broker
        while not self.stop.wait(0.5):
            if isinstance(b, Kafkalite) and b.proc is not None and b.proc.poll() is not None:
                code = b.proc.returncode
                self.crashes.append(f"exit code {code} at {time.strftime('%H:%M:%S')}")
                log(f"broker died (exit code {code}); restarting it")
                b.start()
                continue
            if b.pid is not None and procstat.alive(b.pid):
                self.peak_rss = max(self.peak_rss, _hwm(b.pid))


def _hwm(pid: int) -> int:
    """Peak RSS of ``pid`` so far (VmHWM), in bytes."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def scan_log(path: Path | None) -> tuple[int, int, collections.Counter[str]]:
    """Tracebacks and ERROR lines in the broker's log, and the tracebacks' causes."""
    if path is None or not path.exists():
        return 0, 0, collections.Counter()
    tracebacks = errors = 0
    causes: collections.Counter[str] = collections.Counter()
    in_tb = False
    last = ""
    with path.open(errors="replace") as f:
        for line in f:
            if line.startswith("Traceback (most recent call last)"):
                tracebacks += 1
                in_tb = True
                continue
            if in_tb:
                if line.startswith((" ", "\t")):
                    last = line.strip()
                    continue
                causes[f"{line.strip()[:120]} (after {last[:80]})"] += 1
                in_tb = False
            if " ERROR " in line:
                errors += 1
    return tracebacks, errors, causes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.fuzz_bench", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--bootstrap", metavar="HOST:PORT", help="fuzz this broker instead of starting one"
    )
    ap.add_argument(
        "--broker-log", type=Path, help="with --bootstrap: its log, scanned for tracebacks"
    )
    ap.add_argument(
        "--exclude-api",
        default="",
        help="comma-separated API keys no request is built for (e.g. a known finding)",
    )
    ap.add_argument("--classes", default="", help="comma-separated attack classes (default: all)")
    ap.add_argument("--max-rss-mb", type=float, default=300.0, help="acceptance: peak RSS below")
    ap.add_argument("--max-stall-s", type=float, default=1.0, help="acceptance: canary stall below")
    args = ap.parse_args(argv)
    exclude = frozenset(int(k) for k in args.exclude_api.split(",") if k)

    broker: Kafkalite | External
    if args.bootstrap:
        broker = External(args.bootstrap)
        log_path = args.broker_log
    else:
        broker = Kafkalite()
        log(f"starting kafkalite-server in {broker.dir}")
        broker.start()
        log_path = broker.dir / "broker.log"
    watch = Watch(broker)
    canary = Canary(broker.bootstrap)
    try:
        create_topics(broker.bootstrap, {CANARY_TOPIC: 1, **dict.fromkeys(FUZZ_TOPICS, 2)})
        watch.thread.start()
        canary.start()
        host, port = broker.bootstrap.rsplit(":", 1)
        pools = NamePools(topics=list(FUZZ_TOPICS), avoid={CANARY_TOPIC})
        target = FuzzTarget(host, int(port), {}, pools, exclude_apis=exclude)
        log(
            f"fuzzing {broker.bootstrap} for {args.minutes} min from {args.connections}"
            f" connections, seed {args.seed}"
        )

        async def fuzz() -> FuzzReport:
            target.apis = await read_api_versions(target)
            return await run_fuzz(
                target,
                classes=[c for c in args.classes.split(",") if c] or None,
                seconds=args.minutes * 60,
                connections=args.connections,
                seed=args.seed,
            )

        report = asyncio.run(fuzz())
        log("fuzzing done; draining the canary")
        canary.finish()
    finally:
        watch.stop.set()
        watch.thread.join(5)
        final_rss = broker.rss_bytes()
        if isinstance(broker, Kafkalite):
            broker.stop()

    tracebacks, errors, causes = scan_log(log_path)
    c = canary.summary()
    print(f"# fuzz bench: {args.minutes} min, {args.connections} connections, seed {args.seed}")
    print(f"broker: {broker.describe()}; log {log_path}")
    if exclude:
        print(f"excluded API keys: {sorted(exclude)}")
    print()
    print(report.table())
    frames = report.frames
    secs = report.seconds
    print(f"total: {frames} frames in {secs:.0f} s ({frames / max(secs, 1):.0f}/s)")
    print(f"connect failures (broker down): {report.connect_failures}")
    print()
    print(f"crashes: {len(watch.crashes)} {watch.crashes if watch.crashes else ''}")
    print(f"tracebacks in the broker log: {tracebacks}; ERROR lines: {errors}")
    for cause, n in causes.most_common(10):
        print(f"  {n} x {cause}")
    print(f"peak RSS: {watch.peak_rss / 2**20:.0f} MB (final {(final_rss or 0) / 2**20:.0f} MB)")
    print("canary: " + ", ".join(f"{k} {v}" for k, v in c.items()))
    findings = report.findings()
    if findings:
        print(f"findings ({len(findings)}):")
        for f in findings[:30]:
            print("  " + f[:300])
    stall = max(c["longest ack gap s"], c["longest consume gap s"])
    checks = {
        "no crash": not watch.crashes,
        "no traceback": tracebacks == 0,
        f"peak RSS < {args.max_rss_mb:g} MB": watch.peak_rss < args.max_rss_mb * 2**20,
        "canary lost 0, duplicated 0": c["lost"] == 0 and c["duplicated"] == 0,
        f"canary stall < {args.max_stall_s:g} s": stall < args.max_stall_s,
        "every frame answered or closed": not findings,
    }
    print("acceptance: " + ", ".join(f"{k} {'ok' if v else 'FAILED'}" for k, v in checks.items()))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
