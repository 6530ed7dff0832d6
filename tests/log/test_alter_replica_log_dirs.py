"""AlterReplicaLogDirs on a live broker (JBOD): kafka-python's admin client moves a
replica to another of ``log.dirs``; DescribeLogDirs shows the future replica while it is
copied (throttled by ``replica.alter.log.dirs.io.max.bytes.per.second``), then the
partition serves from the new dir, every record intact, and takes new ones."""

from __future__ import annotations

import os
import time
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.structs import TopicPartitionReplica

from kafkalite.protocol.errors import ErrorCode


def _dirs(admin: KafkaAdminClient, topic: str) -> dict[str, list[tuple[int, bool]]]:
    """log dir -> [(partition, is_future)] of ``topic``."""
    [resp] = admin.describe_log_dirs([topic])
    out: dict[str, list[tuple[int, bool]]] = {}
    for r in resp["log_dirs"]:
        for t in r["topics"]:
            for p in t["partitions"]:
                out.setdefault(r["log_dir"], []).append((p["partition_index"], p["is_future_key"]))
    return out


def _consume(bootstrap: str, topic: str, n: int) -> list[Any]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "mv", "enable.auto.commit": False})
    c.assign([CkTopicPartition(topic, 0, 0)])
    got = []
    try:
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(1)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    return got


def test_a_replica_moves_between_log_dirs_on_a_live_broker(kafka_broker_factory, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    broker = kafka_broker_factory(tmp_path / "data", **{"log.dirs": f"{a},{b}"})
    broker.create_topic("mv", config={"segment.bytes": "20000"})
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for i in range(300):
        p.produce("mv", b"%04d" % i + b"x" * 500, partition=0)
        if i % 30 == 29:  # a batch of ~15 KB a flush: segments of ~20 KB roll
            assert p.flush(10) == 0
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        src = next(d for d, ps in _dirs(admin, "mv").items() if (0, False) in ps)
        dest = str(b if src == str(a) else a)
        # ~150 KB of closed segments at 100 KB/s: the future replica is there a while
        rate = ConfigResource(
            ConfigResourceType.BROKER,
            "0",
            {"replica.alter.log.dirs.io.max.bytes.per.second": "100000"},
        )
        assert admin.alter_configs([rate], incremental=True, raise_on_unknown=False) == {
            "broker": {"0": "OK"}
        }

        errors = admin.alter_replica_log_dirs(
            {
                TopicPartitionReplica("mv", 0, 0): dest,
                TopicPartitionReplica("mv", 0, 0): dest,  # noqa: F601 (the same twice)
            }
        )
        assert [e.errno for e in errors.values()] == [0]
        assert (0, True) in _dirs(admin, "mv").get(dest, [])  # the future replica

        # Kafka's errors: a path not in log.dirs, a partition not hosted here
        bad = admin.alter_replica_log_dirs(
            {
                TopicPartitionReplica("mv", 0, 0): str(tmp_path / "elsewhere"),
                TopicPartitionReplica("nope", 0, 0): dest,
            }
        )
        assert sorted(e.errno for e in bad.values()) == sorted(
            [ErrorCode.log_dir_not_found, ErrorCode.replica_not_available]
        )

        # appends continue during the move
        for i in range(300, 320):
            p.produce("mv", b"%04d" % i, partition=0)
        assert p.flush(10) == 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _dirs(admin, "mv") != {dest: [(0, False)]}:
            time.sleep(0.2)
        assert _dirs(admin, "mv") == {dest: [(0, False)]}
    finally:
        admin.close()

    for i in range(320, 330):
        p.produce("mv", b"%04d" % i, partition=0)
    assert p.flush(10) == 0
    got = _consume(broker.bootstrap_servers, "mv", 330)
    assert [v[:4] for v in got] == [b"%04d" % i for i in range(330)]
    # and after a restart it is still there, in the new dir
    broker.restart()
    assert (
        broker.kafka.log_manager.log_dir_of("mv", 0)
        == broker.kafka.log_manager.log_dirs[
            [str(d) for d in broker.kafka.log_manager.log_dirs].index(dest)
        ]
    )
    assert len(_consume(broker.bootstrap_servers, "mv", 330)) == 330


def test_a_move_cut_short_by_a_restart_is_abandoned(kafka_broker_factory, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    broker = kafka_broker_factory(
        tmp_path / "data",
        **{"log.dirs": f"{a},{b}", "replica.alter.log.dirs.io.max.bytes.per.second": 1000},
    )
    broker.create_topic("cut", config={"segment.bytes": "20000"})
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for i in range(60):
        p.produce("cut", b"%04d" % i + b"x" * 500, partition=0)
        if i % 30 == 29:
            assert p.flush(10) == 0
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        src = next(d for d, ps in _dirs(admin, "cut").items() if (0, False) in ps)
        dest = str(b if src == str(a) else a)
        admin.alter_replica_log_dirs({TopicPartitionReplica("cut", 0, 0): dest})
        assert (0, True) in _dirs(admin, "cut")[dest]
    finally:
        admin.close()
    broker.restart()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        assert _dirs(admin, "cut") == {src: [(0, False)]}
    finally:
        admin.close()
    broker.kafka.log_manager.wait_for_deletions()
    assert not [d for d in os.listdir(dest) if d.endswith("-future")]
    assert len(_consume(broker.bootstrap_servers, "cut", 60)) == 60
