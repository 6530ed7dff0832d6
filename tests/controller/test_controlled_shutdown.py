"""Controlled shutdown (seed 002 §9, #38-41; seed 000 #50-52): the controller moves
leadership off a broker before it stops, and the broker asks for it on stop()."""

from __future__ import annotations

import asyncio
import time

from kafkalite.metadata.isr_change import update_leader_and_isr
from kafkalite.protocol import inter_broker as ib
from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing.faults import Delay
from tests.controller.cluster import Cluster, call, client_partition, eventually


async def _shutdown_request(cluster: Cluster, broker_id: int) -> ib.ControlledShutdownResponse:
    """What a stopping broker asks. It is stopping: its followers stop fetching (held at
    every other broker), so no leader adds it back to an ISR the controller shrank."""
    b = cluster.broker(broker_id)
    for i in cluster.live_ids:
        if i != broker_id:
            cluster.nodes[i].faults.add(
                "FETCH", Delay(None), client_id=f"replica-fetcher-{broker_id}", times=None
            )
    return await call(
        cluster.controller().bound_port(),
        ib.CONTROLLED_SHUTDOWN,
        3,
        ib.ControlledShutdownRequest(broker_id, b.broker_epoch),
        signed_for=cluster.controller(),
    )


def _remaining(resp: ib.ControlledShutdownResponse) -> list[tuple[str, int]]:
    return [(p.topic_name, p.partition_index) for p in resp.remaining_partitions]


async def test_controlled_shutdown_moves_leadership_and_shrinks_isrs(tmp_path, backend):
    """#38"""
    async with Cluster(tmp_path, 4, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2, 3]})
        await cluster.create_topic_znode("u", {0: [2, 1, 3]})
        led, _ = await cluster.wait_state("t", 0, lambda s: s.leader == 1)
        followed, _ = await cluster.wait_state("u", 0, lambda s: s.leader == 2)
        resp = await _shutdown_request(cluster, 1)
        assert (resp.error_code, _remaining(resp)) == (0, [])
        st, _ = await cluster.state("t", 0)
        assert (st.leader, st.isr, st.leader_epoch) == (2, [2, 3], led.leader_epoch + 1)
        st, _ = await cluster.state("u", 0)
        assert (st.leader, st.isr, st.leader_epoch) == (2, [2, 3], followed.leader_epoch + 1)
        assert 1 in cluster.controller().controller.ctx.shutting_down_broker_ids
        await eventually(
            lambda: [r.delete for r in cluster.requests(1, "StopReplica", "u")] == [False]
        )
        assert cluster.requests(1, "StopReplica", "t") == []  # it led t: it just follows now
        await eventually(lambda: cluster.broker(1).replica_manager.get_partition(("u", 0)) is None)
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.leader == 2))
        assert not cluster.broker(1).replica_manager.get_partition(("t", 0)).is_leader
        assert await client_partition(cluster.bootstrap(), "t", 0) == (2, [1, 2, 3], [2, 3])


async def test_rf1_is_ignored_and_partitions_without_another_isr_member_remain(tmp_path, backend):
    """#39"""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("single", {0: [1]})
        await cluster.create_topic_znode("pair", {0: [1, 2]})
        await cluster.wait_state("single", 0, lambda s: s.leader == 1)
        before, _ = await cluster.wait_state("pair", 0, lambda s: s.leader == 1)
        # 2 shuts down first: it leaves pair's ISR
        assert _remaining(await _shutdown_request(cluster, 2)) == []
        await cluster.wait_state("pair", 0, lambda s: s.isr == [1])
        # now 1: single (RF=1) is neither moved nor reported; pair's only other
        # replica is shutting down too, so pair stays and is reported
        resp = await _shutdown_request(cluster, 1)
        assert (resp.error_code, _remaining(resp)) == (0, [("pair", 0)])
        assert (await cluster.state("single", 0))[0].leader == 1
        st, _ = await cluster.state("pair", 0)
        assert (st.leader, st.isr) == (1, [1])


async def test_controlled_shutdown_to_a_non_controller_or_for_an_unknown_broker(tmp_path, backend):
    """#40"""
    async with Cluster(tmp_path, 2, zookeeper_connect=backend) as cluster:
        resp = await call(
            cluster.broker(1).bound_port(),
            ib.CONTROLLED_SHUTDOWN,
            3,
            ib.ControlledShutdownRequest(1),
            signed_for=cluster.broker(1),
        )
        assert resp.error_code == ErrorCode.not_controller
        resp = await call(
            cluster.broker(0).bound_port(),
            ib.CONTROLLED_SHUTDOWN,
            3,
            ib.ControlledShutdownRequest(9),
            signed_for=cluster.broker(0),
        )
        assert resp.error_code == ErrorCode.broker_not_available


async def test_a_shutting_down_broker_never_leads_but_still_gets_metadata(tmp_path, backend):
    """#41"""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2, 0]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 1)
        assert _remaining(await _shutdown_request(cluster, 2)) == []
        # a new partition preferring 2: 2 is skipped
        await cluster.create_topic_znode("u", {0: [2, 0]})
        st, _ = await cluster.wait_state("u", 0, lambda s: True)
        assert (st.leader, st.isr) == (0, [0])
        # the leader of t dies: 2 is not eligible either
        await cluster.kill(1)
        st, _ = await cluster.wait_state("t", 0, lambda s: s.leader != 1)
        assert st.leader == 0
        # but 2 hears about everything
        await eventually(lambda: cluster.cached(2, "u", 0) is not None)
        await eventually(lambda: cluster.cached(2, "t", 0).leader == 0)
        assert set(cluster.broker(2).metadata_cache.brokers) == {0, 2}


async def test_stopping_a_broker_moves_its_leadership_first(tmp_path, backend):
    """seed 000 #50, #52: KafkaBroker.stop() sends ControlledShutdown to the controller."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 1)
        ctrl = cluster.controller().controller
        await cluster.shutdown(1)
        assert ctrl.event_manager.processed.get("ControlledShutdown") == 1
        # broker 1 learnt it was no longer leader while it was still running
        assert any(
            r.partitions.get(("t", 0), {}).get("leader") == 2
            for r in cluster.requests(1, "LeaderAndIsr", "t")
        )
        st, _ = await cluster.state("t", 0)
        assert (st.leader, st.isr) == (2, [2])


async def test_a_failing_controlled_shutdown_is_retried_then_the_broker_stops(tmp_path, backend):
    """seed 000 #52: max.retries attempts, retry.backoff.ms apart, then shutdown proceeds."""
    async with Cluster(
        tmp_path,
        3,
        zookeeper_connect=backend,
        **{"controlled.shutdown.max.retries": 3, "controlled.shutdown.retry.backoff.ms": 300},
    ) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2]})
        st, version = await cluster.wait_state("t", 0, lambda s: s.leader == 1)
        # 2 fell out of the ISR: leadership cannot move off 1
        await update_leader_and_isr(
            cluster.admin,
            ("t", 0),
            leader=1,
            leader_epoch=st.leader_epoch,
            isr=[1],
            controller_epoch=st.controller_epoch,
            zk_version=version,
        )
        ctrl = cluster.controller().controller
        t0 = time.monotonic()
        await cluster.shutdown(1)
        elapsed = time.monotonic() - t0
        assert ctrl.event_manager.processed.get("ControlledShutdown") == 3
        assert elapsed >= 2 * 0.3
        await cluster.wait_state("t", 0, lambda s: s.leader == -1)  # then it died


async def test_with_controlled_shutdown_disabled_no_request_is_sent(tmp_path):
    """seed 000 #52"""
    async with Cluster(tmp_path, 2, **{"controlled.shutdown.enable": False}) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 0]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 1)
        ctrl = cluster.controller().controller
        await cluster.shutdown(1)
        await cluster.wait_state("t", 0, lambda s: s.leader == 0)
        await asyncio.sleep(0.1)
        assert "ControlledShutdown" not in ctrl.event_manager.processed
