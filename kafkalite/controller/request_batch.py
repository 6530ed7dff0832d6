"""ControllerBrokerRequestBatch: one controller event's broker requests, sent together.

While a controller event runs, its LeaderAndIsr, UpdateMetadata and StopReplica
calls are only recorded, per broker; when the event ends
:meth:`send_requests_to_brokers` sends, per broker, one LeaderAndIsr, then one
UpdateMetadata, then StopReplica, as Kafka's batch does. Merging matters: an
event that touches many partitions sends each broker one request per kind
instead of one per partition, and a partition changed twice in one event is
sent once, in its final state.

The batch has the ``BrokerChannel`` methods itself, so the controller calls it
exactly as it would call the channel; it forwards the merged calls to the
channel it wraps (the TCP :class:`ControllerChannelManager`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class RequestSink(Protocol):
    """The BrokerChannel calls the batch forwards to."""

    async def leader_and_isr(
        self,
        broker_id: int,
        controller_id: int,
        controller_epoch: int,
        states: list[dict[str, Any]],
        live_brokers: list[dict[str, Any]],
    ) -> None: ...

    async def update_metadata(
        self,
        broker_id: int,
        controller_id: int,
        controller_epoch: int,
        states: list[dict[str, Any]],
        live_brokers: list[dict[str, Any]],
        deleted_topics: list[str],
    ) -> None: ...

    async def stop_replica(
        self,
        broker_id: int,
        controller_id: int,
        controller_epoch: int,
        partitions: list[TopicPartition],
        delete: bool,
    ) -> None: ...


class IllegalBatchStateError(RuntimeError):
    """A new batch was started while the previous one still held requests."""


@dataclass(slots=True)
class _Pending:
    controller_id: int
    controller_epoch: int
    states: dict[TopicPartition, dict[str, Any]] = field(default_factory=dict)
    live_brokers: list[dict[str, Any]] = field(default_factory=list)
    deleted_topics: dict[str, None] = field(default_factory=dict)
    #: StopReplica: partition -> delete flag (a later delete=True wins)
    stops: dict[TopicPartition, bool] = field(default_factory=dict)


def _key(s: dict[str, Any]) -> TopicPartition:
    return (s["topic"], s["partition"])


class ControllerBrokerRequestBatch:
    def __init__(self, channel: RequestSink) -> None:
        self.channel = channel
        self._leader_and_isr: dict[int, _Pending] = {}
        self._update_metadata: dict[int, _Pending] = {}
        self._stop_replica: dict[int, _Pending] = {}

    @property
    def empty(self) -> bool:
        return not (self._leader_and_isr or self._update_metadata or self._stop_replica)

    def new_batch(self) -> None:
        if not self.empty:
            raise IllegalBatchStateError(
                "controller to broker request batch is not empty while creating a new one"
            )

    def clear(self) -> None:
        self._leader_and_isr.clear()
        self._update_metadata.clear()
        self._stop_replica.clear()

    @staticmethod
    def _pending(
        table: dict[int, _Pending], broker_id: int, controller_id: int, controller_epoch: int
    ) -> _Pending:
        p = table.get(broker_id)
        if p is None:
            p = table[broker_id] = _Pending(controller_id, controller_epoch)
        else:
            p.controller_id, p.controller_epoch = controller_id, controller_epoch
        return p

    # ---- BrokerChannel: record ------------------------------------------------
    async def leader_and_isr(
        self,
        broker_id: int,
        controller_id: int,
        controller_epoch: int,
        states: list[dict[str, Any]],
        live_brokers: list[dict[str, Any]],
    ) -> None:
        p = self._pending(self._leader_and_isr, broker_id, controller_id, controller_epoch)
        p.states.update((_key(s), s) for s in states)
        p.live_brokers = live_brokers

    async def update_metadata(
        self,
        broker_id: int,
        controller_id: int,
        controller_epoch: int,
        states: list[dict[str, Any]],
        live_brokers: list[dict[str, Any]],
        deleted_topics: list[str],
    ) -> None:
        p = self._pending(self._update_metadata, broker_id, controller_id, controller_epoch)
        p.states.update((_key(s), s) for s in states)
        p.live_brokers = live_brokers
        p.deleted_topics.update(dict.fromkeys(deleted_topics))

    async def stop_replica(
        self,
        broker_id: int,
        controller_id: int,
        controller_epoch: int,
        partitions: list[TopicPartition],
        delete: bool,
    ) -> None:
        p = self._pending(self._stop_replica, broker_id, controller_id, controller_epoch)
        for tp in partitions:
            p.stops[tp] = delete or p.stops.get(tp, False)

    # ---- send -----------------------------------------------------------------
    async def send_requests_to_brokers(self) -> None:
        """Hand everything recorded to the channel (LeaderAndIsr, UpdateMetadata,
        then StopReplica for each broker) and start an empty batch."""
        lair, um, stops = self._leader_and_isr, self._update_metadata, self._stop_replica
        self._leader_and_isr, self._update_metadata, self._stop_replica = {}, {}, {}
        ch = self.channel
        for b, p in sorted(lair.items()):
            await ch.leader_and_isr(
                b, p.controller_id, p.controller_epoch, list(p.states.values()), p.live_brokers
            )
        for b, p in sorted(um.items()):
            await ch.update_metadata(
                b,
                p.controller_id,
                p.controller_epoch,
                list(p.states.values()),
                p.live_brokers,
                list(p.deleted_topics),
            )
        for b, p in sorted(stops.items()):
            for delete in (False, True):
                tps = [tp for tp, d in p.stops.items() if d is delete]
                if tps:
                    await ch.stop_replica(b, p.controller_id, p.controller_epoch, tps, delete)
