"""Metadata-session expiry (seed 002 §2, #42): a broker re-registers; a controller
resigns, sends nothing more with its old epoch, and rejoins the election."""

from __future__ import annotations

import asyncio

from kafkalite.metadata import zk_paths
from kafkalite.metadata.embedded_store import EmbeddedStore
from tests.controller.cluster import Cluster, eventually


async def _expire(cluster: Cluster, i: int) -> None:
    store = cluster.broker(i).store
    await store.expire()  # type: ignore[attr-defined]  # both backends can


async def test_a_broker_whose_session_expired_registers_again(tmp_path, backend):
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [2, 1]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 2)
        b2 = cluster.broker(2)
        old_epoch = b2.broker_epoch
        await _expire(cluster, 2)
        await eventually(lambda: b2.broker_epoch != old_epoch)
        stat = await cluster.admin.exists(zk_paths.broker_path(2))
        assert stat is not None and stat.czxid == b2.broker_epoch > old_epoch
        ctrl = cluster.controller().controller
        # the controller saw a new incarnation of broker 2 and talks to it
        await eventually(
            lambda: (
                (info := ctrl.ctx.live_brokers.get(2)) is not None and info.epoch == b2.broker_epoch
            )
        )
        await eventually(lambda: all(2 in b.metadata_cache.brokers for b in cluster.live))
        await eventually(lambda: cluster.all_see("t", 0, lambda m: m.leader in (1, 2)))


async def test_a_controller_whose_session_expired_resigns_and_follows(tmp_path, backend):
    """#42 with the session expired by the store (both backends)."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 1)
        old = cluster.broker(0).controller
        await _expire(cluster, 0)
        await eventually(lambda: old.event_manager.processed.get("Expire", 0) == 1)

        async def reelected() -> bool:
            actives = cluster.active_controllers()
            return (
                await cluster.controller_epoch_in_store() == 2
                and len(actives) == 1
                and cluster.broker(actives[0]).controller.epoch == 2
            )

        await eventually(reelected)
        new = await cluster.wait_for_controller()
        # whoever won, there is exactly one active controller and broker 0 is registered
        assert cluster.active_controllers() == [new]
        assert await cluster.admin.exists(zk_paths.broker_path(0)) is not None
        for i in range(3):
            cluster.received[i].clear()
        await cluster.create_topic_znode("after", {0: [0, 1, 2]})
        await cluster.wait_state("after", 0, lambda s: s.leader == 0)
        await eventually(lambda: cluster.all_see("after", 0, lambda m: m.leader == 0))
        sent = [r for i in range(3) for r in cluster.received[i]]
        assert sent and {r.controller_epoch for r in sent} == {2}


async def test_a_partitioned_controller_sends_nothing_with_its_old_epoch(tmp_path):
    """#42: frozen past its session timeout; on reconnect it resigns before doing anything."""
    async with Cluster(tmp_path, 3, session_timeout_ms=800) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 2]})
        await cluster.wait_state("t", 0, lambda s: s.leader == 1)
        old = cluster.broker(0)
        store = old.store
        assert isinstance(store, EmbeddedStore)
        cluster.partition(0)
        new = await cluster.wait_for_controller(not_=0)
        for i in range(3):
            cluster.received[i].clear()
        # changes the old controller would react to, had it kept its watches
        await cluster.create_topic_znode("while_away", {0: [1]})
        await cluster.wait_state("while_away", 0, lambda s: s.leader == 1)
        topic_changes = old.controller.event_manager.processed.get("TopicChange", 0)
        store.resume()
        cluster.partitioned.discard(0)
        await eventually(lambda: old.controller.event_manager.processed.get("Expire", 0) == 1)
        await eventually(lambda: 0 in cluster.controller().controller.ctx.live_brokers)
        assert not old.controller.is_active and old.controller.ctx.epoch == 0
        await cluster.create_topic_znode("later", {0: [0]})
        await cluster.wait_state("later", 0, lambda s: s.leader == 0)
        await asyncio.sleep(0.2)
        # its old listeners are gone: it handled no topic change, and nobody got epoch 1
        assert old.controller.event_manager.processed.get("TopicChange", 0) == topic_changes
        assert all(r.controller_epoch == 2 for i in range(3) for r in cluster.received[i])
        assert cluster.active_controllers() == [new]
