"""The broker side of LeaderAndIsr / StopReplica / UpdateMetadata / ControlledShutdown,
on the wire against real brokers: fencing by controller, broker and leader epochs."""

from __future__ import annotations

import asyncio
import struct
import uuid
from typing import Any

from kafkalite.protocol import inter_broker as ib
from kafkalite.protocol import messages
from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing import AsyncBroker
from tests.controller.cluster import Cluster, call, eventually
from tests.server.raw_client import RawClient

STALE_CONTROLLER_EPOCH = ErrorCode.stale_controller_epoch
STALE_BROKER_EPOCH = ErrorCode.stale_broker_epoch
CLUSTER_AUTHORIZATION_FAILED = ErrorCode.cluster_authorization_failed


def _lair(topic: str, topic_id: uuid.UUID, controller_epoch: int, leader_epoch: int, **kw):
    state = ib.LeaderAndIsrPartitionState(
        partition_index=0,
        controller_epoch=controller_epoch,
        leader=0,
        leader_epoch=leader_epoch,
        isr=[0],
        partition_epoch=leader_epoch,
        replicas=[0],
    )
    return ib.LeaderAndIsrRequest(
        0, controller_epoch, [ib.LeaderAndIsrTopicState(topic, [state], topic_id)], [], **kw
    )


async def _signed(b: AsyncBroker, api_key: int, version: int, request: Any) -> Any:
    """A request as the controller signs it for ``b`` (so only the fencing under test
    can refuse it)."""
    return await call(b.port, api_key, version, request, signed_for=b.broker)


def _partition_errors(resp: ib.LeaderAndIsrResponse) -> list[int]:
    return [e.error_code for t in resp.topics for e in t.partition_errors]


async def test_a_lone_broker_is_its_own_controller_over_tcp(tmp_path):
    async with AsyncBroker(tmp_path) as b:
        k = b.broker
        await b.create_topic("t", partitions=2)
        assert k.controller.is_active and k.metadata_cache.controller_id == k.broker_id
        assert k.broker_epoch > 0
        # LeaderAndIsr and UpdateMetadata reached the broker through its listener
        assert k.channel.requests_total[ib.LEADER_AND_ISR] >= 1
        assert k.channel.requests_total[ib.UPDATE_METADATA] >= 1
        topic = k.metadata_cache.get_topic("t")
        assert [p.leader for p in topic.partitions.values()] == [k.broker_id] * 2
        assert k.replica_manager.get_partition(("t", 1)).leader_id == k.broker_id


async def test_update_metadata_from_a_stale_controller_epoch_is_rejected(tmp_path):
    async with AsyncBroker(tmp_path) as b:
        k = b.broker
        epoch = k.metadata_cache.controller_epoch
        assert epoch == 1
        ghost = ib.UpdateMetadataTopicState(
            "ghost",
            [ib.UpdateMetadataPartitionState(0, 0, 7, 0, [7], 0, [7])],
            uuid.uuid4(),
        )
        for version in range(9):
            flexible = ib.is_flexible(ib.UPDATE_METADATA, version)
            resp = await call(
                b.port,
                ib.UPDATE_METADATA,
                version,
                ib.UpdateMetadataRequest(7, epoch - 1, [ghost], []),
                signed_for=k if flexible else None,
            )
            # v0-5 cannot carry the authenticator: refused before the epoch is looked at
            expected = STALE_CONTROLLER_EPOCH if flexible else CLUSTER_AUTHORIZATION_FAILED
            assert resp.error_code == expected, version
        assert k.metadata_cache.get_topic("ghost") is None
        assert k.metadata_cache.controller_id == k.broker_id
        assert k.metadata_cache.brokers  # the live broker list was not replaced


async def test_leader_and_isr_fencing_by_controller_and_leader_epoch(tmp_path):
    async with AsyncBroker(tmp_path) as b:
        k = b.broker
        await b.create_topic("t")
        topic_id = k.metadata_cache.get_topic("t").topic_id
        epoch = k.metadata_cache.controller_epoch
        assert k.replica_manager.get_partition(("t", 0)).leader_epoch == 0

        resp = await _signed(b, ib.LEADER_AND_ISR, 7, _lair("t", topic_id, epoch - 1, 5))
        assert resp.error_code == STALE_CONTROLLER_EPOCH
        assert _partition_errors(resp) == [STALE_CONTROLLER_EPOCH]

        # a leader epoch that is not newer than the broker's is ignored
        resp = await _signed(b, ib.LEADER_AND_ISR, 7, _lair("t", topic_id, epoch, 0))
        assert (resp.error_code, _partition_errors(resp)) == (0, [STALE_CONTROLLER_EPOCH])
        assert resp.topics[0].topic_id == topic_id

        resp = await _signed(b, ib.LEADER_AND_ISR, 7, _lair("t", topic_id, epoch, 1))
        assert (resp.error_code, _partition_errors(resp)) == (0, [0])
        assert k.replica_manager.get_partition(("t", 0)).leader_epoch == 1

        # v4 (no topic ids, errors by topic name) is fenced the same way
        resp = await _signed(b, ib.LEADER_AND_ISR, 4, _lair("t", topic_id, epoch, 1))
        assert [(e.topic_name, e.error_code) for e in resp.partition_errors] == [
            ("t", STALE_CONTROLLER_EPOCH)
        ]


async def test_stop_replica_fencing_and_stopping(tmp_path):
    async with AsyncBroker(tmp_path) as b:
        k = b.broker
        await b.create_topic("t", partitions=2)
        topic_id = k.metadata_cache.get_topic("t").topic_id
        epoch = k.metadata_cache.controller_epoch
        await _signed(b, ib.LEADER_AND_ISR, 7, _lair("t", topic_id, epoch, 3))

        def stop(controller_epoch: int, leader_epoch: int, partition: int = 0):
            return ib.StopReplicaRequest(
                0,
                controller_epoch,
                [
                    ib.StopReplicaTopicState(
                        "t", [ib.StopReplicaPartitionState(partition, leader_epoch)]
                    )
                ],
            )

        resp = await _signed(b, ib.STOP_REPLICA, 4, stop(epoch - 1, ib.NO_EPOCH))
        assert resp.error_code == STALE_CONTROLLER_EPOCH
        assert [e.error_code for e in resp.partition_errors] == [STALE_CONTROLLER_EPOCH]

        resp = await _signed(b, ib.STOP_REPLICA, 4, stop(epoch, 2))
        assert [e.error_code for e in resp.partition_errors] == [ErrorCode.fenced_leader_epoch]
        assert k.replica_manager.get_partition(("t", 0)) is not None

        resp = await _signed(b, ib.STOP_REPLICA, 4, stop(epoch, 3))
        assert (resp.error_code, [e.error_code for e in resp.partition_errors]) == (0, [0])
        assert k.replica_manager.get_partition(("t", 0)) is None

        # v0 and v1 cannot carry the authenticator; v2 is the oldest obeyed
        for version in (0, 1):
            req = stop(epoch, ib.NO_EPOCH, partition=1)
            resp = await call(b.port, ib.STOP_REPLICA, version, req)
            assert resp.error_code == CLUSTER_AUTHORIZATION_FAILED
            assert k.replica_manager.get_partition(("t", 1)) is not None
        resp = await _signed(b, ib.STOP_REPLICA, 2, stop(epoch, ib.NO_EPOCH, partition=1))
        assert [e.error_code for e in resp.partition_errors] == [0]
        assert k.replica_manager.get_partition(("t", 1)) is None


async def test_requests_for_an_earlier_incarnation_of_the_broker_are_rejected(tmp_path):
    async with AsyncBroker(tmp_path) as b:
        k = b.broker
        epoch = k.metadata_cache.controller_epoch
        stale = ib.UpdateMetadataRequest(0, epoch, [], [], broker_epoch=k.broker_epoch - 1)
        assert (await _signed(b, ib.UPDATE_METADATA, 8, stale)).error_code == STALE_BROKER_EPOCH
        assert k.metadata_cache.brokers  # not emptied by the rejected request
        stale.broker_epoch = -1  # "unknown", as from an old controller: accepted
        stale.live_brokers = [
            ib.UpdateMetadataBroker(
                0, [ib.UpdateMetadataEndpoint(b.port, "127.0.0.1", "PLAINTEXT")]
            )
        ]
        assert (await _signed(b, ib.UPDATE_METADATA, 8, stale)).error_code == 0
        resp = await _signed(
            b, ib.LEADER_AND_ISR, 7, _lair("x", uuid.uuid4(), epoch, 1, broker_epoch=1)
        )
        assert resp.error_code == STALE_BROKER_EPOCH


async def test_controlled_shutdown_goes_to_the_controller(tmp_path):
    async with Cluster(tmp_path, 2) as cluster:
        controller, other = cluster.broker(0), cluster.broker(1)
        assert cluster.active_controllers() == [0]
        await cluster.nodes[0].create_topic("single", partitions=2, replication_factor=1)

        resp = await call(
            other.bound_port(),
            ib.CONTROLLED_SHUTDOWN,
            3,
            ib.ControlledShutdownRequest(1),
            signed_for=other,
        )
        assert resp.error_code == ErrorCode.not_controller

        resp = await call(
            controller.bound_port(),
            ib.CONTROLLED_SHUTDOWN,
            3,
            ib.ControlledShutdownRequest(99),
            signed_for=controller,
        )
        assert resp.error_code == ErrorCode.broker_not_available

        stale = ib.ControlledShutdownRequest(1, other.broker_epoch - 1)
        resp = await call(
            controller.bound_port(), ib.CONTROLLED_SHUTDOWN, 3, stale, signed_for=controller
        )
        assert resp.error_code == STALE_BROKER_EPOCH

        # v0-2 cannot carry the authenticator
        for version in range(3):
            req = ib.ControlledShutdownRequest(1, other.broker_epoch)
            resp = await call(controller.bound_port(), ib.CONTROLLED_SHUTDOWN, version, req)
            assert resp.error_code == CLUSTER_AUTHORIZATION_FAILED, version
        assert 1 not in controller.controller.ctx.shutting_down_broker_ids
        # RF=1 partitions are neither moved nor reported
        req = ib.ControlledShutdownRequest(1, other.broker_epoch)
        resp = await call(
            controller.bound_port(), ib.CONTROLLED_SHUTDOWN, 3, req, signed_for=controller
        )
        assert (resp.error_code, resp.remaining_partitions) == (0, [])


async def test_api_versions_advertises_the_controller_apis(tmp_path):
    async with AsyncBroker(tmp_path) as b:

        def ask():
            c = RawClient("127.0.0.1", b.port)
            try:
                req = messages.build(
                    messages.request_type(18, 3),
                    {"client_software_name": "t", "client_software_version": "1"},
                )
                return {
                    k.api_key: (k.min_version, k.max_version) for k in c.call(18, 3, req).api_keys
                }
            finally:
                c.close()

        advertised = await asyncio.to_thread(ask)
        assert {k: advertised[k] for k in (4, 5, 6, 7)} == {
            4: (0, 7),
            5: (0, 4),
            6: (0, 8),
            7: (0, 3),
        }


async def test_a_malformed_controller_request_closes_only_that_connection(tmp_path):
    async with AsyncBroker(tmp_path) as b:
        reader, writer = await asyncio.open_connection("127.0.0.1", b.port)
        header = ib.request_header(ib.LEADER_AND_ISR, 7, 1, "bad")
        writer.write(ib.frame_with_body(header, b"\x00\x00\x00\x01\x00garbage"))
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed by the broker
        writer.close()
        # an unsupported version closes too, as for any API
        reader, writer = await asyncio.open_connection("127.0.0.1", b.port)
        writer.write(ib.frame_with_body(struct.pack(">hhih", 4, 8, 1, -1) + b"\x00", b""))
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
        # and the broker keeps serving
        resp = await _signed(b, ib.UPDATE_METADATA, 8, ib.UpdateMetadataRequest(0, 0, [], []))
        assert resp.error_code == STALE_CONTROLLER_EPOCH
        await eventually(lambda: b.broker.metadata_cache.controller_id == 0)
