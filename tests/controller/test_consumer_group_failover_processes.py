"""KIP-848 groups across a coordinator failover: three ``kafkalite-server`` processes over a
real ZooKeeper, three confluent-kafka consumers with ``group.protocol=consumer`` on a
6-partition topic (RF=3, min.insync.replicas=2), and the group coordinator's broker killed
with SIGKILL while they consume.

The group (members, epochs, assignments) and its committed offsets live in the replicated
``__consumer_offsets`` (RF=3); the broker that becomes leader of the group's offsets
partition loads them, and the consumers carry on with it: every partition is owned by one
member, nothing committed before the kill is read again, and every produced record is
consumed.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.cli.wire_client import WireClient
from kafkalite.testing.process_cluster import ProcessCluster
from tests.clients.test_consumer_protocol import Group, owned

TOPIC = "cg-failover"
PARTITIONS = 6
FIND_COORDINATOR, CONSUMER_GROUP_DESCRIBE = 10, 69
COORDINATOR_LOAD_IN_PROGRESS = 14

#: the coordinator is unreachable until ZooKeeper expires its session and a new leader of
#: the group's offsets partition is elected: commits meanwhile fail with these, and are
#: retried (the record was processed; the commit is what is in doubt)
_RETRY_COMMIT = {
    KafkaError.STALE_MEMBER_EPOCH,
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._WAIT_COORD,
}


class FailoverGroup(Group):
    """:class:`Group`, committing through a coordinator failover."""

    def _commit(self, c: Consumer, m: Any) -> None:
        for _ in range(400):
            try:
                c.commit(message=m, asynchronous=False)
                return
            except KafkaException as e:
                err = e.args[0]
                # the partition went to another member meanwhile: it re-reads from the
                # last commit (at least once), this member must not commit for it
                if err.code() in (KafkaError.UNKNOWN_MEMBER_ID, KafkaError.FENCED_MEMBER_EPOCH):
                    return
                if err.code() not in _RETRY_COMMIT and not err.retriable():
                    raise
                c.poll(0.05)
        raise AssertionError("commit kept failing")


def _coordinator(bootstrap: str, group: str) -> int:
    w = WireClient(bootstrap, timeout=10)
    try:
        r = w.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
        coord = r.coordinators[0]
        return int(coord.node_id) if coord.error_code == 0 else -1
    finally:
        w.close()


def _describe(coordinator: str, group: str) -> tuple[str, int, dict[str, int]]:
    """(state, group epoch, member id -> member epoch) as the coordinator has them."""
    w = WireClient(coordinator, timeout=10)
    try:
        deadline = time.monotonic() + 10
        while True:
            r = w.call(
                CONSUMER_GROUP_DESCRIBE,
                0,
                {"group_ids": [group], "include_authorized_operations": False},
            )
            g = r.groups[0]
            # a new coordinator answers COORDINATOR_LOAD_IN_PROGRESS until it has read the log
            if g.error_code != COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert g.error_code == 0, g
        return g.group_state, g.group_epoch, {m.member_id: m.member_epoch for m in g.members}
    finally:
        w.close()


def _committed(bootstrap: str, group: str) -> dict[int, int]:
    """The group's committed offsets, read by a plain (non-member) client."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        got = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=20)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def _produce(bootstrap: str, values: range) -> None:
    p = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "retry.backoff.ms": 100}
    )
    for i in values:
        p.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
    assert p.flush(60) == 0


def test_consumers_carry_on_with_the_new_coordinator_after_it_is_killed(zookeeper, tmp_path):
    zk_connect = f"{zookeeper.connect_string}/cgfail-{os.getpid()}-{time.monotonic_ns()}"
    c = ProcessCluster(
        3,
        tmp_path,
        zk_connect,
        {
            "replica.lag.time.max.ms": 10000,
            "auto.leader.rebalance.enable": "false",
            "offsets.topic.replication.factor": 3,
            "offsets.topic.num.partitions": 3,
            "group.consumer.session.timeout.ms": 6000,
            "group.consumer.min.session.timeout.ms": 1000,
            "group.consumer.heartbeat.interval.ms": 250,
            "group.consumer.min.heartbeat.interval.ms": 100,
        },
    )
    group = f"g-{uuid.uuid4().hex[:6]}"
    g: FailoverGroup | None = None
    try:
        c.start()
        bootstrap = c.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[
            TOPIC
        ].result(30)
        # FindCoordinator creates __consumer_offsets (RF=3) on first use
        coordinator = c.wait(lambda: max(_coordinator(bootstrap, group), 0), 30, "no coordinator")
        c.wait(
            lambda: all(
                len(c.partition_state(t, p)["isr"]) == 3
                for t, n in ((TOPIC, PARTITIONS), ("__consumer_offsets", 3))
                for p in range(n)
            ),
            30,
            "topics not fully in sync",
        )

        g = FailoverGroup(bootstrap, group, TOPIC)
        for _ in range(3):
            g.add()
        g.until(lambda: g.each_partition_once(PARTITIONS))
        assert sorted(len(owned(m)) for m in g.consumers) == [2, 2, 2]
        _produce(bootstrap, range(0, 300))
        g.until(lambda: len(g.seen) == 300)
        before = _committed(bootstrap, group)
        assert before == {p: 50 for p in range(PARTITIONS)}, before
        state, group_epoch, members = _describe(c.servers[coordinator].bootstrap, group)
        assert state == "Stable" and len(members) == 3

        # kill -9 the coordinator; the consumers keep polling (and committing) meanwhile
        victim = c.servers[coordinator]
        victim.kill9()
        survivors = ",".join(s.bootstrap for s in c.servers.values() if s.running)
        g.until(lambda: _coordinator(survivors, group) not in (-1, coordinator), timeout=30)
        new = _coordinator(survivors, group)
        # the new coordinator loaded the group from the replicated log: the same members at
        # the same epochs, no rebalance (a group rebuilt from scratch would have new epochs)
        assert _describe(c.servers[new].bootstrap, group) == ("Stable", group_epoch, members)
        _produce(survivors, range(300, 600))
        g.until(lambda: len(g.seen) == 600, timeout=40)
        g.until(lambda: g.each_partition_once(PARTITIONS))
        assert sorted(len(owned(m)) for m in g.consumers) == [2, 2, 2]
        assert _describe(c.servers[new].bootstrap, group) == ("Stable", group_epoch, members)

        # the commits made before the kill survived the move: nothing before them re-read
        assert all(g.seen[i] == 1 for i in range(300)), "re-read records committed before"
        assert set(g.seen) == set(range(600))
        after = _committed(survivors, group)
        assert after == {p: 100 for p in range(PARTITIONS)}, after
        g.close()
        g = None
    finally:
        if g is not None:
            g.close()
        c.stop()
