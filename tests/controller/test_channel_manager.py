"""ControllerChannelManager against real brokers: one ordered queue per broker,
retries while a broker is unreachable, removal and re-registration."""

from __future__ import annotations

import asyncio
import logging
import socket
import types
from typing import Any

from kafkalite.common.types import Endpoint
from kafkalite.controller.channel_manager import (
    ControllerChannelManager,
    _metadata_changes,
    update_metadata_request,
)
from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.kafka_zk_client import BrokerInfo
from kafkalite.protocol import inter_broker as ib
from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing import AsyncBroker
from tests.controller.cluster import eventually


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _broker(broker_id: int, port: int, epoch: int) -> BrokerInfo:
    return BrokerInfo(broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", port),), epoch)


async def _registered(k: Any, epoch: int) -> BrokerInfo:
    """The broker as its /brokers/ids/<id> registration describes it."""
    raw, _ = await k.store.get(f"{zk_paths.BROKER_IDS}/{k.broker_id}")
    return BrokerInfo.from_registration(k.broker_id, zk_data.BrokerRegistration.decode(raw), epoch)


def _stop(topic: str) -> ib.StopReplicaRequest:
    # harmless on any broker: a partition it does not host, not deleted
    return ib.StopReplicaRequest(
        9, 0, [ib.StopReplicaTopicState(topic, [ib.StopReplicaPartitionState(0)])]
    )


async def test_requests_to_an_unreachable_broker_are_retried_in_order(tmp_path):
    port = _free_port()
    manager = ControllerChannelManager(9, retry_backoff_ms=50)
    manager.update_brokers({0: _broker(0, port, -1)})
    answered: list[tuple[int, str]] = []

    def record(broker_id: int, resp: ib.StopReplicaResponse) -> None:
        answered.extend((broker_id, e.topic_name) for e in resp.partition_errors)

    try:
        for name in ("first", "second", "third"):
            assert manager.send_request(0, ib.STOP_REPLICA, 4, _stop(name), record)
        await asyncio.sleep(0.3)  # several attempts at a closed port
        assert answered == []
        assert manager.queue_size(0) == 2  # "first" is being retried at the head
        async with AsyncBroker(tmp_path, listeners=f"PLAINTEXT://127.0.0.1:{port}") as b:
            # the secret comes into being with the broker's store; senders sign each attempt
            manager.secret = b.broker.inter_broker_secret
            await eventually(lambda: len(answered) == 3)
            assert answered == [(0, "first"), (0, "second"), (0, "third")]
    finally:
        await manager.shutdown()


async def test_a_dead_broker_is_removed_with_its_queue():
    manager = ControllerChannelManager(9)
    manager.update_brokers({3: _broker(3, _free_port(), 10)})
    assert manager.send_request(3, ib.STOP_REPLICA, 4, _stop("t"))
    assert manager.broker_ids == [3] and manager.node(3).epoch == 10
    manager.update_brokers({})
    assert manager.broker_ids == []
    assert not manager.send_request(3, ib.STOP_REPLICA, 4, _stop("t"))
    await asyncio.wait_for(manager.shutdown(), 5)


async def test_requests_carry_the_broker_epoch_the_controller_knows(tmp_path):
    async with AsyncBroker(tmp_path) as b:
        k = b.broker
        epoch = k.metadata_cache.controller_epoch
        extra = BrokerInfo(42, (Endpoint("PLAINTEXT", "10.0.0.42", 9092),), -1)
        live = [await _registered(k, k.broker_epoch), extra]
        manager = ControllerChannelManager(k.broker_id, secret=k.inter_broker_secret)
        try:
            # an earlier incarnation's epoch: the broker refuses, its cache is unchanged
            manager.update_brokers({k.broker_id: await _registered(k, k.broker_epoch - 1)})
            await manager.update_metadata(k.broker_id, k.broker_id, epoch, [], live, [])
            await eventually(lambda: manager.queue_size(k.broker_id) == 0)
            await asyncio.sleep(0.05)
            assert 42 not in k.metadata_cache.brokers

            # re-registration: a new sender with the current epoch is accepted
            manager.update_brokers({k.broker_id: live[0]})
            assert manager.node(k.broker_id).epoch == k.broker_epoch
            await manager.update_metadata(k.broker_id, k.broker_id, epoch, [], live, [])
            await eventually(lambda: 42 in k.metadata_cache.brokers)
        finally:
            await manager.shutdown()


async def test_stale_broker_epoch_is_reported_to_a_callback(tmp_path):
    async with AsyncBroker(tmp_path) as b:
        k = b.broker
        manager = ControllerChannelManager(k.broker_id, secret=k.inter_broker_secret)
        got: list[int] = []
        try:
            manager.update_brokers({k.broker_id: await _registered(k, 1)})
            req = ib.UpdateMetadataRequest(k.broker_id, 1, [], [], broker_epoch=1)
            manager.send_request(
                k.broker_id, ib.UPDATE_METADATA, 8, req, lambda _b, r: got.append(r.error_code)
            )
            await eventually(lambda: got)
            assert got == [ErrorCode.stale_broker_epoch]
        finally:
            await manager.shutdown()


async def test_a_controller_without_the_clusters_secret_is_refused_and_says_so(tmp_path, caplog):
    """A controller on another metadata store (another secret) is not obeyed, and its log
    names the likely cause instead of the broker silently ignoring it."""
    async with AsyncBroker(tmp_path) as b:
        k = b.broker
        epoch = k.metadata_cache.controller_epoch
        manager = ControllerChannelManager(k.broker_id, secret=bytes(32))
        got: list[int] = []
        live = [await _registered(k, k.broker_epoch), BrokerInfo(42, (), -1)]
        try:
            manager.update_brokers({k.broker_id: live[0]})
            req = update_metadata_request(k.broker_id, epoch, k.broker_epoch, [], live)
            with caplog.at_level(logging.WARNING, logger="kafkalite.controller.channel_manager"):
                manager.send_request(
                    k.broker_id, ib.UPDATE_METADATA, 8, req, lambda _b, r: got.append(r.error_code)
                )
                await eventually(lambda: got)
            assert got == [ErrorCode.cluster_authorization_failed]
            assert 42 not in k.metadata_cache.brokers
            assert any("inter-broker secret" in r.getMessage() for r in caplog.records)
            # the same request signed with the cluster's secret is obeyed
            manager.secret = k.inter_broker_secret
            await manager.update_metadata(k.broker_id, k.broker_id, epoch, [], live, [])
            await eventually(lambda: 42 in k.metadata_cache.brokers)
        finally:
            await manager.shutdown()


def _part(p: int, leader: int, epoch: int = 0) -> ib.UpdateMetadataPartitionState:
    return ib.UpdateMetadataPartitionState(p, 1, leader, epoch, [leader], epoch, [leader])


def test_update_metadata_carries_only_what_the_broker_incarnation_lacks():
    sender = types.SimpleNamespace(metadata_sent={}, metadata_live=None)
    live = [BrokerInfo(1, (), -1), BrokerInfo(2, (), -1)]
    states = [ib.UpdateMetadataTopicState("a", [_part(0, 1), _part(1, 2)])]
    assert _metadata_changes(sender, states, live, []) == states  # first: everything
    assert _metadata_changes(sender, states, live, []) == []
    moved = [ib.UpdateMetadataTopicState("a", [_part(0, 2, epoch=1), _part(1, 2)])]
    assert _metadata_changes(sender, moved, live, []) == [
        ib.UpdateMetadataTopicState("a", [_part(0, 2, epoch=1)])
    ]
    # the live set changed: offline replicas may have, so everything again
    assert _metadata_changes(sender, moved, live[:1], []) == moved
    # partitions of deleted topics always go (as leader -2) and are forgotten
    assert _metadata_changes(sender, moved, live[:1], ["a"]) == moved
    assert sender.metadata_sent == {}
