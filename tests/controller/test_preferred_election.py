"""Preferred replica election: the admin node, the ElectLeaders API, and auto leader
rebalance (seed 002 §9, #21-25)."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import ElectionType
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.isr_change import update_leader_and_isr, write_isr_change_notification
from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing.leadership import set_partition_leader
from tests.controller.cluster import Cluster, client_partition, eventually


async def _write_isr(cluster: Cluster, topic: str, partition: int, isr: list[int]) -> None:
    st, version = await cluster.state(topic, partition)
    assert await update_leader_and_isr(
        cluster.admin,
        (topic, partition),
        leader=st.leader,
        leader_epoch=st.leader_epoch,
        isr=isr,
        controller_epoch=st.controller_epoch,
        zk_version=version,
    )


async def _lead_elsewhere(cluster: Cluster, topic: str, partition: int, leader: int) -> None:
    """Move leadership off the preferred replica, as a controller-driven election would."""
    ctrl = cluster.controller().controller
    await ctrl.put(lambda: set_partition_leader(ctrl, (topic, partition), leader))
    await cluster.wait_state(topic, partition, lambda s: s.leader == leader)


async def _request_election(cluster: Cluster, *partitions: tuple[str, int]) -> None:
    await cluster.admin.create(
        zk_paths.PREFERRED_REPLICA_ELECTION,
        zk_data.PreferredReplicaElection(
            tuple(zk_data.TopicPartition(t, p) for t, p in partitions)
        ).encode(),
    )


async def _admin_node_gone(cluster: Cluster) -> bool:
    return await cluster.admin.exists(zk_paths.PREFERRED_REPLICA_ELECTION) is None


async def test_a_manual_preferred_election_moves_leadership_to_ar0(tmp_path, backend):
    """#21"""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1, 2]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        await _lead_elsewhere(cluster, "t", 0, 1)
        before, _ = await cluster.state("t", 0)
        await _request_election(cluster, ("t", 0))
        st, _ = await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        assert (st.isr, st.leader_epoch) == (before.isr, before.leader_epoch + 1)
        await eventually(lambda: _admin_node_gone(cluster))
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.leader == 0))
        assert await client_partition(cluster.bootstrap(), "t", 0) == (0, [0, 1, 2], [0, 1, 2])


@pytest.mark.parametrize("why", ["dead", "out_of_sync"])
async def test_a_preferred_replica_dead_or_out_of_sync_keeps_the_leader(tmp_path, backend, why):
    """#22"""
    async with Cluster(tmp_path, 4, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [3, 1, 2]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 3)
        await _lead_elsewhere(cluster, "t", 0, 1)
        if why == "dead":
            await cluster.kill(3)
            await cluster.wait_state("t", 0, lambda s: 3 not in s.isr)
        else:
            await _write_isr(cluster, "t", 0, [1, 2])
        before = await cluster.state("t", 0)
        await _request_election(cluster, ("t", 0))
        await eventually(lambda: _admin_node_gone(cluster))
        assert await cluster.state("t", 0) == before


async def test_no_write_when_the_preferred_replica_already_leads(tmp_path, backend):
    """#23"""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1, 2]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        before = await cluster.state("t", 0)
        await _request_election(cluster, ("t", 0), ("unknown", 3))
        await eventually(lambda: _admin_node_gone(cluster))
        assert await cluster.state("t", 0) == before  # same data, same version


async def test_elect_leaders_from_a_stock_admin_client(tmp_path, backend):
    """The ElectLeaders API (key 43) runs the same election on the controller."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0]})
        for p in range(3):
            await cluster.wait_state("t", p, lambda s: s.leader >= 0)
        await _lead_elsewhere(cluster, "t", 0, 2)
        await _write_isr(cluster, "t", 2, [0])  # 2 out of sync: cannot lead t-2
        await _lead_elsewhere(cluster, "t", 2, 0)
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.leader == 2))
        bootstrap = cluster.bootstrap()

        def elect(partitions):
            admin = AdminClient({"bootstrap.servers": bootstrap})
            tps = None if partitions is None else [KafkaTopicPartition("t", p) for p in partitions]
            result = admin.elect_leaders(ElectionType.PREFERRED, tps).result(30)
            return {(tp.topic, tp.partition): (e.code() if e else 0) for tp, e in result.items()}

        got = await asyncio.to_thread(elect, [0, 1, 2, 9])
        assert got == {
            ("t", 0): 0,
            ("t", 1): ErrorCode.election_not_needed,
            ("t", 2): ErrorCode.preferred_leader_not_available,
            ("t", 9): ErrorCode.unknown_topic_or_partition,
        }
        st, _ = await cluster.state("t", 0)
        assert st.leader == 0
        # all partitions: only those that needed an election are reported
        assert await asyncio.to_thread(elect, None) == {
            ("t", 2): ErrorCode.preferred_leader_not_available
        }


async def test_auto_rebalance_returns_leadership_to_preferred_replicas(tmp_path):
    """#24: leader.imbalance.check.interval.seconds=1, 10%: after failover and recovery
    the preferred broker leads again (first check 5 s after the controller started)."""
    async with Cluster(
        tmp_path,
        3,
        **{"auto.leader.rebalance.enable": True, "leader.imbalance.check.interval.seconds": 1},
    ) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2], 1: [1, 2], 2: [2, 1]})
        for p in range(3):
            await cluster.wait_state("t", p, lambda s: s.leader >= 0)
        await cluster.shutdown(1)  # leadership moves to 2
        await cluster.wait_state("t", 0, lambda s: s.leader == 2)
        await cluster.restart(1)
        # broker 1 comes back as a follower; the leader adds it back to the ISRs and
        # tells the controller
        for p in (0, 1):
            await _write_isr(cluster, "t", p, [2, 1])
        await write_isr_change_notification(cluster.admin, [("t", 0), ("t", 1)])
        for p in (0, 1):
            await cluster.wait_state("t", p, lambda s: s.leader == 1, timeout=15)
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.leader == 1))
        assert cluster.controller().controller.preferred_replica_imbalance_count() == 0


async def test_auto_rebalance_respects_threshold_reassignment_and_shutdown(tmp_path, backend):
    """#25: nothing at or below the threshold, during a reassignment, or while the
    preferred broker is shutting down."""
    async with Cluster(
        tmp_path,
        3,
        zookeeper_connect=backend,
        **{"leader.imbalance.per.broker.percentage": 50},
    ) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2], 1: [1, 2]})
        await cluster.create_topic_znode("r", {0: [0, 1]})
        for p in range(2):
            await cluster.wait_state("t", p, lambda s: s.leader == 1)
        ctrl = cluster.controller().controller

        async def check() -> list:
            return await ctrl.put(ctrl.preferred_election.check_and_trigger_auto_leader_rebalance)

        await _lead_elsewhere(cluster, "t", 0, 2)  # 1 of 2 = 50%: not above the threshold
        assert await check() == []
        await _lead_elsewhere(cluster, "t", 1, 2)  # 100%
        # a reassignment in progress blocks it
        await cluster.admin.create(
            zk_paths.REASSIGN_PARTITIONS,
            zk_data.PartitionReassignment({zk_data.TopicPartition("r", 0): [0, 2]}).encode(),
        )
        await eventually(lambda: ctrl.ctx.partitions_being_reassigned)
        assert await check() == []
        await _write_isr(cluster, "r", 0, [0, 1, 2])  # the reassignment completes
        await eventually(lambda: not ctrl.ctx.partitions_being_reassigned)
        # the preferred broker is shutting down
        ctrl.ctx.shutting_down_broker_ids.add(1)
        assert await check() == []
        ctrl.ctx.shutting_down_broker_ids.discard(1)
        assert sorted(await check()) == [("t", 0), ("t", 1)]
        for p in range(2):
            await cluster.wait_state("t", p, lambda s: s.leader == 1)
