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
context, as the inter-broker dataclasses the channel encodes (Kafka's batch
keeps the generated ``LeaderAndIsrPartitionState`` / ``UpdateMetadataPartitionState``
the same way); the batch groups them by topic when it sends. Partitions of
topics queued for deletion go out in UpdateMetadata with leader -2, which makes
brokers drop the topic from their metadata; UpdateMetadata's offline replicas
are those in failed log dirs plus those on brokers that are not live when the
batch is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from kafkalite.common.types import TopicPartition
from kafkalite.controller.controller_context import (
    LEADER_DURING_DELETE,
    ControllerContext,
    LeaderIsrAndControllerEpoch,
)
from kafkalite.metadata.kafka_zk_client import BrokerInfo
from kafkalite.protocol import inter_broker as ib
from kafkalite.protocol.kafka_uuid import ZERO_UUID
from kafkalite.timer import loop_slices

log = logging.getLogger(__name__)

#: (broker id, StopReplicaResponse) -> None; called on the channel's sender task
StopReplicaCallback = Callable[[int, Any], None]
#: (broker id, LeaderAndIsrResponse) -> None; called on the channel's sender task
LeaderAndIsrCallback = Callable[[int, Any], None]

S = TypeVar("S")


class BrokerChannel(Protocol):
    """How the controller talks to brokers; the TCP one is ControllerChannelManager."""

    def update_brokers(self, live: Mapping[int, BrokerInfo]) -> None: ...

    async def shutdown(self) -> None: ...

    async def leader_and_isr(
        self,
        broker_id: int,
        controller_id: int,
        controller_epoch: int,
        topic_states: list[ib.LeaderAndIsrTopicState],
        live_brokers: Sequence[BrokerInfo],
        callback: LeaderAndIsrCallback | None = None,
    ) -> None: ...

    async def update_metadata(
        self,
        broker_id: int,
        controller_id: int,
        controller_epoch: int,
        topic_states: list[ib.UpdateMetadataTopicState],
        live_brokers: Sequence[BrokerInfo],
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


def leader_and_isr_partition_state(
    tp: TopicPartition, lic: LeaderIsrAndControllerEpoch, replicas: list[int], *, is_new: bool
) -> ib.LeaderAndIsrPartitionState:
    lai = lic.leader_and_isr
    return ib.LeaderAndIsrPartitionState(
        partition_index=tp[1],
        controller_epoch=lic.controller_epoch,
        leader=lai.leader,
        leader_epoch=lai.leader_epoch,
        isr=list(lai.isr),
        partition_epoch=lai.zk_version,
        replicas=list(replicas),
        is_new=is_new,
    )


def update_metadata_partition_state(
    ctx: ControllerContext,
    tp: TopicPartition,
    lic: LeaderIsrAndControllerEpoch,
    replicas: list[int],
    *,
    leader: int,
) -> ib.UpdateMetadataPartitionState:
    """``offline_replicas`` names the replicas in failed log dirs; the batch adds
    the replicas on brokers that are not live when it sends."""
    lai = lic.leader_and_isr
    return ib.UpdateMetadataPartitionState(
        partition_index=tp[1],
        controller_epoch=lic.controller_epoch,
        leader=leader,
        leader_epoch=lai.leader_epoch,
        isr=list(lai.isr),
        zk_version=lai.zk_version,
        replicas=list(replicas),
        offline_replicas=list(ctx.offline_replicas(tp, replicas)),
    )


def _by_topic(states: Mapping[TopicPartition, S]) -> dict[str, list[S]]:
    """Partition states grouped by topic, topics in order of first appearance."""
    topics: dict[str, list[S]] = {}
    for (topic, _), state in states.items():
        group = topics.get(topic)
        if group is None:
            topics[topic] = [state]
        else:
            group.append(state)
    return topics


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
        self._leader_and_isr: dict[int, dict[TopicPartition, ib.LeaderAndIsrPartitionState]] = {}
        self._update_metadata_brokers: set[int] = set()
        self._update_metadata_partitions: dict[TopicPartition, ib.UpdateMetadataPartitionState] = {}
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
        state = leader_and_isr_partition_state(tp, lic, replicas, is_new=is_new)
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
            self._update_metadata_partitions[tp] = update_metadata_partition_state(
                ctx,
                tp,
                lic,
                ctx.partition_replica_assignment(tp),
                leader=LEADER_DURING_DELETE if deleting else lic.leader_and_isr.leader,
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
        live_brokers = [ctx.live_brokers[b] for b in sorted(ctx.live_brokers)]
        cid, ch = self.controller_id, self.channel
        for b in sorted(lair):
            if b in live:
                await loop_slices.pause()  # each request may hold 10,000 partitions
                await ch.leader_and_isr(
                    b,
                    cid,
                    controller_epoch,
                    [
                        ib.LeaderAndIsrTopicState(t, states, ctx.topic_ids.get(t) or ZERO_UUID)
                        for t, states in _by_topic(lair[b]).items()
                    ],
                    live_brokers,
                    callback=self.leader_and_isr_callback,
                )
        if um_brokers:
            topic_states = _update_metadata_topics(ctx, um_states, deleted, live)
            deleted_list = sorted(deleted)
            for b in sorted(um_brokers):
                if b in live:
                    await loop_slices.pause()
                    await ch.update_metadata(
                        b, cid, controller_epoch, topic_states, live_brokers, deleted_list
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


def _update_metadata_topics(
    ctx: ControllerContext,
    states: Mapping[TopicPartition, ib.UpdateMetadataPartitionState],
    deleted: set[str],
    live: set[int],
) -> list[ib.UpdateMetadataTopicState]:
    """The recorded states by topic, completed as they go out: leader -2 for topics
    being deleted, and the replicas on brokers that are not live added to each
    partition's offline replicas (the states are the batch's own, cleared by now)."""
    out = []
    by_topic = _by_topic(states)
    for topic, parts in by_topic.items():
        if topic in deleted:
            for s in parts:
                s.leader = LEADER_DURING_DELETE
        for s in parts:
            failed = s.offline_replicas
            s.offline_replicas = [r for r in s.replicas if r not in live or r in failed]
        out.append(ib.UpdateMetadataTopicState(topic, parts, ctx.topic_ids.get(topic) or ZERO_UUID))
    missing = deleted.difference(by_topic)
    if missing:
        log.debug("controller: no partition states to mark deleted for %s", sorted(missing))
    return out
