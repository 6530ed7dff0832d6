"""Shared pieces of the exactly-once acceptance tests (seed 001 §6, behaviours 19–26).

The source topic A (3 partitions) holds records ``a-<n>``; a consume-transform-produce
loop copies each as ``b-<n>`` to B in transactions of ``per_txn`` records, aborting
every 7th on purpose and redoing it. The checks: a read_committed reader of B sees
each ``b-<n>`` exactly once, a read_uncommitted one also sees the aborted copies,
and the group's committed offsets on A are A's end offsets.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

#: records copied by each loop; KAFKALITE_TXN_RECORDS=100000 runs the issue's full count
RECORDS = int(os.environ.get("KAFKALITE_TXN_RECORDS", "1400"))
PER_TXN = int(os.environ.get("KAFKALITE_TXN_PER_TXN", "100"))
ABORT_EVERY = 7

BROKER_CONFIG: dict[str, Any] = {
    "transaction.state.log.num.partitions": 5,
    "offsets.topic.num.partitions": 5,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topics(bootstrap: str, *names: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names])
    for f in futures.values():
        f.result(30)


def fill_source(bootstrap: str, topic: str, n: int = RECORDS) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i in range(n):
        p.produce(topic, value=f"a-{i}".encode(), partition=i % 3)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def end_offsets(bootstrap: str, topic: str, partitions: int = 3) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("eo")})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        c.close()


def committed_offsets(
    bootstrap: str, group: str, topic: str, partitions: int = 3
) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def read_all(
    bootstrap: str,
    topic: str,
    isolation: str,
    expect_at_least: int,
    timeout_s: float = 60,
    partitions: int = 3,
) -> list[bytes]:
    """Every value of ``topic`` from the start, up to the (stable) end of each partition."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    eof: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            msgs = c.consume(1000, timeout=0.5)
            for m in msgs:
                if m.error():
                    if m.error().code() == -191:  # _PARTITION_EOF
                        eof.add(m.partition())
                    continue
                values.append(m.value())
            if len(eof) == partitions and len(values) >= expect_at_least and not msgs:
                break
    finally:
        c.close()
    return values


def check_exactly_once(bootstrap: str, source: str, sink: str, group: str, n: int) -> None:
    committed = read_all(bootstrap, sink, "read_committed", n)
    counts = Counter(committed)
    expected = {f"b-{i}".encode() for i in range(n)}
    assert set(counts) == expected
    assert max(counts.values()) == 1, [v for v, c in counts.items() if c > 1][:5]
    uncommitted = read_all(bootstrap, sink, "read_uncommitted", n)
    aborted = Counter(uncommitted) - counts
    assert aborted, "the aborted transactions' records are visible to read_uncommitted"
    assert set(aborted) <= expected
    assert committed_offsets(bootstrap, group, source) == end_offsets(bootstrap, source)


def is_aborted_round(txn_no: int) -> bool:
    return txn_no % ABORT_EVERY == ABORT_EVERY - 1


def transform(value: bytes) -> bytes:
    return b"b-" + value[2:]
