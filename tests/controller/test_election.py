"""Controller election, epochs, failover and resignation (seed 002 §2, #1-6; seed 000 #39-43).

Brokers share an embedded store or a real ZooKeeper (``backend``) and send each
other controller requests over TCP. Checks go through the store, the brokers'
metadata caches, and Metadata.controller_id as librdkafka sees it.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kafkalite.metadata import zk_data, zk_paths
from kafkalite.protocol import inter_broker as ib
from kafkalite.protocol.errors import ErrorCode
from tests.controller.cluster import Cluster, call, client_controller_id, eventually


async def _assert_one_controller(cluster: Cluster, epoch: int) -> int:
    [controller] = await eventually(cluster.active_controllers)
    assert await cluster.controller_in_store() == controller
    assert await cluster.controller_epoch_in_store() == epoch
    # every live broker learnt it from UpdateMetadata, with that epoch
    await eventually(
        lambda: all(
            b.metadata_cache.controller_id == controller
            and b.metadata_cache.controller_epoch == epoch
            for b in cluster.live
        )
    )
    assert all(b.controller.active_controller_id == controller for b in cluster.live)
    return controller


def _agreed_leader(cluster: Cluster, topic: str, partition: int) -> int | None:
    """The leader every live broker's metadata shows, if they agree on a live one."""
    leaders = {cluster.cached(i, topic, partition).leader for i in cluster.live_ids}
    if len(leaders) == 1 and (leader := leaders.pop()) in cluster.live_ids:
        return leader
    return None


async def test_a_fresh_cluster_has_one_controller_with_epoch_1(tmp_path, backend):
    """seed 002 #1, seed 000 #39-40"""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        controller = await _assert_one_controller(cluster, epoch=1)
        assert controller == 0  # the first broker to start
        info = zk_data.ControllerInfo.decode(await cluster.znode(zk_paths.CONTROLLER))
        assert info.broker_id == 0 and info.timestamp > 0
        stat = await cluster.admin.exists(zk_paths.CONTROLLER)
        assert stat is not None and stat.ephemeral
        assert await client_controller_id(cluster.bootstrap()) == controller


async def test_a_lone_broker_is_controller_with_epoch_1(tmp_path, backend):
    """seed 000 #39"""
    async with Cluster(tmp_path, 1, zookeeper_connect=backend) as cluster:
        assert await _assert_one_controller(cluster, epoch=1) == 0


async def test_killing_the_controller_elects_another_within_the_session_timeout(tmp_path, backend):
    """seed 002 #2, seed 000 #41"""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.nodes[0].create_topic("t", partitions=3, replication_factor=3)
        old = await _assert_one_controller(cluster, epoch=1)
        t0 = time.monotonic()
        await cluster.kill(old)
        new = await cluster.wait_for_controller(not_=old)
        assert time.monotonic() - t0 < cluster.session_timeout_ms / 1000 + 2
        assert await _assert_one_controller(cluster, epoch=2) == new
        await eventually(lambda: all(old not in b.metadata_cache.brokers for b in cluster.live))
        assert await client_controller_id(cluster.bootstrap()) == new
        # every live broker got UpdateMetadata from the new controller, with the new epoch
        for i in cluster.live_ids:
            assert any(r.controller_epoch == 2 for r in cluster.requests(i, "UpdateMetadata"))
        # the new controller moved leadership off the dead broker
        await eventually(
            lambda: all(
                cluster.all_see("t", p, lambda m: m.leader not in (old, -1)) for p in range(3)
            )
        )
        # the old controller's epoch is now stale on the wire
        resp = await call(
            cluster.live[0].bound_port(),
            ib.UPDATE_METADATA,
            8,
            ib.UpdateMetadataRequest(old, 1, [], []),
            signed_for=cluster.live[0],
        )
        assert resp.error_code == ErrorCode.stale_controller_epoch


async def test_controller_session_expiry_elects_another_within_the_session_timeout(tmp_path):
    """seed 002 #2 with a frozen (not dead) controller: its session must expire first."""
    async with Cluster(tmp_path, 3, session_timeout_ms=1000) as cluster:
        old = await _assert_one_controller(cluster, epoch=1)
        t0 = time.monotonic()
        cluster.partition(old)
        new = await cluster.wait_for_controller(not_=old, timeout=10)
        elapsed = time.monotonic() - t0
        assert 0.9 < elapsed < 1.0 + 2.0, elapsed  # the timeout, plus a generous margin
        assert await _assert_one_controller(cluster, epoch=2) == new


async def test_the_restarted_old_controller_does_not_take_control_back(tmp_path, backend):
    """seed 002 #3"""
    async with Cluster(tmp_path, 2, zookeeper_connect=backend) as cluster:
        assert cluster.active_controllers() == [0]
        await cluster.kill(0)
        await cluster.wait_for_controller(not_=0)
        await cluster.restart(0)
        await eventually(lambda: 0 in cluster.broker(1).metadata_cache.brokers)
        await asyncio.sleep(0.2)
        assert cluster.active_controllers() == [1]
        assert await cluster.controller_epoch_in_store() == 2
        assert cluster.broker(0).metadata_cache.controller_id == 1
        assert cluster.broker(0).controller.active_controller_id == 1


async def test_after_n_failovers_the_epoch_is_n_plus_1_on_every_request(tmp_path, backend):
    """seed 002 #4"""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.nodes[0].create_topic("t", partitions=2, replication_factor=3)
        for n in (1, 2, 3):
            old = cluster.controller().broker_id
            await cluster.kill(old)
            await cluster.restart(old)
            await cluster.wait_for_controller(not_=old)
            await _assert_one_controller(cluster, epoch=n + 1)
            for i in cluster.live_ids:
                cluster.received[i].clear()
            # a broker bounces: what the controller sends about it carries the current epoch
            other = next(i for i in cluster.live_ids if i != cluster.controller().broker_id)
            await cluster.kill(other)
            await eventually(
                lambda x=other: all(x not in b.metadata_cache.brokers for b in cluster.live)
            )
            await cluster.restart(other)
            await cluster.wait_for_controller()
            await eventually(lambda x=other: cluster.requests(x, "LeaderAndIsr"))
            sent = [r for i in cluster.live_ids for r in cluster.received[i]]
            assert sent and {r.controller_epoch for r in sent} == {n + 1}


async def test_a_state_znode_from_a_newer_controller_epoch_is_left_alone(tmp_path, backend):
    """seed 002 #5: the controller does not overwrite what a newer controller wrote."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("zombie", {0: [1, 2, 0]})
        await cluster.create_topic_znode("normal", {0: [1, 2, 0]})
        await cluster.wait_state("zombie", 0, lambda s: s.leader == 1)
        await cluster.wait_state("normal", 0, lambda s: s.leader == 1)
        st, version = await cluster.state("zombie", 0)
        newer = zk_data.PartitionState(st.leader, st.leader_epoch, st.isr, controller_epoch=99)
        await cluster.admin.set(zk_paths.partition_state_path("zombie", 0), newer.encode())
        before = await cluster.state("zombie", 0)
        await cluster.kill(1)
        # the election for the normal partition shows the broker failure was handled
        await cluster.wait_state("normal", 0, lambda s: s.leader == 2 and s.isr == [2, 0])
        assert await cluster.state("zombie", 0) == before
        assert before[0].controller_epoch == 99 and before[0].leader == 1


async def test_an_epoch_conflict_during_failover_deletes_controller_and_reelects(tmp_path, backend):
    """seed 002 #6: another writer bumps /controller_epoch between our read and our CAS."""
    async with Cluster(tmp_path, 2, zookeeper_connect=backend) as cluster:
        b1 = cluster.broker(1).controller
        zk = b1.zk
        real_bump, real_register = zk.increment_controller_epoch, zk.register_controller
        registered: list[bool] = []
        raced: list[int] = []

        async def racing_bump():
            if not raced:  # a rival controller writes first, once
                raw, stat = await cluster.admin.get(zk_paths.CONTROLLER_EPOCH)
                raced.append(int(raw) + 1)
                real_get = zk.store.get_or_none

                async def stale_get(path, **kw):
                    got = await real_get(path, **kw)
                    if path == zk_paths.CONTROLLER_EPOCH:
                        await cluster.admin.set(path, str(raced[0]).encode())
                    return got

                zk.store.get_or_none = stale_get  # type: ignore[method-assign]
                try:
                    return await real_bump()
                finally:
                    del zk.store.get_or_none
            return await real_bump()

        async def counting_register(broker_id, ts):
            won = await real_register(broker_id, ts)
            registered.append(won)
            return won

        zk.increment_controller_epoch = racing_bump  # type: ignore[method-assign]
        zk.register_controller = counting_register  # type: ignore[method-assign]
        await cluster.kill(0)
        await cluster.wait_for_controller(not_=0)
        # broker 1 won, hit the conflict, resigned (deleting /controller), and won again
        assert registered.count(True) == 2
        assert await cluster.controller_epoch_in_store() == 3  # 1, the rival's 2, then ours
        assert b1.epoch == 3 and b1.is_active
        await _assert_one_controller(cluster, epoch=3)


async def test_deleting_controller_znode_forces_an_election(tmp_path, backend):
    """seed 000 #41: the old controller resigns, a new election runs, epoch 2."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await _assert_one_controller(cluster, epoch=1)
        resigned = cluster.broker(0).controller.event_manager.processed.get("ControllerChange", 0)
        await cluster.admin.delete(zk_paths.CONTROLLER)
        await eventually(
            lambda: (
                cluster.broker(0).controller.event_manager.processed.get("ControllerChange", 0)
                > resigned
            )
        )
        await _assert_one_controller(cluster, epoch=2)


async def test_writing_another_id_into_controller_makes_the_old_one_resign(tmp_path, backend):
    """seed 000 #42: everyone follows /controller; the previous controller resigns."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await _assert_one_controller(cluster, epoch=1)
        await cluster.admin.set(zk_paths.CONTROLLER, zk_data.ControllerInfo(2, 1).encode())
        await eventually(lambda: all(b.controller.active_controller_id == 2 for b in cluster.live))
        await eventually(lambda: not cluster.broker(0).controller.is_active)
        assert cluster.broker(0).controller.ctx.epoch == 0  # state dropped
        # a plain integer is accepted as well (very old brokers wrote that)
        await cluster.admin.set(zk_paths.CONTROLLER, b"1")
        await eventually(lambda: all(b.controller.active_controller_id == 1 for b in cluster.live))


async def test_malformed_controller_znode_is_treated_as_absent(tmp_path, backend):
    """seed 000 #43: with a malformed /controller brokers try to create it; with a valid
    brokerid they do not."""
    async with Cluster(tmp_path, 2, zookeeper_connect=backend) as cluster:
        await _assert_one_controller(cluster, epoch=1)
        attempts: list[int] = []
        for b in cluster.live:
            zk = b.controller.zk
            real = zk.register_controller

            async def register(broker_id, ts, real=real):
                attempts.append(broker_id)
                return await real(broker_id, ts)

            zk.register_controller = register  # type: ignore[method-assign]
        await cluster.admin.set(zk_paths.CONTROLLER, b"not json")
        await eventually(lambda: sorted(attempts) == [0, 1])  # both tried; it exists
        assert cluster.active_controllers() == []
        assert all(b.controller.active_controller_id == -1 for b in cluster.live)
        await cluster.admin.delete(zk_paths.CONTROLLER)  # the operator removes it
        await cluster.wait_for_controller()
        await _assert_one_controller(cluster, epoch=2)
        # a valid brokerid: nobody tries
        n = len(attempts)
        await cluster.admin.set(
            zk_paths.CONTROLLER, zk_data.ControllerInfo(cluster.controller().broker_id, 5).encode()
        )
        await asyncio.sleep(0.3)
        assert len(attempts) == n


async def test_controller_events_run_one_at_a_time_in_fifo_order(tmp_path):
    """seed 000 #45"""
    async with Cluster(tmp_path, 1) as cluster:
        controller = cluster.broker(0).controller
        log: list[str] = []

        def event(name: str, pause: float):
            async def run() -> str:
                log.append(f"start {name}")
                await asyncio.sleep(pause)
                log.append(f"end {name}")
                return name

            return run

        futures = [controller.put(event(n, p)) for n, p in (("a", 0.05), ("b", 0), ("c", 0.01))]
        assert await asyncio.gather(*futures) == ["a", "b", "c"]
        assert log == ["start a", "end a", "start b", "end b", "start c", "end c"]


@pytest.mark.timeout(120)
async def test_broker_ids_are_generated_from_the_shared_seqid(tmp_path, backend):
    """seed 000 #58: no broker.id, no meta.properties → 1001, then 1002."""
    async with Cluster(tmp_path, 1, zookeeper_connect=backend) as cluster:
        a = cluster._node(10, **{"broker.id": -1})
        b = cluster._node(11, **{"broker.id": -1})
        await a.start()
        await b.start()
        try:
            assert (a.broker.broker_id, b.broker.broker_id) == (1001, 1002)
            ids = await cluster.admin.get_children(zk_paths.BROKER_IDS)
            assert sorted(ids) == ["0", "1001", "1002"]
        finally:
            await b.stop(cleanup=False)
            await a.stop(cleanup=False)


async def test_a_controller_with_an_inconsistent_request_batch_gives_up_the_role(tmp_path):
    """Kafka's handleIllegalState: requests left behind by a step → controller move."""
    async with Cluster(tmp_path, 2) as cluster:
        ctrl = cluster.broker(0).controller

        async def broken_step() -> None:
            ctrl.batch.add_update_metadata_request_for_brokers([1], [])
            ctrl.batch.new_batch()  # raises: the batch is not empty

        with pytest.raises(Exception, match="not empty"):
            await ctrl.put(broken_step)
        assert ctrl.batch.empty
        await eventually(lambda: cluster.active_controllers() and ctrl.epoch != 1)
        await _assert_one_controller(cluster, epoch=2)
