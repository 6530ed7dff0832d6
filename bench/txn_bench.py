"""Transactional produce throughput against a kafkalite process (issue 16's benchmark).

    python -m bench.txn_bench [--records 200000] [--value-size 100] [--bootstrap HOST:PORT]

One confluent-kafka producer writes ``--records`` records of ``--value-size``
bytes to a 1-partition topic, three ways, one after the other:

- idempotent, not transactional (``enable.idempotence=true``), flushed at the end;
- transactional, 100 records per transaction (begin, produce, commit);
- transactional, 1,000 records per transaction.

A short warm-up of both kinds runs first (topic creation, __transaction_state).

Printed: records/s of each, and each transactional rate as a share of the
idempotent one (the issue's goal: at least 70% at 1,000 records per
transaction). The broker is ``python -m kafkalite.cli.server`` from this tree
with Kafka's defaults (replication factor 1), unless ``--bootstrap`` names one.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench.harness.brokers import Kafkalite  # noqa: E402


def _topic(bootstrap: str) -> str:
    name = f"txn-bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def idempotent_rate(bootstrap: str, n: int, value: bytes) -> float:
    topic = _topic(bootstrap)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value=value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    return n / (time.perf_counter() - t0)


def transactional_rate(bootstrap: str, n: int, value: bytes, per_txn: int) -> float:
    topic = _topic(bootstrap)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
            "linger.ms": 5,
        }
    )
    p.init_transactions(30)
    t0 = time.perf_counter()
    done = 0
    while done < n:
        p.begin_transaction()
        k = min(per_txn, n - done)
        for _ in range(k):
            while True:
                try:
                    p.produce(topic, value=value, partition=0)
                    break
                except BufferError:
                    p.poll(0.01)
        p.commit_transaction(60)
        done += k
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--bootstrap", help="an already running broker")
    args = ap.parse_args()
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker = Kafkalite()
        broker.start()
        bootstrap = broker.bootstrap
    try:
        value = b"v" * args.value_size
        idempotent_rate(bootstrap, min(args.records, 20_000), value)  # warm-up
        transactional_rate(bootstrap, min(args.records, 2_000), value, 1000)
        base = idempotent_rate(bootstrap, args.records, value)
        print(f"idempotent, not transactional: {base:10.0f} records/s")
        for per_txn in (100, 1000):
            rate = transactional_rate(bootstrap, args.records, value, per_txn)
            print(
                f"transactional, {per_txn:>5} records/txn: {rate:10.0f} records/s"
                f" ({100 * rate / base:.0f}% of idempotent)"
            )
    finally:
        if broker is not None:
            broker.cleanup()


if __name__ == "__main__":
    main()
