"""The workloads of issue 7, each run A/B, B/A, ... when there is a second broker.

Every run gets a fresh topic, so runs do not see each other's data, and
records the broker's and the client's CPU over the client's wall time (100% =
one core), to show which side was the bottleneck.
"""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import admin, procstat
from bench.harness.brokers import Broker
from bench.harness.client import ClientError, ClientRun, LoadClient
from bench.harness.profile import Profiler

MiB = 1 << 20


@dataclass
class Sample:
    """One run of one case on one broker."""

    metrics: dict[str, float]
    broker_cpu: float | None = None  # % of one core
    client_cpu: float | None = None
    other_cpu: float | None = None  # everything else on the machine during the run
    note: str = ""


@dataclass
class Case:
    """A row of the table: one setting of one workload, with the samples of every broker."""

    workload: str
    name: str
    primary: str  # the metric the table leads with and the A/B ratio uses
    higher_better: bool
    samples: dict[str, list[Sample]] = field(default_factory=dict)

    def add(self, broker: str, s: Sample) -> None:
        self.samples.setdefault(broker, []).append(s)

    def median(self, broker: str, metric: str) -> float | None:
        vals = [s.metrics[metric] for s in self.samples.get(broker, []) if metric in s.metrics]
        return statistics.median(vals) if vals else None

    def cpu(self, broker: str) -> tuple[float | None, float | None, float | None]:
        """Median broker, client and other CPU (% of one core) over the rounds."""
        ss = self.samples.get(broker, [])
        out: list[float | None] = []
        for vals in (
            [s.broker_cpu for s in ss],
            [s.client_cpu for s in ss],
            [s.other_cpu for s in ss],
        ):
            got = [v for v in vals if v is not None]
            out.append(statistics.median(got) if got else None)
        return out[0], out[1], out[2]

    def notes(self, broker: str) -> str:
        return "; ".join(sorted({s.note for s in self.samples.get(broker, []) if s.note}))


@dataclass
class Ctx:
    brokers: list[Broker]
    client: LoadClient
    quick: bool
    rounds: int
    log: Callable[[str], None]
    skipped: list[str] = field(default_factory=list)
    profile_dir: Path | None = None  # py-spy broker A during each measured client run
    workload: str = ""
    profiles: list[Path] = field(default_factory=list)

    def runs(self) -> list[tuple[int, Broker]]:
        """A/B, B/A, A/B ...: every round visits every broker in turn, the order reversed
        every other round so neither broker always runs right after the other's writes
        (their page-cache writeback would count against it)."""
        out: list[tuple[int, Broker]] = []
        for r in range(self.rounds):
            order = self.brokers if r % 2 == 0 else self.brokers[::-1]
            out += [(r, b) for b in order]
        return out


def _measured(
    ctx: Ctx, broker: Broker, mode: str, topic: str, **opts: Any
) -> tuple[ClientRun, float | None, float, float | None]:
    procstat.settle(max_wait_s=10.0)  # the last run's dirty pages are not this one's cost
    with contextlib.ExitStack() as stack:
        if ctx.profile_dir is not None and broker is ctx.brokers[0] and broker.pid:
            raw = ctx.profile_dir / f"{ctx.workload}-{len(ctx.profiles)}.txt"
            ctx.profiles.append(raw)
            stack.enter_context(Profiler(broker.pid, raw))
        s0 = procstat.system_busy_seconds()
        b0 = broker.cpu_seconds()
        run = ctx.client.run(mode, broker.bootstrap, topic, **opts)
        b1 = broker.cpu_seconds()
        s1 = procstat.system_busy_seconds()
    wall = max(run.wall_s, 1e-9)
    bcpu = (b1 - b0) / wall * 100 if b0 is not None and b1 is not None else None
    ccpu = run.cpu_s / wall * 100
    other = None
    if bcpu is not None:
        other = max(0.0, (s1 - s0) / wall * 100 - bcpu - ccpu)
    return run, bcpu, ccpu, other


def _failed(run: ClientRun, key: str = "errors") -> str:
    if run.returncode != 0 or run.data.get(key):
        tail = run.stderr_tail.strip().splitlines()
        return f"client exit {run.returncode}" + (f": {tail[-1][:120]}" if tail else "")
    return ""


# -- 1. produce throughput ------------------------------------------------------


def produce(ctx: Ctx) -> list[Case]:
    """100 B and 1 KiB, acks 1 and all, 1 and 6 partitions, none and lz4; linger 5 ms."""
    volume = (256 if ctx.quick else 2048) * MiB
    max_s = 20 if ctx.quick else 90
    cases = []
    for size in (100, 1024):
        for acks in ("1", "all"):
            for parts in (1, 6):
                for codec in ("none", "lz4"):
                    name = f"{size} B, acks={acks}, {parts} part, {codec}"
                    case = Case("produce", name, "msg/s", True)
                    count = volume // size
                    for _, b in ctx.runs():
                        topic = admin.unique(f"produce-{size}-{parts}")
                        ctx.log(f"produce {name} on {b.name}")
                        admin.create_topic(b.bootstrap, topic, parts)
                        try:
                            run, bcpu, ccpu, other = _measured(
                                ctx,
                                b,
                                "produce",
                                topic,
                                size=size,
                                count=count,
                                duration=max_s,
                                acks=acks,
                                linger=5,
                                compression=codec,
                                partitions=parts,
                            )
                            d = run.data
                            note = _failed(run)
                            if codec != "none":
                                stored = admin.stored_codec(b.bootstrap, topic)
                                if stored != codec:
                                    note = (note + "; " if note else "") + f"stored as {stored}"
                            case.add(
                                b.name,
                                Sample(
                                    {
                                        "msg/s": d["msg_per_s"],
                                        "MB/s": d["mb_per_s"],
                                        "records": d["delivered"],
                                        "delivery p50 ms": d["delivery_ms"]["p50"],
                                        "delivery p99 ms": d["delivery_ms"]["p99"],
                                    },
                                    bcpu,
                                    ccpu,
                                    other,
                                    note,
                                ),
                            )
                        finally:
                            admin.delete_topics(b.bootstrap, [topic])
                    cases.append(case)
    return cases


# -- 2. consume from a backlog ----------------------------------------------------


def consume(ctx: Ctx) -> list[Case]:
    """Read a backlog from offset 0 (page cache warm, as right after it was written).

    kafkalite serves PLAINTEXT fetches with os.sendfile from the segment files.
    """
    plans = [(1024, (512 if ctx.quick else 1024) * MiB), (100, (64 if ctx.quick else 256) * MiB)]
    cases = []
    for size, volume in plans:
        count = volume // size
        name = f"{size} B records, {volume // MiB} MiB backlog, 1 part"
        case = Case("consume", name, "MB/s", True)
        topics: dict[str, str] = {}
        for b in ctx.brokers:
            topic = admin.unique(f"backlog-{size}")
            ctx.log(f"consume: writing the {volume // MiB} MiB backlog on {b.name}")
            admin.create_topic(b.bootstrap, topic, 1)
            fill = ctx.client.run(
                "produce",
                b.bootstrap,
                topic,
                size=size,
                count=count,
                acks="1",
                linger=5,
                partitions=1,
            )
            if fill.data.get("delivered") != count:
                ctx.skipped.append(
                    f"consume {name} on {b.name}: backlog incomplete "
                    f"({fill.data.get('delivered')} of {count})"
                )
            topics[b.name] = topic
        for _, b in ctx.runs():
            ctx.log(f"consume {name} on {b.name}")
            run, bcpu, ccpu, other = _measured(
                ctx, b, "consume", topics[b.name], count=count, duration=120, partitions=1
            )
            d = run.data
            note = _failed(run)
            if d["received"] < count:
                note = (note + "; " if note else "") + f"got {d['received']} of {count}"
            case.add(
                b.name,
                Sample(
                    {"MB/s": d["mb_per_s"], "msg/s": d["msg_per_s"], "records": d["received"]},
                    bcpu,
                    ccpu,
                    other,
                    note,
                ),
            )
        for b in ctx.brokers:
            admin.delete_topics(b.bootstrap, [topics[b.name]])
        cases.append(case)
    return cases


# -- 3. end-to-end latency ------------------------------------------------------------


def latency(ctx: Ctx) -> list[Case]:
    """Paced producer + consumer in one process; the send time travels in the record."""
    duration, warmup = (6, 1) if ctx.quick else (30, 5)
    cases = []
    for rate in (1000, 10000, 50000):
        name = f"{rate:,} msg/s, 100 B, acks=1, linger 0, 1 part"
        case = Case("latency", name, "p99 ms", False)
        for _, b in ctx.runs():
            topic = admin.unique(f"latency-{rate}")
            ctx.log(f"latency {name} on {b.name}")
            admin.create_topic(b.bootstrap, topic, 1)
            try:
                run, bcpu, ccpu, other = _measured(
                    ctx,
                    b,
                    "e2e",
                    topic,
                    size=100,
                    rate=rate,
                    duration=duration + warmup,
                    warmup=warmup,
                    acks="1",
                    linger=0,
                    partitions=1,
                )
            finally:
                admin.delete_topics(b.bootstrap, [topic])
            d = run.data
            e = d["e2e_ms"]
            case.add(
                b.name,
                Sample(
                    {
                        "p50 ms": e["p50"],
                        "p99 ms": e["p99"],
                        "p99.9 ms": e["p999"],
                        "max ms": e["max"],
                        "msg/s": d["msg_per_s"],
                    },
                    bcpu,
                    ccpu,
                    other,
                    _failed(run),
                ),
            )
        cases.append(case)
    return cases


# -- 4. many clients ---------------------------------------------------------------------


def clients(ctx: Ctx) -> list[Case]:
    """200 producers + 200 consumers, one partition each, 10 msg/s per producer.

    Consumers are assigned their partition (no group): the group protocol is
    not what this measures.
    """
    n, per_client = 200, 10
    duration, warmup = (10, 5) if ctx.quick else (40, 10)
    name = f"{n} producers + {n} consumers, {n * per_client:,} msg/s total, 100 B"
    case = Case("many clients", name, "p99 ms", False)
    for _, b in ctx.runs():
        topic = admin.unique("clients")
        ctx.log(f"many clients on {b.name}")
        admin.create_topic(b.bootstrap, topic, n)
        try:
            run, bcpu, ccpu, other = _measured(
                ctx,
                b,
                "e2e",
                topic,
                size=100,
                rate=n * per_client,
                duration=duration + warmup,
                warmup=warmup,
                acks="1",
                linger=5,
                partitions=n,
                clients=n,
                timeout=300,
            )
        finally:
            admin.delete_topics(b.bootstrap, [topic])
        d = run.data
        e = d["e2e_ms"]
        case.add(
            b.name,
            Sample(
                {
                    "p50 ms": e["p50"],
                    "p99 ms": e["p99"],
                    "p99.9 ms": e["p999"],
                    "msg/s": d["msg_per_s"],
                },
                bcpu,
                ccpu,
                other,
                _failed(run),
            ),
        )
    return [case]


# -- 5. 10,000 partitions ----------------------------------------------------------------


def scale(ctx: Ctx) -> list[Case]:
    """10 topics x 1,000 partitions on one broker: create, Metadata, RSS, restart.

    Runs once per broker (creating 10,000 partitions twice would double the
    time for no new information). Start-up is measured only on brokers the
    harness started and that keep data (kafkalite): stop, start, time to the
    ready line and to the first full Metadata.
    """
    topics = {admin.unique(f"scale{i}"): 1000 for i in range(10)}
    cases = {
        k: Case("scale", k, k, hb)
        for k, hb in (
            ("create 10,000 partitions (s)", False),
            ("Metadata, all 10,000 partitions (ms)", False),
            ("RSS idle with 10,000 partitions (MB)", False),
            ("start-up with 10,000 partitions (s)", False),
            ("RSS after restart (MB)", False),
        )
    }
    for b in ctx.brokers:
        ctx.log(f"scale: creating 10,000 partitions on {b.name}")
        try:
            created = admin.create_topics(b.bootstrap, topics, timeout=600)
        except RuntimeError as e:
            ctx.skipped.append(f"scale on {b.name}: {e}")
            continue
        cases["create 10,000 partitions (s)"].add(
            b.name, Sample({"create 10,000 partitions (s)": created})
        )
        time.sleep(2)
        md = admin.metadata_timing(b.bootstrap)
        cases["Metadata, all 10,000 partitions (ms)"].add(
            b.name,
            Sample(
                {
                    "Metadata, all 10,000 partitions (ms)": md["median_ms"],
                    "max ms": md["max_ms"],
                    "response KiB": md["bytes"] / 1024,
                    "partitions": md["partitions"],
                }
            ),
        )
        rss = b.rss_bytes()
        if rss is not None:
            cases["RSS idle with 10,000 partitions (MB)"].add(
                b.name, Sample({"RSS idle with 10,000 partitions (MB)": rss / 1e6})
            )
        if not (b.restartable and b.durable):
            ctx.skipped.append(
                f"scale start-up on {b.name}: not restartable by the harness or keeps no data"
            )
            continue
        ctx.log(f"scale: restarting {b.name}")
        t0 = time.perf_counter()
        ready = b.restart()
        md2 = _wait_metadata(b.bootstrap, int(md["partitions"]))
        full = time.perf_counter() - t0
        cases["start-up with 10,000 partitions (s)"].add(
            b.name,
            Sample(
                {
                    "start-up with 10,000 partitions (s)": ready,
                    "to full Metadata s": full,
                    "Metadata ms": md2,
                }
            ),
        )
        time.sleep(2)
        rss = b.rss_bytes()
        if rss is not None:
            cases["RSS after restart (MB)"].add(
                b.name, Sample({"RSS after restart (MB)": rss / 1e6})
            )
    return [c for c in cases.values() if c.samples]


def _wait_metadata(bootstrap: str, partitions: int, timeout: float = 120.0) -> float:
    deadline = time.monotonic() + timeout
    while True:
        try:
            md = admin.metadata_timing(bootstrap, repeats=1)
            if md["partitions"] >= partitions or time.monotonic() > deadline:
                return md["median_ms"]
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.05)


# -- 6. start-up -------------------------------------------------------------------------


STARTUP_BENCH = Path(__file__).resolve().parents[1] / "startup_bench.py"


def startup(ctx: Ctx) -> list[Case]:
    """Delegated to ``bench/startup_bench.py`` (the testing-fixture issue) when it exists."""
    if not STARTUP_BENCH.exists():
        ctx.skipped.append(
            "start-up: bench/startup_bench.py does not exist yet (testing-fixture issue); skipped"
        )
        return []
    ctx.log("startup: running bench/startup_bench.py")
    r = subprocess.run(
        [sys.executable, str(STARTUP_BENCH)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=STARTUP_BENCH.parents[1],
    )
    case = Case("startup", "bench/startup_bench.py", "exit code", False)
    case.add("output", Sample({"exit code": float(r.returncode)}, note=r.stdout.strip()[-2000:]))
    return [case]


WORKLOADS: dict[str, Callable[[Ctx], list[Case]]] = {
    "produce": produce,
    "consume": consume,
    "latency": latency,
    "clients": clients,
    "scale": scale,
    "startup": startup,
}

__all__ = ["WORKLOADS", "Case", "ClientError", "Ctx", "Sample"]
