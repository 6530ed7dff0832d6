"""Partition reassignment (seed 002 §9, #26-30) through /admin/reassign_partitions and
the AlterPartitionReassignments/ListPartitionReassignments APIs.

The test cluster holds follower fetches (``Cluster(replication=False)``), so "the new
replicas catch up" is written as the leader writes it: the new ISR in the state znode;
reassignments with real data movement are in test_replication_processes.py. Phase A (union AR, new replicas
started) and phase B (leader move, old replicas stopped and deleted, final AR) are
the controller's.
"""

from __future__ import annotations

import asyncio

from kafka import TopicPartition as KafkaTopicPartition
from kafka import errors as Errors
from kafka.admin import KafkaAdminClient

from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.isr_change import update_leader_and_isr
from kafkalite.testing.leadership import partition_info
from tests.controller.cluster import Cluster, client_partition, eventually


async def _reassign(cluster: Cluster, wanted: dict[tuple[str, int], list[int]]) -> None:
    await cluster.admin.create(
        zk_paths.REASSIGN_PARTITIONS,
        zk_data.PartitionReassignment(
            {zk_data.TopicPartition(*tp): r for tp, r in wanted.items()}
        ).encode(),
    )


async def _catch_up(cluster: Cluster, topic: str, partition: int, isr: list[int]) -> None:
    """Write the ISR as the leader would; again on a version conflict (a new controller
    resuming the reassignment may write the znode meanwhile, as the leader would see)."""

    async def write() -> bool:
        st, version = await cluster.state(topic, partition)
        written = await update_leader_and_isr(
            cluster.admin,
            (topic, partition),
            leader=st.leader,
            leader_epoch=st.leader_epoch,
            isr=isr,
            controller_epoch=st.controller_epoch,
            zk_version=version,
        )
        return written is not None

    await eventually(write)


async def _assignment(cluster: Cluster, topic: str) -> dict[int, list[int]]:
    return dict(
        zk_data.TopicAssignment.decode(await cluster.znode(zk_paths.topic_path(topic))).partitions
    )


async def _no_admin_node(cluster: Cluster) -> bool:
    return await cluster.admin.exists(zk_paths.REASSIGN_PARTITIONS) is None


async def test_reassigning_to_new_brokers_goes_through_both_phases(tmp_path, backend):
    """#26: [0,1] → [2,3]: union AR, new replicas started, then leader 2, old replicas
    stopped and deleted, AR [2,3], admin node removed, UpdateMetadata everywhere."""
    async with Cluster(tmp_path, 4, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1]})
        start, _ = await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        await _reassign(cluster, {("t", 0): [2, 3]})
        # phase A
        await eventually(lambda: cluster.requests(2, "LeaderAndIsr", "t"))
        assert await _assignment(cluster, "t") == {0: [2, 3, 0, 1]}
        st, _ = await cluster.state("t", 0)
        assert (st.leader, st.isr, st.leader_epoch) == (0, [0, 1], start.leader_epoch + 1)
        for i in (0, 1, 2, 3):
            await eventually(lambda i=i: cluster.requests(i, "LeaderAndIsr", "t"))
            s = cluster.requests(i, "LeaderAndIsr", "t")[-1].partitions[("t", 0)]
            assert (s["leader"], s["replicas"]) == (0, [2, 3, 0, 1])
        assert cluster.broker(3).replica_manager.get_partition(("t", 0)).leader_id == 0
        assert not await _no_admin_node(cluster)
        # the new replicas catch up: phase B
        await _catch_up(cluster, "t", 0, [0, 1, 2, 3])
        await eventually(lambda: _no_admin_node(cluster))
        st, _ = await cluster.state("t", 0)
        assert (st.leader, st.isr) == (2, [2, 3])
        assert await _assignment(cluster, "t") == {0: [2, 3]}
        for i in (0, 1):
            await eventually(
                lambda i=i: (
                    [r.delete for r in cluster.requests(i, "StopReplica", "t")] == [False, True]
                )
            )
            await eventually(lambda i=i: cluster.broker(i).log_manager.get_log("t", 0) is None)
        await eventually(
            lambda: cluster.all_see("t", 0, lambda m: m.leader == 2 and m.replicas == [2, 3])
        )
        assert await client_partition(cluster.bootstrap(), "t", 0) == (2, [2, 3], [2, 3])
        assert not cluster.controller().controller.ctx.partitions_being_reassigned


async def test_a_live_leader_in_the_new_replicas_stays_with_a_new_epoch(tmp_path, backend):
    """#27"""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        await _reassign(cluster, {("t", 0): [0, 2]})
        phase_a, _ = await cluster.wait_state("t", 0, lambda s: s.leader_epoch == 1)
        await _catch_up(cluster, "t", 0, [0, 1, 2])
        await eventually(lambda: _no_admin_node(cluster))
        st, _ = await cluster.state("t", 0)
        assert st.leader == 0 and st.isr == [0, 2]
        assert st.leader_epoch > phase_a.leader_epoch
        assert await _assignment(cluster, "t") == {0: [0, 2]}
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.replicas == [0, 2]))


async def test_pointless_or_unknown_reassignments_are_dropped(tmp_path, backend):
    """#28"""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1]})
        before = await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        await _reassign(cluster, {("t", 0): [0, 1], ("ghost", 0): [1, 2], ("t", 7): [2]})
        await eventually(lambda: _no_admin_node(cluster))
        assert await cluster.state("t", 0) == before
        assert await _assignment(cluster, "t") == {0: [0, 1]}


async def test_reassigning_a_topic_being_deleted_is_skipped(tmp_path, backend):
    """#29"""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        await cluster.kill(1)  # deletion will stall on the dead replica
        await cluster.delete_topic_znode("t")
        ctrl = cluster.controller().controller
        await eventually(lambda: ctrl.topic_deletion_manager.is_topic_queued_up_for_deletion("t"))
        await _reassign(cluster, {("t", 0): [0, 2]})
        await eventually(lambda: _no_admin_node(cluster))
        assert await _assignment(cluster, "t") == {0: [0, 1]}
        assert not ctrl.ctx.partitions_being_reassigned


async def test_a_new_controller_resumes_a_reassignment_in_flight(tmp_path, backend):
    """#30"""
    async with Cluster(tmp_path, 4, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 1)
        await _reassign(cluster, {("t", 0): [2, 3]})
        await cluster.wait_state("t", 0, lambda s: s.leader_epoch == 1)  # phase A done
        assert await _assignment(cluster, "t") == {0: [2, 3, 1]}
        await cluster.kill(0)  # the controller
        new = await cluster.wait_for_controller(not_=0)
        ctrl = cluster.broker(new).controller
        await eventually(lambda: ("t", 0) in ctrl.ctx.partitions_being_reassigned)
        await _catch_up(cluster, "t", 0, [1, 2, 3])
        await eventually(lambda: _no_admin_node(cluster))
        st, _ = await cluster.state("t", 0)
        assert (st.leader, st.isr) == (2, [2, 3])
        assert await _assignment(cluster, "t") == {0: [2, 3]}


async def test_reassignment_apis_from_a_stock_client(tmp_path):
    """AlterPartitionReassignments (45) and ListPartitionReassignments (46), kafka-python."""
    async with Cluster(tmp_path, 3) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1], 1: [1, 2]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        bootstrap = cluster.bootstrap()

        def alter(wanted):
            admin = KafkaAdminClient(bootstrap_servers=bootstrap)
            try:
                return admin.alter_partition_reassignments(wanted)
            finally:
                admin.close()

        def listing():
            admin = KafkaAdminClient(bootstrap_servers=bootstrap)
            try:
                return admin.list_partition_reassignments()
            finally:
                admin.close()

        got = await asyncio.to_thread(
            alter, {KafkaTopicPartition("t", 0): [0, 2], KafkaTopicPartition("t", 1): [5]}
        )
        assert got[KafkaTopicPartition("t", 0)] is None
        assert got[KafkaTopicPartition("t", 1)] is not None  # broker 5 does not exist
        ctrl = cluster.controller().controller
        await eventually(lambda: ("t", 0) in ctrl.ctx.partitions_being_reassigned)
        ongoing = await asyncio.to_thread(listing)
        assert ongoing == {
            KafkaTopicPartition("t", 0): {
                "replicas": [0, 2, 1],
                "adding_replicas": [2],
                "removing_replicas": [1],
            }
        }
        await _catch_up(cluster, "t", 0, [0, 1, 2])
        await eventually(lambda: _no_admin_node(cluster))
        assert await asyncio.to_thread(listing) == {}
        assert await _assignment(cluster, "t") == {0: [0, 2], 1: [1, 2]}


def _admin_call(bootstrap: str, method: str, *args):
    """One kafka-python KafkaAdminClient call (it finds the controller itself)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return getattr(admin, method)(*args)
    finally:
        admin.close()


async def _topic_znode(cluster: Cluster, topic: str) -> zk_data.TopicAssignment:
    return zk_data.TopicAssignment.decode(await cluster.znode(zk_paths.topic_path(topic)))


async def test_cancelling_a_reassignment_goes_back_to_the_original_replicas(tmp_path, backend):
    """KIP-455: AlterPartitionReassignments with null replicas (kafka-python's ``None``).
    [0,1] → [1,2] in phase A (AR [1,2,0], adding [2], removing [0]); cancelled: AR [0,1]
    again, the adding replica 2 stopped and deleted, leader epoch bumped, nothing listed.
    Cancelling again, or a partition never reassigned: NO_REASSIGNMENT_IN_PROGRESS (85)."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1], 1: [1, 2]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        bootstrap = cluster.bootstrap()
        tp0, tp1 = KafkaTopicPartition("t", 0), KafkaTopicPartition("t", 1)
        got = await asyncio.to_thread(
            _admin_call, bootstrap, "alter_partition_reassignments", {tp0: [1, 2]}
        )
        assert got == {tp0: None}
        phase_a, _ = await cluster.wait_state("t", 0, lambda s: s.leader_epoch == 1)
        znode = await _topic_znode(cluster, "t")
        assert dict(znode.partitions)[0] == [1, 2, 0]
        assert (dict(znode.adding_replicas), dict(znode.removing_replicas)) == ({0: [2]}, {0: [0]})
        await eventually(lambda: cluster.broker(2).replica_manager.get_partition(("t", 0)))
        assert cluster.broker(2).log_manager.get_log("t", 0) is not None

        got = await asyncio.to_thread(
            _admin_call, bootstrap, "alter_partition_reassignments", {tp0: None, tp1: None}
        )
        assert got[tp0] is None
        assert got[tp1] is Errors.NoReassignmentInProgressError
        assert Errors.NoReassignmentInProgressError.errno == 85
        ctrl = cluster.controller().controller
        assert not ctrl.ctx.partitions_being_reassigned
        znode = await _topic_znode(cluster, "t")
        assert dict(znode.partitions) == {0: [0, 1], 1: [1, 2]}
        assert (dict(znode.adding_replicas), dict(znode.removing_replicas)) == ({}, {})
        assert await _no_admin_node(cluster)
        st, _ = await cluster.state("t", 0)
        assert (st.leader, st.isr) == (0, [0, 1])
        assert st.leader_epoch > phase_a.leader_epoch
        await eventually(
            lambda: [r.delete for r in cluster.requests(2, "StopReplica", "t")] == [False, True]
        )
        await eventually(lambda: cluster.broker(2).log_manager.get_log("t", 0) is None)
        assert cluster.requests(0, "StopReplica", "t") == []  # the original ones stay
        assert cluster.requests(1, "StopReplica", "t") == []
        await eventually(
            lambda: cluster.all_see("t", 0, lambda m: m.leader == 0 and m.replicas == [0, 1])
        )
        assert await client_partition(bootstrap, "t", 0) == (0, [0, 1], [0, 1])
        assert await asyncio.to_thread(_admin_call, bootstrap, "list_partition_reassignments") == {}
        got = await asyncio.to_thread(
            _admin_call, bootstrap, "alter_partition_reassignments", {tp0: None}
        )
        assert got[tp0] is Errors.NoReassignmentInProgressError


async def test_cancelling_takes_caught_up_adding_replicas_out_of_the_isr(tmp_path, backend):
    """[0,1] → [2,3], replica 2 caught up (ISR [0,1,2]), 3 not yet: the cancellation stops
    both and the ISR is the original replicas again."""
    async with Cluster(tmp_path, 4, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        await _reassign(cluster, {("t", 0): [2, 3]})
        await cluster.wait_state("t", 0, lambda s: s.leader_epoch == 1)
        await _catch_up(cluster, "t", 0, [0, 1, 2])
        ctrl = cluster.controller().controller
        await eventually(lambda: partition_info(ctrl, ("t", 0))[0].isr == (0, 1, 2))
        got = await asyncio.to_thread(
            _admin_call,
            cluster.bootstrap(),
            "alter_partition_reassignments",
            {KafkaTopicPartition("t", 0): None},
        )
        assert got == {KafkaTopicPartition("t", 0): None}
        st, _ = await cluster.state("t", 0)
        assert (st.leader, st.isr) == (0, [0, 1])
        assert await _assignment(cluster, "t") == {0: [0, 1]}
        assert await _no_admin_node(cluster)
        for i in (2, 3):
            await eventually(lambda i=i: cluster.broker(i).log_manager.get_log("t", 0) is None)
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.isr == [0, 1]))


async def test_a_new_controller_cancels_back_to_the_original_replicas(tmp_path, backend):
    """The original replicas of a reassignment in phase A survive a controller failover
    (KIP-455's adding_replicas in the topic znode): [1,2] → [2,3], controller 0 killed,
    cancelled on the new controller: AR = the union [2,3,1] minus the adding replica 3,
    Kafka's ``originReplicas`` (the original order is known only to the controller that
    started the reassignment)."""
    async with Cluster(tmp_path, 4, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 1)
        await _reassign(cluster, {("t", 0): [2, 3]})
        await cluster.wait_state("t", 0, lambda s: s.leader_epoch == 1)
        assert await _assignment(cluster, "t") == {0: [2, 3, 1]}
        await cluster.kill(0)
        new = await cluster.wait_for_controller(not_=0)
        ctrl = cluster.broker(new).controller
        await eventually(lambda: ("t", 0) in ctrl.ctx.partitions_being_reassigned)
        assert ctrl.ctx.partitions_being_reassigned[("t", 0)].original_replicas == [2, 1]
        got = await asyncio.to_thread(
            _admin_call,
            cluster.bootstrap(),
            "alter_partition_reassignments",
            {KafkaTopicPartition("t", 0): None},
        )
        assert got == {KafkaTopicPartition("t", 0): None}
        assert await _assignment(cluster, "t") == {0: [2, 1]}
        st, _ = await cluster.state("t", 0)
        assert (st.leader, sorted(st.isr)) == (1, [1, 2])
        await eventually(lambda: cluster.broker(3).log_manager.get_log("t", 0) is None)
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.replicas == [2, 1]))
        leader, replicas, isr = await client_partition(cluster.bootstrap(), "t", 0)
        assert (leader, replicas, sorted(isr)) == (1, [2, 1], [1, 2])
