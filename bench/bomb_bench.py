"""Decompression bombs against a kafkalite process, with a canary client timing it.

    python -m bench.bomb_bench [--gib 1] [--codecs gzip,snappy-xerial,...] [--no-many]

Issue 13's bound: a 1 GiB bomb is stored or rejected (as Kafka decides) with
less than 100 MB of extra broker memory, and no other client waits more than
100 ms for it. For each codec (gzip, snappy as Java frames it and as librdkafka
writes it, lz4, zstd) it produces one batch whose single record has a value of
``--gib`` GiB of zeros, then (unless ``--no-many``) one of 1 KiB records adding
up to the same size. Meanwhile a canary thread on its own connection produces
one small record at a time, back to back, to another topic.

Printed per bomb: the request's size, the answer (error code, base offset) and
how long it took, the broker's peak RSS above its RSS before the bomb (Linux
resets the high-water mark on request: /proc/PID/clear_refs), and the canary's
worst round trip while the bomb was in flight and how many it completed.

The broker is ``python -m kafkalite.cli.server`` from this tree with Kafka's
defaults, except the bomb topic's ``max.message.bytes`` of 64 MiB (a 1 GiB
snappy bomb takes 48 MiB: snappy's best ratio is about 21). Run it from
another checkout (``PYTHONPATH=...``) to measure that one.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness.brokers import Kafkalite  # noqa: E402
from kafkalite.cli.wire_client import WireClient  # noqa: E402
from kafkalite.protocol.api_keys import ApiKey  # noqa: E402
from kafkalite.protocol.errors import ErrorCode  # noqa: E402
from kafkalite.protocol.records import build_batch  # noqa: E402
from kafkalite.testing.bombs import CODECS, bomb_batch  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30


def produce_body(topic: str, records: bytes) -> dict:
    return {
        "acks": 1,
        "timeout": 30_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }


def status(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def reset_peak_rss(pid: int) -> None:
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


class Canary(threading.Thread):
    """Produces one 100-byte record at a time; keeps (start, seconds) of each round trip."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.client = WireClient(bootstrap, timeout=120)
        self.samples: list[tuple[float, float]] = []
        self.stopping = threading.Event()
        self.body = produce_body("canary", build_batch([(None, b"x" * 100)]))

    def run(self) -> None:
        while not self.stopping.is_set():
            t0 = time.perf_counter()
            resp = self.client.call(ApiKey.PRODUCE, 9, self.body)
            self.samples.append((t0, time.perf_counter() - t0))
            assert resp.responses[0].partition_responses[0].error_code == 0, resp
            time.sleep(0.001)

    def during(self, start: float, end: float) -> list[float]:
        """Round trips that overlapped [start, end] (one still open at `end` counts to now)."""
        return [d for t0, d in list(self.samples) if t0 + d >= start and t0 <= end]


def run_bomb(broker: Kafkalite, client: WireClient, canary: Canary, name: str, batch: bytes) -> str:
    pid = broker.pid
    assert pid is not None
    time.sleep(0.3)  # let the canary settle
    reset_peak_rss(pid)
    before = status(pid, "VmRSS")
    t0 = time.perf_counter()
    resp = client.call(ApiKey.PRODUCE, 9, produce_body("bomb", batch))
    t1 = time.perf_counter()
    time.sleep(0.05)  # the canary's round trip that was open at t1 ends
    peak = status(pid, "VmHWM")
    p = resp.responses[0].partition_responses[0]
    trips = canary.during(t0, t1)
    worst = max(trips) * 1000 if trips else float("nan")
    outcome = (
        f"{ErrorCode(p.error_code).name} @{p.base_offset}"
        if p.error_code == 0
        else ErrorCode(p.error_code).name
    )
    return (
        f"| {name} | {len(batch) / MiB:,.2f} MiB | {outcome} | {(t1 - t0):.2f} s | "
        f"{(peak - before) / MiB:,.1f} MB | {worst:,.1f} ms | {len(trips)} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0, help="inflated size of each bomb")
    ap.add_argument("--codecs", default=",".join(CODECS), help=f"of {', '.join(CODECS)}")
    ap.add_argument("--no-many", action="store_true", help="skip the many-small-records bombs")
    args = ap.parse_args(argv)
    size = int(args.gib * GiB)
    codecs = args.codecs.split(",")

    broker = Kafkalite()
    broker.start()
    try:
        admin = WireClient(broker.bootstrap)
        admin.call(
            ApiKey.CREATE_TOPICS,
            5,
            {
                "topics": [
                    {
                        "name": "bomb",
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "configs": [{"name": "max.message.bytes", "value": str(64 * MiB)}],
                    },
                    {"name": "canary", "num_partitions": 1, "replication_factor": 1},
                ],
                "timeout_ms": 30_000,
            },
        )
        time.sleep(0.5)
        canary = Canary(broker.bootstrap)
        canary.start()
        client = WireClient(broker.bootstrap, timeout=300)
        print(
            f"kafkalite pid {broker.pid}, idle RSS {status(broker.pid or 0, 'VmRSS') / MiB:.0f} MB"
        )
        print()
        print(
            "| bomb | request | answer | took | broker peak RSS above before | "
            "canary worst round trip meanwhile | canary round trips meanwhile |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- |")
        plans = [(f"{c}: 1 record of {args.gib:g} GiB", c, 1, size) for c in codecs]
        if not args.no_many:
            plans += [
                (f"{c}: {size // 1024:,} records of 1 KiB", c, size // 1024, 1024)
                for c in codecs
                if c != "snappy-raw"
            ]
        for label, codec, count, value in plans:
            batch = bomb_batch(codec, count, value)
            print(run_bomb(broker, client, canary, label, batch), flush=True)
        canary.stopping.set()
        canary.join(10)
        idle = [d for _, d in canary.samples]
        print()
        print(
            f"canary: {len(idle):,} round trips, median {statistics.median(idle) * 1000:.2f} ms, "
            f"max {max(idle) * 1000:.1f} ms; broker RSS at the end "
            f"{status(broker.pid or 0, 'VmRSS') / MiB:.0f} MB"
        )
    finally:
        broker.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
