"""Topic and partition creation through the controller (seed 002 §9 TopicChange and
PartitionModifications, #7-11). Topics are created as an admin tool does, by writing
/brokers/topics/<t>; clients see the result through Metadata."""

from __future__ import annotations

import asyncio

from confluent_kafka.admin import AdminClient, NewPartitions

from kafkalite.metadata import zk_paths
from tests.controller.cluster import Cluster, client_partition, eventually


async def test_creating_a_topic_znode_elects_the_first_live_replica(tmp_path, backend):
    """#7: state {leader 1, epoch 0, isr [1,2,3]}; 1-3 get LeaderAndIsr, everyone UpdateMetadata."""
    async with Cluster(tmp_path, 4, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2, 3]})
        st, version = await cluster.wait_state("t", 0, lambda s: True)
        assert (st.leader, st.leader_epoch, st.isr, st.controller_epoch) == (1, 0, [1, 2, 3], 1)
        assert version == 0
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.leader == 1))
        for i in (1, 2, 3):
            [lair] = cluster.requests(i, "LeaderAndIsr", "t")
            s = lair.partitions[("t", 0)]
            assert (s["leader"], s["leader_epoch"], s["isr"], s["replicas"]) == (
                1,
                0,
                [1, 2, 3],
                [1, 2, 3],
            )
        assert cluster.requests(0, "LeaderAndIsr", "t") == []
        for i in range(4):
            assert cluster.requests(i, "UpdateMetadata", "t")
        # the leader leads, the others follow
        assert cluster.broker(1).replica_manager.get_partition(("t", 0)).is_leader
        assert cluster.broker(2).replica_manager.get_partition(("t", 0)).leader_id == 1
        assert cluster.broker(0).replica_manager.get_partition(("t", 0)) is None
        assert await client_partition(cluster.bootstrap(), "t", 0) == (1, [1, 2, 3], [1, 2, 3])


async def test_a_dead_first_replica_is_skipped_at_creation(tmp_path, backend):
    """#8"""
    async with Cluster(tmp_path, 4, zookeeper_connect=backend) as cluster:
        await cluster.kill(1)
        await eventually(lambda: 1 not in cluster.controller().controller.ctx.live_brokers)
        await cluster.create_topic_znode("t", {0: [1, 2, 3]})
        st, _ = await cluster.wait_state("t", 0, lambda s: True)
        assert (st.leader, st.leader_epoch, st.isr) == (2, 0, [2, 3])
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.leader == 2))
        assert await client_partition(cluster.bootstrap(), "t", 0) == (2, [1, 2, 3], [2, 3])


async def test_a_partition_with_no_live_replica_waits_for_one_to_register(tmp_path, backend):
    """#9: no state znode while every replica is down; initialized when one registers."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.kill(1)
        await cluster.kill(2)
        await eventually(lambda: set(cluster.controller().controller.ctx.live_brokers) == {0})
        await cluster.create_topic_znode("t", {0: [1, 2], 1: [0]})
        await cluster.wait_state("t", 1, lambda s: s.leader == 0)
        await asyncio.sleep(0.2)
        assert await cluster.state("t", 0) is None
        assert cluster.cached(0, "t", 0) is None  # not in metadata without a leader
        await cluster.restart(2)
        st, _ = await cluster.wait_state("t", 0, lambda s: True)
        assert (st.leader, st.leader_epoch, st.isr) == (2, 0, [2])
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.leader == 2))


async def test_adding_a_partition_leaves_the_existing_ones_alone(tmp_path, backend):
    """#10, with a stock client's CreatePartitions"""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1, 2]})
        before = await cluster.wait_state("t", 0, lambda s: True)
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.leader == 0))

        def add() -> None:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
            for f in admin.create_partitions([NewPartitions("t", 2)]).values():
                f.result(20)

        await asyncio.to_thread(add)
        st1, _ = await cluster.wait_state("t", 1, lambda s: True)
        assert st1.leader_epoch == 0 and len(st1.isr) == 3
        assert await cluster.state("t", 0) == before
        await eventually(lambda: cluster.all_see("t", 1, lambda m: m.leader >= 0))
        assert cluster.cached(1, "t", 0).leader_epoch == before[0].leader_epoch


async def test_partitions_added_to_a_topic_being_deleted_are_ignored(tmp_path, backend):
    """#11: deletion stalls on a dead replica; partitions added meanwhile never come online."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 1)
        await cluster.kill(2)
        await cluster.delete_topic_znode("t")
        ctrl = cluster.controller().controller
        await eventually(lambda: ctrl.topic_deletion_manager.is_topic_queued_up_for_deletion("t"))
        await cluster.add_partitions_znode("t", {1: [0, 1]})
        await asyncio.sleep(0.3)
        assert await cluster.state("t", 1) is None
        assert ctrl.ctx.partition_replica_assignment(("t", 1)) == []
        assert await cluster.admin.exists(zk_paths.topic_path("t")) is not None  # still stalled


async def test_a_topic_removed_behind_the_controllers_back_can_be_created_again(tmp_path):
    async with Cluster(tmp_path, 2) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        ctrl = cluster.controller().controller
        await cluster.admin.delete(zk_paths.topic_path("t"), recursive=True)
        await eventually(lambda: "t" not in ctrl.ctx.all_topics)
        await cluster.admin.delete(zk_paths.topic_config_path("t"))
        await cluster.create_topic_znode("t", {0: [1, 0]})
        st, _ = await cluster.wait_state("t", 0, lambda s: True)
        assert (st.leader, st.leader_epoch, st.isr) == (1, 0, [1, 0])
