"""ControllerBrokerRequestBatch: per-event accumulation, merging and send order."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kafkalite.controller.request_batch import ControllerBrokerRequestBatch, IllegalBatchStateError
from kafkalite.protocol import inter_broker as ib
from kafkalite.testing import AsyncBroker
from tests.controller.cluster import eventually


class Sink:
    """Records the BrokerChannel calls the batch forwards."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def leader_and_isr(self, broker_id, controller_id, epoch, states, live) -> None:
        self.calls.append(("LeaderAndIsr", broker_id, epoch, states, live))

    async def update_metadata(self, broker_id, controller_id, epoch, states, live, deleted) -> None:
        self.calls.append(("UpdateMetadata", broker_id, epoch, states, live, deleted))

    async def stop_replica(self, broker_id, controller_id, epoch, partitions, delete) -> None:
        self.calls.append(("StopReplica", broker_id, epoch, partitions, delete))


def _s(topic: str, p: int, leader: int) -> dict[str, Any]:
    return {"topic": topic, "partition": p, "leader": leader}


async def test_one_request_per_kind_and_broker_in_kafka_order():
    sink = Sink()
    batch = ControllerBrokerRequestBatch(sink)
    batch.new_batch()
    await batch.stop_replica(2, 0, 1, [("t", 0)], False)
    await batch.stop_replica(2, 0, 1, [("t", 1)], True)
    await batch.update_metadata(2, 0, 1, [_s("t", 0, 1)], ["live1"], [])
    await batch.leader_and_isr(2, 0, 1, [_s("t", 0, 1)], ["live1"])
    await batch.leader_and_isr(1, 0, 1, [_s("t", 0, 1), _s("t", 1, 1)], ["live1"])
    await batch.leader_and_isr(1, 0, 1, [_s("t", 1, 3)], ["live2"])  # same partition again
    await batch.update_metadata(2, 0, 1, [_s("u", 0, 2)], ["live2"], ["gone"])
    assert sink.calls == []  # nothing leaves during the event
    with pytest.raises(IllegalBatchStateError):
        batch.new_batch()

    await batch.send_requests_to_brokers()
    assert batch.empty
    assert [(c[0], c[1]) for c in sink.calls] == [
        ("LeaderAndIsr", 1),
        ("LeaderAndIsr", 2),
        ("UpdateMetadata", 2),
        ("StopReplica", 2),
        ("StopReplica", 2),
    ]
    lair1 = sink.calls[0]
    assert lair1[3] == [_s("t", 0, 1), _s("t", 1, 3)] and lair1[4] == ["live2"]
    um = sink.calls[2]
    assert um[3] == [_s("t", 0, 1), _s("u", 0, 2)] and um[5] == ["gone"]
    assert sink.calls[3][3:] == ([("t", 0)], False)
    assert sink.calls[4][3:] == ([("t", 1)], True)


async def test_a_later_delete_wins_and_clear_drops_everything():
    sink = Sink()
    batch = ControllerBrokerRequestBatch(sink)
    await batch.stop_replica(1, 0, 1, [("t", 0)], False)
    await batch.stop_replica(1, 0, 1, [("t", 0)], True)
    await batch.stop_replica(1, 0, 1, [("t", 0)], False)
    await batch.send_requests_to_brokers()
    assert sink.calls == [("StopReplica", 1, 1, [("t", 0)], True)]
    await batch.update_metadata(1, 0, 1, [], [], [])
    batch.clear()
    await batch.send_requests_to_brokers()
    assert len(sink.calls) == 1


async def test_a_controller_event_sends_each_broker_one_request_per_kind(tmp_path):
    """Deleting a topic is one event with two UpdateMetadata calls (leader -2 first,
    then the rest): the broker receives a single UpdateMetadata, then StopReplica."""
    async with AsyncBroker(tmp_path) as b:
        k = b.broker
        await b.create_topic("doomed", partitions=4)
        before = dict(k.channel.requests_total)
        assert await k.admin.delete_topics(["doomed"], timeout_ms=10000) == {"doomed": 0}
        await eventually(lambda: k.channel.requests_total.get(ib.STOP_REPLICA, 0) == 1)
        await asyncio.sleep(0.1)
        assert k.channel.requests_total[ib.UPDATE_METADATA] - before[ib.UPDATE_METADATA] == 1
        assert k.metadata_cache.get_topic("doomed") is None
        assert k.replica_manager.get_partition(("doomed", 0)) is None
