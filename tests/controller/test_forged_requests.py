"""Controller requests are obeyed only from the live controller per the metadata store,
on the embedded store and on a real ZooKeeper: a forged request (another broker's id, an
epoch the store does not hold) deletes nothing, while the real controller, also after a
failover the brokers had not heard of, is obeyed."""

from __future__ import annotations

from kafkalite.protocol import inter_broker as ib
from kafkalite.protocol.errors import ErrorCode
from tests.controller.cluster import Cluster, call, eventually

STALE_CONTROLLER_EPOCH = ErrorCode.stale_controller_epoch


def _delete(topic: str, controller_id: int, epoch: int) -> ib.StopReplicaRequest:
    return ib.StopReplicaRequest(
        controller_id,
        epoch,
        [
            ib.StopReplicaTopicState(
                topic, [ib.StopReplicaPartitionState(0, ib.EPOCH_DURING_DELETE, True)]
            )
        ],
    )


async def test_a_broker_claiming_to_be_controller_is_refused(tmp_path, backend):
    async with Cluster(tmp_path, 2, zookeeper_connect=backend) as cluster:
        await cluster.nodes[0].create_topic("t", assignments={0: [1]})
        target = cluster.broker(1)
        await eventually(lambda: target.replica_manager.get_partition(("t", 0)) is not None)
        epoch = target.metadata_cache.controller_epoch
        log_dir = target.log_manager.log_dir_of("t", 0)
        for forged in (_delete("t", 1, epoch), _delete("t", 1, epoch + 1)):
            resp = await call(target.bound_port(), ib.STOP_REPLICA, 4, forged)
            assert resp.error_code == STALE_CONTROLLER_EPOCH
        assert target.replica_manager.get_partition(("t", 0)) is not None
        assert log_dir is not None and (log_dir / "t-0").is_dir()
        assert target.metadata_cache.controller_epoch == epoch


async def test_after_a_failover_only_the_new_controller_is_obeyed(tmp_path, backend):
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        old, old_epoch = 0, cluster.broker(0).metadata_cache.controller_epoch
        await cluster.nodes[0].create_topic("t", assignments={0: [2]})
        await cluster.kill(old)
        new = await cluster.wait_for_controller(not_=old)
        new_epoch = await cluster.controller_epoch_in_store()
        assert new_epoch == old_epoch + 1
        target = cluster.broker(2)
        for forged in (
            _delete("t", old, old_epoch),  # the dead controller, as a zombie would send
            _delete("t", new, old_epoch),
            _delete("t", old, new_epoch),
            _delete("t", new, new_epoch + 1),
        ):
            resp = await call(target.bound_port(), ib.STOP_REPLICA, 4, forged)
            assert resp.error_code == STALE_CONTROLLER_EPOCH
        assert target.replica_manager.get_partition(("t", 0)) is not None
        # the survivor followed the new controller (a store re-read: its epoch was new)
        assert target.controller_gate.live.epoch == new_epoch
        # the new controller's requests still create topics on the survivors
        await cluster.nodes[new].create_topic("after", assignments={0: [2]})
        await eventually(lambda: target.replica_manager.get_partition(("after", 0)) is not None)
