"""Share groups (KIP-932) with a stock client: confluent-kafka's ``ShareConsumer``
(librdkafka) against a real broker, plus the admin APIs over the wire."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from kafkalite.cli.admin import main
from kafkalite.testing.embedded_broker import ThreadedBroker
from tests.coordinator.wire import Wire

BROKER_CONFIG = {
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 1,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 300,
    "group.share.min.session.timeout.ms": 1000,
    "group.share.session.timeout.ms": 20000,
    "group.consumer.min.heartbeat.interval.ms": 100,
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedBroker]:
    b = ThreadedBroker(tmp_path_factory.mktemp("kip932"), **BROKER_CONFIG)
    b.start()
    try:
        yield b
    finally:
        b.stop()


def _topic(b: ThreadedBroker, partitions: int = 1) -> str:
    name = f"share-{uuid.uuid4().hex[:8]}"
    b.create_topic(name, partitions)
    return name


def _produce(bootstrap: str, topic: str, n: int, partitions: int = 1, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def _set_group_configs(bootstrap: str, group: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()
        ],
    )
    for f in admin.incremental_alter_configs([res]).values():
        f.result(15)


def _consumer(bootstrap: str, group: str, **extra: Any) -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **extra})


def _wire(bootstrap: str, api: int, version: int, body: dict[str, Any]) -> Any:
    async def go() -> Any:
        w = await Wire.connect(bootstrap)
        try:
            return await w.call(api, version, body)
        finally:
            await w.close()

    return asyncio.run(go())


def _share_offsets(bootstrap: str, group: str, topic: str, partitions: list[int]) -> list[Any]:
    r = _wire(
        bootstrap,
        90,
        1,
        {
            "groups": [
                {"group_id": group, "topics": [{"topic_name": topic, "partitions": partitions}]}
            ]
        },
    )
    [g] = r.groups
    assert g.error_code == 0, g
    return sorted(g.topics[0].partitions, key=lambda p: p.partition_index)


# ---- acceptance -------------------------------------------------------------------------------


def test_four_consumers_share_two_partitions_exactly_once(broker: ThreadedBroker) -> None:
    """10,000 records through 4 members on 2 partitions: each accepted once, >2 members get some."""
    bs = broker.bootstrap_servers
    topic, group, total = _topic(broker, 2), f"g-{uuid.uuid4().hex[:6]}", 10_000
    _set_group_configs(bs, group, share_auto_offset_reset="earliest")
    seen: list[Counter[tuple[int, int]]] = [Counter() for _ in range(4)]
    done = threading.Event()
    joined = threading.Barrier(5, timeout=60)
    errors: list[str] = []

    def run(i: int) -> None:
        c = _consumer(bs, group, **{"max.poll.records": 200})
        try:
            c.subscribe([topic])
            assert not c.poll(0.5)  # joined, its share session open, nothing yet
            joined.wait()
            while not done.is_set():
                for m in c.poll(0.5):
                    if m.error():
                        errors.append(str(m.error()))
                        continue
                    seen[i][(m.partition(), m.offset())] += 1
                if sum(sum(s.values()) for s in seen) >= total:
                    done.set()
                time.sleep(0.01)  # each member takes its share instead of draining all
            # implicit mode: the last poll's records are accepted by the next commit
            # (librdkafka 2.16's close() does not send them)
            c.commit_sync(15)
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    joined.wait()
    _produce(bs, topic, total, partitions=2)  # every member is waiting for it
    done.wait(90)
    done.set()
    for t in threads:
        t.join(60)
    merged: Counter[tuple[int, int]] = Counter()
    for s in seen:
        merged.update(s)
    assert not errors
    assert len(merged) == total
    assert max(merged.values()) == 1  # no record delivered twice
    assert sum(1 for s in seen if s) > 2
    # every record accepted: the start offsets moved to the end of both partitions
    deadline = time.time() + 10
    while True:
        rows = _share_offsets(bs, group, topic, [0, 1])
        if [r.start_offset for r in rows] == [total // 2, total // 2] or time.time() > deadline:
            break
        time.sleep(0.2)
    assert [r.start_offset for r in rows] == [total // 2, total // 2]
    assert [r.lag for r in rows] == [0, 0]


def _poll_until(c: ShareConsumer, want: int, timeout: float = 15) -> list[Any]:
    out: list[Any] = []
    deadline = time.time() + timeout
    while len(out) < want and time.time() < deadline:
        out += [m for m in c.poll(0.5) if not m.error()]
    return out


def test_explicit_release_reject_and_delivery_limit(broker: ThreadedBroker) -> None:
    bs = broker.bootstrap_servers
    topic, group = _topic(broker), f"g-{uuid.uuid4().hex[:6]}"
    _set_group_configs(
        bs, group, share_auto_offset_reset="earliest", share_delivery_count_limit="2"
    )
    _produce(bs, topic, 3)
    c = _consumer(bs, group, **{"share.acknowledgement.mode": "explicit"})
    try:
        c.subscribe([topic])
        first = _poll_until(c, 3)
        assert [(m.offset(), m.delivery_count()) for m in first] == [(0, 1), (1, 1), (2, 1)]
        c.acknowledge(first[0], AcknowledgeType.RELEASE)
        c.acknowledge(first[1], AcknowledgeType.REJECT)
        c.acknowledge(first[2], AcknowledgeType.ACCEPT)
        c.commit_sync(15)
        again = _poll_until(c, 1)
        # the released record comes back with a higher delivery count; the rejected never
        assert [(m.offset(), m.delivery_count()) for m in again] == [(0, 2)]
        c.acknowledge(again[0], AcknowledgeType.RELEASE)  # its 2nd delivery: the limit
        c.commit_sync(15)
        assert _poll_until(c, 1, timeout=3) == []  # archived
    finally:
        c.close()
    [row] = _share_offsets(bs, group, topic, [0])
    assert (row.start_offset, row.lag) == (3, 0)


_CHILD = textwrap.dedent(
    """
    import json, sys, time
    from confluent_kafka import ShareConsumer
    c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([sys.argv[3]])
    got = []
    while not got:
        got = [m.offset() for m in c.poll(0.5) if not m.error()]
    print(json.dumps(got), flush=True)
    time.sleep(600)
    """
)


def test_killed_consumer_records_come_back(broker: ThreadedBroker) -> None:
    """kill -9 of a member holding records: its connection drops, its share session
    ends and the records go to another member (at the latest when the lock runs out)."""
    bs = broker.bootstrap_servers
    topic, group = _topic(broker), f"g-{uuid.uuid4().hex[:6]}"
    _set_group_configs(
        bs, group, share_auto_offset_reset="earliest", share_record_lock_duration_ms="2000"
    )
    _produce(bs, topic, 50)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, bs, group, topic],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert child.stdout is not None
        held = json.loads(child.stdout.readline())
        assert held
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    c = _consumer(bs, group)
    try:
        c.subscribe([topic])
        got = _poll_until(c, 50, timeout=20)
    finally:
        c.close()
    offsets = sorted(m.offset() for m in got)
    assert offsets == list(range(50))  # none lost, none twice
    counts = {m.offset(): m.delivery_count() for m in got}
    assert all(counts[o] == 2 for o in held)  # redelivered, counted


def test_broker_restart_keeps_acknowledgements(tmp_path: Any) -> None:
    b = ThreadedBroker(tmp_path / "restart", **BROKER_CONFIG)
    b.start()
    try:
        bs = b.bootstrap_servers
        topic, group = _topic(b), "restart-group"
        _set_group_configs(bs, group, share_auto_offset_reset="earliest")
        _produce(bs, topic, 20)
        c = _consumer(bs, group, **{"share.acknowledgement.mode": "explicit"})
        c.subscribe([topic])
        got = _poll_until(c, 20)
        assert [m.offset() for m in got] == list(range(20))
        for m in got[::2]:
            c.acknowledge(m, AcknowledgeType.ACCEPT)  # even offsets accepted
        c.commit_sync(15)
        b.restart()  # the odd offsets are still acquired by c
        c2 = _consumer(b.bootstrap_servers, group)
        try:
            c2.subscribe([topic])
            again = _poll_until(c2, 10, timeout=20)
            extra = _poll_until(c2, 1, timeout=2)
        finally:
            c2.close()
        del c  # never closed: its session died with the old broker
        assert sorted(m.offset() for m in again + extra) == list(range(1, 20, 2))
        assert all(m.delivery_count() == 2 for m in again)
    finally:
        b.stop()


def test_share_auto_offset_reset_latest_and_earliest(broker: ThreadedBroker) -> None:
    bs = broker.bootstrap_servers
    topic = _topic(broker)
    latest, earliest = f"latest-{uuid.uuid4().hex[:6]}", f"earliest-{uuid.uuid4().hex[:6]}"
    _set_group_configs(bs, earliest, share_auto_offset_reset="earliest")
    _produce(bs, topic, 10)
    cl, ce = _consumer(bs, latest), _consumer(bs, earliest)
    try:
        cl.subscribe([topic])
        ce.subscribe([topic])
        # the latest group's share partition starts where the log ends at its first fetch
        deadline = time.time() + 15
        while time.time() < deadline:
            assert not [m for m in cl.poll(0.3) if not m.error()]
            if _share_offsets(bs, latest, topic, [0])[0].start_offset == 10:
                break
        _produce(bs, topic, 5, start=10)
        got_latest = _poll_until(cl, 5)
        got_earliest = _poll_until(ce, 15)
    finally:
        cl.close()
        ce.close()
    assert [m.offset() for m in got_latest] == [10, 11, 12, 13, 14]
    assert [m.offset() for m in got_earliest] == list(range(15))


# ---- admin APIs --------------------------------------------------------------------------------


def test_group_config_resources(broker: ThreadedBroker) -> None:
    """DescribeConfigs / IncrementalAlterConfigs on GROUP resources, validated like Kafka."""
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    group = f"cfg-{uuid.uuid4().hex[:6]}"
    _set_group_configs(bs, group, share_record_lock_duration_ms="5000")
    [f] = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    entries = f.result(15)
    assert entries["share.record.lock.duration.ms"].value == "5000"
    assert entries["share.auto.offset.reset"].value == "latest"
    assert entries["consumer.session.timeout.ms"].value == "45000"
    # the source: the group's override, else its broker synonym (set in the file or not)
    assert entries["share.record.lock.duration.ms"].source == ConfigSource.GROUP_CONFIG.value
    assert entries["consumer.session.timeout.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    session = entries["share.session.timeout.ms"]
    assert (session.value, session.source) == ("20000", ConfigSource.STATIC_BROKER_CONFIG.value)
    for key, value, message in (
        ("share.record.lock.duration.ms", "500", "greater than or equal to"),
        ("share.auto.offset.reset", "none", "String must be one of"),
        ("share.nonsense", "1", "Unknown group config name"),
        ("share.auto.offset.reset", "by_duration:1h", "ISO 8601"),
        ("share.partition.max.record.locks", "50", "greater than or equal to"),
    ):
        with pytest.raises(KafkaException) as e:
            _set_group_configs(bs, group, **{key.replace(".", "_"): value})
        assert e.value.args[0].code() == 40  # INVALID_CONFIG
        assert message in str(e.value)
    _set_group_configs(bs, group, share_auto_offset_reset="by_duration:PT1H")
    [f] = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    assert f.result(15)["share.auto.offset.reset"].value == "by_duration:PT1H"
    # AlterConfigs (33) replaces a group's whole set
    r = _wire(
        bs,
        33,
        2,
        {
            "resources": [
                {
                    "resource_type": 32,
                    "resource_name": group,
                    "configs": [{"name": "share.delivery.count.limit", "value": "3"}],
                }
            ],
            "validate_only": False,
        },
    )
    assert r.responses[0].error_code == 0
    [f] = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    entries = f.result(15)
    assert entries["share.delivery.count.limit"].value == "3"
    assert entries["share.auto.offset.reset"].value == "latest"  # the old override is gone
    # consumer.heartbeat.interval.ms takes effect in the KIP-848 coordinator
    _set_group_configs(bs, group, consumer_heartbeat_interval_ms="7000")
    fc = _wire(bs, 10, 4, {"key_type": 0, "coordinator_keys": [group]})
    assert fc.coordinators[0].error_code == 0  # __consumer_offsets exists
    r = _wire(
        bs,
        68,
        0,
        {
            "group_id": group,
            "member_id": "",
            "member_epoch": 0,
            "rebalance_timeout": 30000,
            "subscribed_topic_names": ["x"],
            "topic_partitions": [],
        },
    )
    assert r.error_code == 0 and r.heartbeat_interval.total_seconds() == 7


def _cli(capsys: pytest.CaptureFixture[str], bs: str, *argv: str) -> str:
    capsys.readouterr()
    assert main(["groups", "--bootstrap-server", bs, *argv]) == 0
    return capsys.readouterr().out


def test_admin_list_describe_alter_delete(
    broker: ThreadedBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    bs = broker.bootstrap_servers
    topic, group = _topic(broker), f"adm-{uuid.uuid4().hex[:6]}"
    _set_group_configs(bs, group, share_auto_offset_reset="earliest")
    _produce(bs, topic, 6)
    c = _consumer(bs, group)
    try:
        c.subscribe([topic])
        assert len(_poll_until(c, 6)) == 6
        c.commit_sync(15)
        # ListGroups (types filter) and ShareGroupDescribe while it has a member
        listed = _wire(bs, 16, 5, {"states_filter": [], "types_filter": ["share"]})
        assert (group, "share") in [(g.group_id, g.group_type) for g in listed.groups]
        d = _wire(bs, 77, 1, {"group_ids": [group], "include_authorized_operations": False})
        [g] = d.groups
        assert (g.error_code, g.group_state, len(g.members)) == (0, "Stable", 1)
        assert g.members[0].assignment.topic_partitions[0].topic_name == topic
        # the CLI lists and describes it, members and lag included
        listed_cli = _cli(capsys, bs, "--list", "--type", "share")
        assert (group, "share", "Stable") in {tuple(x.split()) for x in listed_cli.splitlines()}
        out = _cli(capsys, bs, "--describe", "--group", group)
        assert "TYPE share" in out and "STATE Stable" in out
        assert [r.split() for r in out.splitlines() if r.startswith(topic)] == [
            [topic, "0", "6", "0", "1"]
        ]
        out = _cli(capsys, bs, "--describe", "--group", group, "--members")
        assert f"{topic}(0)" in out
        # not while it has members
        r = _wire(
            bs,
            91,
            0,
            {
                "group_id": group,
                "topics": [
                    {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 2}]}
                ],
            },
        )
        assert r.error_code == 68  # NON_EMPTY_GROUP
        admin = AdminClient({"bootstrap.servers": bs})
        with pytest.raises(KafkaException) as e:
            for f in admin.delete_consumer_groups([group]).values():
                f.result(15)
        assert e.value.args[0].code() == 68  # DeleteGroups of a live share group
    finally:
        c.close()
    _cli(
        capsys,
        bs,
        "--reset-offsets",
        "--group",
        group,
        "--topic",
        topic,
        "--to-earliest",
        "--execute",
    )
    [row] = _share_offsets(bs, group, topic, [0])
    assert (row.start_offset, row.lag) == (0, 6)
    r = _wire(
        bs,
        91,
        0,
        {
            "group_id": group,
            "topics": [
                {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 2}]}
            ],
        },
    )
    assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0
    [row] = _share_offsets(bs, group, topic, [0])
    assert (row.start_offset, row.lag) == (2, 4)
    r = _wire(bs, 92, 0, {"group_id": group, "topics": [{"topic_name": topic}]})
    assert r.error_code == 0 and r.responses[0].error_code == 0
    [row] = _share_offsets(bs, group, topic, [0])
    assert row.start_offset == -1
    # DeleteGroups on the now empty share group
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.delete_consumer_groups([group]).values():
        f.result(15)
    listed = _wire(bs, 16, 5, {"states_filter": [], "types_filter": ["share"]})
    assert group not in [g.group_id for g in listed.groups]


def test_share_session_errors(broker: ThreadedBroker) -> None:
    """Kafka's share-session errors over the wire."""
    bs = broker.bootstrap_servers
    topic = _topic(broker)
    kb = broker._async.broker
    assert kb is not None
    tid = kb.metadata_cache.topics[topic].topic_id

    async def go() -> None:
        w = await Wire.connect(bs)
        try:
            fc = await w.call(10, 4, {"key_type": 0, "coordinator_keys": ["sess"]})
            assert fc.coordinators[0].error_code == 0
            hb = await w.call(
                76,
                1,
                {
                    "group_id": "sess",
                    "member_id": "m1",
                    "member_epoch": 0,
                    "subscribed_topic_names": [topic],
                },
            )
            assert hb.error_code == 0 and hb.member_epoch > 0

            def fetch(epoch: int, acks: list[Any] | None = None) -> dict[str, Any]:
                return {
                    "group_id": "sess",
                    "member_id": "m1",
                    "share_session_epoch": epoch,
                    "max_wait": 0,
                    "min_bytes": 1,
                    "max_bytes": 1 << 20,
                    "max_records": 100,
                    "batch_size": 100,
                    "topics": [
                        {
                            "topic_id": tid,
                            "partitions": [
                                {"partition_index": 0, "acknowledgement_batches": acks or []}
                            ],
                        }
                    ],
                    "forgotten_topics_data": [],
                }

            r = await w.call(78, 1, fetch(5))
            assert r.error_code == 122  # SHARE_SESSION_NOT_FOUND
            r = await w.call(78, 1, fetch(0))
            assert r.error_code == 0
            r = await w.call(78, 1, fetch(3))
            assert r.error_code == 123  # INVALID_SHARE_SESSION_EPOCH
            ack = [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]
            r = await w.call(78, 1, fetch(1, ack))  # nothing acquired at offset 0
            assert r.error_code == 0
            assert (
                r.responses[0].partitions[0].acknowledge_error_code == 121
            )  # INVALID_RECORD_STATE
            hb = await w.call(
                76, 1, {"group_id": "sess", "member_id": "m1", "member_epoch": hb.member_epoch + 5}
            )
            assert hb.error_code == 110  # FENCED_MEMBER_EPOCH
        finally:
            await w.close()

    asyncio.run(go())


def test_partition_max_record_locks_bounds_acquisition(tmp_path: Any) -> None:
    """group.share.partition.max.record.locks: no more in flight than that, until the
    start offset moves past acknowledged records."""
    b = ThreadedBroker(
        tmp_path / "locks", **{**BROKER_CONFIG, "group.share.partition.max.record.locks": 100}
    )
    b.start()
    try:
        bs = b.bootstrap_servers
        topic, group = _topic(b), "locks"
        _set_group_configs(bs, group, share_auto_offset_reset="earliest")
        _produce(bs, topic, 250)
        kb = b._async.broker
        assert kb is not None
        tid = kb.metadata_cache.topics[topic].topic_id

        def fetch(member: str, epoch: int, acks: list[Any] | None = None) -> dict[str, Any]:
            return {
                "group_id": group,
                "member_id": member,
                "share_session_epoch": epoch,
                "max_wait": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "max_records": 1000,
                "batch_size": 1000,
                "topics": [
                    {
                        "topic_id": tid,
                        "partitions": [
                            {"partition_index": 0, "acknowledgement_batches": acks or []}
                        ],
                    }
                ],
                "forgotten_topics_data": [],
            }

        def acquired(r: Any) -> list[tuple[int, int, int]]:
            return [
                (a.first_offset, a.last_offset, a.delivery_count)
                for t in r.responses
                for p in t.partitions
                for a in p.acquired_records
            ]

        async def go() -> None:
            w = await Wire.connect(bs)
            try:
                fc = await w.call(10, 4, {"key_type": 0, "coordinator_keys": [group]})
                assert fc.coordinators[0].error_code == 0  # creates __consumer_offsets
                for m in ("a", "b"):
                    hb = await w.call(
                        76,
                        1,
                        {
                            "group_id": group,
                            "member_id": m,
                            "member_epoch": 0,
                            "subscribed_topic_names": [topic],
                        },
                    )
                    assert hb.error_code == 0
                assert acquired(await w.call(78, 1, fetch("a", 0))) == [(0, 99, 1)]
                assert acquired(await w.call(78, 1, fetch("b", 0))) == []  # at the limit
                accept = [{"first_offset": 0, "last_offset": 49, "acknowledge_types": [1]}]
                r = await w.call(78, 1, fetch("a", 1, accept))
                assert r.responses[0].partitions[0].acknowledge_error_code == 0
                assert acquired(r) == [(100, 149, 1)]  # the SPSO moved to 50
                assert acquired(await w.call(78, 1, fetch("b", 1))) == []
            finally:
                await w.close()

        asyncio.run(go())
        [row] = _share_offsets(bs, group, topic, [0])
        assert (row.start_offset, row.lag) == (50, 200)
    finally:
        b.stop()


def test_lock_expiry_redelivers_to_another_member(broker: ThreadedBroker) -> None:
    """Records acquired and never acknowledged come back when the lock runs out, with
    the member's session still open."""
    bs = broker.bootstrap_servers
    topic, group = _topic(broker), f"lock-{uuid.uuid4().hex[:6]}"
    _set_group_configs(
        bs, group, share_auto_offset_reset="earliest", share_record_lock_duration_ms="1000"
    )
    _produce(bs, topic, 5)
    kb = broker._async.broker
    assert kb is not None
    tid = kb.metadata_cache.topics[topic].topic_id

    def fetch(member: str, wait_ms: int) -> dict[str, Any]:
        return {
            "group_id": group,
            "member_id": member,
            "share_session_epoch": 0,
            "max_wait": wait_ms,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "max_records": 100,
            "batch_size": 100,
            "topics": [
                {
                    "topic_id": tid,
                    "partitions": [{"partition_index": 0, "acknowledgement_batches": []}],
                }
            ],
            "forgotten_topics_data": [],
        }

    async def go() -> None:
        a, b = await Wire.connect(bs), await Wire.connect(bs)
        try:
            fc = await a.call(10, 4, {"key_type": 0, "coordinator_keys": [group]})
            assert fc.coordinators[0].error_code == 0
            for w, m in ((a, "a"), (b, "b")):
                hb = await w.call(
                    76,
                    1,
                    {
                        "group_id": group,
                        "member_id": m,
                        "member_epoch": 0,
                        "subscribed_topic_names": [topic],
                    },
                )
                assert hb.error_code == 0
            r = await a.call(78, 1, fetch("a", 0))
            assert r.acquisition_lock_timeout.total_seconds() == 1
            got = [
                (x.first_offset, x.last_offset, x.delivery_count)
                for t in r.responses
                for p in t.partitions
                for x in p.acquired_records
            ]
            assert got == [(0, 4, 1)]
            t0 = time.monotonic()
            # b long-polls: nothing to acquire until a's lock runs out
            r = await b.call(78, 1, fetch("b", 5000))
            got = [
                (x.first_offset, x.last_offset, x.delivery_count)
                for t in r.responses
                for p in t.partitions
                for x in p.acquired_records
            ]
            assert got == [(0, 4, 2)]
            assert time.monotonic() - t0 >= 0.5
        finally:
            await a.close()
            await b.close()

    asyncio.run(go())


def test_share_isolation_level_read_committed(broker: ThreadedBroker) -> None:
    """share.isolation.level=read_committed: an aborted transaction's records are never
    delivered; read_uncommitted delivers them."""
    bs = broker.bootstrap_servers
    topic = _topic(broker)
    committed, uncommitted = f"rc-{uuid.uuid4().hex[:6]}", f"ru-{uuid.uuid4().hex[:6]}"
    _set_group_configs(
        bs, committed, share_auto_offset_reset="earliest", share_isolation_level="read_committed"
    )
    _set_group_configs(bs, uncommitted, share_auto_offset_reset="earliest")
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"tx-{topic}"})
    p.init_transactions(15)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=b"aborted-%d" % i, partition=0)
    p.flush(15)
    p.abort_transaction(15)
    p.begin_transaction()
    for i in range(2):
        p.produce(topic, value=b"committed-%d" % i, partition=0)
    p.commit_transaction(15)
    rc, ru = _consumer(bs, committed), _consumer(bs, uncommitted)
    try:
        rc.subscribe([topic])
        ru.subscribe([topic])
        got_rc = _poll_until(rc, 2) + _poll_until(rc, 1, timeout=1.5)
        got_ru = _poll_until(ru, 5)
    finally:
        rc.close()
        ru.close()
    assert [m.value() for m in got_rc] == [b"committed-0", b"committed-1"]
    assert sorted(m.value() for m in got_ru) == sorted(
        [b"aborted-0", b"aborted-1", b"aborted-2", b"committed-0", b"committed-1"]
    )


# ---- the share-state coordinator's APIs (83–87) ------------------------------------------------


def test_share_state_apis_over_the_wire(broker: ThreadedBroker) -> None:
    """Initialize/Read/Write/Delete/ReadSummary as a partition leader on another broker
    would send them: an uninitialized state reads as start offset -1, a read records the
    leader epoch so an older leader's write is FENCED_LEADER_EPOCH, a lower state epoch
    is FENCED_STATE_EPOCH, and FindCoordinator key type SHARE names the coordinator."""
    bs = broker.bootstrap_servers
    topic, group = _topic(broker), f"state-{uuid.uuid4().hex[:6]}"
    kb = broker._async.broker
    assert kb is not None
    tid = kb.metadata_cache.topics[topic].topic_id

    def key(**partition: Any) -> dict[str, Any]:
        return {
            "group_id": group,
            "topics": [{"topic_id": tid, "partitions": [{"partition": 0, **partition}]}],
        }

    def write(state_epoch: int, leader_epoch: int, start: int) -> int:
        r = _wire(
            bs,
            85,
            1,
            key(
                state_epoch=state_epoch,
                leader_epoch=leader_epoch,
                start_offset=start,
                delivery_complete_count=1,
                state_batches=[
                    {
                        "first_offset": start,
                        "last_offset": start,
                        "delivery_state": 2,
                        "delivery_count": 1,
                    },
                    {
                        "first_offset": start + 1,
                        "last_offset": start + 2,
                        "delivery_state": 0,
                        "delivery_count": 3,
                    },
                ],
            ),
        )
        return int(r.results[0].partitions[0].error_code)

    async def join() -> None:
        w = await Wire.connect(bs)
        try:
            fc = await w.call(10, 6, {"key_type": 2, "coordinator_keys": [f"{group}:x:0"]})
            assert fc.coordinators[0].error_code == 0
            assert fc.coordinators[0].node_id == kb.broker_id
            bad = await w.call(10, 6, {"key_type": 2, "coordinator_keys": ["no-partition"]})
            assert bad.coordinators[0].error_code == 42  # INVALID_REQUEST
            hb = await w.call(
                76,
                1,
                {
                    "group_id": group,
                    "member_id": "m1",
                    "member_epoch": 0,
                    "subscribed_topic_names": [topic],
                },
            )
            assert hb.error_code == 0
        finally:
            await w.close()

    asyncio.run(join())  # FindCoordinator creates __consumer_offsets; the member joins
    # a group that is not a share group: kafkalite keeps share state with the group
    other = _wire(bs, 84, 0, {**key(leader_epoch=0), "group_id": f"{group}-none"})
    assert other.results[0].partitions[0].error_code == 69  # GROUP_ID_NOT_FOUND
    r = _wire(bs, 84, 0, key(leader_epoch=0))
    p = r.results[0].partitions[0]
    assert (p.error_code, p.start_offset, p.state_epoch, p.state_batches) == (0, -1, 0, ())
    assert write(0, 5, 10) == 0
    r = _wire(bs, 84, 0, key(leader_epoch=6))  # a new leader loads it
    p = r.results[0].partitions[0]
    assert (p.error_code, p.start_offset) == (0, 10)
    assert [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches
    ] == [(10, 10, 2, 1), (11, 12, 0, 3)]
    assert write(0, 5, 11) == 74  # FENCED_LEADER_EPOCH: the old leader is out
    assert _wire(bs, 84, 0, key(leader_epoch=5)).results[0].partitions[0].error_code == 74
    s = _wire(bs, 87, 1, key(leader_epoch=-1)).results[0].partitions[0]
    assert (s.error_code, s.start_offset, s.leader_epoch, s.delivery_complete_count) == (
        0,
        10,
        6,
        1,
    )
    init = _wire(bs, 83, 0, key(state_epoch=1, start_offset=20))
    assert init.results[0].partitions[0].error_code == 0
    assert write(0, 6, 21) == 124  # FENCED_STATE_EPOCH: an offsets reset came in between
    r = _wire(bs, 84, 0, key(leader_epoch=6)).results[0].partitions[0]
    assert (r.start_offset, r.state_epoch, r.state_batches) == (20, 1, ())
    unknown = _wire(
        bs,
        84,
        0,
        {
            **key(leader_epoch=6),
            "topics": [
                {"topic_id": uuid.uuid4(), "partitions": [{"partition": 0, "leader_epoch": 6}]}
            ],
        },
    )
    assert unknown.results[0].partitions[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert _wire(bs, 86, 0, key()).results[0].partitions[0].error_code == 0
    r = _wire(bs, 84, 0, key(leader_epoch=6)).results[0].partitions[0]
    assert (r.error_code, r.start_offset) == (0, -1)
    # ShareFetch v2 with an unknown share_acquire_mode (KIP-1206)
    f = _wire(
        bs,
        78,
        2,
        {
            "group_id": group,
            "member_id": "m1",
            "share_session_epoch": 0,
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "max_records": 10,
            "batch_size": 10,
            "share_acquire_mode": 7,
            "is_renew_ack": False,
            "topics": [],
            "forgotten_topics_data": [],
        },
    )
    assert f.error_code == 42


def test_members_survive_a_coordinator_restart(tmp_path: Any) -> None:
    """ShareGroupMemberMetadata and ShareGroupCurrentMemberAssignment records: after a
    restart the coordinator has the same members at the same epochs (no rejoin, no epoch
    bump); a member that left before stays gone."""
    b = ThreadedBroker(tmp_path / "members", **BROKER_CONFIG)
    b.start()
    try:
        topic, group = _topic(b, 2), "members-group"

        def call(api: int, version: int, body: dict[str, Any]) -> Any:
            for _ in range(200):
                r = _wire(b.bootstrap_servers, api, version, body)
                code = r.groups[0].error_code if api == 77 else r.error_code
                if code not in (14, 15, 16):  # the coordinator is (re)loading
                    return r
                time.sleep(0.05)
            raise AssertionError("coordinator never ready")

        def heartbeat(member: str, epoch: int) -> Any:
            body: dict[str, Any] = {"group_id": group, "member_id": member, "member_epoch": epoch}
            if epoch == 0:
                body["subscribed_topic_names"] = [topic]
            return call(76, 1, body)

        def describe() -> tuple[int, dict[str, tuple[int, str, tuple[int, ...]]]]:
            [g] = call(77, 1, {"group_ids": [group], "include_authorized_operations": False}).groups
            assert g.error_code == 0, g
            return g.group_epoch, {
                m.member_id: (
                    m.member_epoch,
                    m.client_id,
                    tuple(p for t in m.assignment.topic_partitions for p in t.partitions),
                )
                for m in g.members
            }

        _wire(b.bootstrap_servers, 10, 4, {"key_type": 0, "coordinator_keys": [group]})
        e1 = heartbeat("m1", 0).member_epoch
        e2 = heartbeat("m2", 0).member_epoch
        heartbeat("m3", 0)
        assert heartbeat("m3", -1).error_code == 0  # leaves
        e1 = heartbeat("m1", e1).member_epoch
        before = describe()
        assert set(before[1]) == {"m1", "m2"} and before[1]["m1"][2] == (0, 1)
        b.restart()
        assert describe() == before
        r = heartbeat("m1", e1)  # carries on at its epoch: not fenced, not unknown
        assert (r.error_code, r.member_epoch) == (0, e1)
        assert heartbeat("m2", e2).error_code == 0
        assert heartbeat("m3", 1).error_code == 25  # UNKNOWN_MEMBER_ID: it left
        assert describe()[0] == before[0]
    finally:
        b.stop()
