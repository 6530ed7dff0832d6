"""aiokafka end to end against a real kafkalite broker (on the test's own event loop)."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from kafkalite.testing import AsyncBroker
from tests.clients.workload import CODECS, Got, check_consumed, make_records

N = 10_000


@pytest.fixture
async def abroker():
    async with AsyncBroker() as b:
        yield b


async def test_aiokafka_full_lifecycle(abroker):
    bootstrap = abroker.bootstrap_servers
    topic = "aio-lifecycle"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])

        expected = []
        for codec in CODECS:
            recs = make_records(codec, N)
            expected += recs
            p = AIOKafkaProducer(
                bootstrap_servers=bootstrap,
                compression_type=None if codec == "none" else codec,
                linger_ms=5,
                acks="all",
                max_batch_size=64 * 1024,
            )
            await p.start()
            try:
                futs = [
                    await p.send(
                        topic,
                        value=r.value,
                        key=r.key,
                        headers=list(r.headers),
                        timestamp_ms=r.timestamp,
                    )
                    for r in recs
                ]
                for f in futs:
                    assert (await f).offset >= 0
            finally:
                await p.stop()

        c = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await c.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(3)]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            got = []
            while len(got) < len(expected):
                batch = await c.getmany(timeout_ms=5000, max_records=5000)
                if not batch:
                    break
                for tp, msgs in batch.items():
                    for m in msgs:
                        got.append(
                            Got(
                                tp.partition, m.offset, m.key, m.value, list(m.headers), m.timestamp
                            )
                        )
            check_consumed(expected, got, 3)

            counts = {p: sum(1 for g in got if g.partition == p) for p in range(3)}
            assert await c.beginning_offsets(tps) == {tp: 0 for tp in tps}
            assert await c.end_offsets(tps) == {tp: counts[tp.partition] for tp in tps}
            first_lz4 = min(
                (g for g in got if dict(g.headers)["codec"] == b"lz4"), key=lambda g: g.timestamp
            )
            tp = TopicPartition(topic, first_lz4.partition)
            found = (await c.offsets_for_times({tp: first_lz4.timestamp}))[tp]
            assert found.offset == first_lz4.offset
        finally:
            await c.stop()

        res = ConfigResource(ConfigResourceType.TOPIC, topic)
        described = await admin.describe_configs([res])
        entries = {e[0]: e[1] for e in described[0].resources[0][4]}
        assert entries["cleanup.policy"] == "delete"
        await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"cleanup.policy": "compact"})]
        )
        described = await admin.describe_configs([res])
        entries = {e[0]: e[1] for e in described[0].resources[0][4]}
        assert entries["cleanup.policy"] == "compact"

        await admin.delete_topics([topic])
        assert topic not in await admin.list_topics()
    finally:
        await admin.close()
