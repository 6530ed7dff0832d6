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
        now = int(time.time() * 1000)
        self.remote_replicas = {
            r: self.remote_replicas.get(r) or ReplicaState(r, -1, now)
            for r in state.replicas
            if r != self.local_broker_id
        }
        log.leader_epoch_cache.assign(state.leader_epoch, log.log_end_offset)
        self.maybe_increment_high_watermark()
        return is_new

    def make_follower(self, state: LeaderAndIsrState, log: Log) -> bool:
        changed = self.leader_id != state.leader or self.leader_epoch != state.leader_epoch
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
        self, replica_id: int, fetch_offset: int, log_start_offset: int
    ) -> bool:
        """A follower fetched from ``fetch_offset``: it has everything below it.

        Returns True if the high watermark moved (waiting acks=all produces may complete).
        """
        rs = self.remote_replicas.get(replica_id)
        if rs is None:
            return False
        rs.log_end_offset = fetch_offset
        rs.log_start_offset = log_start_offset
        if self.log is not None and fetch_offset >= self.log.high_watermark:
            rs.last_caught_up_time_ms = int(time.time() * 1000)
        return self.maybe_increment_high_watermark()

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
