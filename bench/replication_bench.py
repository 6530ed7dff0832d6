"""Replication cost: produce throughput at RF=1 acks=1 vs RF=3 acks=all, and end-to-end latency.

    python bench/replication_bench.py [--seconds 8] [--rounds 1] [--rate 1000]

Three ``kafkalite-server`` processes over a local Apache ZooKeeper
(``kafkalite.testing.process_cluster``), one confluent-kafka producer:

- ``throughput``: 1 KiB records as fast as the producer goes (linger 5 ms) for
  ``--seconds``, to a 6-partition topic at RF=1 with acks=1, then at RF=3
  (min.insync.replicas=2) with acks=all; MB/s of acknowledged payload
  (acknowledged bytes over the time from the first send to the last ack). Both
  phases run on the same three brokers with the same producer settings and six
  partitions whose leaders are spread over the three brokers: RF=1 is three
  brokers each appending its partitions; RF=3 is the same appends plus every
  byte fetched by and written on two followers, acknowledged once the ISR has
  it. Each phase starts from a clean page cache (``os.sync()`` before it): a
  phase must not pay the kernel's writeback of the previous phase's gigabytes,
  which throttled the RF=3 phase that always ran second. ``--rounds`` repeats
  the pair in the same cluster; the ratio printed is total RF=3 MB/s over total
  RF=1 MB/s. On this VM a second round costs more CPU per byte in both phases (the
  page cache grows into guest memory not touched lately, see docs/performance.md),
  so for several samples run the command again (a fresh cluster) rather than
  raising ``--rounds``. Each
  phase also prints the brokers' CPU seconds (user + system, ``/proc``) per
  100 MB acknowledged: the figure other load on the machine disturbs least.
- ``latency``: ``--rate`` msg/s of 1 KiB for ``--seconds`` to a RF=3 topic with
  acks=all, a consumer reading along; end-to-end p50/p99 from the send
  timestamp in the record to its consumption.

Issue 15's goals: RF=3 acks=all at least half of RF=1's throughput on this
2-core machine; end-to-end p99 under 20 ms at 1k msg/s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafkalite.testing.process_cluster import ProcessCluster  # noqa: E402
from kafkalite.testing.zookeeper import ZooKeeperServer  # noqa: E402

PAYLOAD = 1024
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of these processes so far."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / _TICK


def create(bootstrap: str, name: str, rf: int) -> None:
    cfg = {"min.insync.replicas": "2"} if rf == 3 else {}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 6, rf, config=cfg)])[name].result(30)
    time.sleep(1.0)


def throughput(bootstrap: str, topic: str, acks: str, seconds: float) -> tuple[float, float]:
    """MB/s acknowledged, and MB acknowledged."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 262144,
            "queue.buffering.max.kbytes": 262144,
        }
    )
    acked = [0]

    def done(err: object, _m: object) -> None:
        if err is None:
            acked[0] += 1

    value = b"x" * PAYLOAD
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        try:
            p.produce(topic, value, on_delivery=done)
        except BufferError:
            p.poll(0.001)
        p.poll(0)
    p.flush(60)
    elapsed = time.monotonic() - t0
    mb = acked[0] * PAYLOAD / 1e6
    return mb / elapsed, mb


def phase(bootstrap: str, topic: str, acks: str, seconds: float, pids: list[int]) -> float:
    """One throughput phase from a clean page cache; prints it, returns MB/s."""
    os.sync()
    cpu0 = cpu_seconds(pids)
    rate, mb = throughput(bootstrap, topic, acks, seconds)
    cpu = cpu_seconds(pids) - cpu0
    label = f"RF={3 if topic == 'rf3' else 1} acks={acks}:"
    print(
        f"throughput {label:<12} {rate:7.1f} MB/s (1 KiB records; brokers' CPU "
        f"{cpu / mb * 100:.2f} s per 100 MB)",
        flush=True,
    )
    return rate


def latency(bootstrap: str, topic: str, rate: int, seconds: float) -> tuple[float, float, int]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "auto.offset.reset": "latest",
            "fetch.wait.max.ms": 100,
        }
    )
    c.subscribe([topic])
    while not c.assignment():
        c.poll(0.1)
    time.sleep(1.0)
    lat: list[float] = []
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            m = c.poll(0.1)
            if m is None or m.error():
                continue
            (sent,) = struct.unpack_from(">d", m.value())
            lat.append((time.time() - sent) * 1000)

    t = threading.Thread(target=consume)
    t.start()
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    pad = b"y" * (PAYLOAD - 8)
    n = int(rate * seconds)
    t0 = time.monotonic()
    for i in range(n):
        due = t0 + i / rate
        while time.monotonic() < due:
            p.poll(0)
            time.sleep(0.0002)
        p.produce(topic, struct.pack(">d", time.time()) + pad)
        p.poll(0)
    p.flush(30)
    time.sleep(1.0)
    stop.set()
    t.join()
    c.close()
    qs = statistics.quantiles(lat, n=100)
    return qs[49], qs[98], len(lat)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=1, help="RF=1 / RF=3 pairs")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        zk = ZooKeeperServer().start()
        try:
            with ProcessCluster(3, Path(tmp), f"{zk.connect_string}/bench") as c:
                b = c.bootstrap_servers
                pids = [s.proc.pid for s in c.servers.values() if s.proc is not None]
                create(b, "rf1", 1)
                create(b, "rf3", 3)
                rf1: list[float] = []
                rf3: list[float] = []
                for _ in range(args.rounds):
                    rf1.append(phase(b, "rf1", "1", args.seconds, pids))
                    rf3.append(phase(b, "rf3", "all", args.seconds, pids))
                print(
                    f"RF=3 acks=all / RF=1 acks=1: {sum(rf3) / sum(rf1):.0%} "
                    f"(per round: {', '.join(f'{x / y:.0%}' for x, y in zip(rf3, rf1, strict=True))}; goal 50%)",
                    flush=True,
                )
                os.sync()
                create(b, "lat", 3)
                p50, p99, n = latency(b, "lat", args.rate, args.seconds)
                print(
                    f"end-to-end RF=3 acks=all at {args.rate} msg/s: "
                    f"p50 {p50:.2f} ms, p99 {p99:.2f} ms ({n} records)"
                )
        finally:
            zk.stop()


if __name__ == "__main__":
    main()
