"""The exactly-once loop with kafka-python's and aiokafka's transactional producers.

Each reads A with its own client (read_committed) and writes B in transactions,
every 7th aborted and redone; the checks are confluent-kafka readers (eos.py).
"""

from __future__ import annotations

import asyncio
import os

import pytest

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

#: the pure-Python clients are slower: the same rules at a smaller count in CI, the
#: full count when KAFKALITE_TXN_RECORDS asks for it
N = RECORDS if "KAFKALITE_TXN_RECORDS" in os.environ else min(RECORDS, 700)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    from kafkalite.testing.embedded_broker import ThreadedBroker

    b = ThreadedBroker(tmp_path_factory.mktemp("eos-py"), **BROKER_CONFIG)
    b.start()
    try:
        yield b.bootstrap_servers
    finally:
        b.stop()


def test_kafka_python_transactional_copy(bootstrap):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    source, sink, group = unique("A"), unique("B"), unique("copy-kp")
    create_topics(bootstrap, source, sink)
    fill_source(bootstrap, source, N)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    tps = [TopicPartition(source, p) for p in range(3)]
    consumer.assign(tps)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=unique("kp"), linger_ms=5
    )
    producer.init_transactions()
    copied = txn_no = aborted = 0
    try:
        while copied < N:
            start = {tp: consumer.position(tp) for tp in tps}
            polled = consumer.poll(timeout_ms=2000, max_records=PER_TXN)
            msgs = [m for batch in polled.values() for m in batch]
            if not msgs:
                continue
            producer.begin_transaction()
            for m in msgs:
                producer.send(sink, value=transform(m.value), partition=m.partition)
            offsets = {tp: OffsetAndMetadata(consumer.position(tp), "", -1) for tp in tps}
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            if is_aborted_round(txn_no):
                producer.flush()
                producer.abort_transaction()
                aborted += 1
                for tp, off in start.items():
                    consumer.seek(tp, off)
            else:
                producer.commit_transaction()
                copied += len(msgs)
            txn_no += 1
    finally:
        consumer.close()
        producer.close()
    assert aborted >= 1
    check_exactly_once(bootstrap, source, sink, group, N)


def test_aiokafka_transactional_copy(bootstrap):
    source, sink, group = unique("A"), unique("B"), unique("copy-aio")
    create_topics(bootstrap, source, sink)
    fill_source(bootstrap, source, N)

    async def run() -> int:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, transactional_id=unique("aio"), linger_ms=5
        )
        await consumer.start()
        await producer.start()
        tps = [TopicPartition(source, p) for p in range(3)]
        consumer.assign(tps)
        copied = txn_no = aborted = 0
        try:
            while copied < N:
                start = {tp: await consumer.position(tp) for tp in tps}
                polled = await consumer.getmany(timeout_ms=2000, max_records=PER_TXN)
                msgs = [m for batch in polled.values() for m in batch]
                if not msgs:
                    continue
                await producer.begin_transaction()
                for m in msgs:
                    await producer.send(sink, value=transform(m.value), partition=m.partition)
                offsets = {tp: await consumer.position(tp) for tp in tps}
                await producer.send_offsets_to_transaction(offsets, group)
                if is_aborted_round(txn_no):
                    await producer.flush()
                    await producer.abort_transaction()
                    aborted += 1
                    for tp, off in start.items():
                        consumer.seek(tp, off)
                else:
                    await producer.commit_transaction()
                    copied += len(msgs)
                txn_no += 1
        finally:
            await consumer.stop()
            await producer.stop()
        return aborted

    assert asyncio.run(run()) >= 1
    check_exactly_once(bootstrap, source, sink, group, N)
