"""ControllerBrokerRequestBatch: recording, Kafka's send order, deletion marking."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkalite.common.types import Endpoint
from kafkalite.controller.controller_context import (
    ControllerContext,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
)
from kafkalite.controller.request_batch import ControllerBrokerRequestBatch, IllegalBatchStateError
from kafkalite.metadata.kafka_zk_client import BrokerInfo
from kafkalite.protocol import inter_broker as ib


class Sink:
    """Records the BrokerChannel calls the batch makes (the TCP channel is tested elsewhere)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def leader_and_isr(
        self, broker_id, controller_id, epoch, states, live, callback=None
    ) -> None:
        self.calls.append(("LeaderAndIsr", broker_id, epoch, states, live))

    async def update_metadata(self, broker_id, controller_id, epoch, states, live, deleted) -> None:
        self.calls.append(("UpdateMetadata", broker_id, epoch, states, live, deleted))

    async def stop_replica(
        self, broker_id, controller_id, epoch, partitions, delete, callback=None
    ):
        self.calls.append(("StopReplica", broker_id, epoch, partitions, delete, callback))


def _ctx() -> ControllerContext:
    ctx = ControllerContext(epoch=5, epoch_zk_version=4)
    ctx.live_brokers = {
        b: BrokerInfo(b, (Endpoint("PLAINTEXT", "h", 9090 + b),), 10 + b) for b in (1, 2, 3)
    }
    for topic in ("t", "doomed"):
        ctx.all_topics.add(topic)
        ctx.assignments[topic] = {0: [1, 2], 1: [2, 3]}
        for p in (0, 1):
            ctx.partition_leadership_info[(topic, p)] = LeaderIsrAndControllerEpoch(
                LeaderAndIsr(1 + p, 3, (1 + p, 2 + p), 9), 4
            )
    return ctx


def _batch(sink: Sink, ctx: ControllerContext) -> ControllerBrokerRequestBatch:
    return ControllerBrokerRequestBatch(
        0, lambda: ctx, sink, is_topic_queued_for_deletion=lambda t: t == "doomed"
    )


def _lic(ctx: ControllerContext, tp: tuple[str, int]) -> LeaderIsrAndControllerEpoch:
    return ctx.partition_leadership_info[tp]


def _flat(topic_states: list[Any]) -> list[tuple[str, Any]]:
    """(topic, partition state) for each partition of a request's topic states."""
    return [(t.topic_name, s) for t in topic_states for s in t.partition_states]


async def test_leader_and_isr_then_update_metadata_then_stop_replica_per_broker():
    sink, ctx = Sink(), _ctx()
    batch = _batch(sink, ctx)
    batch.new_batch()
    batch.add_stop_replica_request_for_brokers([2], ("t", 1), delete_partition=False)
    batch.add_leader_and_isr_request_for_brokers([1, 2], ("t", 0), _lic(ctx, ("t", 0)), [1, 2])
    batch.add_leader_and_isr_request_for_brokers([2], ("t", 1), _lic(ctx, ("t", 1)), [2, 3])
    assert sink.calls == []  # nothing leaves before the batch is sent
    with pytest.raises(IllegalBatchStateError):
        batch.new_batch()
    await batch.send_requests_to_brokers(5)
    assert batch.empty
    assert [(c[0], c[1]) for c in sink.calls] == [
        ("LeaderAndIsr", 1),
        ("LeaderAndIsr", 2),
        ("UpdateMetadata", 1),  # LeaderAndIsr implies UpdateMetadata to every live broker
        ("UpdateMetadata", 2),
        ("UpdateMetadata", 3),
        ("StopReplica", 2),
    ]
    assert all(c[2] == 5 for c in sink.calls)
    lair2 = _flat(sink.calls[1][3])
    assert [(t, s.partition_index, s.leader, s.isr) for t, s in lair2] == [
        ("t", 0, 1, [1, 2]),
        ("t", 1, 2, [2, 3]),
    ]
    assert lair2[0][1].leader_epoch == 3 and lair2[0][1].partition_epoch == 9
    assert lair2[0][1].controller_epoch == 4
    assert [b.id for b in sink.calls[0][4]] == [1, 2, 3]
    assert {(t, s.partition_index) for t, s in _flat(sink.calls[2][3])} == {("t", 0), ("t", 1)}


async def test_stop_replica_without_then_with_deletion_are_both_sent_in_that_order():
    sink, ctx = Sink(), _ctx()
    batch = _batch(sink, ctx)
    got: list[Any] = []
    batch.add_stop_replica_request_for_brokers([1], ("t", 0), delete_partition=False)
    batch.add_stop_replica_request_for_brokers(
        [1], ("t", 0), delete_partition=True, callback=lambda b, r: got.append((b, r))
    )
    await batch.send_requests_to_brokers(5)
    assert [(c[0], c[3], c[4]) for c in sink.calls] == [
        ("StopReplica", [("t", 0)], False),
        ("StopReplica", [("t", 0)], True),
    ]
    assert sink.calls[0][5] is None and sink.calls[1][5] is not None


async def test_partitions_of_topics_being_deleted_go_out_with_leader_minus_2():
    sink, ctx = Sink(), _ctx()
    batch = _batch(sink, ctx)
    batch.add_update_metadata_request_for_brokers([1, 2, 3], None)
    await batch.send_requests_to_brokers(5)
    assert len(sink.calls) == 3
    states = {(t, s.partition_index): s.leader for t, s in _flat(sink.calls[0][3])}
    assert states == {("t", 0): 1, ("t", 1): 2, ("doomed", 0): -2, ("doomed", 1): -2}
    assert sink.calls[0][5] == ["doomed"]


async def test_requests_for_brokers_that_are_down_are_not_sent_and_clear_drops_all():
    sink, ctx = Sink(), _ctx()
    batch = _batch(sink, ctx)
    batch.add_leader_and_isr_request_for_brokers([7], ("t", 0), _lic(ctx, ("t", 0)), [1, 2])
    batch.add_stop_replica_request_for_brokers([7], ("t", 0), delete_partition=True)
    batch.add_update_metadata_request_for_brokers([7], [])
    await batch.send_requests_to_brokers(5)
    assert {c[1] for c in sink.calls} == {1, 2, 3}  # only the UpdateMetadata to live brokers
    batch.add_update_metadata_request_for_brokers([1], [])
    batch.clear()
    batch.new_batch()
    sink.calls.clear()
    await batch.send_requests_to_brokers(5)
    assert sink.calls == []


async def test_update_metadata_skips_partitions_without_a_leader_yet():
    sink, ctx = Sink(), _ctx()
    ctx.assignments["fresh"] = {0: [1]}
    batch = _batch(sink, ctx)
    batch.add_update_metadata_request_for_brokers([1], [("fresh", 0), ("t", 0)])
    await batch.send_requests_to_brokers(5)
    assert [(t, s.partition_index) for t, s in _flat(sink.calls[0][3])] == [("t", 0)]


async def test_the_channel_gets_inter_broker_topic_states_and_live_broker_values():
    """The batch hands the channel the dataclasses it encodes, grouped by topic with the
    topic's id, and the live brokers as BrokerInfo values: no dicts to translate."""
    sink, ctx = Sink(), _ctx()
    tid = uuid.uuid4()
    ctx.topic_ids["t"] = tid
    batch = _batch(sink, ctx)
    batch.add_leader_and_isr_request_for_brokers(
        [1], ("t", 0), _lic(ctx, ("t", 0)), [1, 2], is_new=True
    )
    batch.add_leader_and_isr_request_for_brokers([1], ("t", 1), _lic(ctx, ("t", 1)), [2, 3])
    await batch.send_requests_to_brokers(5)
    lair, um = sink.calls[0], sink.calls[1]
    assert lair[3] == [
        ib.LeaderAndIsrTopicState(
            "t",
            [
                ib.LeaderAndIsrPartitionState(0, 4, 1, 3, [1, 2], 9, [1, 2], is_new=True),
                ib.LeaderAndIsrPartitionState(1, 4, 2, 3, [2, 3], 9, [2, 3]),
            ],
            tid,
        )
    ]
    assert lair[4] == [ctx.live_brokers[b] for b in (1, 2, 3)]
    assert um[3] == [
        ib.UpdateMetadataTopicState(
            "t",
            [
                ib.UpdateMetadataPartitionState(0, 4, 1, 3, [1, 2], 9, [1, 2], []),
                ib.UpdateMetadataPartitionState(1, 4, 2, 3, [2, 3], 9, [2, 3], []),
            ],
            tid,
        )
    ]


async def test_update_metadata_offline_replicas_are_failed_log_dirs_and_brokers_not_live():
    sink, ctx = Sink(), _ctx()
    ctx.assignments["t"][0] = [1, 2, 4]  # broker 4 is not live
    ctx.replicas_on_offline_dirs[2] = {("t", 0)}
    batch = _batch(sink, ctx)
    batch.add_update_metadata_request_for_brokers([1], [("t", 0), ("t", 1)])
    await batch.send_requests_to_brokers(5)
    offline = {(t, s.partition_index): s.offline_replicas for t, s in _flat(sink.calls[0][3])}
    assert offline == {("t", 0): [2, 4], ("t", 1): []}


async def test_a_broker_receives_leader_and_isr_then_update_metadata_then_stop_replica(tmp_path):
    """seed 002 #44, on the wire: one batch, the three kinds, in Kafka's order."""
    from tests.controller.cluster import Cluster, eventually

    async with Cluster(tmp_path, 2) as cluster:
        await cluster.create_topic_znode("t", {0: [1, 0], 1: [0, 1]})
        await cluster.wait_state("t", 1, lambda s: s.leader == 0)
        await eventually(lambda: cluster.all_see("t", 1, lambda m: m.leader == 0))
        ctrl = cluster.controller().controller
        cluster.received[1].clear()

        async def event() -> None:
            batch, ctx = ctrl.batch, ctrl.ctx
            batch.new_batch()
            # recorded in the "wrong" order on purpose
            batch.add_stop_replica_request_for_brokers([1], ("t", 1), delete_partition=False)
            batch.add_update_metadata_request_for_brokers([1], [("t", 1)])
            lic = ctx.partition_leadership_info[("t", 0)]
            lic = type(lic)(lic.leader_and_isr.new_epoch(), lic.controller_epoch)
            batch.add_leader_and_isr_request_for_brokers([1], ("t", 0), lic, [1, 0])
            await batch.send_requests_to_brokers(ctx.epoch)

        await ctrl.put(event)
        await eventually(lambda: len(cluster.received[1]) >= 3)
        assert [r.api for r in cluster.received[1]] == [
            "LeaderAndIsr",
            "UpdateMetadata",
            "StopReplica",
        ]
