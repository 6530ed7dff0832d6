"""ControllerContext: the active controller's in-memory view of the cluster (seed 002 §3).

Everything here is a cache of the metadata store, rebuilt on failover and kept
current by the controller's events. The assignment (AR) order matters: AR[0]
is the preferred replica, and leader selection walks AR in order.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields

from kafkalite.common.types import TopicPartition
from kafkalite.metadata.kafka_zk_client import BrokerInfo

NO_LEADER = -1
LEADER_DURING_DELETE = -2
INITIAL_LEADER_EPOCH = 0


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """A partition's leader, leader epoch and ISR, and the state znode version they came from."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int = 0

    def new_leader_and_isr(self, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        """Every leader or ISR change bumps the leader epoch (seed 002 §10)."""
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr), self.zk_version)

    def new_epoch(self) -> LeaderAndIsr:
        return LeaderAndIsr(self.leader, self.leader_epoch + 1, self.isr, self.zk_version)


@dataclass(frozen=True, slots=True)
class LeaderIsrAndControllerEpoch:
    """LeaderAndIsr plus the epoch of the controller that wrote it."""

    leader_and_isr: LeaderAndIsr
    controller_epoch: int


@dataclass(frozen=True, slots=True)
class PartitionAndReplica:
    topic: str
    partition: int
    replica: int

    @property
    def topic_partition(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(slots=True)
class ReassignedPartitionsContext:
    """A partition being reassigned: its target replicas (RAR)."""

    new_replicas: list[int]
    #: the AR when the reassignment started (for ListPartitionReassignments)
    original_replicas: list[int] = field(default_factory=list)


@dataclass(slots=True)
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = 0
    shutting_down_broker_ids: set[int] = field(default_factory=set)
    live_brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    all_topics: set[str] = field(default_factory=set)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    #: topic -> partition -> AR (ordered; AR[0] is the preferred replica)
    assignments: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    partition_leadership_info: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(
        default_factory=dict
    )
    partitions_being_reassigned: dict[TopicPartition, ReassignedPartitionsContext] = field(
        default_factory=dict
    )
    partitions_undergoing_preferred_replica_election: set[TopicPartition] = field(
        default_factory=set
    )
    #: per live broker, its replicas in failed log dirs (LeaderAndIsr answered
    #: KAFKA_STORAGE_ERROR); dropped when the broker restarts or dies
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)

    def reset(self) -> None:
        """Forget everything, in place (the state machines and selectors keep this object)."""
        fresh = ControllerContext()
        for f in fields(self):
            setattr(self, f.name, getattr(fresh, f.name))

    # ---- brokers ------------------------------------------------------------------
    @property
    def live_broker_ids(self) -> set[int]:
        """Brokers eligible as leaders: live and not shutting down."""
        return set(self.live_brokers) - self.shutting_down_broker_ids

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        """Brokers that still get UpdateMetadata."""
        return set(self.live_brokers)

    # ---- assignment -----------------------------------------------------------------
    def partition_replica_assignment(self, tp: TopicPartition) -> list[int]:
        """AR of ``tp``; empty if unknown."""
        return self.assignments.get(tp[0], {}).get(tp[1], [])

    def update_partition_replica_assignment(self, tp: TopicPartition, replicas: list[int]) -> None:
        self.assignments.setdefault(tp[0], {})[tp[1]] = list(replicas)

    def all_partitions(self) -> Iterator[TopicPartition]:
        for topic, parts in self.assignments.items():
            for p in parts:
                yield (topic, p)

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [(topic, p) for p in sorted(self.assignments.get(topic, {}))]

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [
            (topic, p)
            for topic, parts in self.assignments.items()
            for p, replicas in parts.items()
            if broker_id in replicas
        ]

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> list[PartitionAndReplica]:
        ids = set(broker_ids)
        return [
            PartitionAndReplica(topic, p, r)
            for topic, parts in self.assignments.items()
            for p, replicas in parts.items()
            for r in replicas
            if r in ids
        ]

    def replicas_for_topic(self, topic: str) -> list[PartitionAndReplica]:
        return [
            PartitionAndReplica(topic, p, r)
            for p, replicas in self.assignments.get(topic, {}).items()
            for r in replicas
        ]

    def replicas_for_partitions(
        self, partitions: Iterable[TopicPartition]
    ) -> list[PartitionAndReplica]:
        return [
            PartitionAndReplica(tp[0], tp[1], r)
            for tp in partitions
            for r in self.partition_replica_assignment(tp)
        ]

    def all_live_replicas(self) -> list[PartitionAndReplica]:
        return self.replicas_on_brokers(self.live_broker_ids)

    def is_replica_online(
        self, broker_id: int, tp: TopicPartition, include_shutting_down: bool = False
    ) -> bool:
        """Kafka's isReplicaOnline: the broker is live (or shutting down, if asked) and the
        replica's log dir has not failed. What elections and ISR decisions go by."""
        if broker_id not in self.live_brokers:
            return False
        if not include_shutting_down and broker_id in self.shutting_down_broker_ids:
            return False
        offline = self.replicas_on_offline_dirs.get(broker_id)
        return offline is None or tp not in offline

    def offline_replicas(self, tp: TopicPartition, replicas: list[int]) -> tuple[int, ...]:
        """The replicas of ``tp`` on live brokers whose log dir failed (Metadata lists them
        with the dead brokers' replicas in offline_replicas)."""
        dirs = self.replicas_on_offline_dirs
        if not dirs:
            return ()
        return tuple(r for r in replicas if tp in dirs.get(r, ()))

    def remove_topic(self, topic: str) -> None:
        parts = self.assignments.pop(topic, {})
        for p in parts:
            self.partition_leadership_info.pop((topic, p), None)
        self.all_topics.discard(topic)
        self.topic_ids.pop(topic, None)
