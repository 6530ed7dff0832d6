"""A log dir failing at runtime, end to end (Kafka's JBOD behaviour in ZooKeeper mode).

One broker with two log dirs. One dir is made to fail with a real filesystem
condition (replaced by a plain file), found by the log manager's next
checkpoint. The broker takes the dir's replicas offline, answers requests for
them with KAFKA_STORAGE_ERROR and writes /log_dir_event_notification; the
controller asks it which replicas are offline (LeaderAndIsr) and, with no other
replica to elect, leaves those partitions leaderless with the broker in
offline_replicas. The partitions in the healthy dir keep working and lose
nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kafkalite.metadata import zk_paths
from kafkalite.protocol.errors import ErrorCode
from tests.replica.wire import (
    FETCH_V,
    PRODUCE_V,
    batch,
    fail_log_dir,
    fetch,
    log_dir_of,
    produce,
    wait_until,
)
from tests.server.raw_client import RawClient
from tests.server.test_protocol_edges import metadata

TOPIC = "jbod"


@pytest.fixture
def jbod(kafka_broker_factory, tmp_path):
    b = kafka_broker_factory(
        tmp_path,
        **{
            "log.dirs": f"{tmp_path}/d0,{tmp_path}/d1",
            "log.flush.offset.checkpoint.interval.ms": 100,
        },
    )
    b.create_topic(TOPIC, 2)
    return b


def _produce_all(bootstrap: str, partition: int, values: list[bytes], timeout_ms: int = 10_000):
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "message.timeout.ms": timeout_ms,
        }
    )
    errors: list = []
    for v in values:
        p.produce(TOPIC, v, partition=partition, on_delivery=lambda err, _m: errors.append(err))
    p.flush(timeout_ms / 1000 + 5)
    return errors


def _partition_metadata(bootstrap: str) -> dict[int, object]:
    c = RawClient.to(bootstrap)
    try:
        [t] = c.call(3, 12, metadata(TOPIC)).topics
        return {p.partition_index: p for p in t.partitions}
    finally:
        c.close()


def test_failed_log_dir_takes_its_partitions_offline_and_the_other_dir_keeps_serving(jbod):
    bootstrap = jbod.bootstrap_servers
    bad = 1
    good = 0
    failing = log_dir_of(jbod, TOPIC, bad)
    assert log_dir_of(jbod, TOPIC, good) != failing
    before = [f"before-{i}".encode() for i in range(20)]
    assert _produce_all(bootstrap, good, before) == [None] * 20
    assert _produce_all(bootstrap, bad, before) == [None] * 20

    fail_log_dir(failing)

    # the controller learns the replica is offline: no leader, the broker in offline_replicas
    def offline_in_metadata() -> bool:
        p = _partition_metadata(bootstrap)[bad]
        return p.leader_id == -1 and list(p.offline_replicas) == [0]

    wait_until(offline_in_metadata, 15, "metadata to report the offline replica")
    md = _partition_metadata(bootstrap)
    assert md[bad].error_code == ErrorCode.leader_not_available
    assert list(md[bad].replica_nodes) == [0] and list(md[bad].isr_nodes) == [0]
    assert md[good].error_code == ErrorCode.none and md[good].leader_id == 0
    assert list(md[good].offline_replicas) == []
    # the notification was consumed and the partition state records no leader
    store = jbod.kafka.store
    assert jbod.call(store.get_children, zk_paths.LOG_DIR_EVENT_NOTIFICATION) == []
    raw, _ = jbod.call(store.get, zk_paths.partition_state_path(TOPIC, bad))
    assert json.loads(raw)["leader"] == -1

    # the broker answers requests for the offline partition with KAFKA_STORAGE_ERROR
    c = RawClient.to(bootstrap)
    r = c.call(0, PRODUCE_V, produce([(TOPIC, bad, batch(1))]))
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.kafka_storage_error
    r = c.call(1, FETCH_V, fetch([(TOPIC, bad, 0)], wait_ms=0))
    assert r.responses[0].partitions[0].error_code == ErrorCode.kafka_storage_error
    c.close()

    # stock clients: the admin client sees the partition leaderless ...
    admin = AdminClient({"bootstrap.servers": bootstrap})
    parts = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
    assert parts[bad].leader == -1 and parts[bad].error is not None
    assert parts[bad].error.code() == ErrorCode.leader_not_available
    assert parts[good].leader == 0 and parts[good].error is None
    # ... a producer cannot deliver to it, but still can to the healthy partition
    after = [f"after-{i}".encode() for i in range(20)]
    assert _produce_all(bootstrap, good, after) == [None] * 20
    [err] = _produce_all(bootstrap, bad, [b"lost?"], timeout_ms=2000)
    assert err is not None
    # ... and a consumer reads everything from the healthy partition: nothing lost
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "jbod-check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, good, 0)])
    got: list[bytes] = []
    for _ in range(100):
        if len(got) >= 40:
            break
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    consumer.close()
    assert got == before + after


def test_leader_moves_to_another_replica_when_its_log_dir_fails(tmp_path):
    """Two brokers, partition replicas [0, 1] led by 0, broker 0 with two log dirs. Its
    dir holding the partition fails: the controller takes the replica offline and
    elects broker 1 (the other ISR member); clients see offline_replicas [0]."""
    from kafkalite.metadata.embedded_store import EmbeddedEnsemble
    from kafkalite.testing.embedded_broker import AsyncBroker, LoopThread

    lt = LoopThread("log-dir-failover")
    lt.start()
    ensemble = EmbeddedEnsemble(fsync=False)
    peers: dict = {}
    common = {"log.flush.offset.checkpoint.interval.ms": 100}
    nodes = [
        AsyncBroker(
            tmp_path / "b0",
            ensemble=ensemble,
            peers=peers,
            **{**common, "broker.id": 0, "log.dirs": f"{tmp_path}/b0/d0,{tmp_path}/b0/d1"},
        ),
        AsyncBroker(tmp_path / "b1", ensemble=ensemble, peers=peers, **{**common, "broker.id": 1}),
    ]
    try:

        async def start_all() -> None:  # together: the first to create /controller wins
            await asyncio.gather(*(n.start() for n in nodes))

        lt.run(start_all())
        lt.run(nodes[0].create_topic("moved", assignments={0: [0, 1]}))

        def state(i: int):
            t = nodes[i].broker.metadata_cache.get_topic("moved")
            return t.partitions[0] if t is not None and 0 in t.partitions else None

        wait_until(lambda: all(state(i) and state(i).leader == 0 for i in (0, 1)), 10, "topic")
        dirs = [Path(f"{tmp_path}/b0/d0"), Path(f"{tmp_path}/b0/d1")]
        [failing] = [d for d in dirs if (d / "moved-0").is_dir()]
        fail_log_dir(failing)
        wait_until(lambda: state(1) is not None and state(1).leader == 1, 15, "a new leader")
        c = RawClient.to(nodes[1].bootstrap_servers)
        [t] = c.call(3, 12, metadata("moved")).topics
        [p] = t.partitions
        assert (p.error_code, p.leader_id) == (ErrorCode.none, 1)
        assert list(p.isr_nodes) == [1] and list(p.offline_replicas) == [0]
        r = c.call(0, PRODUCE_V, produce([("moved", 0, batch(2))]))
        assert r.responses[0].partition_responses[0].error_code == ErrorCode.none
        c.close()
        c = RawClient.to(nodes[0].bootstrap_servers)
        r = c.call(0, PRODUCE_V, produce([("moved", 0, batch(2))]))
        assert r.responses[0].partition_responses[0].error_code == ErrorCode.kafka_storage_error
        c.close()
    finally:
        for n in reversed(nodes):
            with contextlib.suppress(Exception):
                lt.run(n.stop(cleanup=False))
        lt.call(ensemble.close)
        lt.stop()
