"""Topic deletion through the TopicDeletionManager (seed 002 §9, #31-36)."""

from __future__ import annotations

import asyncio

from confluent_kafka.admin import AdminClient

from kafkalite.controller.controller_context import PartitionAndReplica
from kafkalite.controller.replica_state_machine import ReplicaState
from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.isr_change import update_leader_and_isr
from kafkalite.protocol.errors import ErrorCode
from tests.controller.cluster import Cluster, client_topics, eventually


async def _gone(cluster: Cluster, topic: str) -> bool:
    return all(
        [
            await cluster.admin.exists(zk_paths.topic_path(topic)) is None,
            await cluster.admin.exists(zk_paths.topic_config_path(topic)) is None,
            await cluster.admin.exists(zk_paths.delete_topic_path(topic)) is None,
        ]
    )


async def test_with_deletion_disabled_the_marker_goes_and_the_topic_stays(tmp_path, backend):
    """#31"""
    async with Cluster(
        tmp_path, 2, zookeeper_connect=backend, **{"delete.topic.enable": False}
    ) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        await cluster.delete_topic_znode("t")
        await eventually(_marker_gone(cluster, "t"))
        await asyncio.sleep(0.2)
        assert await cluster.admin.exists(zk_paths.topic_path("t")) is not None
        assert cluster.all_see("t", 0, lambda m: m.leader == 0)
        assert all(not cluster.requests(i, "StopReplica") for i in (0, 1))
        assert "t" in await client_topics(cluster.bootstrap())


def _marker_gone(cluster: Cluster, topic: str):
    async def check() -> bool:
        return await cluster.admin.exists(zk_paths.delete_topic_path(topic)) is None

    return check


async def test_deleting_a_topic_stops_and_deletes_every_replica_then_forgets_it(tmp_path, backend):
    """#32, through a stock client's DeleteTopics."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1], 1: [1, 2]})
        await cluster.wait_state("t", 1, lambda s: s.leader == 1)
        await eventually(
            lambda: all(cluster.all_see("t", p, lambda m: m.leader >= 0) for p in (0, 1))
        )
        for i in range(3):
            cluster.received[i].clear()

        def delete() -> None:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
            for f in admin.delete_topics(["t"], operation_timeout=20).values():
                f.result(30)

        await asyncio.to_thread(delete)
        await eventually(lambda: _gone(cluster, "t"))
        assert await cluster.state("t", 0) is None
        for i in range(3):
            seen = [
                (r.api, r.delete)
                for r in cluster.received[i]
                if r.api in ("UpdateMetadata", "StopReplica")
                and (
                    ("t", 0) in r.partitions or ("t", 1) in r.partitions or "t" in r.deleted_topics
                )
            ]
            # leader -2 first, then the replicas this broker hosts: stop, then delete
            assert seen[0] == ("UpdateMetadata", None)
            assert [r.deleted_topics for r in cluster.requests(i, "UpdateMetadata")][0] == ["t"]
            hosted = {p for p, ar in {0: [0, 1], 1: [1, 2]}.items() if i in ar}
            stops = cluster.requests(i, "StopReplica")
            assert [r.delete for r in stops] == [False, True]
            assert all({tp[1] for tp in r.partitions} == hosted for r in stops)
            assert cluster.broker(i).metadata_cache.get_topic("t") is None
            assert cluster.broker(i).log_manager.get_log("t", 0) is None
            assert cluster.broker(i).log_manager.get_log("t", 1) is None
        assert "t" not in await client_topics(cluster.bootstrap())
        ctrl = cluster.controller().controller
        assert "t" not in ctrl.ctx.all_topics
        assert not ctrl.topic_deletion_manager.topics_to_be_deleted


async def test_deleting_a_nonexistent_topic_only_removes_its_marker(tmp_path, backend):
    """#33"""
    async with Cluster(tmp_path, 2, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("kept", {0: [0]})
        await cluster.wait_state("kept", 0, lambda s: s.leader == 0)
        await cluster.delete_topic_znode("ghost")
        await eventually(_marker_gone(cluster, "ghost"))
        assert all(not cluster.requests(i, "StopReplica") for i in (0, 1))
        assert await cluster.admin.exists(zk_paths.topic_path("kept")) is not None


async def test_deletion_stalls_while_a_replica_broker_is_down(tmp_path, backend):
    """#34: it completes when the broker comes back."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 2], 1: [1]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        await cluster.kill(2)
        await cluster.wait_state("t", 0, lambda s: s.isr == [0])
        await cluster.delete_topic_znode("t")
        ctrl = cluster.controller().controller
        tdm = ctrl.topic_deletion_manager
        await eventually(lambda: tdm.is_topic_ineligible_for_deletion("t"))
        # brokers stopped serving it, the live replicas are deleted, the dead one waits
        await eventually(lambda: all(cluster.cached(i, "t", 0) is None for i in (0, 1)))
        await eventually(
            lambda: (
                ctrl.replica_state_machine.state(PartitionAndReplica("t", 0, 0))
                is ReplicaState.DELETION_SUCCESSFUL
            )
        )
        await asyncio.sleep(0.3)
        assert await cluster.admin.exists(zk_paths.topic_path("t")) is not None
        assert await cluster.admin.exists(zk_paths.delete_topic_path("t")) is not None
        await cluster.restart(2)
        await eventually(lambda: _gone(cluster, "t"))
        assert cluster.broker(2).log_manager.get_log("t", 0) is None
        assert [r.delete for r in cluster.requests(2, "StopReplica")][-2:] == [False, True]


async def test_a_replica_deletion_error_makes_the_topic_ineligible_until_resumed(tmp_path, backend):
    """#35"""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 1)
        b2 = cluster.broker(2)
        real = b2.replica_manager.stop_replicas
        failed: list[bool] = []

        async def failing(epoch, partitions, delete):
            if delete and not failed:
                failed.append(True)  # a disk error, once
                return {tp: int(ErrorCode.kafka_storage_error) for tp in partitions}
            return await real(epoch, partitions, delete)

        b2.replica_manager.stop_replicas = failing  # type: ignore[method-assign]
        await cluster.delete_topic_znode("t")
        ctrl = cluster.controller().controller
        tdm = ctrl.topic_deletion_manager
        rsm = ctrl.replica_state_machine
        await eventually(lambda: failed and tdm.is_topic_ineligible_for_deletion("t"))
        await eventually(
            lambda: rsm.state(PartitionAndReplica("t", 0, 1)) is ReplicaState.DELETION_SUCCESSFUL
        )
        await asyncio.sleep(0.3)
        assert await cluster.admin.exists(zk_paths.topic_path("t")) is not None
        assert rsm.state(PartitionAndReplica("t", 0, 2)) is not ReplicaState.DELETION_SUCCESSFUL
        # broker 2 restarts: deletion resumes and completes
        await cluster.shutdown(2)
        await cluster.restart(2)
        await eventually(lambda: _gone(cluster, "t"))


async def test_deletion_waits_for_a_reassignment_of_the_topic_to_finish(tmp_path, backend):
    """#36"""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        await cluster.admin.create(
            zk_paths.REASSIGN_PARTITIONS,
            zk_data.PartitionReassignment({zk_data.TopicPartition("t", 0): [1, 2]}).encode(),
        )
        ctrl = cluster.controller().controller
        await eventually(lambda: ("t", 0) in ctrl.ctx.partitions_being_reassigned)
        await cluster.delete_topic_znode("t")
        await eventually(lambda: ctrl.topic_deletion_manager.is_topic_ineligible_for_deletion("t"))
        await asyncio.sleep(0.3)
        assert await cluster.admin.exists(zk_paths.topic_path("t")) is not None
        assert not any(r.delete for i in range(3) for r in cluster.requests(i, "StopReplica"))
        # the new replica catches up (the leader adds it to the ISR): reassignment ends,
        # then deletion runs
        st, version = await cluster.state("t", 0)
        await update_leader_and_isr(
            cluster.admin,
            ("t", 0),
            leader=st.leader,
            leader_epoch=st.leader_epoch,
            isr=[0, 1, 2],
            controller_epoch=st.controller_epoch,
            zk_version=version,
        )
        await eventually(lambda: _gone(cluster, "t"))
        assert await cluster.admin.exists(zk_paths.REASSIGN_PARTITIONS) is None
