"""Controller election and failover with several brokers in one process.

The brokers share an embedded metadata store (or a real ZooKeeper) and send each
other LeaderAndIsr / UpdateMetadata over TCP. Checks go through the store and
through Metadata.controller_id as librdkafka sees it.
"""

from __future__ import annotations

import pytest

from kafkalite.protocol import inter_broker as ib
from kafkalite.protocol.errors import ErrorCode
from tests.controller.cluster import Cluster, call, client_controller_id, eventually


async def _assert_one_controller(cluster: Cluster, epoch: int) -> int:
    [controller] = await eventually(cluster.active_controllers)
    assert await cluster.controller_in_store() == controller
    assert await cluster.controller_epoch_in_store() == epoch
    # every live broker learnt it from UpdateMetadata, with the same epoch
    await eventually(
        lambda: all(
            b.metadata_cache.controller_id == controller
            and b.metadata_cache.controller_epoch == epoch
            for b in cluster.live
        )
    )
    return controller


async def _fail_over(cluster: Cluster, kill) -> None:
    old = await _assert_one_controller(cluster, epoch=1)
    assert await client_controller_id(cluster.bootstrap()) == old

    await kill(old)

    new = await eventually(
        lambda: [c for c in cluster.active_controllers() if c != old], timeout=10
    )
    assert len(new) == 1
    assert await _assert_one_controller(cluster, epoch=2) == new[0]
    survivors = [b for b in cluster.live if b.broker_id != old]
    await eventually(lambda: all(old not in b.metadata_cache.brokers for b in survivors))
    assert await client_controller_id(cluster.bootstrap(survivors)) == new[0]

    # the old controller's epoch is now stale on the wire
    resp = await call(
        survivors[0].bound_port(),
        ib.UPDATE_METADATA,
        8,
        ib.UpdateMetadataRequest(old, 1, [], []),
    )
    assert resp.error_code == ErrorCode.stale_controller_epoch


async def test_killing_the_controller_elects_another(tmp_path):
    async with Cluster(tmp_path, 3) as cluster:
        await cluster.nodes[0].create_topic("t", partitions=3, replication_factor=3)
        await _fail_over(cluster, cluster.kill)
        # the new controller moved leadership off the dead broker
        await eventually(
            lambda: all(
                p.leader not in (0, -1)
                for p in cluster.broker(1).metadata_cache.get_topic("t").partitions.values()
            )
        )


async def test_controller_session_expiry_elects_another_within_the_session_timeout(tmp_path):
    async with Cluster(tmp_path, 3, session_timeout_ms=1000) as cluster:

        async def partition(i: int) -> None:
            cluster.partition(i)

        await _fail_over(cluster, partition)


async def test_restarted_old_controller_does_not_take_control_back(tmp_path):
    async with Cluster(tmp_path, 2) as cluster:
        assert cluster.active_controllers() == [0]
        await cluster.kill(0)
        await eventually(lambda: cluster.active_controllers() == [1])
        await cluster.nodes[0].start()
        cluster.stopped.discard(0)
        await eventually(lambda: 0 in cluster.broker(1).metadata_cache.brokers)
        assert cluster.active_controllers() == [1]
        assert await cluster.controller_epoch_in_store() == 2
        assert cluster.broker(0).metadata_cache.controller_id == 1


@pytest.mark.timeout(120)
async def test_failover_on_a_real_zookeeper(tmp_path, zookeeper_connect):
    async with Cluster(tmp_path, 3, zookeeper_connect=zookeeper_connect) as cluster:
        await _fail_over(cluster, cluster.kill)
