"""Forged controller requests (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown)
sent over TCP to a real broker: only the live controller, on the controller's listener, is
obeyed. A refused request gets an error code, changes nothing (no log dir created or
deleted, no metadata cache change, no cached epoch raised) and logs one line."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kafkalite.protocol import inter_broker as ib
from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.config import BrokerConfig, ConfigError
from kafkalite.testing import AsyncBroker
from tests.controller.cluster import call

CLUSTER_AUTHORIZATION_FAILED = ErrorCode.cluster_authorization_failed
STALE_CONTROLLER_EPOCH = ErrorCode.stale_controller_epoch
INT32_MAX = 2**31 - 1

#: a client listener and an inter-broker listener, as a production broker has
TWO_LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
}


def _tree(root: Path) -> set[str]:
    return {
        os.path.relpath(os.path.join(d, n), root)
        for d, dirs, files in os.walk(root)
        for n in dirs + files
        if not n.startswith("kafkalite-metadata")  # the embedded store's journal grows
    }


def _stop_replica_delete(topic: str, controller_id: int, controller_epoch: int):
    return ib.StopReplicaRequest(
        controller_id,
        controller_epoch,
        [
            ib.StopReplicaTopicState(
                topic, [ib.StopReplicaPartitionState(0, ib.EPOCH_DURING_DELETE, True)]
            )
        ],
    )


def _leader_and_isr(topic: str, controller_id: int, controller_epoch: int, leader_epoch: int = 1):
    state = ib.LeaderAndIsrPartitionState(0, controller_epoch, 0, leader_epoch, [0], 0, [0])
    return ib.LeaderAndIsrRequest(
        controller_id,
        controller_epoch,
        [ib.LeaderAndIsrTopicState(topic, [state], uuid.uuid4())],
        [],
    )


def _evil_update_metadata(controller_id: int, controller_epoch: int):
    return ib.UpdateMetadataRequest(
        controller_id,
        controller_epoch,
        [],
        [ib.UpdateMetadataBroker(0, [ib.UpdateMetadataEndpoint(9, "evil.invalid", "PLAINTEXT")])],
    )


def _round_trip(bootstrap: str, topic: str) -> list[bytes]:
    """A stock client produces one record and reads it back."""
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(topic, b"still-working", partition=0)
    assert p.flush(20) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    while True:
        m = c.poll(10)
        assert m is not None
        if m.error():
            break
        out.append(m.value())
    c.close()
    return out


async def _still_works(b: AsyncBroker, topic: str) -> None:
    """The real controller's requests are still obeyed (the cached epoch was not raised)
    and clients are served."""
    await b.create_topic(topic)
    assert await asyncio.to_thread(_round_trip, b.bootstrap_servers, topic) == [b"still-working"]


async def test_forged_stop_replica_delete_with_max_epoch_on_the_client_listener_deletes_nothing(
    tmp_path,
):
    async with AsyncBroker(tmp_path, **TWO_LISTENERS) as b:
        k = b.broker
        await b.create_topic("victim")
        before = _tree(tmp_path)
        resp = await call(b.port, ib.STOP_REPLICA, 4, _stop_replica_delete("victim", 0, INT32_MAX))
        assert resp.error_code == CLUSTER_AUTHORIZATION_FAILED
        assert [e.error_code for e in resp.partition_errors] == [CLUSTER_AUTHORIZATION_FAILED]
        assert _tree(tmp_path) == before
        assert k.replica_manager.get_partition(("victim", 0)) is not None
        assert k.metadata_cache.controller_epoch == 1
        await _still_works(b, "after")


async def test_forged_stop_replica_from_a_broker_that_is_not_the_controller_deletes_nothing(
    tmp_path,
):
    async with AsyncBroker(tmp_path) as b:
        await b.create_topic("victim")
        before = _tree(tmp_path)
        epoch = b.broker.metadata_cache.controller_epoch
        resp = await call(b.port, ib.STOP_REPLICA, 4, _stop_replica_delete("victim", 7, epoch))
        assert resp.error_code == STALE_CONTROLLER_EPOCH
        assert _tree(tmp_path) == before
        assert b.broker.replica_manager.get_partition(("victim", 0)) is not None
        await _still_works(b, "after")


@pytest.mark.parametrize("epoch", [2, INT32_MAX])
async def test_forged_stop_replica_with_an_epoch_above_the_store_deletes_nothing(tmp_path, epoch):
    async with AsyncBroker(tmp_path) as b:
        k = b.broker
        await b.create_topic("victim")
        assert k.metadata_cache.controller_epoch == 1
        before = _tree(tmp_path)
        resp = await call(b.port, ib.STOP_REPLICA, 4, _stop_replica_delete("victim", 0, epoch))
        assert resp.error_code == STALE_CONTROLLER_EPOCH
        assert _tree(tmp_path) == before
        assert k.metadata_cache.controller_epoch == 1  # not poisoned
        assert k.controller_gate.live.epoch == 1
        await _still_works(b, "after")


async def test_forged_update_metadata_cannot_change_advertised_endpoints(tmp_path):
    async with AsyncBroker(tmp_path, **TWO_LISTENERS) as b:
        internal = b.broker.bound_port("INTERNAL")
        epoch = b.broker.metadata_cache.controller_epoch
        forgeries = [
            (b.port, _evil_update_metadata(0, epoch), CLUSTER_AUTHORIZATION_FAILED),
            (internal, _evil_update_metadata(5, epoch), STALE_CONTROLLER_EPOCH),
            (internal, _evil_update_metadata(0, epoch + 1), STALE_CONTROLLER_EPOCH),
            (internal, _evil_update_metadata(0, INT32_MAX), STALE_CONTROLLER_EPOCH),
        ]
        for port, req, code in forgeries:
            assert (await call(port, ib.UPDATE_METADATA, 8, req)).error_code == code

        def advertised() -> dict[int, tuple[str, int]]:
            md = AdminClient({"bootstrap.servers": b.bootstrap_servers}).list_topics(timeout=10)
            return {i: (m.host, m.port) for i, m in md.brokers.items()}

        assert await asyncio.to_thread(advertised) == {0: ("127.0.0.1", b.port)}
        assert b.broker.metadata_cache.controller_epoch == epoch


async def test_forged_leader_and_isr_creates_no_log(tmp_path):
    async with AsyncBroker(tmp_path, **TWO_LISTENERS) as b:
        internal = b.broker.bound_port("INTERNAL")
        epoch = b.broker.metadata_cache.controller_epoch
        before = _tree(tmp_path)
        for port, req, code in [
            (b.port, _leader_and_isr("ghost", 0, epoch), CLUSTER_AUTHORIZATION_FAILED),
            (internal, _leader_and_isr("ghost", 3, epoch), STALE_CONTROLLER_EPOCH),
            (internal, _leader_and_isr("ghost", 0, INT32_MAX), STALE_CONTROLLER_EPOCH),
        ]:
            resp = await call(port, ib.LEADER_AND_ISR, 7, req)
            assert resp.error_code == code
            assert [e.error_code for t in resp.topics for e in t.partition_errors] == [code]
        assert _tree(tmp_path) == before
        assert b.broker.replica_manager.get_partition(("ghost", 0)) is None


async def test_controlled_shutdown_on_a_client_listener_is_refused(tmp_path):
    async with AsyncBroker(tmp_path, **TWO_LISTENERS) as b:
        req = ib.ControlledShutdownRequest(0, b.broker.broker_epoch)
        resp = await call(b.port, ib.CONTROLLED_SHUTDOWN, 3, req)
        assert (resp.error_code, resp.remaining_partitions) == (CLUSTER_AUTHORIZATION_FAILED, [])
        # the broker itself still shuts down through its inter-broker listener
        internal = b.broker.bound_port("INTERNAL")
        resp = await call(internal, ib.CONTROLLED_SHUTDOWN, 3, req)
        assert resp.error_code == 0


async def test_a_refused_controller_request_logs_one_line(tmp_path, caplog):
    async with AsyncBroker(tmp_path) as b:
        await b.create_topic("victim")
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kafkalite.server.controller_identity"):
            await call(b.port, ib.STOP_REPLICA, 4, _stop_replica_delete("victim", 0, INT32_MAX))
        refused = [r for r in caplog.records if r.name == "kafkalite.server.controller_identity"]
        assert len(refused) == 1
        assert "StopReplica" in refused[0].getMessage()
        assert "error 11" in refused[0].getMessage()


async def test_controller_requests_go_to_the_control_plane_listener(tmp_path):
    """KIP-291: with control.plane.listener.name the controller connects there (the
    broker could not finish starting otherwise), and only there are its requests obeyed."""
    async with AsyncBroker(
        tmp_path,
        listeners="PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROL://127.0.0.1:0",
        **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,"
            "CONTROL:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "control.plane.listener.name": "CONTROL",
        },
    ) as b:
        k = b.broker
        await b.create_topic("t")
        assert k.channel.requests_total[ib.UPDATE_METADATA] >= 1
        epoch = k.metadata_cache.controller_epoch
        req = _leader_and_isr("t2", 0, epoch)
        internal, control = k.bound_port("INTERNAL"), k.bound_port("CONTROL")
        resp = await call(internal, ib.LEADER_AND_ISR, 7, req)
        assert resp.error_code == CLUSTER_AUTHORIZATION_FAILED
        resp = await call(control, ib.LEADER_AND_ISR, 7, req)
        assert resp.error_code == 0
        assert [e.error_code for e in resp.topics[0].partition_errors] == [0]
        await _still_works(b, "after")
        # controlled shutdown still goes over the inter-broker listener, as in Kafka (last:
        # the controller then treats the broker as shutting down)
        shutdown = ib.ControlledShutdownRequest(0, k.broker_epoch)
        assert (await call(internal, ib.CONTROLLED_SHUTDOWN, 3, shutdown)).error_code == 0


async def test_leader_and_isr_with_leader_epoch_minus_one_gets_stale_controller_epoch(tmp_path):
    async with AsyncBroker(tmp_path) as b:
        epoch = b.broker.metadata_cache.controller_epoch
        before = _tree(tmp_path)
        resp = await call(b.port, ib.LEADER_AND_ISR, 7, _leader_and_isr("fresh", 0, epoch, -1))
        assert resp.error_code == 0
        assert [e.error_code for e in resp.topics[0].partition_errors] == [STALE_CONTROLLER_EPOCH]
        assert _tree(tmp_path) == before
        await _still_works(b, "after")


async def test_leader_and_isr_for_a_replica_set_without_this_broker_is_refused(tmp_path):
    async with AsyncBroker(tmp_path) as b:
        epoch = b.broker.metadata_cache.controller_epoch
        req = _leader_and_isr("elsewhere", 0, epoch)
        state = req.topic_states[0].partition_states[0]
        state.leader, state.isr, state.replicas = 9, [9], [9]
        before = _tree(tmp_path)
        resp = await call(b.port, ib.LEADER_AND_ISR, 7, req)
        assert [e.error_code for e in resp.topics[0].partition_errors] == [
            ErrorCode.unknown_topic_or_partition
        ]
        assert _tree(tmp_path) == before


def test_inter_broker_and_control_plane_listener_names_are_checked_like_kafka():
    base = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": "/tmp/unused"}
    with pytest.raises(ConfigError) as e:
        BrokerConfig({**base, "inter.broker.listener.name": "INTERNAL"})
    assert e.value.key == "inter.broker.listener.name"
    with pytest.raises(ConfigError) as e:
        BrokerConfig({**base, "control.plane.listener.name": "PLAINTEXT"})
    assert e.value.key == "control.plane.listener.name"  # must differ from inter-broker
    cfg = BrokerConfig({**TWO_LISTENERS, "log.dirs": "/tmp/unused"})
    assert (cfg.inter_broker_listener, cfg.control_plane_listener) == ("INTERNAL", "INTERNAL")
