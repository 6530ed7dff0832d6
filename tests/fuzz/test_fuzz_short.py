"""The fuzzer's short form: every attack class against an embedded broker.

A few thousand frames per frame class, and a few seconds of each connection
pattern (stalled prefixes, never-reading clients, slowloris, idle connections,
churn, resets) at the same time (``kafkalite.testing.fuzz``), seeded so a
failure reproduces. Afterwards the broker must still serve (ApiVersions, and a
produce/consume round trip with a stock client), every frame must have been
answered or had its connection closed (only an acks=0 Produce may go
unanswered), and nothing may have been logged at ERROR or with a traceback.
"""

from __future__ import annotations

import logging

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from kafkalite.testing import AsyncBroker
from kafkalite.testing.fuzz import (
    ATTACKS,
    FuzzTarget,
    SocketAttack,
    read_api_versions,
    run_fuzz,
)

FRAMES_PER_CLASS = 2000
SEED = 13

#: partitions one CreateTopics/CreatePartitions may add: a flipped bit in a count asks
#: for millions, which the default limit (10,000, POLICY_VIOLATION above it) refuses;
#: a small one keeps what fuzzing may create quick to create
MAX_PARTITIONS_PER_REQUEST = 8


async def test_every_attack_class_is_answered_or_closed_and_the_broker_keeps_serving(caplog):
    # ERROR only: warnings (one per closed connection) are expected, and keeping tens of
    # thousands of records would keep their connections' buffers alive
    caplog.set_level(logging.ERROR)
    async with AsyncBroker(
        **{"kafkalite.max.partitions.per.request": MAX_PARTITIONS_PER_REQUEST}
    ) as b:
        for topic in ("fuzz-0", "fuzz-1"):
            await b.create_topic(topic, 2)
        host, port = b.bootstrap_servers.rsplit(":", 1)
        target = FuzzTarget(host, int(port), {})
        report = await run_fuzz(
            target, frames_per_class=FRAMES_PER_CLASS, connections=4, seed=SEED, timeout=20
        )
        print(f"\n{report.table()}\n{report.frames} frames in {report.seconds:.1f} s")

        assert set(report.stats) == set(ATTACKS)
        for name, s in report.stats.items():
            if issubclass(ATTACKS[name], SocketAttack):
                # connection patterns: connections opened, none refused or failed
                assert s.sent > 0, name
                assert s.stalled == s.wrong == 0, (name, s.findings)
                continue
            assert s.sent == FRAMES_PER_CLASS, name
            assert s.answered + s.silent + s.closed == s.sent, (name, s.findings)
            assert s.stalled == s.wrong == 0, (name, s.findings)
        # the malformed classes really were malformed, the valid ones really answered
        assert report.stats["truncate"].closed > FRAMES_PER_CLASS // 2
        assert report.stats["counts"].closed > FRAMES_PER_CLASS // 2
        assert report.stats["valid"].answered > FRAMES_PER_CLASS * 9 // 10
        assert report.stats["records"].answered > FRAMES_PER_CLASS * 9 // 10

        assert (await read_api_versions(target))[18] == (0, 4)
        await _round_trip(b.bootstrap_servers)
    assert [r.getMessage() for r in caplog.records] == []


async def _round_trip(bootstrap: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        meta = await producer.send_and_wait("after-fuzz", b"still here", partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        "after-fuzz", bootstrap_servers=bootstrap, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        msg = await consumer.getone()
        assert (msg.offset, msg.value) == (meta.offset, b"still here")
    finally:
        await consumer.stop()
