"""ISR change notifications (seed 002 §9, #37): the leader writes the state znode and
a sequential notification; the controller re-reads and sends UpdateMetadata only."""

from __future__ import annotations

from kafkalite.metadata import zk_paths
from kafkalite.metadata.isr_change import (
    IsrChangePropagator,
    update_leader_and_isr,
    write_isr_change_notification,
)
from tests.controller.cluster import Cluster, client_partition, eventually


async def test_an_isr_change_notification_sends_update_metadata_only(tmp_path, backend):
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1, 2], 1: [1, 2]})
        st, version = await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.isr == [0, 1, 2]))
        lair_before = [len(cluster.requests(i, "LeaderAndIsr")) for i in range(3)]
        # the leader shrinks the ISR (fenced by the znode version) and notifies
        assert (
            await update_leader_and_isr(
                cluster.admin,
                ("t", 0),
                leader=0,
                leader_epoch=st.leader_epoch,
                isr=[0, 2],
                controller_epoch=st.controller_epoch,
                zk_version=version,
            )
            == version + 1
        )
        # a stale writer (old version) is refused
        assert (
            await update_leader_and_isr(
                cluster.admin,
                ("t", 0),
                leader=0,
                leader_epoch=st.leader_epoch,
                isr=[0],
                controller_epoch=st.controller_epoch,
                zk_version=version,
            )
            is None
        )
        # a malformed notification is deleted too
        await cluster.admin.create(
            zk_paths.isr_change_notification_path(), b"{not json", sequential=True
        )
        path = await write_isr_change_notification(cluster.admin, [("t", 0)])
        assert zk_paths.sequence_number(path, zk_paths.ISR_CHANGE_PREFIX) >= 0
        assert len(path.rsplit("_", 1)[1]) == 10
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.isr == [0, 2]))

        async def processed() -> bool:
            return await cluster.admin.get_children(zk_paths.ISR_CHANGE_NOTIFICATION) == []

        await eventually(processed)
        assert [len(cluster.requests(i, "LeaderAndIsr")) for i in range(3)] == lair_before
        for i in range(3):
            um = cluster.requests(i, "UpdateMetadata", "t")[-1]
            assert list(um.partitions) == [("t", 0)] and um.partitions[("t", 0)]["isr"] == [0, 2]
        ctrl = cluster.controller().controller
        assert ctrl.ctx.partition_leadership_info[("t", 0)].leader_and_isr.isr == (0, 2)
        assert await client_partition(cluster.bootstrap(), "t", 0) == (0, [0, 1, 2], [0, 2])


async def test_the_propagator_batches_changes_like_kafka(tmp_path):
    """Kafka's leader-side rule: propagate after 5 s without changes, or every 60 s."""
    async with Cluster(tmp_path, 1) as cluster:
        now = [1_000_000]
        prop = IsrChangePropagator(cluster.admin, clock_ms=lambda: now[0])
        assert await prop.maybe_propagate() is None  # nothing recorded
        prop.record(("a", 0))
        now[0] += 4000
        prop.record(("b", 1))
        now[0] += 4000
        assert await prop.maybe_propagate() is None  # the last change is 4 s old
        now[0] += 1001
        path = await prop.maybe_propagate()
        assert path is not None

        # written and, since broker 0's controller watches, processed and deleted
        async def gone() -> bool:
            return await cluster.admin.exists(path) is None

        await eventually(gone)
        # a steady stream of changes (never 5 s apart) still propagates every 60 s
        last = now[0]
        result = None
        while result is None:
            now[0] += 4900
            prop.record(("a", 0))
            result = await prop.maybe_propagate()
            assert result is not None or now[0] - last <= 60_000
        assert 60_000 < now[0] - last <= 60_000 + 4900
