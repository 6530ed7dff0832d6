"""Broker failure and restart (seed 002 §9 BrokerChange, #12-20 and #43).

ISRs other than "all live replicas" are written as a partition leader writes them
(:mod:`kafkalite.metadata.isr_change`), since follower fetching is not built yet.
"""

from __future__ import annotations

import asyncio
import time

from kafkalite.controller.controller_context import PartitionAndReplica
from kafkalite.controller.partition_state_machine import PartitionState
from kafkalite.controller.replica_state_machine import ReplicaState
from kafkalite.metadata import zk_paths
from kafkalite.metadata.isr_change import update_leader_and_isr
from tests.controller.cluster import Cluster, client_partition, client_topics, eventually


async def _set_isr(cluster: Cluster, topic: str, partition: int, isr: list[int]) -> None:
    """Shrink/reorder the ISR as the partition's leader would (conditional write)."""
    st, version = await cluster.state(topic, partition)
    new = await update_leader_and_isr(
        cluster.admin,
        (topic, partition),
        leader=st.leader,
        leader_epoch=st.leader_epoch,
        isr=isr,
        controller_epoch=st.controller_epoch,
        zk_version=version,
    )
    assert new == version + 1


async def test_killing_the_leader_elects_the_next_isr_replica(tmp_path, backend):
    """#12: leader 2, ISR [2,3], epoch+1 within T; LeaderAndIsr to 2 and 3; UpdateMetadata to all."""
    async with Cluster(tmp_path, 4, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2, 3]})
        before, _ = await cluster.wait_state("t", 0, lambda s: s.leader == 1)
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.leader == 1))
        for i in range(4):
            cluster.received[i].clear()
        t0 = time.monotonic()
        await cluster.kill(1)
        st, _ = await cluster.wait_state("t", 0, lambda s: s.leader != 1)
        assert (st.leader, st.isr, st.leader_epoch) == (2, [2, 3], before.leader_epoch + 1)
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.leader == 2))
        assert time.monotonic() - t0 < cluster.session_timeout_ms / 1000 + 2
        for i in (2, 3):
            [lair] = cluster.requests(i, "LeaderAndIsr", "t")
            s = lair.partitions[("t", 0)]
            assert (s["leader"], s["isr"], s["leader_epoch"]) == (2, [2, 3], st.leader_epoch)
        assert cluster.requests(0, "LeaderAndIsr", "t") == []
        for i in (0, 2, 3):
            um = cluster.requests(i, "UpdateMetadata", "t")
            assert um and um[-1].partitions[("t", 0)]["leader"] == 2
        assert cluster.broker(2).replica_manager.get_partition(("t", 0)).is_leader
        assert await client_partition(cluster.bootstrap(), "t", 0) == (2, [1, 2, 3], [2, 3])


async def test_the_new_leader_follows_assignment_order_not_isr_order(tmp_path, backend):
    """#13: AR [3,1,2], ISR [2,1,3], broker 3 dead → leader 1."""
    async with Cluster(tmp_path, 4, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [3, 1, 2]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 3)
        await _set_isr(cluster, "t", 0, [2, 1, 3])
        await cluster.kill(3)
        st, _ = await cluster.wait_state("t", 0, lambda s: s.leader != 3)
        assert (st.leader, st.isr) == (1, [2, 1])


async def test_killing_a_follower_removes_it_from_the_isr(tmp_path, backend):
    """#14: ISR shrinks, epoch+1, leader unchanged."""
    async with Cluster(tmp_path, 4, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2, 3]})
        before, _ = await cluster.wait_state("t", 0, lambda s: s.leader == 1)
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.leader == 1))
        for i in range(4):
            cluster.received[i].clear()
        await cluster.kill(3)
        st, _ = await cluster.wait_state("t", 0, lambda s: 3 not in s.isr)
        assert (st.leader, st.isr, st.leader_epoch) == (1, [1, 2], before.leader_epoch + 1)
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.isr == [1, 2]))
        for i in (1, 2):  # the shrunk ISR goes to the remaining replicas
            assert cluster.requests(i, "LeaderAndIsr", "t")[-1].partitions[("t", 0)]["isr"] == [
                1,
                2,
            ]
        assert cluster.broker(1).replica_manager.get_partition(("t", 0)).isr == [1, 2]
        assert await client_partition(cluster.bootstrap(), "t", 0) == (1, [1, 2, 3], [1, 2])


async def test_with_unclean_disabled_the_last_isr_member_stays_and_leads_again(tmp_path, backend):
    """#15: every ISR member dead → leader -1, ISR keeps it; it leads with epoch+1 on return."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 1)
        await _set_isr(cluster, "t", 0, [1])  # 2 fell behind
        await cluster.kill(1)
        st, _ = await cluster.wait_state("t", 0, lambda s: s.leader == -1)
        assert st.isr == [1]
        down_epoch = st.leader_epoch
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.leader == -1))
        await cluster.restart(1)
        st, _ = await cluster.wait_state("t", 0, lambda s: s.leader == 1)
        assert (st.isr, st.leader_epoch) == ([1], down_epoch + 1)


async def test_with_unclean_enabled_a_live_out_of_sync_replica_leads(tmp_path, backend):
    """#16: ISR dead, non-ISR AR replica alive → it leads with ISR [it]."""
    async with Cluster(
        tmp_path, 3, zookeeper_connect=backend, **{"unclean.leader.election.enable": True}
    ) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 1)
        await _set_isr(cluster, "t", 0, [1])
        await cluster.kill(1)
        st, _ = await cluster.wait_state("t", 0, lambda s: s.leader != 1)
        assert (st.leader, st.isr) == (2, [2])
        assert cluster.controller().controller.unclean_leader_elections == 1


async def test_a_topic_override_disabling_unclean_election_wins(tmp_path, backend):
    """#17: broker default true, topic override false → no unclean election."""
    async with Cluster(
        tmp_path, 3, zookeeper_connect=backend, **{"unclean.leader.election.enable": True}
    ) as cluster:
        await cluster.create_topic_znode(
            "t", {0: [1, 2]}, config={"unclean.leader.election.enable": "false"}
        )
        await cluster.wait_state("t", 0, lambda s: s.leader == 1)
        await _set_isr(cluster, "t", 0, [1])
        await cluster.kill(1)
        st, _ = await cluster.wait_state("t", 0, lambda s: s.leader != 1)
        assert (st.leader, st.isr) == (-1, [1])


async def test_killing_a_broker_that_leads_nothing_updates_every_live_list(tmp_path, backend):
    """#18"""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        await cluster.kill(2)
        await eventually(lambda: all(set(b.metadata_cache.brokers) == {0, 1} for b in cluster.live))
        for i in (0, 1):
            assert cluster.requests(i, "UpdateMetadata")[-1].live_brokers == [0, 1]


async def test_a_restarted_broker_follows_and_does_not_take_leadership_back(tmp_path, backend):
    """#19: LeaderAndIsr as follower for every replica it hosts."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2, 0], 1: [2, 1, 0], 2: [0, 2]})
        for p in range(3):
            await cluster.wait_state("t", p, lambda s: s.leader >= 0)
        await cluster.kill(1)
        await cluster.wait_state("t", 0, lambda s: s.leader == 2)
        await cluster.restart(1)
        await eventually(lambda: cluster.requests(1, "LeaderAndIsr", "t"))
        got = {
            tp: s
            for r in cluster.requests(1, "LeaderAndIsr", "t")
            for tp, s in r.partitions.items()
        }
        assert set(got) == {("t", 0), ("t", 1)}  # every replica it hosts, nothing else
        assert {tp: s["leader"] for tp, s in got.items()} == {("t", 0): 2, ("t", 1): 2}
        await asyncio.sleep(0.3)
        assert (await cluster.state("t", 0))[0].leader == 2
        assert not cluster.broker(1).replica_manager.get_partition(("t", 0)).is_leader
        assert cluster.broker(1).replica_manager.get_partition(("t", 1)).leader_id == 2


async def test_offline_partitions_come_back_when_their_replica_registers(tmp_path, backend):
    """#20 (RF=1: the only eligible replica is on the restarted broker)."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [2]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 2)
        await cluster.kill(2)
        await cluster.wait_state("t", 0, lambda s: s.leader == -1)
        assert "t" in await client_topics(cluster.bootstrap())
        assert (await client_partition(cluster.bootstrap(), "t", 0))[0] == -1
        ctrl = cluster.controller().controller
        assert ctrl.partition_state_machine.state(("t", 0)) is PartitionState.OFFLINE
        assert ctrl.offline_partitions_count() == 1
        await cluster.restart(2)
        await cluster.wait_state("t", 0, lambda s: s.leader == 2)
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.leader == 2))
        assert ctrl.offline_partitions_count() == 0


async def test_controller_startup_initializes_both_state_machines(tmp_path, backend):
    """#43: replicas Online / ReplicaDeletionIneligible, partitions Online / Offline / New;
    Offline and New partitions are elected at once, except those of topics being deleted."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        for topic, ar in (("on", [1]), ("moved", [0, 1]), ("off", [2]), ("newp", [1])):
            await cluster.create_topic_znode(topic, {0: ar})
            await cluster.wait_state(topic, 0, lambda s, x=ar[0]: s.leader == x)
        await cluster.create_topic_znode("doomed", {0: [0, 1, 2]})
        await cluster.wait_state("doomed", 0, lambda s: s.leader == 0)
        # newp-0 loses its state znode behind the controller's back: New for the next one
        await cluster.admin.delete(zk_paths.partition_state_path("newp", 0))
        await cluster.kill(2)
        await cluster.wait_state("off", 0, lambda s: s.leader == -1)
        await cluster.wait_state("doomed", 0, lambda s: s.isr == [0, 1])
        await cluster.delete_topic_znode("doomed")  # stalls: a replica is on dead broker 2
        ctrl0 = cluster.controller().controller
        await eventually(
            lambda: ctrl0.topic_deletion_manager.is_topic_ineligible_for_deletion("doomed")
        )
        doomed_before = await cluster.state("doomed", 0)

        observed: dict[str, dict] = {}
        new_ctrl = cluster.broker(1).controller
        psm = new_ctrl.partition_state_machine
        real = psm.trigger_online_partition_state_change

        async def snapshot(partitions=None):
            if not observed:
                observed["partitions"] = dict(psm.partition_state)
                observed["replicas"] = dict(new_ctrl.replica_state_machine.replica_state)
            return await real(partitions)

        psm.trigger_online_partition_state_change = snapshot  # type: ignore[method-assign]
        await cluster.kill(0)
        assert await cluster.wait_for_controller(not_=0) == 1
        S, R = PartitionState, ReplicaState
        assert {tp[0]: st for tp, st in observed["partitions"].items()} == {
            "on": S.ONLINE,
            "moved": S.OFFLINE,
            "off": S.OFFLINE,
            "newp": S.NEW,
            "doomed": S.OFFLINE,
        }
        replicas = observed["replicas"]
        assert replicas[PartitionAndReplica("on", 0, 1)] is R.ONLINE
        assert replicas[PartitionAndReplica("moved", 0, 1)] is R.ONLINE
        # dead brokers' replicas: ReplicaDeletionIneligible, then Offline (out of their ISRs)
        assert replicas[PartitionAndReplica("moved", 0, 0)] is R.OFFLINE
        assert replicas[PartitionAndReplica("off", 0, 2)] is R.OFFLINE
        # elected during startup
        st, _ = await cluster.wait_state("moved", 0, lambda s: s.leader == 1)
        assert st.controller_epoch == 2
        st, _ = await cluster.wait_state("newp", 0, lambda s: s.leader == 1)
        assert (st.leader_epoch, st.controller_epoch) == (0, 2)
        assert (await cluster.state("off", 0))[0].leader == -1
        # the topic being deleted was left as it was
        assert await cluster.state("doomed", 0) == doomed_before
        assert psm.state(("doomed", 0)) is S.OFFLINE
