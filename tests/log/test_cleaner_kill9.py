"""kill -9 the broker process while its cleaner is compacting, again and again.

The broker runs as a real OS process with the cleaner throttled
(log.cleaner.io.max.bytes.per.second) so a pass lasts seconds. Each round
produces keyed records with acks=1, waits until a pass is visibly under way
(``.cleaned`` or ``.swap`` files in the partition dir), SIGKILLs the broker at
a random moment after that, and restarts it. At the end every key's latest
acknowledged value must be readable at its acknowledged offset, and every
record read must be one that was acknowledged, at the same offset.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from test_crash_recovery import BrokerProcess

ROUNDS = 5
TOPIC = "compact-kill"
KEYS = 30

Row = tuple[int, bytes, bytes]


@pytest.fixture
def proc(tmp_path: Path):  # noqa: ANN201
    b = BrokerProcess(
        tmp_path,
        **{
            "log.cleaner.backoff.ms": 50,
            "log.cleaner.io.max.bytes.per.second": 300_000,
            "log.segment.delete.delay.ms": 60_000,
        },
    )
    yield b
    if b.proc is not None:
        b.kill()


def _produce(b: BrokerProcess, start: int, n: int) -> list[Row]:
    acked: list[Row] = []

    def report(err: Any, msg: Any) -> None:
        assert err is None, err
        acked.append((msg.offset(), msg.key(), msg.value()))

    p = Producer({"bootstrap.servers": b.bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 8192})
    for i in range(start, start + n):
        p.produce(
            TOPIC, key=b"key-%02d" % (i % KEYS), value=b"%06d" % i + b"x" * 200, on_delivery=report
        )
        if i % 200 == 199:
            p.flush(10)
    assert p.flush(20) == 0
    return acked


def _pass_under_way(d: Path) -> bool:
    try:
        return any(n.endswith((".cleaned", ".swap")) for n in os.listdir(d))
    except FileNotFoundError:
        return False


def _consume(b: BrokerProcess) -> list[Row]:
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": "kill9",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 20,
        }
    )
    c.assign([CkTopicPartition(TOPIC, 0, 0)])
    out: list[Row] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise KafkaException(m.error())
            out.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    raise AssertionError("no EOF")


def test_kill_9_during_cleaning_keeps_every_latest_value(proc: BrokerProcess) -> None:
    rng = random.Random(int(os.environ.get("KAFKALITE_CRASH_SEED", "0")) or None)
    b = proc
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    cfg = {
        "cleanup.policy": "compact",
        "segment.bytes": "16384",
        "min.cleanable.dirty.ratio": "0.01",
    }
    admin.create_topics([NewTopic(TOPIC, 1, 1, config=cfg)])[TOPIC].result(10)
    part_dir = b.data / f"{TOPIC}-0"
    acked: list[Row] = []
    seq = 0
    caught = 0
    for _ in range(ROUNDS):
        acked += _produce(b, seq, 1500)  # ~330 KB: over a second of throttled cleaning
        seq += 1500
        deadline = time.monotonic() + 20
        while not _pass_under_way(part_dir) and time.monotonic() < deadline:
            time.sleep(0.005)
        caught += _pass_under_way(part_dir)
        time.sleep(rng.uniform(0, 0.3))  # anywhere in the pass: map, recopy, swap
        b.kill()
        b.start()
    assert caught >= ROUNDS - 1, f"only {caught} of {ROUNDS} kills hit a pass in progress"
    # the cleaner finished its work after the last restart (or not): either way
    got = _consume(b)
    assert [o for o, _k, _v in got] == sorted({o for o, _k, _v in got})
    assert set(got) <= set(acked), "a record that was never acknowledged, or at another offset"
    latest = {k: (o, k, v) for o, k, v in sorted(acked)}
    missing = [r for r in latest.values() if r not in set(got)]
    assert not missing, f"latest values lost: {missing[:5]}"
    assert len(got) < len(acked)  # it did compact
    # interrupted passes were completed or rolled back at load
    b.kill()
    b.start()
    assert not [n for n in os.listdir(part_dir) if n.endswith((".cleaned", ".swap"))]
    assert {k: v for _o, k, v in _consume(b)} == {k: v for _o, k, v in latest.values()}
    b.stop()
