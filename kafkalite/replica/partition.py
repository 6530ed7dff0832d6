"""Partition: one topic-partition hosted on this broker, as leader or follower.

It owns the leader state the controller hands down (leader, epoch, replicas,
ISR) and the high watermark rule: HW = min LEO over the ISR. On a single
broker the ISR is just the leader, so HW follows the log end offset at once.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkalite.common.types import TopicPartition
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.record_batch import (
    NO_PRODUCER_ID,
    ValidatedRecords,
    validate_records,
)
from kafkalite.protocol.record_validator import WritableBuffer
from kafkalite.replica.producer_state import ProducerStateManager

if TYPE_CHECKING:
    from kafkalite.log.log import Log


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows about a follower (from its fetches)."""

    broker_id: int
    log_end_offset: int = -1
    last_caught_up_time_ms: int = 0
    log_start_offset: int = -1
    #: the leader's log end offset and the time of this follower's previous fetch
    last_fetch_leader_leo: int = -1
    last_fetch_time_ms: int = 0


@dataclass(slots=True)
class LeaderAndIsrState:
    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    partition_epoch: int = 0
    controller_epoch: int = 0
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)
    is_new: bool = False  # the controller just created this replica: no log can exist yet


@dataclass(slots=True)
class DuplicateAppend:
    """The LogAppendInfo shape for a deduplicated retry."""

    first_offset: int
    last_offset: int
    log_start_offset: int
    log_append_time: int = -1


class Partition:
    def __init__(
        self, topic: str, partition: int, topic_id: uuid.UUID, local_broker_id: int
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.local_broker_id = local_broker_id
        self.log: Log | None = None
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = 0
        self.controller_epoch = 0
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.remote_replicas: dict[int, ReplicaState] = {}
        self.min_insync_replicas = 1
        #: the leader's log end offset when this broker became leader at this epoch: a
        #: follower joins the ISR only once it has reached it (Kafka's leaderEpochStartOffset)
        self.leader_epoch_start_offset = -1
        #: an ISR write in flight (one at a time, as Kafka's pendingIsr)
        self.isr_change_pending = False
        #: as a follower, the leader's high watermark in its last fetch response
        self.leader_hw_seen = 0

    @property
    def key(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id and self.log is not None

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark if self.log is not None else 0

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset if self.log is not None else 0

    def make_leader(self, state: LeaderAndIsrState, log: Log) -> bool:
        """Become leader; returns True if this is a new leadership (epoch changed)."""
        is_new = self.leader_id != self.local_broker_id or self.leader_epoch != state.leader_epoch
        self.log = log
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.controller_epoch = state.controller_epoch
        self.replicas = list(state.replicas)
        self.isr = list(state.isr)
        self.isr_change_pending = False
        now = int(time.time() * 1000)
        # Kafka's resetReplicaState: a new leadership forgets what followers had fetched
        # (their LEOs are unknown until they fetch again); ISR members count as caught up now
        self.remote_replicas = {
            r: (
                ReplicaState(r, -1, now if r in state.isr else 0)
                if is_new or r not in self.remote_replicas
                else self.remote_replicas[r]
            )
            for r in state.replicas
            if r != self.local_broker_id
        }
        if is_new:
            self.leader_epoch_start_offset = log.log_end_offset
        log.leader_epoch_cache.assign(state.leader_epoch, log.log_end_offset)
        self.maybe_increment_high_watermark()
        return is_new

    def make_follower(self, state: LeaderAndIsrState, log: Log) -> bool:
        changed = self.leader_id != state.leader or self.leader_epoch != state.leader_epoch
        self.isr_change_pending = False
        self.leader_epoch_start_offset = -1
        self.log = log
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.controller_epoch = state.controller_epoch
        self.replicas = list(state.replicas)
        self.isr = list(state.isr)
        self.remote_replicas = {}
        return changed

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        if self.log is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise KafkaError(ErrorCode.fenced_leader_epoch)
            if current_leader_epoch > self.leader_epoch:
                raise KafkaError(ErrorCode.unknown_leader_epoch)
        if self.leader_id != self.local_broker_id:
            raise KafkaError(ErrorCode.not_leader_or_follower)

    def append_records_to_leader(
        self, records: WritableBuffer, required_acks: int, validated: ValidatedRecords | None = None
    ):  # -> LogAppendInfo
        self.check_leader()
        assert self.log is not None
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise KafkaError(
                ErrorCode.not_enough_replicas,
                f"ISR {self.isr} is smaller than min.insync.replicas={self.min_insync_replicas}",
            )
        if validated is None:
            validated = validate_records(records)
        headers = validated.headers
        idempotent = any(h.producer_id != NO_PRODUCER_ID for h in headers)
        if idempotent:
            state = self.producer_state()
            dup = state.check(headers)
            if dup is not None:
                # a retry of an appended batch: answer with the original offsets, append nothing
                return DuplicateAppend(dup.first_offset, dup.last_offset, self.log.log_start_offset)
        # the log records the batches in its producer state as it appends them
        info = self.log.append_as_leader(records, self.leader_epoch, validated)
        self.maybe_increment_high_watermark()
        return info

    def producer_state(self) -> ProducerStateManager:
        """The log's (Kafka's UnifiedLog owns it): loaded from its snapshot on first use."""
        if self.log is None:
            return ProducerStateManager()
        return self.log.producer_state

    def reset_producer_state(self) -> None:
        """Nothing to do: a truncated log reloads its own producer state."""

    @property
    def low_watermark(self) -> int:
        """Smallest log start offset over the replicas (DeleteRecords completes at it)."""
        if self.log is None:
            return -1
        low = self.log.log_start_offset
        for r in self.replicas:
            rs = self.remote_replicas.get(r)
            if rs is not None and rs.log_start_offset >= 0:
                low = min(low, rs.log_start_offset)
        return low

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, log_start_offset: int, now_ms: int | None = None
    ) -> bool:
        """A follower fetched from ``fetch_offset``: it has everything below it.

        Its last caught-up time follows Kafka's Replica.updateFetchState: now if it
        asked for the leader's log end, else the time of its previous fetch if it
        has reached what the leader had then. Returns True if the high watermark
        moved (waiting acks=all produces may complete).
        """
        rs = self.remote_replicas.get(replica_id)
        if rs is None or self.log is None:
            return False
        now = int(time.time() * 1000) if now_ms is None else now_ms
        leader_leo = self.log.log_end_offset
        if fetch_offset >= leader_leo:
            rs.last_caught_up_time_ms = max(rs.last_caught_up_time_ms, now)
        elif fetch_offset >= rs.last_fetch_leader_leo:
            rs.last_caught_up_time_ms = max(rs.last_caught_up_time_ms, rs.last_fetch_time_ms)
        rs.last_fetch_leader_leo = leader_leo
        rs.last_fetch_time_ms = now
        rs.log_end_offset = fetch_offset
        rs.log_start_offset = log_start_offset
        return self.maybe_increment_high_watermark()

    def isr_expand_candidate(self, replica_id: int) -> bool:
        """Kafka's isFollowerInSync for an expansion: an assigned replica outside the ISR
        that has reached the high watermark and this leader's first offset of its epoch."""
        if not self.is_leader or self.isr_change_pending or replica_id in self.isr:
            return False
        if replica_id not in self.replicas:
            return False
        rs = self.remote_replicas.get(replica_id)
        assert self.log is not None
        return (
            rs is not None
            and rs.log_end_offset >= self.log.high_watermark
            and rs.log_end_offset >= self.leader_epoch_start_offset
        )

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """ISR followers not caught up for ``max_lag_ms`` (replica.lag.time.max.ms)."""
        if not self.is_leader or self.isr_change_pending:
            return []
        assert self.log is not None
        leo = self.log.log_end_offset
        out = []
        for r in self.isr:
            if r == self.local_broker_id:
                continue
            rs = self.remote_replicas.get(r)
            if rs is None:
                out.append(r)
            elif rs.log_end_offset != leo and now_ms - rs.last_caught_up_time_ms > max_lag_ms:
                out.append(r)
        return out

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the ISR; returns True if it moved."""
        log = self.log
        if log is None or self.leader_id != self.local_broker_id:
            return False
        new_hw = log.log_end_offset
        for r in self.isr:
            if r == self.local_broker_id:
                continue
            rs = self.remote_replicas.get(r)
            leo = rs.log_end_offset if rs is not None else -1
            if leo < new_hw:
                new_hw = max(leo, 0)
        old = log.high_watermark
        if new_hw > old:
            log.update_high_watermark(new_hw)
            return True
        return False
