"""Consumer groups with stock clients (librdkafka, kafka-python, aiokafka) against a real broker."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from kafkalite.protocol.record_batch import COMPRESSION_CODEC_MASK, iter_headers

FAST = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 200, "auto.offset.reset": "earliest"}


def group_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def consumer(bootstrap: str, group: str, **extra: object) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, **FAST, **extra})


def produce(bootstrap: str, topic: str, n: int, partitions: int = 3, **extra: object) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **extra})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions)
    assert p.flush(15) == 0


def poll_until(consumers: list[Consumer], done: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and m.error() and m.error().code() != KafkaError._PARTITION_EOF:
                raise AssertionError(f"consumer error: {m.error()}")
        if done():
            return
    raise AssertionError("timed out waiting for the group")


def keep_polling(consumers: list[Consumer], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.05)


def partitions_of(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def exactly_once(consumers: list[Consumer], n: int) -> bool:
    owned = [partitions_of(c) for c in consumers]
    return sum(len(o) for o in owned) == n and set().union(*owned) == set(range(n))


def test_subscribers_share_partitions_and_rebalance_when_one_leaves(kafka_bootstrap, kafka_topic):
    group = group_name("ck-share")
    cs = [consumer(kafka_bootstrap, group) for _ in range(3)]
    try:
        for c in cs:
            c.subscribe([kafka_topic])
        poll_until(cs, lambda: exactly_once(cs, 3) and all(partitions_of(c) for c in cs))
        assert sorted(len(partitions_of(c)) for c in cs) == [1, 1, 1]
        cs.pop().close()  # LeaveGroup: the others take over its partition
        poll_until(cs, lambda: exactly_once(cs, 3))
    finally:
        for c in cs:
            c.close()


def test_group_consumes_everything_once_and_commits(kafka_bootstrap, kafka_topic):
    produce(kafka_bootstrap, kafka_topic, 30)
    group = group_name("ck-commit")
    got: list[tuple[int, int]] = []
    c = consumer(kafka_bootstrap, group, **{"enable.auto.commit": False})
    c.subscribe([kafka_topic])

    def drain() -> bool:
        for m in c.consume(100, timeout=0.1):
            if not m.error():
                got.append((m.partition(), m.offset()))
        return len(got) >= 30

    poll_until([], drain)
    c.commit(asynchronous=False)
    committed = c.committed([TopicPartition(kafka_topic, p) for p in range(3)], timeout=10)
    assert [tp.offset for tp in committed] == [10, 10, 10]
    c.close()
    assert len(set(got)) == 30


def test_committed_offsets_survive_a_broker_restart(kafka_broker_factory, tmp_path):
    b = kafka_broker_factory(tmp_path / "restart")
    b.create_topic("durable", partitions=1)
    produce(b.bootstrap_servers, "durable", 10, partitions=1)
    group = "ck-durable"
    c = consumer(b.bootstrap_servers, group, **{"enable.auto.commit": False})
    c.subscribe(["durable"])
    seen: list[int] = []
    poll_until(
        [],
        lambda: (
            seen.extend(m.offset() for m in c.consume(1, timeout=0.1) if not m.error())
            or len(seen) >= 5
        ),
    )
    c.commit(offsets=[TopicPartition("durable", 0, seen[4] + 1)], asynchronous=False)
    c.close()

    b.restart()
    c = consumer(b.bootstrap_servers, group)
    c.subscribe(["durable"])
    first: list[int] = []
    poll_until(
        [],
        lambda: (
            first.extend(m.offset() for m in c.consume(1, timeout=0.1) if not m.error())
            or bool(first)
        ),
    )
    c.close()
    assert first[0] == 5


def test_assign_consumer_commits_and_fetches_offsets(kafka_bootstrap, kafka_topic):
    group = group_name("ck-assign")
    c = consumer(kafka_bootstrap, group, **{"enable.auto.commit": False})
    c.assign([TopicPartition(kafka_topic, 0), TopicPartition(kafka_topic, 2)])
    c.commit(
        offsets=[TopicPartition(kafka_topic, 0, 7), TopicPartition(kafka_topic, 2, 3)],
        asynchronous=False,
    )
    got = c.committed([TopicPartition(kafka_topic, p) for p in range(3)], timeout=10)
    assert [tp.offset for tp in got] == [7, -1001, 3]  # -1001: no committed offset
    c.close()


def test_static_member_rejoin_keeps_its_assignment_without_a_rebalance(
    kafka_bootstrap, kafka_topic
):
    group = group_name("ck-static")
    assigned_a: list[list[int]] = []
    a = consumer(
        kafka_bootstrap, group, **{"group.instance.id": "static-a", "session.timeout.ms": 10000}
    )
    a.subscribe(
        [kafka_topic], on_assign=lambda _c, ps: assigned_a.append([p.partition for p in ps])
    )
    b = consumer(
        kafka_bootstrap, group, **{"group.instance.id": "static-b", "session.timeout.ms": 10000}
    )
    b.subscribe([kafka_topic])
    poll_until(
        [a, b],
        lambda: exactly_once([a, b], 3) and bool(partitions_of(a)) and bool(partitions_of(b)),
    )
    before_b, rebalances_a = partitions_of(b), len(assigned_a)
    b.close()  # a static member does not send LeaveGroup

    b2 = consumer(
        kafka_bootstrap, group, **{"group.instance.id": "static-b", "session.timeout.ms": 10000}
    )
    b2.subscribe([kafka_topic])
    try:
        poll_until([a, b2], lambda: bool(partitions_of(b2)))
        assert partitions_of(b2) == before_b
        keep_polling([a, b2], 1.0)
        assert len(assigned_a) == rebalances_a  # a was never reassigned
    finally:
        b2.close()
        a.close()


def test_older_of_two_live_static_members_is_fenced(kafka_bootstrap, kafka_topic):
    group = group_name("ck-fenced")
    old = consumer(kafka_bootstrap, group, **{"group.instance.id": "twin"})
    old.subscribe([kafka_topic])
    poll_until([old], lambda: bool(partitions_of(old)))
    new = consumer(kafka_bootstrap, group, **{"group.instance.id": "twin"})
    new.subscribe([kafka_topic])
    errors: list[KafkaError] = []
    deadline = time.monotonic() + 20
    try:
        while not errors and time.monotonic() < deadline:
            m = old.poll(0.05)
            new.poll(0.05)
            if m is not None and m.error():
                errors.append(m.error())
        assert errors and errors[0].code() == KafkaError._FATAL
        assert "fenced" in errors[0].str().lower()
        poll_until([new], lambda: partitions_of(new) == {0, 1, 2})
    finally:
        new.close()
        old.close()


def test_admin_client_lists_describes_alters_and_deletes_groups(kafka_bootstrap, kafka_topic):
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    group = group_name("ck-admin")
    c = consumer(kafka_bootstrap, group, **{"enable.auto.commit": False, "client.id": "admin-test"})
    c.subscribe([kafka_topic])
    poll_until([c], lambda: partitions_of(c) == {0, 1, 2})
    c.commit(offsets=[TopicPartition(kafka_topic, 1, 4)], asynchronous=False)

    listed = admin.list_consumer_groups(request_timeout=10).result(15)
    mine = [g for g in listed.valid if g.group_id == group]
    assert (
        len(mine) == 1
        and str(mine[0].state).endswith("STABLE")
        and not mine[0].is_simple_consumer_group
    )

    desc = admin.describe_consumer_groups([group])[group].result(15)
    assert desc.group_id == group and str(desc.state).endswith("STABLE")
    assert desc.partition_assignor in ("range", "roundrobin")
    [member] = desc.members
    assert member.client_id == "admin-test"
    assert {tp.partition for tp in member.assignment.topic_partitions} == {0, 1, 2}

    fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    offsets = {tp.partition: tp.offset for tp in fut.result(15).topic_partitions}
    assert offsets == {1: 4}

    # deleting a group with members fails; once empty it works
    with pytest.raises(Exception, match="NON_EMPTY_GROUP|not empty"):
        admin.delete_consumer_groups([group])[group].result(15)
    c.close()
    new_offsets = [TopicPartition(kafka_topic, 0, 9), TopicPartition(kafka_topic, 2, 1)]
    altered = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, new_offsets)]
    )[group]
    assert {tp.partition: tp.offset for tp in altered.result(15).topic_partitions} == {0: 9, 2: 1}
    fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    assert {tp.partition: tp.offset for tp in fut.result(15).topic_partitions} == {0: 9, 1: 4, 2: 1}
    admin.delete_consumer_groups([group])[group].result(15)
    listed = admin.list_consumer_groups(request_timeout=10).result(15)
    assert group not in {g.group_id for g in listed.valid}


def test_kafka_python_group_consumes_and_commits(kafka_bootstrap, kafka_topic):
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka import TopicPartition as KTopicPartition

    produce(kafka_bootstrap, kafka_topic, 12)
    group = group_name("kp-group")
    c = KafkaConsumer(
        kafka_topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
    )
    try:
        # the topic's metadata before the first poll(), so the first assignment is the full
        # one: a kafka-python 3.0.12 rejoin started by a later metadata update can strand
        # when poll() times out mid-join (tests/clients/test_consumer_protocol.py, _Member)
        assert c.partitions_for_topic(kafka_topic)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 12 and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                got.extend((r.partition, r.offset) for r in records)
        assert len(set(got)) == 12
        c.commit()
        assert [c.committed(KTopicPartition(kafka_topic, p)) for p in range(3)] == [4, 4, 4]
    finally:
        c.close()
    c2 = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False)
    try:
        c2.assign([KTopicPartition(kafka_topic, 0)])
        c2.commit({KTopicPartition(kafka_topic, 0): OffsetAndMetadata(2, "", -1)})
        assert c2.committed(KTopicPartition(kafka_topic, 0)) == 2
    finally:
        c2.close()


async def test_aiokafka_group_consumes_and_commits(kafka_bootstrap, kafka_topic):
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATopicPartition

    produce(kafka_bootstrap, kafka_topic, 9)
    group = group_name("aio-group")
    c = AIOKafkaConsumer(
        kafka_topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
    )
    await c.start()
    try:
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 9 and time.monotonic() < deadline:
            for records in (await c.getmany(timeout_ms=200)).values():
                got.extend((r.partition, r.offset) for r in records)
        assert len(set(got)) == 9
        await c.commit()
        assert [await c.committed(ATopicPartition(kafka_topic, p)) for p in range(3)] == [3, 3, 3]
    finally:
        await c.stop()


def test_librdkafka_compresses_with_lz4(kafka_broker, kafka_bootstrap, kafka_topic):
    """librdkafka enables LZ4 only once the broker advertises FindCoordinator v0."""
    produce(kafka_bootstrap, kafka_topic, 50, partitions=1, **{"compression.type": "lz4"})

    def codecs() -> set[int]:
        part = kafka_broker.kafka.replica_manager.partitions[(kafka_topic, 0)]
        data = part.log.read(0, 1 << 20, max_offset=None, min_one_message=True).records
        raw = data if isinstance(data, bytes | bytearray) else data.read_bytes()
        return {h.attributes & COMPRESSION_CODEC_MASK for _, h in iter_headers(raw)}

    assert kafka_broker.call(codecs) == {3}


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_balanced_consumer_commits(kafka_broker, kafka_bootstrap, kafka_topic):
    """kcat 1.7 (librdkafka 2.0): an older client's group join, sync and commits."""
    produce(kafka_bootstrap, kafka_topic, 9)
    group = group_name("kcat-group")
    out = subprocess.run(
        [
            "kcat",
            "-b",
            kafka_bootstrap,
            "-G",
            group,
            "-o",
            "beginning",
            "-c",
            "9",
            "-e",
            "-q",
            "-X",
            "session.timeout.ms=6000",
            kafka_topic,
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert sorted(out.stdout.split()) == [b"v%d" % i for i in range(9)]
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    assert {tp.partition: tp.offset for tp in fut.result(15).topic_partitions} == {0: 3, 1: 3, 2: 3}
