"""Log dir failures on the controller side (Kafka's ZooKeeper-mode JBOD handling).

A broker whose log dir fails takes the dir's replicas offline and writes
/log_dir_event_notification/log_dir_event_<seq>. The controller then sends it
LeaderAndIsr for all its replicas; those answered with KAFKA_STORAGE_ERROR are
in ControllerContext.replicas_on_offline_dirs and go through
onReplicasBecomeOffline: new leaders where they led, out of the ISRs,
StopReplica, and Metadata lists them in offline_replicas.

The failure is a real filesystem condition (the dir replaced by a plain file),
found by the broker's next checkpoint write; nothing is mocked.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaAdminClient

from kafkalite.metadata import zk_data, zk_paths
from tests.controller.cluster import Cluster, client_partition, eventually
from tests.replica.wire import fail_log_dir

#: the broker with two log dirs in these tests
JBOD = 1


def _jbod_cluster(tmp_path: Path, backend: str | None, n: int = 3) -> Cluster:
    """``n`` brokers; broker JBOD has two log dirs and checkpoints every 100 ms, so a
    failed dir is found within a fraction of a second."""
    cluster = Cluster(tmp_path, n, zookeeper_connect=backend)
    cluster.nodes[JBOD] = cluster._node(JBOD, **_jbod_config(tmp_path))
    return cluster


def _jbod_config(tmp_path: Path) -> dict[str, Any]:
    d = tmp_path / f"b{JBOD}"
    return {
        "log.dirs": f"{d}/d0,{d}/d1",
        "log.flush.offset.checkpoint.interval.ms": 100,
    }


def _dir_of(tmp_path: Path, topic: str, partition: int) -> Path:
    """The JBOD broker's log dir holding the partition (from the filesystem)."""
    d = tmp_path / f"b{JBOD}"
    [found] = [x for x in (d / "d0", d / "d1") if (x / f"{topic}-{partition}").is_dir()]
    return found


async def _log_dir_of(cluster: Cluster, tmp_path: Path, topic: str, partition: int) -> Path:
    await eventually(
        lambda: cluster.broker(JBOD).replica_manager.get_partition((topic, partition)) is not None
    )
    return _dir_of(tmp_path, topic, partition)


async def _kafka_python_partition(bootstrap: str, topic: str, partition: int) -> dict[str, Any]:
    """The partition as kafka-python's admin client gets it from Metadata."""

    def ask() -> dict[str, Any]:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            [t] = admin.describe_topics([topic])
            [p] = [p for p in t["partitions"] if p["partition_index"] == partition]
            return dict(p)
        finally:
            admin.close()

    return await asyncio.to_thread(ask)


async def _no_notifications(cluster: Cluster) -> bool:
    return await cluster.admin.get_children(zk_paths.LOG_DIR_EVENT_NOTIFICATION) == []


async def _quiet(channel: Any, brokers: tuple[int, ...]) -> dict[int, int]:
    """Requests answered per broker, once nothing is queued or in flight for 0.3 s."""

    def counts() -> dict[int, int]:
        return {b: channel.requests_sent(b) for b in brokers}

    while True:
        before = counts()
        await asyncio.sleep(0.3)
        if counts() == before and all(channel.queue_size(b) == 0 for b in brokers):
            return before


def _offline_dirs(cluster: Cluster) -> dict[int, set[tuple[str, int]]]:
    return dict(cluster.controller().controller.ctx.replicas_on_offline_dirs)


async def test_a_follower_in_a_failed_log_dir_leaves_the_isr_and_the_leader_stays(
    tmp_path, backend
):
    async with _jbod_cluster(tmp_path, backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0, JBOD, 2]})
        before, _ = await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        failing = await _log_dir_of(cluster, tmp_path, "t", 0)
        for i in range(3):
            cluster.received[i].clear()

        fail_log_dir(failing)

        st, _ = await cluster.wait_state("t", 0, lambda s: JBOD not in s.isr)
        assert (st.leader, st.isr, st.leader_epoch) == (0, [0, 2], before.leader_epoch + 1)
        assert _offline_dirs(cluster) == {JBOD: {("t", 0)}}
        await eventually(lambda: _no_notifications(cluster))
        # the live replicas learn the smaller ISR; the failed one is stopped, not deleted
        for i in (0, 2):
            lair = await eventually(lambda i=i: cluster.requests(i, "LeaderAndIsr", "t"))
            s = lair[-1].partitions[("t", 0)]
            assert (s["leader"], s["isr"]) == (0, [0, 2])
        [stop] = await eventually(lambda: cluster.requests(JBOD, "StopReplica", "t"))
        assert stop.delete is False
        await eventually(
            lambda: cluster.all_see(
                "t", 0, lambda m: m.isr == [0, 2] and m.offline_replicas == [JBOD]
            )
        )
        assert cluster.controller().controller.offline_partitions_count() == 0
        # stock clients: the leader is unchanged, the replica is listed offline
        assert await client_partition(cluster.bootstrap(), "t", 0) == (0, [0, JBOD, 2], [0, 2])
        p = await _kafka_python_partition(cluster.bootstrap(), "t", 0)
        assert (p["leader_id"], p["isr_nodes"], p["offline_replicas"]) == (0, [0, 2], [JBOD])


async def test_a_leader_in_a_failed_log_dir_is_replaced_by_another_isr_replica(tmp_path, backend):
    async with _jbod_cluster(tmp_path, backend) as cluster:
        # two partitions led by the JBOD broker: one per log dir (a new log goes to the
        # dir with the fewest logs)
        await cluster.create_topic_znode("t", {0: [JBOD, 0, 2], 1: [JBOD, 2, 0]})
        before, _ = await cluster.wait_state("t", 0, lambda s: s.leader == JBOD)
        await cluster.wait_state("t", 1, lambda s: s.leader == JBOD)
        failing = await _log_dir_of(cluster, tmp_path, "t", 0)
        assert await _log_dir_of(cluster, tmp_path, "t", 1) != failing
        for i in range(3):
            cluster.received[i].clear()

        fail_log_dir(failing)

        st, _ = await cluster.wait_state("t", 0, lambda s: s.leader != JBOD)
        assert (st.leader, st.isr, st.leader_epoch) == (0, [0, 2], before.leader_epoch + 1)
        # the partition in the healthy dir keeps its leader and ISR
        other, _ = await cluster.state("t", 1)
        assert (other.leader, other.isr) == (JBOD, [JBOD, 2, 0])
        assert _offline_dirs(cluster) == {JBOD: {("t", 0)}}
        # the new leader and the other follower are told; the failed replica is not
        for i in (0, 2):
            lair = await eventually(lambda i=i: cluster.requests(i, "LeaderAndIsr", "t"))
            s = lair[-1].partitions[("t", 0)]
            assert (s["leader"], s["isr"], s["leader_epoch"]) == (0, [0, 2], st.leader_epoch)
        assert all(
            ("t", 0) not in r.partitions for r in cluster.requests(JBOD, "LeaderAndIsr", "t")
        )
        rm = cluster.broker(0).replica_manager
        await eventually(lambda: rm.get_partition(("t", 0)).is_leader)
        await eventually(
            lambda: cluster.all_see(
                "t", 0, lambda m: m.leader == 0 and m.offline_replicas == [JBOD]
            )
        )
        assert cluster.all_see("t", 1, lambda m: m.leader == JBOD and m.offline_replicas == [])
        bootstrap = cluster.bootstrap()
        assert await client_partition(bootstrap, "t", 0) == (0, [JBOD, 0, 2], [0, 2])
        p = await _kafka_python_partition(bootstrap, "t", 0)
        assert (p["leader_id"], p["offline_replicas"]) == (0, [JBOD])
        p = await _kafka_python_partition(bootstrap, "t", 1)
        assert (p["leader_id"], p["offline_replicas"]) == (JBOD, [])


async def test_a_replica_alone_in_a_failed_log_dir_leaves_its_partition_offline(tmp_path, backend):
    """No other replica: no leader (unclean election is off); the last ISR member stays."""
    async with _jbod_cluster(tmp_path, backend) as cluster:
        await cluster.create_topic_znode("solo", {0: [JBOD]})
        await cluster.wait_state("solo", 0, lambda s: s.leader == JBOD)
        fail_log_dir(await _log_dir_of(cluster, tmp_path, "solo", 0))
        st, _ = await cluster.wait_state("solo", 0, lambda s: s.leader == -1)
        assert st.isr == [JBOD]
        ctrl = cluster.controller().controller
        await eventually(lambda: ctrl.offline_partitions_count() == 1)
        await eventually(
            lambda: cluster.all_see(
                "solo", 0, lambda m: m.leader == -1 and m.offline_replicas == [JBOD]
            )
        )
        p = await _kafka_python_partition(cluster.bootstrap(), "solo", 0)
        assert (p["leader_id"], p["isr_nodes"], p["offline_replicas"]) == (-1, [JBOD], [JBOD])


async def test_log_dir_events_of_dead_brokers_and_malformed_ones_are_deleted_and_ignored(
    tmp_path, backend
):
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1, 2], 1: [1, 2, 0]})
        await cluster.wait_state("t", 1, lambda s: s.leader == 1)
        await cluster.kill(2)
        await cluster.wait_state("t", 1, lambda s: 2 not in s.isr)
        ctrl = cluster.controller().controller
        await eventually(lambda: 2 not in ctrl.ctx.live_brokers)
        channel = ctrl.channel_manager
        sent = await _quiet(channel, (0, 1))
        states = {p: await cluster.state("t", p) for p in (0, 1)}

        for data in (zk_data.LogDirEventNotification(2).encode(), b"{not json", b'{"broker":"x"}'):
            await cluster.admin.create(
                zk_paths.log_dir_event_notification_path(), data, sequential=True
            )
        await eventually(lambda: _no_notifications(cluster))
        assert await _quiet(channel, (0, 1)) == sent  # nothing was sent to anyone
        assert {p: await cluster.state("t", p) for p in (0, 1)} == states
        assert ctrl.ctx.replicas_on_offline_dirs == {}
        assert ctrl.is_active

        # a live broker's notification (its dirs are fine): LeaderAndIsr to it for all
        # its replicas; nothing goes offline and nothing changes
        await cluster.admin.create(
            zk_paths.log_dir_event_notification_path(),
            zk_data.LogDirEventNotification(1).encode(),
            sequential=True,
        )
        await eventually(lambda: _no_notifications(cluster))
        assert (await _quiet(channel, (0, 1)))[1] > sent[1]
        assert ctrl.ctx.replicas_on_offline_dirs == {}
        assert {p: await cluster.state("t", p) for p in (0, 1)} == states


async def test_a_restart_with_a_healthy_log_dir_brings_the_replica_back(tmp_path, backend):
    async with _jbod_cluster(tmp_path, backend) as cluster:
        await cluster.create_topic_znode("solo", {0: [JBOD]})
        await cluster.wait_state("solo", 0, lambda s: s.leader == JBOD)
        await eventually(lambda: cluster.all_see("solo", 0, lambda m: m.leader == JBOD))
        bootstrap = cluster.bootstrap()
        values = [f"v{i}".encode() for i in range(10)]

        def produce() -> list[Any]:
            p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
            errors: list[Any] = []
            for v in values:
                p.produce("solo", v, on_delivery=lambda err, _m: errors.append(err))
            p.flush(15)
            return errors

        assert await asyncio.to_thread(produce) == [None] * 10
        failing = await _log_dir_of(cluster, tmp_path, "solo", 0)
        fail_log_dir(failing)
        await cluster.wait_state("solo", 0, lambda s: s.leader == -1)
        await eventually(lambda: _offline_dirs(cluster) == {JBOD: {("solo", 0)}})

        # the disk is replaced: the broker stops, the dir comes back, the broker starts
        await cluster.kill(JBOD)
        await eventually(lambda: JBOD not in cluster.controller().controller.ctx.live_brokers)
        failing.unlink()
        failing.with_name(failing.name + ".failed").rename(failing)
        await cluster.restart(JBOD, **_jbod_config(tmp_path))

        st, _ = await cluster.wait_state("solo", 0, lambda s: s.leader == JBOD)
        assert st.isr == [JBOD]
        ctrl = cluster.controller().controller
        assert JBOD not in ctrl.ctx.replicas_on_offline_dirs
        # the broker accepted the LeaderAndIsr of its startup (the handler runs only for
        # replicas it hosts; one in a failed dir is answered KAFKA_STORAGE_ERROR before
        # it), then the one that made it leader again
        await eventually(lambda: cluster.requests(JBOD, "LeaderAndIsr", "solo"))
        rm = cluster.broker(JBOD).replica_manager
        await eventually(lambda: (p := rm.get_partition(("solo", 0))) is not None and p.is_leader)
        assert ("solo", 0) not in rm.offline_partitions
        await eventually(
            lambda: cluster.all_see(
                "solo", 0, lambda m: m.leader == JBOD and m.offline_replicas == []
            )
        )
        await eventually(lambda: ctrl.offline_partitions_count() == 0)
        p = await _kafka_python_partition(cluster.bootstrap(), "solo", 0)
        assert (p["leader_id"], p["offline_replicas"]) == (JBOD, [])

        def consume() -> list[bytes]:
            c = Consumer(
                {
                    "bootstrap.servers": cluster.bootstrap(),
                    "group.id": "check",
                    "enable.auto.commit": False,
                }
            )
            c.assign([CkTopicPartition("solo", 0, 0)])
            got: list[bytes] = []
            for _ in range(60):
                if len(got) >= len(values):
                    break
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    got.append(m.value())
            c.close()
            return got

        assert await asyncio.to_thread(consume) == values  # nothing lost


async def test_a_new_controller_learns_the_failed_log_dirs_from_leader_and_isr(tmp_path, backend):
    """No notification is pending after failover: the LeaderAndIsr the replica state
    machine sends at start-up comes back with KAFKA_STORAGE_ERROR (as in Kafka)."""
    async with _jbod_cluster(tmp_path, backend) as cluster:
        await cluster.create_topic_znode("t", {0: [2, JBOD]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 2)
        fail_log_dir(await _log_dir_of(cluster, tmp_path, "t", 0))
        await cluster.wait_state("t", 0, lambda s: s.isr == [2])
        await eventually(lambda: _offline_dirs(cluster) == {JBOD: {("t", 0)}})

        await cluster.kill(0)  # the controller
        new = await cluster.wait_for_controller(not_=0)
        ctrl = cluster.broker(new).controller
        await eventually(lambda: ctrl.ctx.replicas_on_offline_dirs == {JBOD: {("t", 0)}})

        def latest_says_offline(i: int) -> bool:
            um = [
                r
                for r in cluster.requests(i, "UpdateMetadata", "t")
                if r.controller_epoch == ctrl.epoch and ("t", 0) in r.partitions
            ]
            return bool(um) and um[-1].partitions[("t", 0)]["offline_replicas"] == [JBOD]

        await eventually(lambda: all(latest_says_offline(i) for i in cluster.live_ids))
        assert cluster.all_see("t", 0, lambda m: m.offline_replicas == [JBOD])
        st, _ = await cluster.state("t", 0)
        assert (st.leader, st.isr) == (2, [2])
