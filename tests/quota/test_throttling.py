"""KIP-219 enforcement over the wire (requests built with kio): the response comes at
once with throttle_time_ms, then the connection is muted for that long; nothing is
dropped or failed for a byte-rate or request quota; Fetch responses are shaped by the
quota; KIP-599 answers THROTTLING_QUOTA_EXCEEDED to strict versions.

The quota window is 2 samples of 1 s so that a few kilobytes are enough to exceed a
quota. Nothing here asserts a duration: the throttle times are the broker's own
arithmetic, checked against the reported value and the connection's muted state.
"""

from __future__ import annotations

import datetime
import time

from kafkalite.protocol.records import build_batch
from kafkalite.testing import AsyncBroker
from tests.coordinator.wire import Wire
from tests.quota.quota_wire import alter
from tests.server.raw_client import fetch, produce

PRODUCE, FETCH, METADATA, CREATE_TOPICS, DELETE_TOPICS = 0, 1, 3, 19, 20
THROTTLING_QUOTA_EXCEEDED = 89
METADATA_ALL = {
    "topics": None,
    "allow_auto_topic_creation": False,
    "include_topic_authorized_operations": False,
}
FAST_WINDOW = {"quota.window.num": 2, "quota.window.size.seconds": 1}


def ms(td: datetime.timedelta | int) -> int:
    return int(td.total_seconds() * 1000) if isinstance(td, datetime.timedelta) else int(td)


def batch(n: int, size: int) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([(None, b"x" * size, [], now) for _ in range(n)])


def connection_of(b: AsyncBroker, w: Wire):
    me = w.writer.get_extra_info("sockname")[:2]
    return next(c for c in b.broker.channel.connections if tuple(c.peer[:2]) == me)


async def _admin(b: AsyncBroker, entity, values) -> None:
    w = await Wire.connect(b.bootstrap_servers, "admin")
    try:
        assert (await alter(w, entity, values)).error_code == 0
    finally:
        await w.close()


async def test_produce_over_its_byte_rate_is_answered_with_throttle_time_and_muted(tmp_path):
    async with AsyncBroker(tmp_path, **FAST_WINDOW) as b:
        await b.create_topic("t")
        await _admin(b, {"client-id": "greedy"}, {"producer_byte_rate": 10000})
        greedy = await Wire.connect(b.bootstrap_servers, "greedy")
        free = await Wire.connect(b.bootstrap_servers, "free")
        try:
            # 15 kB against 10 kB/s over (at least) 1 s: 500 ms owed
            r = await greedy.call(PRODUCE, 9, produce("t", batch(15, 1000)))
            p = r.responses[0].partition_responses[0]
            assert p.error_code == 0 and p.base_offset == 0
            throttle = ms(r.throttle_time)
            # Kafka's (rate - quota) / quota * window: 5 kB and the request's headers
            # over the quota, about 0.5 s (never capped for a byte rate)
            assert 0 < throttle < 1000
            conn = connection_of(b, greedy)
            assert conn.throttled and not conn.reading
            metrics = b.broker.metrics
            labels = {"user": "", "client_id": "greedy"}
            assert metrics.value("kafkalite_quota_produce_throttled_responses", **labels) == 1
            assert metrics.value("kafka_server_produce_byte_rate", **labels) > 10000
            assert metrics.value("kafka_server_produce_throttle_time", **labels) == throttle
            # another client is not throttled, muted or slowed by the greedy one's quota
            r2 = await free.call(PRODUCE, 9, produce("t", batch(15, 1000)))
            assert ms(r2.throttle_time) == 0
            assert r2.responses[0].partition_responses[0].error_code == 0
            assert not connection_of(b, free).throttled
            # what the greedy client pipelines while muted is read and answered afterwards,
            # in order, nothing dropped
            greedy_ids = []
            for _ in range(2):
                r = await greedy.call(PRODUCE, 9, produce("t", batch(1, 100)))
                assert r.responses[0].partition_responses[0].error_code == 0
                greedy_ids.append(r.responses[0].partition_responses[0].base_offset)
            assert greedy_ids == sorted(greedy_ids) and len(set(greedy_ids)) == 2
            assert (await greedy.call(METADATA, 12, METADATA_ALL)).brokers
            assert len(b.records("t")) == 15 + 15 + 2
        finally:
            await greedy.close()
            await free.close()


async def test_fetch_is_shaped_by_the_quota_and_an_over_quota_fetch_is_empty(tmp_path):
    async with AsyncBroker(tmp_path, **FAST_WINDOW) as b:
        await b.create_topic("t")
        producer = await Wire.connect(b.bootstrap_servers, "producer")
        try:
            for _ in range(20):  # 20 batches of about 2 kB
                r = await producer.call(PRODUCE, 9, produce("t", batch(2, 1000)))
                assert r.responses[0].partition_responses[0].error_code == 0
        finally:
            await producer.close()
        await _admin(b, {"client-id": "reader"}, {"consumer_byte_rate": 8000})
        w = await Wire.connect(b.bootstrap_servers, "reader")
        try:
            # asks for 1 MiB; gets no more than the quota allows over its window (8 kB)
            r = await w.call(FETCH, 12, fetch("t", 0, max_bytes=1 << 20))
            records = r.responses[0].partitions[0].records
            assert 0 < len(records) <= 8000
            assert ms(r.throttle_time) == 0
            got = len(records)
            # the next fetch is over the quota: empty at once, with the time to wait
            r = await w.call(FETCH, 12, fetch("t", 0, max_bytes=1 << 20))
            throttle = ms(r.throttle_time)
            assert throttle > 0
            assert r.responses == () or all(
                not p.records for t in r.responses for p in t.partitions
            )
            assert connection_of(b, w).throttled
            # nothing was lost: after the mute the same offsets are served
            r = await w.call(FETCH, 12, fetch("t", 0, max_bytes=1 << 20))
            while not r.responses or not r.responses[0].partitions[0].records:
                r = await w.call(FETCH, 12, fetch("t", 0, max_bytes=1 << 20))
            assert r.responses[0].partitions[0].records[:got] == records
        finally:
            await w.close()


async def test_request_percentage_throttles_a_client_flooding_metadata(tmp_path):
    async with AsyncBroker(tmp_path, **FAST_WINDOW) as b:
        await _admin(b, {"client-id": "flood"}, {"request_percentage": 0.5})
        flood = await Wire.connect(b.bootstrap_servers, "flood")
        try:
            throttled = None
            for _ in range(20000):
                r = await flood.call(METADATA, 12, METADATA_ALL)
                if ms(r.throttle_time):
                    throttled = ms(r.throttle_time)
                    break
            assert throttled is not None, "0.5% of the loop never exceeded"
            assert connection_of(b, flood).throttled
            labels = {"user": "", "client_id": "flood"}
            assert b.broker.metrics.value("kafka_server_request_request_time", **labels) > 0.5
            # the next request is answered (after the mute), not refused
            assert (await flood.call(METADATA, 12, METADATA_ALL)).brokers
        finally:
            await flood.close()


def _create(names_partitions: list[tuple[str, int]]) -> dict:
    return {
        "topics": [
            {
                "name": n,
                "num_partitions": p,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
            for n, p in names_partitions
        ],
        "timeout": datetime.timedelta(seconds=10),
        "validate_only": False,
    }


async def test_controller_mutation_rate_refuses_strict_versions_and_throttles_old_ones(tmp_path):
    window = {"controller.quota.window.num": 2, "controller.quota.window.size.seconds": 1}
    async with AsyncBroker(tmp_path, **window) as b:
        # 1 partition/s with a burst of 2 (2 samples of 1 s)
        await _admin(b, {"client-id": "admin-tool"}, {"controller_mutation_rate": 1})
        w = await Wire.connect(b.bootstrap_servers, "admin-tool")
        try:
            # v7 (strict): the first topic takes the bucket below zero and is created;
            # the second is refused while it is
            r = await w.call(CREATE_TOPICS, 7, _create([("a", 3), ("b", 1)]))
            codes = {t.name: t.error_code for t in r.topics}
            assert codes == {"a": 0, "b": THROTTLING_QUOTA_EXCEEDED}
            assert ms(r.throttle_time) > 0
            assert "b" not in b.broker.metadata_cache.topics
            # Kafka's kafka.server:type=ControllerMutation metrics for the entity
            metrics, labels = b.broker.metrics, {"user": "", "client_id": "admin-tool"}
            assert metrics.value("kafka_server_controllermutation_tokens", **labels) < 0
            assert metrics.value("kafka_server_controllermutation_mutation_rate", **labels) > 0
            assert metrics.value("kafka_server_controllermutation_throttle_time", **labels) == ms(
                r.throttle_time
            )
            # v5 (permissive, before KIP-599): created, only throttled
            r = await w.call(CREATE_TOPICS, 5, _create([("c", 2), ("d", 2)]))
            assert {t.name: t.error_code for t in r.topics} == {"c": 0, "d": 0}
            assert ms(r.throttle_time) > 0
            # DeleteTopics v6 (strict) counts the partitions it deletes
            r = await w.call(
                DELETE_TOPICS,
                6,
                {
                    "topics": [{"name": "c", "topic_id": None}, {"name": "d", "topic_id": None}],
                    "timeout": datetime.timedelta(seconds=10),
                },
            )
            codes = {t.name: t.error_code for t in r.responses}
            assert THROTTLING_QUOTA_EXCEEDED in codes.values()
            # another client has no such quota
            other = await Wire.connect(b.bootstrap_servers, "other")
            try:
                r = await other.call(CREATE_TOPICS, 7, _create([("e", 4), ("f", 4)]))
                assert {t.name: t.error_code for t in r.topics} == {"e": 0, "f": 0}
                assert ms(r.throttle_time) == 0
            finally:
                await other.close()
        finally:
            await w.close()


async def test_no_quota_configured_keeps_throttle_time_zero(tmp_path):
    async with AsyncBroker(tmp_path, **FAST_WINDOW) as b:
        await b.create_topic("t")
        w = await Wire.connect(b.bootstrap_servers, "anyone")
        try:
            for _ in range(3):
                r = await w.call(PRODUCE, 9, produce("t", batch(50, 1000)))
                assert ms(r.throttle_time) == 0
            assert not connection_of(b, w).throttled
            assert not b.broker.quotas.produce.sensors
        finally:
            await w.close()


async def test_fetch_and_mutation_quotas_key_on_the_connections_principal(tmp_path):
    """A user quota applies to Fetch and to topic mutations of that user's connections
    (the principal SASL or mTLS set on the connection), not to ANONYMOUS ones."""
    from kafkalite.common.principal import KafkaPrincipal

    window = {**FAST_WINDOW, "controller.quota.window.num": 2}
    async with AsyncBroker(tmp_path, **window) as b:
        await b.create_topic("t")
        producer = await Wire.connect(b.bootstrap_servers, "producer")
        try:
            for _ in range(10):
                r = await producer.call(PRODUCE, 9, produce("t", batch(2, 1000)))
                assert r.responses[0].partition_responses[0].error_code == 0
        finally:
            await producer.close()
        await _admin(
            b, {"user": "alice"}, {"consumer_byte_rate": 4000, "controller_mutation_rate": 1}
        )
        alice = await Wire.connect(b.bootstrap_servers, "app")
        anon = await Wire.connect(b.bootstrap_servers, "app")
        try:
            connection_of(b, alice).principal = KafkaPrincipal("User", "alice")
            r = await alice.call(FETCH, 12, fetch("t", 0, max_bytes=1 << 20))
            assert 0 < len(r.responses[0].partitions[0].records) <= 4000  # her window
            r = await anon.call(FETCH, 12, fetch("t", 0, max_bytes=1 << 20))
            assert len(r.responses[0].partitions[0].records) > 4000 and not ms(r.throttle_time)
            r = await alice.call(CREATE_TOPICS, 7, _create([("a", 3), ("b", 1)]))
            assert {t.name: t.error_code for t in r.topics} == {
                "a": 0,
                "b": THROTTLING_QUOTA_EXCEEDED,
            }
            r = await anon.call(CREATE_TOPICS, 7, _create([("c", 3), ("d", 1)]))
            assert {t.name: t.error_code for t in r.topics} == {"c": 0, "d": 0}
            assert set(b.broker.quotas.fetch.sensors) == {("alice", "")}
        finally:
            await alice.close()
            await anon.close()
