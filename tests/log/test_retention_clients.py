"""Retention seen through stock clients (seed 001 behaviour 44; issue 3 acceptance).

retention.ms, retention.bytes and DeleteRecords each move the log start offset;
after each, ListOffsets(earliest) reports it, a fetch below it gets
OFFSET_OUT_OF_RANGE and a fetch at it returns the first record kept. Real
embedded brokers with a 100 ms retention check; confluent-kafka produces,
lists offsets and deletes records; librdkafka and kafka-python consume.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import OffsetOutOfRangeError

from kafkalite.testing.embedded_broker import ThreadedBroker

SMALL_SEGMENTS = {"segment.bytes": "1024"}


@pytest.fixture
def broker(kafka_broker_factory: Callable[..., ThreadedBroker]) -> ThreadedBroker:
    return kafka_broker_factory(**{"log.retention.check.interval.ms": 100})


Row = tuple[int, bytes]


def _produce(
    b: ThreadedBroker, topic: str, n: int, *, timestamp: int | None = None, tag: bytes = b"v"
) -> list[Row]:
    """``n`` records of ~100 bytes in batches of 4; returns (offset, value) as acknowledged."""
    acked: list[Row] = []

    def report(err: Any, msg: Any) -> None:
        assert err is None, err
        acked.append((msg.offset(), msg.value()))

    p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
    for i in range(n):
        kw: dict[str, Any] = {"value": tag + b"%05d" % i + b"x" * 95, "on_delivery": report}
        if timestamp is not None:
            kw["timestamp"] = timestamp
        p.produce(topic, **kw)
        if i % 4 == 3:
            p.flush(10)
    assert p.flush(10) == 0
    return sorted(acked)


def _earliest(b: ThreadedBroker, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    tp = CkTopicPartition(topic, 0)
    return int(admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(10).offset)


def _wait_earliest_above(b: ThreadedBroker, topic: str, floor: int, timeout: float = 15) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        start = _earliest(b, topic)
        if start > floor:
            return start
        time.sleep(0.05)
    raise AssertionError(f"the log start offset of {topic} stayed at {floor}")


def _check_start(b: ThreadedBroker, topic: str, start: int, acked: list[Row]) -> None:
    """Below ``start``: OFFSET_OUT_OF_RANGE to both clients; at it: the records from it."""
    log = b.kafka.log_manager.get_log(topic, 0)
    assert log is not None and log.log_start_offset == start
    # librdkafka with auto.offset.reset=error reports the broker's OFFSET_OUT_OF_RANGE
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap_servers,
            "group.id": "retention",
            "auto.offset.reset": "error",
            "enable.auto.commit": False,
        }
    )
    c.assign([CkTopicPartition(topic, 0, start - 1)])
    err = None
    try:
        deadline = time.monotonic() + 10
        while err is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is not None, f"got a record at {m.offset()} below {start}"
                err = m.error()
    finally:
        c.close()
    assert err is not None and "out of range" in err.str().lower(), err
    # kafka-python raises the error code itself
    kc = KafkaConsumer(
        bootstrap_servers=b.bootstrap_servers, auto_offset_reset="none", enable_auto_commit=False
    )
    tp = KpTopicPartition(topic, 0)
    kc.assign([tp])
    kc.seek(tp, 0)
    try:
        with pytest.raises(OffsetOutOfRangeError):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                assert not kc.poll(timeout_ms=200)
    finally:
        kc.close()
    # at the log start offset: everything from there to the end
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap_servers,
            "group.id": "retention-ok",
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
        }
    )
    c.assign([CkTopicPartition(topic, 0, start)])
    got: list[tuple[int, bytes]] = []
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise KafkaException(m.error())
            got.append((m.offset(), m.value()))
    finally:
        c.close()
    assert got == [r for r in acked if r[0] >= start]


def test_time_retention_moves_the_log_start(broker: ThreadedBroker) -> None:
    broker.create_topic("by-time", config=dict(SMALL_SEGMENTS, **{"retention.ms": "60000"}))
    now = int(time.time() * 1000)
    old = _produce(broker, "by-time", 40, timestamp=now - 3_600_000, tag=b"old")
    new = _produce(broker, "by-time", 12, tag=b"new")
    assert new[0][0] == old[-1][0] + 1
    start = _wait_earliest_above(broker, "by-time", 0)
    # every segment holding only hour-old records went; nothing recent did
    assert start <= new[0][0]
    log = broker.kafka.log_manager.get_log("by-time", 0)
    assert log is not None
    assert all(s.largest_timestamp >= now - 60_000 for s in log.segments[1:])
    assert log.segments[0].largest_timestamp >= now - 60_000 or log.num_segments == 1
    _check_start(broker, "by-time", start, old + new)


def test_size_retention_moves_the_log_start(broker: ThreadedBroker) -> None:
    broker.create_topic("by-size", config=dict(SMALL_SEGMENTS, **{"retention.bytes": "3000"}))
    acked = _produce(broker, "by-size", 150)  # ~20 KB in ~1 KB segments
    start = _wait_earliest_above(broker, "by-size", 0)
    log = broker.kafka.log_manager.get_log("by-size", 0)
    assert log is not None
    # whole oldest segments go while what is left stays >= retention.bytes
    assert 3000 <= log.size_in_bytes <= 3000 + 1024 + log.active_segment.size
    _check_start(broker, "by-size", start, acked)


def test_delete_records_moves_the_log_start(broker: ThreadedBroker) -> None:
    broker.create_topic("deleted", config=SMALL_SEGMENTS)
    acked = _produce(broker, "deleted", 60)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    tp = CkTopicPartition("deleted", 0, 37)
    [res] = admin.delete_records([tp]).values()
    assert res.result(10).low_watermark == 37
    assert _earliest(broker, "deleted") == 37
    _check_start(broker, "deleted", 37, acked)
    # and retention then drops the segments wholly below the new start
    log = broker.kafka.log_manager.get_log("deleted", 0)
    assert log is not None
    deadline = time.monotonic() + 10
    while log.segments[0].base_offset == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert 0 < log.segments[0].base_offset <= 37
    assert _earliest(broker, "deleted") == 37
