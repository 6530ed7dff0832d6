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
        req = _stop_replica_delete("victim", 0, INT32_MAX)
        resp = await call(b.port, ib.STOP_REPLICA, 4, req, signed_for=k)  # even signed
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
        req = _stop_replica_delete("victim", 7, epoch)
        resp = await call(b.port, ib.STOP_REPLICA, 4, req, signed_for=b.broker)
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
        req = _stop_replica_delete("victim", 0, epoch)
        resp = await call(b.port, ib.STOP_REPLICA, 4, req, signed_for=k)
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
            resp = await call(port, ib.UPDATE_METADATA, 8, req, signed_for=b.broker)
            assert resp.error_code == code

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
            resp = await call(port, ib.LEADER_AND_ISR, 7, req, signed_for=b.broker)
            assert resp.error_code == code
            assert [e.error_code for t in resp.topics for e in t.partition_errors] == [code]
        assert _tree(tmp_path) == before
        assert b.broker.replica_manager.get_partition(("ghost", 0)) is None


async def test_controlled_shutdown_on_a_client_listener_is_refused(tmp_path):
    async with AsyncBroker(tmp_path, **TWO_LISTENERS) as b:
        req = ib.ControlledShutdownRequest(0, b.broker.broker_epoch)
        resp = await call(b.port, ib.CONTROLLED_SHUTDOWN, 3, req, signed_for=b.broker)
        assert (resp.error_code, resp.remaining_partitions) == (CLUSTER_AUTHORIZATION_FAILED, [])
        # the broker itself still shuts down through its inter-broker listener
        internal = b.broker.bound_port("INTERNAL")
        resp = await call(internal, ib.CONTROLLED_SHUTDOWN, 3, req, signed_for=b.broker)
        assert resp.error_code == 0


async def test_a_refused_controller_request_logs_one_line(tmp_path, caplog):
    async with AsyncBroker(tmp_path) as b:
        await b.create_topic("victim")
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kafkalite.server.controller_identity"):
            req = _stop_replica_delete("victim", 0, INT32_MAX)
            await call(b.port, ib.STOP_REPLICA, 4, req, signed_for=b.broker)
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
        resp = await call(internal, ib.LEADER_AND_ISR, 7, req, signed_for=k)
        assert resp.error_code == CLUSTER_AUTHORIZATION_FAILED
        resp = await call(control, ib.LEADER_AND_ISR, 7, req, signed_for=k)
        assert resp.error_code == 0
        assert [e.error_code for e in resp.topics[0].partition_errors] == [0]
        await _still_works(b, "after")
        # controlled shutdown still goes over the inter-broker listener, as in Kafka (last:
        # the controller then treats the broker as shutting down)
        shutdown = ib.ControlledShutdownRequest(0, k.broker_epoch)
        resp = await call(internal, ib.CONTROLLED_SHUTDOWN, 3, shutdown, signed_for=k)
        assert resp.error_code == 0


async def test_leader_and_isr_with_leader_epoch_minus_one_gets_stale_controller_epoch(tmp_path):
    async with AsyncBroker(tmp_path) as b:
        epoch = b.broker.metadata_cache.controller_epoch
        before = _tree(tmp_path)
        req = _leader_and_isr("fresh", 0, epoch, -1)
        resp = await call(b.port, ib.LEADER_AND_ISR, 7, req, signed_for=b.broker)
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
        resp = await call(b.port, ib.LEADER_AND_ISR, 7, req, signed_for=b.broker)
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


# ---- the authenticator: the live controller's exact id and epoch are not enough ------------


async def _exchange(port: int, api_key: int, version: int, frame: bytes):
    """Send a hand-built request frame; the decoded response."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(frame)
        await writer.drain()
        size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 10), "big")
        return ib.parse_response_frame(api_key, version, await reader.readexactly(size))[1]
    finally:
        writer.close()


def _signed_frame(api_key: int, version: int, body: bytes, mac: bytes | None) -> bytes:
    return ib.frame_with_body(ib.request_header(api_key, version, 1, "forger", mac), body)


async def test_stop_replica_delete_with_the_live_controllers_exact_id_and_epoch_but_no_authenticator_deletes_nothing(
    tmp_path,
):
    """Issue 13: on the default single listener a client reads the controller id from
    Metadata and guesses the small epoch; without the cluster's secret it is still refused."""
    async with AsyncBroker(tmp_path) as b:
        k = b.broker
        await b.create_topic("victim")
        epoch = k.metadata_cache.controller_epoch
        before = _tree(tmp_path)
        req = _stop_replica_delete("victim", k.controller.active_controller_id, epoch)
        req.broker_epoch = k.broker_epoch
        resp = await call(b.port, ib.STOP_REPLICA, 4, req)
        assert resp.error_code == CLUSTER_AUTHORIZATION_FAILED
        assert [e.error_code for e in resp.partition_errors] == [CLUSTER_AUTHORIZATION_FAILED]
        assert _tree(tmp_path) == before
        assert k.replica_manager.get_partition(("victim", 0)) is not None
        await _still_works(b, "after")


async def test_update_metadata_with_the_live_controllers_exact_id_and_epoch_but_no_authenticator_changes_no_endpoint(
    tmp_path,
):
    async with AsyncBroker(tmp_path) as b:
        epoch = b.broker.metadata_cache.controller_epoch
        resp = await call(b.port, ib.UPDATE_METADATA, 8, _evil_update_metadata(0, epoch))
        assert resp.error_code == CLUSTER_AUTHORIZATION_FAILED

        def advertised() -> dict[int, tuple[str, int]]:
            md = AdminClient({"bootstrap.servers": b.bootstrap_servers}).list_topics(timeout=10)
            return {i: (m.host, m.port) for i, m in md.brokers.items()}

        assert await asyncio.to_thread(advertised) == {0: ("127.0.0.1", b.port)}


async def test_leader_and_isr_with_the_live_controllers_exact_id_and_epoch_but_no_authenticator_creates_no_log(
    tmp_path,
):
    async with AsyncBroker(tmp_path) as b:
        epoch = b.broker.metadata_cache.controller_epoch
        before = _tree(tmp_path)
        resp = await call(b.port, ib.LEADER_AND_ISR, 7, _leader_and_isr("ghost", 0, epoch))
        assert resp.error_code == CLUSTER_AUTHORIZATION_FAILED
        assert [e.error_code for t in resp.topics for e in t.partition_errors] == [
            CLUSTER_AUTHORIZATION_FAILED
        ]
        assert _tree(tmp_path) == before
        assert b.broker.replica_manager.get_partition(("ghost", 0)) is None


async def test_controlled_shutdown_with_the_brokers_exact_id_and_epoch_but_no_authenticator_is_refused(
    tmp_path,
):
    async with AsyncBroker(tmp_path) as b:
        k = b.broker
        req = ib.ControlledShutdownRequest(k.broker_id, k.broker_epoch)
        resp = await call(b.port, ib.CONTROLLED_SHUTDOWN, 3, req)
        assert (resp.error_code, resp.remaining_partitions) == (CLUSTER_AUTHORIZATION_FAILED, [])
        assert k.broker_id not in k.controller.ctx.shutting_down_broker_ids
        await _still_works(b, "after")


async def test_a_wrong_authenticator_is_refused(tmp_path):
    """Each thing the HMAC binds: the key, the target broker, the API version, the body;
    and its length."""
    async with AsyncBroker(tmp_path) as b:
        k = b.broker
        await b.create_topic("victim")
        secret = k.inter_broker_secret
        assert secret is not None
        req = _stop_replica_delete("victim", 0, k.metadata_cache.controller_epoch)
        req.broker_epoch = k.broker_epoch
        body = ib.encode_request(ib.STOP_REPLICA, 4, req)
        harmless = ib.encode_request(ib.STOP_REPLICA, 4, _stop_replica_delete("other", 0, 1))
        macs = {
            "another secret": ib.authenticator(os.urandom(32), ib.STOP_REPLICA, 4, 0, body),
            "another broker": ib.authenticator(secret, ib.STOP_REPLICA, 4, 1, body),
            "another version": ib.authenticator(secret, ib.STOP_REPLICA, 3, 0, body),
            "another api": ib.authenticator(secret, ib.LEADER_AND_ISR, 4, 0, body),
            "another body": ib.authenticator(secret, ib.STOP_REPLICA, 4, 0, harmless),
            "truncated": ib.authenticator(secret, ib.STOP_REPLICA, 4, 0, body)[:31],
            "empty": b"",
        }
        before = _tree(tmp_path)
        for case, mac in macs.items():
            frame = _signed_frame(ib.STOP_REPLICA, 4, body, mac)
            resp = await _exchange(b.port, ib.STOP_REPLICA, 4, frame)
            assert resp.error_code == CLUSTER_AUTHORIZATION_FAILED, case
        assert _tree(tmp_path) == before
        assert k.replica_manager.get_partition(("victim", 0)) is not None
        # the right one, for contrast: the same frame layout is obeyed
        mac = ib.authenticator(secret, ib.STOP_REPLICA, 4, 0, body)
        resp = await _exchange(
            b.port, ib.STOP_REPLICA, 4, _signed_frame(ib.STOP_REPLICA, 4, body, mac)
        )
        assert (resp.error_code, [e.error_code for e in resp.partition_errors]) == (0, [0])
        assert k.replica_manager.get_partition(("victim", 0)) is None


async def test_versions_without_request_header_tags_cannot_be_authenticated_and_are_refused(
    tmp_path,
):
    async with AsyncBroker(tmp_path) as b:
        k = b.broker
        await b.create_topic("victim")
        epoch = k.metadata_cache.controller_epoch
        before = _tree(tmp_path)
        stop = _stop_replica_delete("victim", 0, epoch)
        stop.delete_partitions = True  # v0-2 say it for the whole request
        cases = [(ib.STOP_REPLICA, v, stop) for v in (0, 1)]
        cases += [(ib.LEADER_AND_ISR, v, _leader_and_isr("ghost", 0, epoch)) for v in range(4)]
        cases += [(ib.UPDATE_METADATA, v, _evil_update_metadata(0, epoch)) for v in range(6)]
        shutdown = ib.ControlledShutdownRequest(0, k.broker_epoch)
        cases += [(ib.CONTROLLED_SHUTDOWN, v, shutdown) for v in range(3)]
        for api_key, version, req in cases:
            assert not ib.is_flexible(api_key, version)
            resp = await call(b.port, api_key, version, req)
            assert resp.error_code == CLUSTER_AUTHORIZATION_FAILED, (api_key, version)
        assert _tree(tmp_path) == before
        assert k.replica_manager.get_partition(("victim", 0)) is not None
        assert k.replica_manager.get_partition(("ghost", 0)) is None
        assert k.broker_id not in k.controller.ctx.shutting_down_broker_ids
        await _still_works(b, "after")


async def test_an_unauthenticated_controller_request_logs_one_line(tmp_path, caplog):
    async with AsyncBroker(tmp_path) as b:
        epoch = b.broker.metadata_cache.controller_epoch
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kafkalite.server.controller_identity"):
            await call(b.port, ib.UPDATE_METADATA, 8, _evil_update_metadata(0, epoch))
        refused = [r for r in caplog.records if r.name == "kafkalite.server.controller_identity"]
        assert len(refused) == 1
        line = refused[0].getMessage()
        assert "UpdateMetadata" in line and "error 31" in line and "authenticator" in line


async def test_other_request_header_tags_beside_the_authenticator_are_skipped(tmp_path):
    """Kafka skips request-header tags it does not know; so does the authenticator's reader."""
    async with AsyncBroker(tmp_path) as b:
        k = b.broker
        epoch = k.metadata_cache.controller_epoch
        req = _leader_and_isr("tagged", 0, epoch)
        body = ib.encode_request(ib.LEADER_AND_ISR, 7, req)
        mac = ib.authenticator(k.inter_broker_secret, ib.LEADER_AND_ISR, 7, 0, body)
        unknown = b"\x05\x03abc"  # tag 5, 3 bytes
        tags = b"\x02" + unknown + ib.header_tagged_fields(mac)[1:]  # 2 tags, in tag order
        header = ib.request_header(ib.LEADER_AND_ISR, 7, 1, "c")[:-1] + tags
        resp = await _exchange(b.port, ib.LEADER_AND_ISR, 7, ib.frame_with_body(header, body))
        assert (
            resp.error_code,
            [e.error_code for t in resp.topics for e in t.partition_errors],
        ) == (
            0,
            [0],
        )
        assert k.replica_manager.get_partition(("tagged", 0)) is not None


async def test_an_authenticator_tag_given_twice_closes_the_connection(tmp_path):
    async with AsyncBroker(tmp_path) as b:
        k = b.broker
        body = ib.encode_request(ib.UPDATE_METADATA, 8, _evil_update_metadata(0, 1))
        mac = ib.authenticator(k.inter_broker_secret, ib.UPDATE_METADATA, 8, 0, body)
        one = ib.header_tagged_fields(mac)[1:]
        header = ib.request_header(ib.UPDATE_METADATA, 8, 1, "c")[:-1] + b"\x02" + one + one
        reader, writer = await asyncio.open_connection("127.0.0.1", b.port)
        writer.write(ib.frame_with_body(header, body))
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
        assert b.broker.metadata_cache.brokers[0].endpoints == {"PLAINTEXT": ("127.0.0.1", b.port)}
        await _still_works(b, "after")


async def test_a_restarted_broker_keeps_the_clusters_secret_and_its_controller_is_obeyed(tmp_path):
    """The embedded store persists the secret in the data dir: the restarted broker's own
    controller signs with the key the broker checks."""
    b = AsyncBroker(tmp_path)
    await b.start()
    try:
        secret = b.broker.inter_broker_secret
        await b.restart()
        assert b.broker.inter_broker_secret == secret
        await _still_works(b, "after-restart")
    finally:
        await b.stop()
