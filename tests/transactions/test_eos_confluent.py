"""Exactly-once consume-transform-produce with confluent-kafka (librdkafka's transactions)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.transactions.eos import (
    BROKER_CONFIG,
    PER_TXN,
    RECORDS,
    check_exactly_once,
    create_topics,
    fill_source,
    is_aborted_round,
    transform,
    unique,
)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    from kafkalite.testing.embedded_broker import ThreadedBroker

    b = ThreadedBroker(tmp_path_factory.mktemp("eos"), **BROKER_CONFIG)
    b.start()
    try:
        yield b.bootstrap_servers
    finally:
        b.stop()


def copy_with_confluent(bootstrap: str, source: str, sink: str, group: str, n: int) -> int:
    """The loop; returns how many transactions were aborted on purpose."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": unique("copier"), "linger.ms": 5}
    )
    producer.init_transactions(30)
    consumer.assign([TopicPartition(source, p, 0) for p in range(3)])
    # the loop keeps its own positions: librdkafka's position() is unset (-1001) for a
    # partition after a seek until a message of it is consumed
    position = dict.fromkeys(range(3), 0)
    copied = txn_no = aborted = 0
    try:
        while copied < n:
            start = dict(position)
            msgs = [m for m in consumer.consume(PER_TXN, timeout=2) if not m.error()]
            if not msgs:
                continue
            producer.begin_transaction()
            for m in msgs:
                producer.produce(sink, value=transform(m.value()), partition=m.partition())
                position[m.partition()] = m.offset() + 1
            producer.send_offsets_to_transaction(
                [TopicPartition(source, p, o) for p, o in position.items()],
                consumer.consumer_group_metadata(),
                30,
            )
            if is_aborted_round(txn_no):
                producer.flush(30)  # the records reach the log, then are aborted
                producer.abort_transaction(30)
                aborted += 1
                for p, o in start.items():  # redo: rewind to where this transaction began
                    consumer.seek(TopicPartition(source, p, o))
                position = start
            else:
                producer.commit_transaction(30)
                copied += len(msgs)
            txn_no += 1
    finally:
        consumer.close()
    return aborted


def test_consume_transform_produce_exactly_once(bootstrap):
    source, sink, group = unique("A"), unique("B"), unique("copy")
    create_topics(bootstrap, source, sink)
    fill_source(bootstrap, source)
    aborted = copy_with_confluent(bootstrap, source, sink, group, RECORDS)
    assert aborted >= 1
    check_exactly_once(bootstrap, source, sink, group, RECORDS)
