"""TopicDeletionManager (seed 002 §9, "Topic deletion").

DeleteTopics (or an admin tool) creates /admin/delete_topics/<t>; the
controller queues the topic here. Deleting a topic is asynchronous and may take
several controller events:

1. ``onTopicDeletion``: UpdateMetadata with leader -2 for its partitions (brokers
   stop serving it), offline replicas (dead broker or failed log dir) →
   ReplicaDeletionIneligible, online ones → OfflineReplica (StopReplica without
   deletion) → ReplicaDeletionStarted (StopReplica with deletion, whose response
   comes back as a controller event).
2. Each response moves the replica to ReplicaDeletionSuccessful, or, on error,
   to ReplicaDeletionIneligible and the topic becomes ineligible.
3. When every replica is ReplicaDeletionSuccessful the topic is completed:
   replicas → NonExistentReplica, partitions → Offline → NonExistent, the
   topic's znodes go, and the controller forgets it.

A topic is ineligible while a replica is dead, while it is being reassigned or
in a preferred election, or after a deletion error; it is resumed when a
broker holding its replicas starts, when the reassignment or election ends,
and retried whenever deletion is resumed. With ``delete.topic.enable=false``
nothing is queued and the admin nodes are just removed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kafkalite.controller.controller_context import PartitionAndReplica
from kafkalite.controller.partition_state_machine import PartitionState
from kafkalite.controller.replica_state_machine import ReplicaState

if TYPE_CHECKING:
    from kafkalite.controller.kafka_controller import KafkaController

log = logging.getLogger(__name__)


class TopicDeletionManager:
    def __init__(self, controller: KafkaController, *, delete_topic_enable: bool) -> None:
        self.controller = controller
        self.delete_topic_enable = delete_topic_enable
        self.topics_to_be_deleted: set[str] = set()
        self.topics_ineligible_for_deletion: set[str] = set()

    # ---- life cycle -------------------------------------------------------------------
    def init(self, initial_topics_to_be_deleted: set[str], initial_ineligible: set[str]) -> None:
        if self.delete_topic_enable:
            self.topics_to_be_deleted = set(initial_topics_to_be_deleted)
            self.topics_ineligible_for_deletion = initial_ineligible & self.topics_to_be_deleted

    def reset(self) -> None:
        self.topics_to_be_deleted.clear()
        self.topics_ineligible_for_deletion.clear()

    async def try_topic_deletion(self) -> None:
        if self.delete_topic_enable:
            await self.resume_deletions()

    # ---- queries -------------------------------------------------------------------
    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return self.delete_topic_enable and topic in self.topics_to_be_deleted

    def is_topic_ineligible_for_deletion(self, topic: str) -> bool:
        return self.delete_topic_enable and topic in self.topics_ineligible_for_deletion

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        return (
            self.delete_topic_enable
            and self.controller.replica_state_machine.is_any_replica_in_state(
                topic, ReplicaState.DELETION_STARTED
            )
        )

    def _is_topic_eligible_for_deletion(self, topic: str) -> bool:
        return (
            topic in self.topics_to_be_deleted
            and not self.is_topic_deletion_in_progress(topic)
            and topic not in self.topics_ineligible_for_deletion
        )

    # ---- signals -------------------------------------------------------------------
    async def enqueue_topics_for_deletion(self, topics: Iterable[str]) -> None:
        if self.delete_topic_enable:
            self.topics_to_be_deleted.update(topics)
            await self.resume_deletions()

    async def resume_deletion_for_topics(self, topics: Iterable[str]) -> None:
        if not self.delete_topic_enable:
            return
        resumed = set(topics) & self.topics_to_be_deleted
        if resumed:
            self.topics_ineligible_for_deletion -= resumed
            await self.resume_deletions()

    def mark_topic_ineligible_for_deletion(self, topics: Iterable[str], reason: str) -> None:
        if not self.delete_topic_enable:
            return
        halted = set(topics) & self.topics_to_be_deleted
        if halted - self.topics_ineligible_for_deletion:
            log.info("halting deletion of topics %s: %s", sorted(halted), reason)
        self.topics_ineligible_for_deletion |= halted

    async def fail_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        if not self.delete_topic_enable:
            return
        failed = [r for r in replicas if r.topic in self.topics_to_be_deleted]
        if failed:
            log.warning("deletion failed for replicas %s", failed)
            await self.controller.replica_state_machine.handle_state_changes(
                failed, ReplicaState.DELETION_INELIGIBLE
            )
            self.mark_topic_ineligible_for_deletion(
                {r.topic for r in failed}, "replica deletion failure"
            )
            await self.resume_deletions()

    async def complete_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        deleted = [r for r in replicas if r.topic in self.topics_to_be_deleted]
        if deleted:
            await self.controller.replica_state_machine.handle_state_changes(
                deleted, ReplicaState.DELETION_SUCCESSFUL
            )
            await self.resume_deletions()

    # ---- the work -------------------------------------------------------------------
    async def resume_deletions(self) -> None:
        rsm = self.controller.replica_state_machine
        retry: set[str] = set()
        eligible: set[str] = set()
        for topic in sorted(self.topics_to_be_deleted):
            if rsm.are_all_replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL):
                await self._complete_delete_topic(topic)
                log.info("deletion of topic %s completed", topic)
                continue
            if not rsm.is_any_replica_in_state(topic, ReplicaState.DELETION_STARTED):
                # nothing in flight: either not started yet, or some replica failed
                if rsm.is_any_replica_in_state(topic, ReplicaState.DELETION_INELIGIBLE):
                    retry.add(topic)
            if self._is_topic_eligible_for_deletion(topic):
                log.info("deleting topic %s", topic)
                eligible.add(topic)
        if retry:
            await self._retry_deletion_for_ineligible_replicas(retry)
        if eligible:
            await self._on_topic_deletion(eligible)

    async def _retry_deletion_for_ineligible_replicas(self, topics: set[str]) -> None:
        rsm = self.controller.replica_state_machine
        failed = [
            r
            for t in sorted(topics)
            for r in rsm.replicas_in_state(t, ReplicaState.DELETION_INELIGIBLE)
        ]
        await rsm.handle_state_changes(failed, ReplicaState.OFFLINE)

    async def _on_topic_deletion(self, topics: set[str]) -> None:
        ctx = self.controller.ctx
        partitions = [tp for t in sorted(topics) for tp in ctx.partitions_for_topic(t)]
        # brokers stop serving the topic: leader -2 in UpdateMetadata
        await self.controller.send_update_metadata_request(
            ctx.live_or_shutting_down_broker_ids, partitions
        )
        for topic in sorted(topics):
            await self._start_replica_deletion(topic)

    async def _start_replica_deletion(self, topic: str) -> None:
        ctx = self.controller.ctx
        rsm = self.controller.replica_state_machine
        replicas = ctx.replicas_for_topic(topic)
        online = {r for r in replicas if ctx.is_replica_online(r.replica, r.topic_partition, True)}
        dead = [r for r in replicas if r not in online]
        done = set(rsm.replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL))
        retry = [r for r in replicas if r in online and r not in done]
        await rsm.handle_state_changes(dead, ReplicaState.DELETION_INELIGIBLE)
        await rsm.handle_state_changes(retry, ReplicaState.OFFLINE)
        await rsm.handle_state_changes(retry, ReplicaState.DELETION_STARTED)
        if dead:
            self.mark_topic_ineligible_for_deletion(
                {topic},
                f"replicas on dead brokers or failed log dirs {sorted({r.replica for r in dead})}",
            )

    async def _complete_delete_topic(self, topic: str) -> None:
        controller = self.controller
        ctx = controller.ctx
        rsm, psm = controller.replica_state_machine, controller.partition_state_machine
        await rsm.handle_state_changes(
            rsm.replicas_in_state(topic, ReplicaState.DELETION_SUCCESSFUL),
            ReplicaState.NON_EXISTENT,
        )
        partitions = ctx.partitions_for_topic(topic)
        await psm.handle_state_changes(partitions, PartitionState.OFFLINE)
        await psm.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
        self.topics_to_be_deleted.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)
        await controller.zk.delete_topic_znodes(topic, ctx.epoch_zk_version)
        ctx.remove_topic(topic)
