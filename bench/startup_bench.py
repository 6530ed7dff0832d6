"""Start-up to first produce+consume round trip of the embedded broker and cluster, and idle RSS.

    python bench/startup_bench.py [--runs 20] [--confluent] [--profile]

Issue 6's goals: under 100 ms for one in-process broker, under 300 ms for a
3-broker in-process cluster, idle RSS under 60 MB for one broker.

What is timed, per run (medians over ``--runs``):

- ``start``: ``ThreadedBroker.start()`` / ``ThreadedCluster.start()`` — what a
  synchronous test pays (loop thread, broker(s), controller election, the
  brokers' metadata caches agreeing);
- ``topic``: creating a 1-partition topic and waiting until it is served;
- ``round trip``: the client side with kafkalite's own wire client
  (``kafkalite/cli/wire_client.py``: TCP connect + ApiVersions, then Metadata
  to find the leader, Produce acks=1 of one record, Fetch of it back). Its
  client start-up (connect + ApiVersions) is shown apart as ``client``;
- ``total``: start + topic + round trip, i.e. start-up to first round trip;
- ``stop``: clean shutdown (a suite pays it too).

``--confluent`` adds a row for confluent-kafka (librdkafka): Producer + Consumer
creation, first delivery and first consumed message, against an already started
broker — this is the client's own start-up, not the broker's.

Idle RSS is read from /proc in a fresh process after start-up, one round trip
and 1 s idle, next to the same process's RSS after imports only (the
interpreter and libraries, which a test process pays anyway).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.cli.wire_client import WireClient  # noqa: E402
from kafkalite.protocol.api_keys import ApiKey  # noqa: E402
from kafkalite.protocol.records import build_batch, iter_records  # noqa: E402
from kafkalite.testing.embedded_broker import ThreadedBroker  # noqa: E402
from kafkalite.testing.in_process_cluster import ThreadedCluster  # noqa: E402

TOPIC = "startup"


def _ms(t0: float, t1: float) -> float:
    return (t1 - t0) * 1000


def round_trip(bootstrap: str) -> tuple[float, float]:
    """(client start-up ms, produce+fetch ms incl. finding the leader) with the wire client."""
    t0 = time.perf_counter()
    boot = WireClient(bootstrap, timeout=10)
    t1 = time.perf_counter()
    md = boot.call(
        ApiKey.METADATA, 9, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False}
    )
    leader = md.topics[0].partitions[0].leader_id
    node = next(b for b in md.brokers if b.node_id == leader)
    client = boot
    if f"{node.host}:{node.port}" != bootstrap.split(",")[0]:
        client = WireClient(f"{node.host}:{node.port}", timeout=10)
    batch = build_batch([(None, b"ping")])
    resp = client.call(
        ApiKey.PRODUCE,
        9,
        {
            "acks": 1,
            "timeout": 5000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
        },
    )
    assert resp.responses[0].partition_responses[0].error_code == 0, resp
    resp = client.call(
        ApiKey.FETCH,
        11,
        {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [
                        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )
    records = resp.responses[0].partitions[0].records
    assert [r.value for _h, r in iter_records(bytes(records))] == [b"ping"], resp
    t2 = time.perf_counter()
    for c in {id(boot): boot, id(client): client}.values():
        c.close()
    return _ms(t0, t1), _ms(t1, t2)


def _confluent_round_trip(bootstrap: str, topic: str) -> float:
    from confluent_kafka import Consumer, Producer, TopicPartition

    t0 = time.perf_counter()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    p.produce(topic, b"ping", partition=0)
    assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "fetch.wait.max.ms": 10})
    c.assign([TopicPartition(topic, 0, 0)])
    m = c.poll(10)
    assert m is not None and m.value() == b"ping"
    t1 = time.perf_counter()
    c.close()
    return _ms(t0, t1)


def bench_broker() -> dict[str, float]:
    t0 = time.perf_counter()
    b = ThreadedBroker()
    b.start()
    t1 = time.perf_counter()
    b.create_topic(TOPIC)
    t2 = time.perf_counter()
    client, rt = round_trip(b.bootstrap_servers)
    t3 = time.perf_counter()
    b.stop()
    t4 = time.perf_counter()
    return {
        "start": _ms(t0, t1),
        "topic": _ms(t1, t2),
        "client": client,
        "round trip": rt,
        "total": _ms(t0, t3),
        "stop": _ms(t3, t4),
    }


def bench_cluster(n: int = 3) -> dict[str, float]:
    t0 = time.perf_counter()
    c = ThreadedCluster(n)
    c.start()
    t1 = time.perf_counter()
    c.create_topic(TOPIC)
    t2 = time.perf_counter()
    client, rt = round_trip(c.bootstrap_servers)
    t3 = time.perf_counter()
    c.stop()
    t4 = time.perf_counter()
    return {
        "start": _ms(t0, t1),
        "topic": _ms(t1, t2),
        "client": client,
        "round trip": rt,
        "total": _ms(t0, t3),
        "stop": _ms(t3, t4),
    }


def bench_confluent() -> dict[str, float]:
    b = ThreadedBroker()
    b.start()
    try:
        b.create_topic(TOPIC)
        return {"confluent round trip": _confluent_round_trip(b.bootstrap_servers, TOPIC)}
    finally:
        b.stop()


def medians(fn: Callable[[], dict[str, float]], runs: int) -> dict[str, float]:
    fn()  # warm-up: imports, first-use caches
    samples = [fn() for _ in range(runs)]
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]}


_RSS_CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")

from kafkalite.testing.embedded_broker import ThreadedBroker
import startup_bench
imports = rss_mb()
b = ThreadedBroker()
b.start()
b.create_topic(startup_bench.TOPIC)
startup_bench.round_trip(b.bootstrap_servers)
time.sleep(1.0)
idle = rss_mb()
b.stop()
print(json.dumps({{"imports": imports, "idle": idle}}))
"""


def idle_rss() -> dict[str, float]:
    here = Path(__file__).resolve().parent
    code = _RSS_CHILD.format(root=str(here.parent))
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=here,
        env={**os.environ, "PYTHONPATH": str(here)},
        capture_output=True,
        text=True,
        check=True,
    )
    bare = subprocess.run([sys.executable, "-c", _BARE], capture_output=True, text=True, check=True)
    res: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    res["bare python"] = float(bare.stdout.strip())
    return res


_BARE = """
for line in open("/proc/self/status"):
    if line.startswith("VmRSS:"):
        print(int(line.split()[1]) / 1024)
"""


def import_time() -> float:
    """Fresh-process time to import the embedded broker (paid once per test session)."""
    code = (
        "import time; t=time.perf_counter(); import kafkalite.testing.embedded_broker, kafkalite.testing.in_process_cluster;"
        " print((time.perf_counter()-t)*1000)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def profile(top: int = 25) -> None:
    """cProfile a warm broker's start, topic creation and stop on this thread; count fsyncs."""
    import asyncio

    from kafkalite.testing.embedded_broker import AsyncBroker

    async def once() -> None:
        b = AsyncBroker()
        await b.start()
        await b.create_topic(TOPIC)
        await b.stop()

    bench_broker()  # warm-up: imports and kio's lazily loaded schemas
    asyncio.run(once())
    fsyncs: list[float] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        t = time.perf_counter()
        real_fsync(fd)
        fsyncs.append(_ms(t, time.perf_counter()))

    os.fsync = counting_fsync
    pr = cProfile.Profile()
    try:
        pr.enable()
        asyncio.run(once())
        pr.disable()
    finally:
        os.fsync = real_fsync
    pstats.Stats(pr, stream=sys.stdout).sort_stats("cumulative").print_stats(top)
    print(f"fsync calls: {len(fsyncs)}, {sum(fsyncs):.1f} ms in total")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument(
        "--confluent", action="store_true", help="also time confluent-kafka's first round trip"
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="cProfile a warm broker start, topic creation and stop",
    )
    ap.add_argument("--no-rss", action="store_true")
    args = ap.parse_args(argv)

    if args.profile:
        profile()
        return 0
    rows = {
        "broker (1)": medians(bench_broker, args.runs),
        "cluster (3)": medians(bench_cluster, args.runs),
    }
    cols = ["start", "topic", "client", "round trip", "total", "stop"]
    print(f"median of {args.runs} runs, ms (client: kafkalite wire client)")
    print(f"{'':12}" + "".join(f"{c:>12}" for c in cols))
    for name, r in rows.items():
        print(f"{name:12}" + "".join(f"{r[c]:12.1f}" for c in cols))
    goals = {"broker (1)": 100.0, "cluster (3)": 300.0}
    for name, goal in goals.items():
        total = rows[name]["total"]
        print(
            f"{name}: start-up to first round trip {total:.1f} ms (goal < {goal:.0f} ms): "
            f"{'ok' if total < goal else 'MISSED'}"
        )
    if args.confluent:
        r = medians(bench_confluent, args.runs)
        print(
            f"confluent-kafka client start-up + first round trip: {r['confluent round trip']:.1f} ms"
        )
    print(f"import kafkalite.testing (fresh process): {import_time():.0f} ms")
    if not args.no_rss:
        rss = idle_rss()
        print(
            f"RSS: bare python {rss['bare python']:.1f} MB, after imports {rss['imports']:.1f} MB, "
            f"idle broker {rss['idle']:.1f} MB (goal < 60 MB: {'ok' if rss['idle'] < 60 else 'MISSED'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
