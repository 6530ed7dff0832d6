"""Compaction seen through stock clients (seed 001 behaviours 36-44).

A real embedded broker; topics with tiny segments so they roll; the cleaner's
background loop is switched off and each test drives it with
``LogCleaner.clean_once`` on the broker's loop, so nothing depends on timing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from kafkalite.testing.embedded_broker import ThreadedBroker

Row = tuple[int, bytes | None, bytes | None]

COMPACT = {
    "cleanup.policy": "compact",
    "segment.bytes": "1024",
    "min.cleanable.dirty.ratio": "0.01",
}


class Crash(BaseException):
    pass


@pytest.fixture
def broker(kafka_broker_factory: Callable[..., ThreadedBroker]) -> ThreadedBroker:
    b = kafka_broker_factory(**{"log.cleaner.enable": False})
    assert not b.kafka.log_manager.cleaner.config.enable_cleaner
    return b


def _cleaner(b: ThreadedBroker) -> Any:
    return b.kafka.log_manager.cleaner


def _clean(b: ThreadedBroker, now_ms: int | None = None) -> Any:
    return b.call(_cleaner(b).clean_once, now_ms)


def _clean_all(b: ThreadedBroker, now_ms: int | None = None) -> list[Any]:
    out = []
    while (s := _clean(b, now_ms)) is not None:
        out.append(s)
    return out


def _log(b: ThreadedBroker, topic: str) -> Any:
    return b.kafka.replica_manager.get_partition((topic, 0)).log


def _produce(
    b: ThreadedBroker,
    topic: str,
    items: list[tuple[bytes | None, bytes | None]],
    *,
    timestamp: int | None = None,
    every: int = 3,
) -> list[Row]:
    """Produce in small batches; returns (offset, key, value) as acknowledged."""
    acked: list[Row] = []
    errors: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.offset(), msg.key(), msg.value()))

    p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0, "acks": 1})
    for i, (k, v) in enumerate(items):
        kw: dict[str, Any] = {"key": k, "value": v, "on_delivery": report}
        if timestamp is not None:
            kw["timestamp"] = timestamp
        p.produce(topic, **kw)
        if i % every == every - 1:
            p.flush(10)
    assert p.flush(10) == 0
    assert not errors, errors
    return sorted(acked)


def _consume(b: ThreadedBroker, topic: str, start: int = 0) -> list[Row]:
    """Everything from ``start`` to the end with librdkafka; also checks timestamps exist."""
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap_servers,
            "group.id": "compaction-test",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 20,
        }
    )
    c.assign([CkTopicPartition(topic, 0, start)])
    out: list[Row] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            m = c.poll(1)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise KafkaException(m.error())
            assert m.timestamp()[1] > 0
            out.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    raise AssertionError(f"did not reach the end of {topic}; got {len(out)}")


def _latest(rows: list[Row]) -> dict[bytes | None, Row]:
    return {k: (o, k, v) for o, k, v in rows}


def _keyed(n: int, keys: int, tag: bytes = b"v") -> list[tuple[bytes, bytes]]:
    return [(b"key-%02d" % (i % keys), tag + b"-%04d" % i) for i in range(n)]


def test_latest_value_per_key_with_original_offsets(broker: ThreadedBroker) -> None:
    """36 and 38: latest value of every key, same offsets, same order; active segment intact.

    42: compaction never blocks reads is covered in test_cleaner.py (the work runs on a
    worker thread; a heartbeat on the loop keeps ticking) together with the one-segment
    bound on extra disk.
    """
    broker.create_topic("c36", config=COMPACT)
    acked = _produce(broker, "c36", _keyed(300, 12))
    lg = _log(broker, "c36")
    assert lg.num_segments > 5
    active_base = lg.active_segment.base_offset
    stats = _clean(broker)
    assert stats is not None and stats.end_offset == active_base
    got = _consume(broker, "c36")
    assert set(got) <= set(acked)
    assert [o for o, _k, _v in got] == sorted(o for o, _k, _v in got)
    assert _latest(got) == _latest(acked)
    assert len([r for r in got if r[0] < active_base]) <= 12
    assert [r for r in got if r[0] >= active_base] == [r for r in acked if r[0] >= active_base]
    # kafka-python sees the same (compacted batches have offset gaps and empty batches)
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False)
    tp = KpTopicPartition("c36", 0)
    kc.assign([tp])
    kc.seek_to_beginning(tp)
    kp: list[Row] = []
    deadline = time.monotonic() + 20
    while kc.position(tp) < acked[-1][0] + 1 and time.monotonic() < deadline:
        for msgs in kc.poll(timeout_ms=500).values():
            kp.extend((m.offset, m.key, m.value) for m in msgs)
    kc.close()
    assert kp == got


def test_fetch_at_a_removed_offset_starts_at_the_next_survivor(broker: ThreadedBroker) -> None:
    """37: a removed offset is equivalent to the next surviving one."""
    broker.create_topic("c37", config=COMPACT)
    acked = _produce(broker, "c37", _keyed(120, 4))
    _clean(broker)
    kept = [o for o, _k, _v in _consume(broker, "c37")]
    removed = [o for o, _k, _v in acked if o not in kept]
    for o in removed[:: max(len(removed) // 5, 1)]:
        got = _consume(broker, "c37", o)
        assert got[0][0] == min(k for k in kept if k > o)


def test_rolling_makes_the_active_segment_eligible(broker: ThreadedBroker) -> None:
    """38: the active segment is never cleaned; once rolled (segment.ms) it is."""
    cfg = dict(COMPACT, **{"segment.bytes": str(1 << 20), "segment.ms": "300"})
    broker.create_topic("c38", config=cfg)
    _produce(broker, "c38", _keyed(60, 3))
    assert _clean(broker) is None  # a single, active segment
    assert len(_consume(broker, "c38")) == 60
    time.sleep(0.4)
    _produce(broker, "c38", [(b"key-00", b"roll")])  # this append rolls past segment.ms
    assert _log(broker, "c38").num_segments == 2
    assert _clean(broker) is not None
    got = _consume(broker, "c38")
    assert len(got) == 4  # three keys from the old segment + the new record


def test_records_younger_than_min_compaction_lag_stay(broker: ThreadedBroker) -> None:
    """39: min.compaction.lag.ms protects recent records."""
    broker.create_topic("c39", config=dict(COMPACT, **{"min.compaction.lag.ms": "600000"}))
    now = int(time.time() * 1000)
    old = _produce(broker, "c39", _keyed(60, 3, b"old"), timestamp=now - 3_600_000)
    young = _produce(broker, "c39", _keyed(60, 3, b"new"), timestamp=now)
    _produce(broker, "c39", [(b"key-00", b"tail")] * 40)
    assert _clean(broker) is not None
    got = _consume(broker, "c39")
    # segments holding only old records were compacted; no young record went, even
    # though later records supersede them all
    assert len([r for r in got if r in old]) < len(old)
    assert all(r in got for r in young)


def test_dirty_ratio_threshold_and_max_compaction_lag(broker: ThreadedBroker) -> None:
    """40: below min.cleanable.dirty.ratio nothing is cleaned unless max.compaction.lag.ms passed."""
    broker.create_topic("c40", config=dict(COMPACT, **{"min.cleanable.dirty.ratio": "0.99"}))
    acked = _produce(broker, "c40", _keyed(120, 4), timestamp=int(time.time() * 1000))
    assert _clean(broker) is not None  # all dirty: ratio 1.0
    after_first = _consume(broker, "c40")
    _produce(broker, "c40", _keyed(60, 4, b"more"))
    assert _clean(broker) is None  # the clean part dominates now
    assert len(_consume(broker, "c40")) == len(after_first) + 60
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    res = ConfigResource(
        "topic",
        "c40",
        set_config=dict(
            COMPACT, **{"min.cleanable.dirty.ratio": "0.99", "max.compaction.lag.ms": "1000"}
        ),
    )
    for f in admin.alter_configs([res]).values():
        f.result(10)
    assert _clean(broker, int(time.time() * 1000) + 3_600_000) is not None
    got = _consume(broker, "c40")
    assert len(got) < len(after_first) + 60
    assert {k for _o, k, _v in got} == {k for _o, k, _v in acked}


def test_tombstone_lifetime(broker: ThreadedBroker) -> None:
    """41: a tombstone removes earlier values, stays delete.retention.ms after cleaning, then goes."""
    broker.create_topic("c41", config=dict(COMPACT, **{"delete.retention.ms": "5000"}))
    _produce(broker, "c41", _keyed(40, 2))
    tomb = _produce(broker, "c41", [(b"key-00", None)])[0]
    _produce(broker, "c41", [(b"pad", b"x" * 200)] * 12)
    t0 = int(time.time() * 1000)
    assert _clean(broker, t0) is not None
    got = _consume(broker, "c41")
    assert [(o, v) for o, k, v in got if k == b"key-00"] == [(tomb[0], None)]
    assert _clean(broker, t0 + 4_999) is None  # still within delete.retention.ms
    assert tomb in _consume(broker, "c41")
    assert _clean(broker, t0 + 5_000) is not None
    got = _consume(broker, "c41")
    assert all(k != b"key-00" for _o, k, _v in got)
    assert any(k == b"key-01" for _o, k, _v in got)


def test_only_compacted_topics_are_cleaned(broker: ThreadedBroker) -> None:
    """43: delete-policy topics are never compacted."""
    broker.create_topic("c43-delete", config={"segment.bytes": "1024"})
    broker.create_topic("c43-compact", config=COMPACT)
    items = _keyed(150, 3)
    plain = _produce(broker, "c43-delete", items)
    _produce(broker, "c43-compact", items)
    cleaned = _clean_all(broker)
    assert {s.topic_partition for s in cleaned} == {("c43-compact", 0)}
    assert _consume(broker, "c43-delete") == plain
    assert len(_consume(broker, "c43-compact")) < 150


def test_compact_delete_retention_advances_the_log_start(broker: ThreadedBroker) -> None:
    """44 with compact,delete: retention drops whole old segments; below the start is out of range."""
    cfg = dict(COMPACT, **{"cleanup.policy": "compact,delete", "retention.bytes": "3000"})
    broker.create_topic("c44", config=cfg)
    # 50 keys x ~150 bytes: the compacted log alone is well over retention.bytes, however
    # the client happened to batch the records
    _produce(broker, "c44", [(k, v + b"x" * 100) for k, v in _keyed(200, 50)])
    assert _clean(broker) is not None
    lg = _log(broker, "c44")
    first = lg.segments[0].size
    # precondition of size retention: deleting the oldest segment still leaves >= 3000 bytes
    assert lg.size_in_bytes - 3000 >= first, (lg.size_in_bytes, first)
    deleted = broker.call(broker.kafka.log_manager.cleanup_logs)
    assert deleted > 0
    start = lg.log_start_offset
    assert start > 0 and lg.size_in_bytes <= 3000 + 1024
    got = _consume(broker, "c44", start)
    assert got and got[0][0] >= start
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "c44",
            "auto.offset.reset": "error",
            "enable.auto.commit": False,
        }
    )
    c.assign([CkTopicPartition("c44", 0, 0)])
    try:
        deadline = time.monotonic() + 10
        err = None
        while err is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error():
                err = m.error()
        assert err is not None and "out of range" in err.str().lower()
    finally:
        c.close()


def test_null_key_to_compacted_topic_is_invalid_record(broker: ThreadedBroker) -> None:
    broker.create_topic("c-nokey", config=COMPACT)
    errors: list[Any] = []
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "linger.ms": 0,
            "message.send.max.retries": 0,
        }
    )
    p.produce("c-nokey", value=b"no key", on_delivery=lambda err, _m: errors.append(err))
    p.flush(10)
    assert [e.code() for e in errors] == [KafkaError.INVALID_RECORD]
    assert _produce(broker, "c-nokey", [(b"k", b"fine")])[0][0] == 0


def test_compressed_batches_stay_compressed(broker: ThreadedBroker) -> None:
    broker.create_topic("c-zstd", config=COMPACT)
    p = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, "compression.type": "zstd"}
    )
    for i in range(400):
        p.produce("c-zstd", key=b"k%d" % (i % 10), value=b"value-%d" % i + b"x" * 50)
        if i % 20 == 19:
            p.flush(10)
    p.flush(10)
    _clean(broker)
    lg = _log(broker, "c-zstd")
    from kafkalite.protocol.record_batch import iter_headers

    codecs = {
        h.compression
        for s in lg.segments
        for _p, h in iter_headers(s.read_batch_bytes(0, s.size))
        if h.records_count
    }
    assert codecs == {4}
    got = _latest(_consume(broker, "c-zstd"))
    assert {k: v for k, (_o, _k, v) in got.items()} == {
        b"k%d" % j: b"value-%d" % (390 + j) + b"x" * 50 for j in range(10)
    }


@pytest.mark.parametrize("step", ["cleaned", "swap", "deleted", "replaced", "checkpointed"])
def test_cleaner_crash_at_each_swap_step_is_recovered_at_restart(
    broker: ThreadedBroker, step: str
) -> None:
    broker.create_topic("c-crash", config=COMPACT)
    acked = _produce(broker, "c-crash", _keyed(150, 5))
    before = _consume(broker, "c-crash")

    def hook(name: str) -> None:
        if name == step:
            raise Crash(name)

    _cleaner(broker).crash_hook = hook
    with pytest.raises(Crash):
        _clean(broker)
    broker.restart()
    got = _consume(broker, "c-crash")
    assert _latest(got) == _latest(acked)
    assert set(got) <= set(before)
    if step != "cleaned":
        assert len(got) < len(before)
    d = _log(broker, "c-crash").dir
    assert not [p for p in d.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
    # and the log goes on: new writes at the next offset, cleaning works again
    nxt = _produce(broker, "c-crash", [(b"key-00", b"after")])[0][0]
    assert nxt == acked[-1][0] + 1
    _produce(broker, "c-crash", [(b"pad", b"x" * 100)] * 20)
    _clean_all(broker)
    assert _latest(_consume(broker, "c-crash"))[b"key-00"][2] == b"after"
