"""A share group of 4 against a classic consumer group of 4 on the same topic.

    python bench/share_bench.py [--records 200000] [--partitions 4] [--members 4]

Starts kafkalite as its own process, produces ``--records`` 100-byte records to a
topic, then times two groups reading all of it with confluent-kafka (librdkafka),
each member in its own thread:

- ``share``: ``ShareConsumer`` members (implicit acknowledgement: every record
  delivered is accepted; the run ends when all are delivered and the last
  acknowledgements are committed);
- ``classic``: ``Consumer`` members (``auto.offset.reset=earliest``, offsets
  auto-committed).

Records/s is records over the time from the first ``subscribe`` to the last record,
group join included. One run, printed; figures depend on the machine, never on a test.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from bench.harness.brokers import Kafkalite  # noqa: E402


def _produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 2000})
    value = b"x" * 100
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, key=b"%d" % i)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)


def _run_group(members: int, make: Callable[[int], Any], total: int) -> tuple[float, list[int]]:
    counts = [0] * members
    done = threading.Event()
    start = threading.Barrier(members + 1)

    def member(i: int) -> None:
        c = make(i)
        start.wait()
        try:
            while not done.is_set():
                msgs = c.poll(0.2) if isinstance(c, ShareConsumer) else c.consume(500, 0.2)
                counts[i] += sum(1 for m in msgs if not m.error())
                if sum(counts) >= total:
                    done.set()
            if isinstance(c, ShareConsumer):
                c.commit_sync(30)
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(i,)) for i in range(members)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    done.wait(600)
    elapsed = time.perf_counter() - t0
    done.set()
    for t in threads:
        t.join(60)
    return elapsed, counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--members", type=int, default=4)
    args = ap.parse_args(argv)
    broker = Kafkalite()
    broker.start()
    try:
        bs = broker.bootstrap
        topic = f"bench-share-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic(topic, args.partitions, 1)]).values():
            f.result(30)
        t0 = time.perf_counter()
        _produce(bs, topic, args.records)
        produce_s = time.perf_counter() - t0
        share_group, classic_group = f"share-{topic}", f"classic-{topic}"
        res = ConfigResource(
            ResourceType.GROUP,
            share_group,
            incremental_configs=[
                ConfigEntry(
                    "share.auto.offset.reset",
                    "earliest",
                    incremental_operation=AlterConfigOpType.SET,
                )
            ],
        )
        for f in admin.incremental_alter_configs([res]).values():
            f.result(30)

        def share(i: int) -> ShareConsumer:
            c = ShareConsumer({"bootstrap.servers": bs, "group.id": share_group})
            c.subscribe([topic])
            return c

        def classic(i: int) -> Consumer:
            c = Consumer(
                {
                    "bootstrap.servers": bs,
                    "group.id": classic_group,
                    "auto.offset.reset": "earliest",
                }
            )
            c.subscribe([topic])
            return c

        rows = []
        for name, make in (("share", share), ("classic", classic)):
            elapsed, counts = _run_group(args.members, make, args.records)
            rows.append((name, elapsed, sum(counts), counts))
        print(
            f"{args.records} records of 100 bytes, {args.partitions} partitions, "
            f"{args.members} members per group (produced in {produce_s:.1f} s)"
        )
        print(f"{'group':<8} {'seconds':>8} {'records/s':>10}  per member")
        for name, elapsed, n, counts in rows:
            print(f"{name:<8} {elapsed:>8.2f} {n / elapsed:>10.0f}  {counts}")
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
