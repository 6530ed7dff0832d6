"""Fencing of zombie producers and the coordinator's timeout abort (seed 001 behaviours 22-25)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import IsolationLevel, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from tests.transactions.eos import BROKER_CONFIG, create_topics, read_all, unique


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from kafkalite.testing.embedded_broker import ThreadedBroker

    b = ThreadedBroker(
        tmp_path_factory.mktemp("fence"),
        **{**BROKER_CONFIG, "transaction.max.timeout.ms": 60000},
    )
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="module")
def bootstrap(broker):
    return broker.bootstrap_servers


def _metric(broker, name: str, **labels: str) -> float | None:
    return broker.call(lambda: broker.kafka.metrics.value(name, **labels))


def _producer(bootstrap: str, tid: str, **extra: object) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 1, **extra})
    p.init_transactions(30)
    return p


def _lso_and_end(bootstrap: str, topic: str) -> tuple[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    lso = admin.list_offsets(
        {tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED
    )[tp].result(10)
    end = admin.list_offsets(
        {tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_UNCOMMITTED
    )[tp].result(10)
    return lso.offset, end.offset


def test_second_producer_fences_the_first(bootstrap):
    topic, tid = unique("fence"), unique("tid")
    create_topics(bootstrap, topic, partitions=1)
    zombie = _producer(bootstrap, tid)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie-0", partition=0)
    assert zombie.flush(10) == 0
    # the new instance's InitProducerId aborts the zombie's open transaction and bumps the epoch
    fresh = _producer(bootstrap, tid)
    # the zombie's late write and its commit are refused
    zombie.produce(topic, value=b"zombie-late", partition=0)
    with pytest.raises(KafkaException) as e:
        zombie.flush(10)  # the partition refuses the old epoch (INVALID_PRODUCER_EPOCH)
        zombie.commit_transaction(10)
    err = e.value.args[0]
    assert err.fatal(), err
    assert err.name() == "_FENCED", err
    fresh.begin_transaction()
    fresh.produce(topic, value=b"fresh-0", partition=0)
    fresh.commit_transaction(10)
    assert read_all(bootstrap, topic, "read_committed", 1, timeout_s=10, partitions=1) == [
        b"fresh-0"
    ]
    assert b"zombie-late" not in read_all(
        bootstrap, topic, "read_uncommitted", 2, timeout_s=10, partitions=1
    )


def test_kafka_python_zombie_is_fenced(bootstrap):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    topic, tid = unique("fence-kp"), unique("tid")
    create_topics(bootstrap, topic, partitions=1)
    zombie = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.send(topic, b"zombie", partition=0).get(10)
    fresh = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
    fresh.init_transactions()
    with pytest.raises(KafkaError) as e:
        zombie.commit_transaction()
    assert "Fenced" in type(e.value).__name__ or "Epoch" in type(e.value).__name__, e.value
    fresh.begin_transaction()
    fresh.send(topic, b"fresh", partition=0).get(10)
    fresh.commit_transaction()
    fresh.close()
    zombie.close(timeout=1)
    assert read_all(bootstrap, topic, "read_committed", 1, timeout_s=10, partitions=1) == [b"fresh"]


def test_timeout_abort_moves_the_lso(broker, bootstrap):
    topic = unique("timeout")
    create_topics(bootstrap, topic, partitions=1)
    slow = _producer(bootstrap, unique("slow"), **{"transaction.timeout.ms": 1000})
    slow.begin_transaction()
    slow.produce(topic, value=b"never-committed", partition=0)
    assert slow.flush(10) == 0
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=b"after", partition=0)
    assert plain.flush(10) == 0
    lso, end = _lso_and_end(bootstrap, topic)
    assert (lso, end) == (0, 2)  # held at the open transaction's first offset
    lag = "kafkalite_partition_last_stable_offset_lag"
    assert _metric(broker, lag, topic=topic, partition="0") == 2
    events = "kafkalite_transaction_coordinator_events_total"
    before = _metric(broker, events, event="timed_out_aborts") or 0
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and lso < end:
        time.sleep(0.1)
        lso, end = _lso_and_end(bootstrap, topic)
    assert lso == end == 3  # aborted by the coordinator: its marker is at offset 2
    assert _metric(broker, lag, topic=topic, partition="0") is None
    assert (_metric(broker, events, event="timed_out_aborts") or 0) >= before + 1
    # a read_committed consumer is not stuck behind it and never sees its record
    assert read_all(bootstrap, topic, "read_committed", 1, timeout_s=10, partitions=1) == [b"after"]
    with pytest.raises(KafkaException):
        slow.commit_transaction(10)


def test_timeout_above_the_broker_maximum_is_refused(bootstrap):
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": unique("too-long"),
            "transaction.timeout.ms": 120000,
        }
    )
    with pytest.raises(KafkaException) as e:
        p.init_transactions(10)
    assert "INVALID_TRANSACTION_TIMEOUT" in str(e.value) or e.value.args[0].code() == 39
