"""ControllerBrokerRequestBatch: the broker requests of one state-machine step (seed 002 §5).

A state machine starts a batch, records LeaderAndIsr, UpdateMetadata and
StopReplica requests per broker while it changes partitions and replicas, and
sends them together at the end: per broker one LeaderAndIsr (with the leaders'
endpoints; its response goes to the LeaderAndIsr callback, which is how the
controller learns of replicas in failed log dirs), then one UpdateMetadata, then StopReplica (one without deletion,
then one with deletion, whose response goes to the deletion callback). The
channel keeps each broker's requests in FIFO order, so a replica stopped in one
step and deleted in the next receives StopReplica(delete=false) before
StopReplica(delete=true).

Partition states are captured when they are added, from the controller
context; partitions of topics queued for deletion go out in UpdateMetadata with
leader -2, which makes brokers drop the topic from their metadata.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafkalite.controller.controller_context import (
    LEADER_DURING_DELETE,
    ControllerContext,
    LeaderIsrAndControllerEpoch,
)
from kafkalite.timer import loop_slices

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
#: (broker id, StopReplicaResponse) -> None; called on the channel's sender task
StopReplicaCallback = Callable[[int, Any], None]
#: (broker id, LeaderAndIsrResponse) -> None; called on the channel's sender task
LeaderAndIsrCallback = Callable[[int, Any], None]


class BrokerChannel(Protocol):
    """How the controller talks to brokers; the TCP one is ControllerChannelManager."""

    def update_brokers(self, live: dict[int, Any], epochs: dict[int, int]) -> None: ...

    async def shutdown(self) -> None: ...

    async def leader_and_isr(
        self,
        broker_id: int,
        controller_id: int,
        controller_epoch: int,
        states: list[dict[str, Any]],
        live_brokers: list[dict[str, Any]],
        callback: LeaderAndIsrCallback | None = None,
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
        callback: StopReplicaCallback | None = None,
    ) -> None: ...


class IllegalBatchStateError(RuntimeError):
    """A new batch was started while the previous one still held requests."""


@dataclass(slots=True)
class _StopReplicas:
    keep: dict[TopicPartition, None] = field(default_factory=dict)
    delete: dict[TopicPartition, None] = field(default_factory=dict)
    callback: StopReplicaCallback | None = None


def partition_state_dict(
    ctx: ControllerContext,
    tp: TopicPartition,
    lic: LeaderIsrAndControllerEpoch,
    replicas: list[int],
    *,
    leader: int | None = None,
    is_new: bool = False,
) -> dict[str, Any]:
    """A partition as the channel manager encodes it into LeaderAndIsr/UpdateMetadata.

    ``offline_replicas`` names the replicas in failed log dirs; the channel adds the
    replicas on brokers missing from the live list (UpdateMetadata's offline_replicas)."""
    lai = lic.leader_and_isr
    return {
        "topic": tp[0],
        "partition": tp[1],
        "topic_id": ctx.topic_ids.get(tp[0]),
        "leader": lai.leader if leader is None else leader,
        "leader_epoch": lai.leader_epoch,
        "isr": list(lai.isr),
        "replicas": list(replicas),
        "offline_replicas": ctx.offline_replicas(tp, replicas),
        "controller_epoch": lic.controller_epoch,
        "partition_epoch": lai.zk_version,
        "is_new": is_new,
    }


class ControllerBrokerRequestBatch:
    def __init__(
        self,
        controller_id: int,
        ctx: Callable[[], ControllerContext],
        channel: BrokerChannel,
        *,
        is_topic_queued_for_deletion: Callable[[str], bool] = lambda _t: False,
        leader_and_isr_callback: LeaderAndIsrCallback | None = None,
    ) -> None:
        self.controller_id = controller_id
        self._ctx = ctx
        self.channel = channel
        self.is_topic_queued_for_deletion = is_topic_queued_for_deletion
        #: every LeaderAndIsr response goes here (Kafka's LeaderAndIsrResponseReceived)
        self.leader_and_isr_callback = leader_and_isr_callback
        self._leader_and_isr: dict[int, dict[TopicPartition, dict[str, Any]]] = {}
        self._update_metadata_brokers: set[int] = set()
        self._update_metadata_partitions: dict[TopicPartition, dict[str, Any]] = {}
        self._deleted_topics: set[str] = set()
        self._stop_replica: dict[int, _StopReplicas] = {}

    @property
    def empty(self) -> bool:
        return not (
            self._leader_and_isr
            or self._update_metadata_brokers
            or self._update_metadata_partitions
            or self._stop_replica
        )

    def new_batch(self) -> None:
        if not self.empty:
            raise IllegalBatchStateError(
                "controller to broker request batch is not empty while creating a new one"
            )

    def clear(self) -> None:
        self._leader_and_isr = {}
        self._update_metadata_brokers = set()
        self._update_metadata_partitions = {}
        self._deleted_topics = set()
        self._stop_replica = {}

    # ---- recording ------------------------------------------------------------------
    def add_leader_and_isr_request_for_brokers(
        self,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        lic: LeaderIsrAndControllerEpoch,
        replicas: list[int],
        *,
        is_new: bool = False,
    ) -> None:
        """LeaderAndIsr for ``tp`` to ``broker_ids``, and UpdateMetadata for it to every
        live or shutting-down broker (as Kafka's batch does)."""
        ctx = self._ctx()
        state = partition_state_dict(ctx, tp, lic, replicas, is_new=is_new)
        for b in broker_ids:
            if b >= 0:
                self._leader_and_isr.setdefault(b, {})[tp] = state
        self.add_update_metadata_request_for_brokers(ctx.live_or_shutting_down_broker_ids, [tp])

    def add_stop_replica_request_for_brokers(
        self,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        *,
        delete_partition: bool,
        callback: StopReplicaCallback | None = None,
    ) -> None:
        for b in broker_ids:
            if b < 0:
                continue
            stops = self._stop_replica.setdefault(b, _StopReplicas())
            if delete_partition:
                stops.delete[tp] = None
                if callback is not None:
                    stops.callback = callback
            else:
                stops.keep[tp] = None

    def add_update_metadata_request_for_brokers(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition] | None = None
    ) -> None:
        """UpdateMetadata to ``broker_ids``; ``partitions`` None means every partition
        with a leader, an empty iterable just the live broker list."""
        ctx = self._ctx()
        self._update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        if partitions is None:
            partitions = list(ctx.partition_leadership_info)
        for tp in partitions:
            lic = ctx.partition_leadership_info.get(tp)
            if lic is None:
                continue  # no leader assigned yet: nothing to say about it
            deleting = self.is_topic_queued_for_deletion(tp[0])
            if deleting:
                self._deleted_topics.add(tp[0])
            self._update_metadata_partitions[tp] = partition_state_dict(
                ctx,
                tp,
                lic,
                ctx.partition_replica_assignment(tp),
                leader=LEADER_DURING_DELETE if deleting else None,
            )

    # ---- sending ------------------------------------------------------------------
    async def send_requests_to_brokers(self, controller_epoch: int) -> None:
        """Queue everything recorded on the channel, in Kafka's order, and start empty."""
        lair, um_brokers = self._leader_and_isr, self._update_metadata_brokers
        um_states, deleted = self._update_metadata_partitions, self._deleted_topics
        stops = self._stop_replica
        self.clear()
        ctx = self._ctx()
        live = ctx.live_or_shutting_down_broker_ids
        live_list = [
            {"id": b, **ctx.live_brokers[b].registration} for b in sorted(ctx.live_brokers)
        ]
        cid, ch = self.controller_id, self.channel
        for b in sorted(lair):
            if b in live:
                await loop_slices.pause()  # each request may hold 10,000 partitions
                await ch.leader_and_isr(
                    b,
                    cid,
                    controller_epoch,
                    list(lair[b].values()),
                    live_list,
                    callback=self.leader_and_isr_callback,
                )
        if um_brokers:
            states = list(um_states.values())
            deleted_list = sorted(deleted)
            for b in sorted(um_brokers):
                if b in live:
                    await loop_slices.pause()
                    await ch.update_metadata(
                        b, cid, controller_epoch, states, live_list, deleted_list
                    )
        for b in sorted(stops):
            if b not in live:
                log.debug("controller: not sending StopReplica to broker %d, which is down", b)
                continue
            s = stops[b]
            await loop_slices.pause()
            if s.keep:
                await ch.stop_replica(b, cid, controller_epoch, list(s.keep), False)
            if s.delete:
                await ch.stop_replica(b, cid, controller_epoch, list(s.delete), True, s.callback)
