"""What the per-request metrics cost: ``python -m bench.metrics_cost_bench [--rounds 3] [--full]``.

Issue 20 asks that the produce and consume benchmarks stay within 3% with the metrics on.
This starts two ``kafkalite-server`` processes from this tree, identical but for
``kafkalite.request.metrics.enabled`` (true: every request recorded in RequestMetrics,
BrokerTopicMetrics, FetchConsumer/FetchFollower and ResponseSendTimeMs; false: none of
it), runs ``python -m bench``'s produce and consume workloads on both (``--quick``
volumes unless ``--full``), and prints per case the medians of:

- throughput (the benchmark's own figure), on and off;
- the broker's CPU time per record (``/proc/PID/schedstat`` around each run), which a
  shared machine moves far less than throughput.

Rounds alternate the order (on, off, then off, on, ...: ``Ctx.runs``) so that neither
broker always runs right after the other's writes (page-cache writeback would then
count against it).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

from bench.harness import client as clients
from bench.harness import machine, procstat
from bench.harness.brokers import Kafkalite
from bench.harness.workloads import WORKLOADS, Case, Ctx

ON = "metrics on"
OFF = "metrics off"


def log(msg: str) -> None:
    print(f"[metrics-cost {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cpu_us_per_record(case: Case, broker: str) -> float | None:
    """Median broker CPU µs per record over the rounds (CPU % of a core / records per s)."""
    vals = []
    for s in case.samples.get(broker, []):
        rate = s.metrics.get("msg/s")
        if s.broker_cpu is not None and rate:
            vals.append(s.broker_cpu / 100.0 / rate * 1e6)
    return statistics.median(vals) if vals else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _fmt(v: float | None, spec: str) -> str:
    return "—" if v is None else format(v, spec)


def _geomean(vals: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def table(cases: list[Case]) -> str:
    rows = [
        "| workload | throughput on | throughput off | on / off "
        "| broker CPU µs/record on | off | on / off |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    thr: list[float] = []
    cpu: list[float] = []
    for c in cases:
        t_on, t_off = c.median(ON, c.primary), c.median(OFF, c.primary)
        c_on, c_off = cpu_us_per_record(c, ON), cpu_us_per_record(c, OFF)
        rt, rc = _ratio(t_on, t_off), _ratio(c_on, c_off)
        if rt:
            thr.append(rt)
        if rc:
            cpu.append(rc)
        rows.append(
            f"| {c.workload} {c.name} ({c.primary}) | {_fmt(t_on, ',.0f')} | {_fmt(t_off, ',.0f')} "
            f"| {_fmt(rt, '.3f')} | {_fmt(c_on, '.3f')} | {_fmt(c_off, '.3f')} | {_fmt(rc, '.3f')} |"
        )
    rows.append(
        f"| geometric mean | | | {_fmt(_geomean(thr), '.3f')} | | | {_fmt(_geomean(cpu), '.3f')} |"
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.metrics_cost_bench")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each case on each broker")
    ap.add_argument("--full", action="store_true", help="the full volumes, not --quick's")
    ap.add_argument(
        "--workloads", default="produce,consume", help="comma-separated (default produce,consume)"
    )
    args = ap.parse_args(argv)
    brokers = [
        Kafkalite({"kafkalite.request.metrics.enabled": "true"}, name=ON),
        Kafkalite({"kafkalite.request.metrics.enabled": "false"}, name=OFF),
    ]
    t0 = time.perf_counter()
    try:
        for b in brokers:
            b.start()
        client, notes = clients.resolve("auto", [b.bootstrap for b in brokers])
        for n in notes:
            log(f"client: {n}")
        ctx = Ctx(list(brokers), client, not args.full, args.rounds, log)
        cases: list[Case] = []
        for name in args.workloads.split(","):
            ctx.workload = name
            procstat.settle()
            cases += WORKLOADS[name](ctx)
        print()
        print(f"kafkalite {machine.commit()}, load client: {client.describe()}")
        print(
            f"{args.rounds} rounds per case and broker, medians; {'full' if args.full else 'quick'} volumes"
        )
        print()
        print(table(cases))
        for s in ctx.skipped:
            print(f"- {s}")
        print(f"- load average at the end: {os.getloadavg()[0]:.2f}")
        print(f"- elapsed: {(time.perf_counter() - t0) / 60:.1f} min")
    finally:
        for b in brokers:
            b.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
