"""Offline log dirs: a dir failing at start-up starts offline (Kafka's errorLogDirs),
the broker serves from the others, and DescribeLogDirs reports KAFKA_STORAGE_ERROR.

Real embedded brokers; kafka-python's admin client sends DescribeLogDirs;
confluent-kafka produces and consumes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient

from kafkalite.log.errors import KafkaStorageError
from kafkalite.testing.embedded_broker import ThreadedBroker

KAFKA_STORAGE_ERROR = 56


def _describe(b: ThreadedBroker, topics: Any = None) -> dict[str, dict[str, Any]]:
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
    try:
        [resp] = admin.describe_log_dirs(topics)
    finally:
        admin.close()
    return {r["log_dir"]: r for r in resp["log_dirs"]}


def _round_trip(b: ThreadedBroker, topic: str, partitions: int) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
    for i in range(partitions):
        p.produce(topic, value=b"v%d" % i, partition=i)
    assert p.flush(10) == 0
    c = Consumer(
        {"bootstrap.servers": b.bootstrap_servers, "group.id": "g", "enable.partition.eof": True}
    )
    c.assign([CkTopicPartition(topic, i, 0) for i in range(partitions)])
    got, eof = [], 0
    try:
        while eof < partitions:
            m = c.poll(5)
            assert m is not None
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF
                eof += 1
            else:
                got.append((m.partition(), m.value()))
    finally:
        c.close()
    assert sorted(got) == [(i, b"v%d" % i) for i in range(partitions)]


@pytest.mark.parametrize("damage", ["corrupt meta.properties", "not a directory"])
def test_a_dir_failing_at_startup_is_offline_and_the_broker_serves_from_the_rest(
    kafka_broker_factory: Callable[..., ThreadedBroker], tmp_path: Path, damage: str
) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    if damage == "not a directory":
        bad.write_text("a file where a log dir should be\n")
    else:
        bad.mkdir()
        (bad / "meta.properties").write_text("#\nversion=not-a-number\nbroker.id=0\n")
    b = kafka_broker_factory(tmp_path / "b", **{"log.dirs": f"{good},{bad}"})
    lm = b.kafka.log_manager
    assert lm.offline_dirs == {bad}
    assert set(b.kafka.offline_log_dirs_at_start) == {bad}
    b.create_topic("t", partitions=3)
    _round_trip(b, "t", 3)
    assert {lm.log_dir_of("t", i) for i in range(3)} == {good}
    dirs = _describe(b)
    assert set(dirs) == {str(good), str(bad)}
    assert dirs[str(bad)]["error_code"] == KAFKA_STORAGE_ERROR
    assert dirs[str(bad)]["topics"] == []
    g = dirs[str(good)]
    assert g["error_code"] == 0 and g["total_bytes"] > 0 and g["usable_bytes"] > 0
    parts = {
        p["partition_index"]: p for t in g["topics"] if t["name"] == "t" for p in t["partitions"]
    }
    assert sorted(parts) == [0, 1, 2]
    assert all(p["partition_size"] > 0 and p["offset_lag"] == 0 for p in parts.values())
    # the damaged dir was left alone: nothing written into it
    if damage == "corrupt meta.properties":
        assert sorted(p.name for p in bad.iterdir()) == ["meta.properties"]


def test_broker_refuses_to_start_when_every_dir_fails(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "meta.properties").write_text("garbage without a version\n")
    b = ThreadedBroker(
        tmp_path / "b", **{"log.dirs": str(bad), "metadata.dir": str(tmp_path / "md")}
    )
    with pytest.raises(KafkaStorageError, match="every log dir failed at start-up.*bad"):
        b.start()


def test_describe_log_dirs_reports_a_dir_that_failed_at_runtime(
    kafka_broker_factory: Callable[..., ThreadedBroker], tmp_path: Path
) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    b = kafka_broker_factory(tmp_path / "b", **{"log.dirs": f"{d1},{d2}"})
    b.create_topic("t", partitions=2)
    lm = b.kafka.log_manager
    assert {lm.log_dir_of("t", 0), lm.log_dir_of("t", 1)} == {d1, d2}
    before = _describe(b, {"t": [0, 1]})
    assert [r["error_code"] for r in before.values()] == [0, 0]
    # what an I/O error in d2 does (LogManager._on_log_io_error)
    b.call(lm._mark_dir_offline, d2)
    after = _describe(b)
    assert after[str(d2)]["error_code"] == KAFKA_STORAGE_ERROR
    assert after[str(d1)]["error_code"] == 0
    assert [t["name"] for t in after[str(d1)]["topics"]] == ["t"]


def test_describe_log_dirs_filters_by_partition(
    kafka_broker_factory: Callable[..., ThreadedBroker],
) -> None:
    b = kafka_broker_factory()
    b.create_topic("a", partitions=2)
    b.create_topic("b", partitions=1)
    _round_trip(b, "a", 2)
    [only] = _describe(b, {"a": [1]}).values()
    assert [
        (t["name"], [p["partition_index"] for p in t["partitions"]]) for t in only["topics"]
    ] == [("a", [1])]
    [everything] = _describe(b).values()
    names = {t["name"] for t in everything["topics"]}
    assert {"a", "b"} <= names


def _record_into(errors: dict[int, Any]) -> Callable[[Any, Any], None]:
    return lambda e, m: errors.update({m.partition(): e})


def test_a_dir_offline_at_restart_keeps_its_partitions_offline_not_recreated_empty(
    kafka_broker_factory: Callable[..., ThreadedBroker], tmp_path: Path
) -> None:
    """Kafka's getOrCreateLog(isNew=false) with offline dirs: KAFKA_STORAGE_ERROR, no
    empty stand-in in another dir; the data comes back when the dir does."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    cfg = {"log.dirs": f"{d1},{d2}"}
    b = kafka_broker_factory(tmp_path / "b", **cfg)
    b.create_topic("t", partitions=4)
    _round_trip(b, "t", 4)
    lm = b.kafka.log_manager
    in_d2 = sorted(i for i in range(4) if lm.log_dir_of("t", i) == d2)
    in_d1 = sorted(set(range(4)) - set(in_d2))
    assert in_d1 and in_d2  # spread over both dirs
    b.stop(cleanup=False)

    meta = (d2 / "meta.properties").read_bytes()
    (d2 / "meta.properties").write_text("garbage without a version\n")
    b = kafka_broker_factory(tmp_path / "b", **cfg)
    lm = b.kafka.log_manager
    assert lm.offline_dirs == {d2}
    # the partitions of the offline dir were not recreated, empty, in d1
    assert sorted(lg.partition for lg in lm.all_logs() if lg.topic == "t") == in_d1
    assert not any((d1 / f"t-{i}").exists() for i in in_d2)
    # the controller took them offline (no leader);
    # the others serve
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    deadline = time.monotonic() + 15
    while True:  # the controller learns it from the LeaderAndIsr responses
        parts = admin.list_topics("t", timeout=10).topics["t"].partitions
        if all(parts[i].leader == -1 for i in in_d2) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert all(parts[i].leader == -1 and parts[i].replicas == [0] for i in in_d2)
    assert all(parts[i].leader == 0 for i in in_d1)
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
    errors: dict[int, Any] = {}
    for i in in_d1:
        p.produce("t", b"after", partition=i, on_delivery=_record_into(errors))
    assert p.flush(10) == 0
    assert errors == {i: None for i in in_d1}
    # a topic created now is new: its logs go to the online dir
    b.create_topic("fresh", partitions=2)
    for i in range(2):
        p.produce("fresh", b"new", partition=i)
    assert p.flush(10) == 0
    assert [r.value for r in b.records("fresh")] == [b"new", b"new"]
    assert {lm.log_dir_of("fresh", i) for i in range(2)} == {d1}
    b.stop(cleanup=False)

    (d2 / "meta.properties").write_bytes(meta)
    b = kafka_broker_factory(tmp_path / "b", **cfg)
    assert b.kafka.log_manager.offline_dirs == set()
    for i in in_d2:  # the data written before is back, with nothing lost
        assert [r.value for r in b.records("t", i)][:1] == [b"v%d" % i]
