"""Many partitions on one broker: creation, start-up, and the first appends.

    python bench/partitions_bench.py [--partitions 10000] [--topics 10] [--profile]
    python bench/partitions_bench.py --first-appends [--partitions 200]

Default mode runs a real broker process (``python -m kafkalite.cli.server``,
Kafka's defaults, fsync of checkpoints on) in a temp dir and times:

- ``create``: CreateTopics for ``--topics`` topics sharing ``--partitions``
  partitions (confluent-kafka AdminClient) until Metadata shows a leader for
  every partition;
- ``start-up``: SIGTERM, start again, time to the "ready" line and to the
  first Metadata response listing every partition with a leader.

``--profile`` also loads the same data dir in-process under cProfile
(``LogManager.startup`` + ``KafkaBroker.start``) and prints the top functions.

``--first-appends`` is the log layer alone: ``--partitions`` new logs with
preallocated (sparse) indexes, one append of two 5 KiB batches each (the
second batch adds an index entry), then a second round;
it prints the per-append latency percentiles of each round (the first touch
of a fresh mmap'd index is what it measures).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Proc:
    def __init__(self, root: Path) -> None:
        self.port = _free_port()
        self.cfg = root / "server.yaml"
        self.data = root / "data"
        self.cfg.write_text(
            f"listeners: PLAINTEXT://127.0.0.1:{self.port}\n"
            f"log.dirs: {self.data}\n"
            "broker.id: 0\n"
            "offsets.topic.replication.factor: 1\n"
            "transaction.state.log.replication.factor: 1\n"
            "transaction.state.log.min.isr: 1\n"
        )
        self.proc: subprocess.Popen[str] | None = None
        self.err = root / "broker.err"
        self.level = "WARNING"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, level: str | None = None) -> float:
        level = level or self.level
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkalite.cli.server", str(self.cfg), "--log-level", level],
            stdout=subprocess.PIPE,
            stderr=self.err.open("a"),
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "ready on" not in line:
            raise RuntimeError(f"broker did not start: {line!r}\n{self.err.read_text()[-3000:]}")
        return time.perf_counter() - t0

    def stop(self) -> float:
        assert self.proc is not None
        t0 = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(300)
        self.proc.stdout.close()  # type: ignore[union-attr]
        self.proc = None
        return time.perf_counter() - t0


def _all_leaders(bootstrap: str, topics: list[str], partitions: int) -> bool:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=30)
    n = 0
    for t in topics:
        tm = md.topics.get(t)
        if tm is None or tm.error is not None:
            return False
        n += sum(1 for p in tm.partitions.values() if p.leader >= 0)
    return n == partitions


def _wait_leaders(bootstrap: str, topics: list[str], partitions: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not _all_leaders(bootstrap, topics, partitions):
        if time.monotonic() > deadline:
            raise RuntimeError("not every partition has a leader")
        time.sleep(0.05)


def scale(args: argparse.Namespace) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    root = Path(tempfile.mkdtemp(prefix="kafkalite-partitions-", dir=args.dir))
    b = Proc(root)
    b.level = args.log_level
    try:
        b.start()
        per = args.partitions // args.topics
        topics = [f"scale{i}" for i in range(args.topics)]
        total = per * args.topics
        admin = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0})
        t0 = time.perf_counter()
        futs = admin.create_topics(
            [NewTopic(t, per, 1) for t in topics], request_timeout=600, operation_timeout=600
        )
        for f in futs.values():
            f.result(600)
        _wait_leaders(b.bootstrap, topics, total, 600)
        create_s = time.perf_counter() - t0
        stop_s = b.stop()
        seen = len(b.err.read_text())
        ready_s = b.start("INFO")
        t1 = time.perf_counter()
        _wait_leaders(b.bootstrap, topics, total, 600)
        full_s = ready_s + time.perf_counter() - t1
        b.stop()
        m = re.search(r"loaded (\d+) logs in (\d+) ms", b.err.read_text()[seen:])
        load_s = f"{int(m[2]) / 1000:.1f}" if m else "?"
        print(
            "| partitions | create (s) | clean stop (s) | start-up to ready (s)"
            " | of which loading logs (s) | to full Metadata (s) |"
        )
        print("| --- | --- | --- | --- | --- | --- |")
        print(
            f"| {total:,} | {create_s:.1f} | {stop_s:.1f} | {ready_s:.1f} | {load_s} | {full_s:.1f} |"
        )
        if args.profile:
            profile_startup(b)
    finally:
        if b.proc is not None:
            b.proc.kill()
            b.proc.wait()
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def profile_startup(b: Proc) -> None:
    """In-process start on the same data: LogManager.startup alone, then all of start()."""
    from kafkalite.log.log_manager import LogManager
    from kafkalite.server.broker import KafkaBroker
    from kafkalite.server.config import BrokerConfig

    cfg = BrokerConfig.load(b.cfg)
    broker = KafkaBroker(cfg)
    load_s: list[float] = []
    startup = LogManager.startup

    def timed_startup(self: LogManager) -> None:
        t0 = time.perf_counter()
        startup(self)
        load_s.append(time.perf_counter() - t0)

    LogManager.startup = timed_startup  # type: ignore[method-assign]

    async def go() -> None:
        t0 = time.perf_counter()
        await broker.start()
        total = time.perf_counter() - t0
        await broker.stop()
        print(f"in-process start(): {total:.2f} s, of which LogManager.startup {load_s[0]:.2f} s")
        load_s.clear()
        broker2 = KafkaBroker(BrokerConfig.load(b.cfg))
        pr = cProfile.Profile()
        pr.enable()
        await broker2.start()
        pr.disable()
        await broker2.stop()
        pstats.Stats(pr).sort_stats("cumulative").print_stats(40)

    asyncio.run(go())


def first_appends(args: argparse.Namespace) -> None:
    from kafkalite.log.log_config import LogConfig
    from kafkalite.log.log_manager import LogManager
    from kafkalite.protocol.records import build_batch

    root = Path(tempfile.mkdtemp(prefix="kafkalite-first-", dir=args.dir))
    try:
        lm = LogManager([root], LogConfig())
        lm.startup()
        logs = [lm.get_or_create_log(f"t{i // 100}", i % 100) for i in range(args.partitions)]
        # two ~5 KiB batches: the second one gets an offset and a time index entry
        template = bytes(build_batch([(None, b"x" * 1000)] * 5)) * 2
        rounds = []
        for _ in range(2):
            lat = []
            for lg in logs:
                t0 = time.perf_counter()
                lg.append_as_leader(bytearray(template), 0)
                lat.append((time.perf_counter() - t0) * 1000)
            rounds.append(lat)
        # reads touch the index mapping too
        lat_read = []
        for lg in logs:
            lg.update_high_watermark(lg.log_end_offset)
            t0 = time.perf_counter()
            lg.read(7, 1 << 20)
            lat_read.append((time.perf_counter() - t0) * 1000)
        lm.shutdown()
        print(f"{args.partitions} new logs, appends of two 5 KiB batches (ms)")
        print("| round | p50 | p99 | max | total |")
        print("| --- | --- | --- | --- | --- |")
        for name, lat in (
            ("first append", rounds[0]),
            ("second append", rounds[1]),
            ("read", lat_read),
        ):
            q = statistics.quantiles(lat, n=100)
            print(f"| {name} | {q[49]:.3f} | {q[98]:.3f} | {max(lat):.3f} | {sum(lat):.0f} |")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=None)
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--dir", type=Path, default=None, help="parent of the temp data dir")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--log-level", default="WARNING", help="the broker's (INFO: as the harness)")
    ap.add_argument("--keep", action="store_true", help="keep the data dir and broker log")
    ap.add_argument("--first-appends", action="store_true")
    args = ap.parse_args()
    if args.first_appends:
        args.partitions = args.partitions or 200
        first_appends(args)
    else:
        args.partitions = args.partitions or 10_000
        scale(args)
    os.sync()


if __name__ == "__main__":
    main()
