"""Controller requests are obeyed only from the live controller per the metadata store,
on the embedded store and on a real ZooKeeper: a forged request (no authenticator, or
signed but with another broker's id or an epoch the store does not hold) deletes nothing,
while the real controller, also after a failover the brokers had not heard of, after a
restart, or when the brokers first started together, is obeyed."""

from __future__ import annotations

from kafkalite.metadata.inter_broker_secret import INTER_BROKER_SECRET_PATH, InterBrokerSecret
from kafkalite.protocol import inter_broker as ib
from kafkalite.protocol.errors import ErrorCode
from tests.controller.cluster import Cluster, call, eventually

STALE_CONTROLLER_EPOCH = ErrorCode.stale_controller_epoch
CLUSTER_AUTHORIZATION_FAILED = ErrorCode.cluster_authorization_failed


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
            resp = await call(target.bound_port(), ib.STOP_REPLICA, 4, forged, signed_for=target)
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
            resp = await call(target.bound_port(), ib.STOP_REPLICA, 4, forged, signed_for=target)
            assert resp.error_code == STALE_CONTROLLER_EPOCH
        assert target.replica_manager.get_partition(("t", 0)) is not None
        # the survivor followed the new controller (a store re-read: its epoch was new)
        assert target.controller_gate.live.epoch == new_epoch
        # the new controller's requests still create topics on the survivors
        await cluster.nodes[new].create_topic("after", assignments={0: [2]})
        await eventually(lambda: target.replica_manager.get_partition(("after", 0)) is not None)


async def test_the_live_controllers_id_and_epoch_without_the_authenticator_delete_nothing(
    tmp_path, backend
):
    async with Cluster(tmp_path, 2, zookeeper_connect=backend) as cluster:
        await cluster.nodes[0].create_topic("t", assignments={0: [1]})
        target = cluster.broker(1)
        await eventually(lambda: target.replica_manager.get_partition(("t", 0)) is not None)
        controller = await cluster.controller_in_store()
        epoch = await cluster.controller_epoch_in_store()
        forged = _delete("t", controller, epoch)
        forged.broker_epoch = target.broker_epoch
        resp = await call(target.bound_port(), ib.STOP_REPLICA, 4, forged)
        assert resp.error_code == CLUSTER_AUTHORIZATION_FAILED
        # signed for another broker of the cluster: not valid for this one either
        resp = await call(
            target.bound_port(), ib.STOP_REPLICA, 4, forged, signed_for=cluster.broker(0)
        )
        assert resp.error_code == CLUSTER_AUTHORIZATION_FAILED
        log_dir = target.log_manager.log_dir_of("t", 0)
        assert log_dir is not None and (log_dir / "t-0").is_dir()
        # the real controller is still obeyed
        await cluster.nodes[0].create_topic("after", assignments={0: [1]})
        await eventually(lambda: target.replica_manager.get_partition(("after", 0)) is not None)


async def test_brokers_started_together_on_a_fresh_store_agree_on_the_secret(tmp_path, backend):
    cluster = Cluster(tmp_path, 3, zookeeper_connect=backend)
    try:
        await cluster.start(concurrently=True)
        secrets = {cluster.broker(i).inter_broker_secret for i in range(3)}
        assert len(secrets) == 1
        raw = await cluster.znode(INTER_BROKER_SECRET_PATH)
        assert InterBrokerSecret.decode(raw).key in secrets
        # whichever won the election, every broker obeys it
        controller = await cluster.wait_for_controller()
        await cluster.nodes[controller].create_topic("t", replication_factor=3)
        await eventually(
            lambda: all(b.replica_manager.get_partition(("t", 0)) is not None for b in cluster.live)
        )
    finally:
        await cluster.stop()


async def test_restarted_brokers_keep_the_secret_and_obey_the_new_controller(tmp_path, backend):
    async with Cluster(tmp_path, 2, zookeeper_connect=backend) as cluster:
        secret = cluster.broker(0).inter_broker_secret
        await cluster.kill(0)  # the controller
        assert await cluster.wait_for_controller(not_=0) == 1
        restarted = await cluster.restart(0)
        assert restarted.inter_broker_secret == secret
        await eventually(lambda: restarted.metadata_cache.controller_id == 1)
        await cluster.nodes[1].create_topic("t", assignments={0: [0]})
        await eventually(lambda: restarted.replica_manager.get_partition(("t", 0)) is not None)
        # and the restarted broker's ControlledShutdown is accepted by the new controller
        ctrl = cluster.broker(1).controller
        await cluster.shutdown(0)
        assert ctrl.event_manager.processed.get("ControlledShutdown") == 1
