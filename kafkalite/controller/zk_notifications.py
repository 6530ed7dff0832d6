"""The notification znodes brokers write for the controller (seed 002 §4, §9).

- /isr_change_notification/isr_change_<seq>: a leader changed ISRs in state
  znodes (Kafka's IsrChangeNotificationHandler). The controller re-reads those
  states, sends UpdateMetadata (no LeaderAndIsr) and deletes the notifications.
- /log_dir_event_notification/log_dir_event_<seq>: a broker had a log dir fail
  (Kafka's LogDirEventNotificationHandler, ``onBrokerLogDirFailure``). The
  controller sends LeaderAndIsr for every replica on that broker; the broker
  answers KAFKA_STORAGE_ERROR for those in failed dirs, and the response (a
  controller event, Kafka's LeaderAndIsrResponseReceived) takes them offline.

The :class:`KafkaController` owns the event queue and the watches; this module
holds the event bodies (Kafka keeps them in ``KafkaController`` itself).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafkalite.common.types import TopicPartition
from kafkalite.controller.controller_context import PartitionAndReplica
from kafkalite.controller.partition_state_machine import leader_and_isr_of
from kafkalite.controller.replica_state_machine import ReplicaState
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.kafka_uuid import ZERO_UUID

if TYPE_CHECKING:
    from kafkalite.controller.kafka_controller import KafkaController

log = logging.getLogger(__name__)


KAFKA_STORAGE_ERROR = int(ErrorCode.kafka_storage_error)


class ZkNotificationHandler:
    """Handles ISR change and log dir event notifications, inside the controller's events."""

    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller

    # ---- ISR change notifications ------------------------------------------------------
    async def watch_isr_change_notifications(self) -> list[str]:
        c = self.controller
        return await c.zk.get_isr_change_notifications(
            watch=c.watch("IsrChangeNotification", self.on_isr_change_notification)
        )

    async def on_isr_change_notification(self) -> None:
        """Leaders changed ISRs in state znodes: re-read them, tell every broker (no LeaderAndIsr)."""
        c = self.controller
        ctx = c.ctx
        names = await self.watch_isr_change_notifications()
        if not names:
            return
        try:
            partitions = [
                tp
                for tp in sorted(await c.zk.get_isr_change_partitions(names))
                if ctx.partition_replica_assignment(tp)
            ]
            if partitions:
                states = await c.zk.get_partition_states(partitions)
                for tp, (st, version) in states.items():
                    ctx.partition_leadership_info[tp] = leader_and_isr_of(st, version)
                await c.send_update_metadata_request(
                    ctx.live_or_shutting_down_broker_ids, list(states)
                )
        finally:
            await c.zk.delete_isr_change_notifications(names, ctx.epoch_zk_version)

    # ---- log dir failures (JBOD) --------------------------------------------------------
    async def _watch_log_dir_event_notifications(self) -> list[str]:
        c = self.controller
        return await c.zk.get_log_dir_event_notifications(
            watch=c.watch("LogDirEventNotification", self.on_log_dir_event_notification)
        )

    async def initialize_log_dir_event_notifications(self) -> None:
        """Watch /log_dir_event_notification and drop what is pending, as Kafka does at
        failover: the LeaderAndIsr that the replica state machine's start-up sends to
        every live replica finds the failed dirs anyway."""
        names = await self._watch_log_dir_event_notifications()
        if names:
            c = self.controller
            await c.zk.delete_log_dir_event_notifications(names, c.ctx.epoch_zk_version)

    async def on_log_dir_event_notification(self) -> None:
        """Brokers had a log dir fail (KafkaBroker wrote log_dir_event_<seq>): ask them
        which replicas are offline (Kafka's onBrokerLogDirFailure), then delete the
        notifications, malformed ones and those of brokers that are not live too."""
        c = self.controller
        ctx = c.ctx
        names = await self._watch_log_dir_event_notifications()
        if not names:
            return
        try:
            brokers = await c.zk.get_broker_ids_from_log_dir_events(names)
            gone = brokers - set(ctx.live_brokers)
            if gone:
                log.info(
                    "controller %d: ignoring log dir events of brokers %s, which are not live",
                    c.broker_id,
                    sorted(gone),
                )
            await self._on_broker_log_dir_failure(sorted(brokers - gone))
        finally:
            await c.zk.delete_log_dir_event_notifications(names, ctx.epoch_zk_version)

    async def _on_broker_log_dir_failure(self, brokers: list[int]) -> None:
        """LeaderAndIsr for every replica on ``brokers`` (OnlineReplica): a broker answers
        KAFKA_STORAGE_ERROR for the replicas in its failed dirs, and the response, a
        controller event, takes them offline. Replicas of topics being deleted are left
        to the deletion (their StopReplica fails instead)."""
        if not brokers:
            return
        c = self.controller
        log.info("controller %d: handling log dir failure on brokers %s", c.broker_id, brokers)
        replicas = [
            r
            for r in c.ctx.replicas_on_brokers(brokers)
            if not c.is_topic_queued_for_deletion(r.topic)
        ]
        await c.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE)

    # ---- LeaderAndIsr responses ---------------------------------------------------------
    def on_leader_and_isr_response(self, broker_id: int, response: Any) -> None:
        """A LeaderAndIsr was answered (channel sender task): handle it as an event."""
        c = self.controller
        generation = c.generation
        info = c.ctx.live_brokers.get(broker_id)
        broker_epoch = info.epoch if info is not None else None

        async def process() -> None:
            if generation != c.generation or not c.is_active:
                return
            info = c.ctx.live_brokers.get(broker_id)
            if info is None or info.epoch != broker_epoch:
                return  # the broker died or restarted since: its dirs are probed afresh
            await self._leader_and_isr_response_received(broker_id, response)

        c.put_nowait("LeaderAndIsrResponseReceived", process)

    async def _leader_and_isr_response_received(self, broker_id: int, response: Any) -> None:
        """Kafka's LeaderAndIsrResponseReceived: KAFKA_STORAGE_ERROR marks a replica as in a
        failed log dir, NONE as back online; the newly offline ones go through the
        controller's ``on_replicas_become_offline``."""
        c = self.controller
        ctx = c.ctx
        if response.error_code:
            log.error(
                "controller %d: LeaderAndIsr answered with error %d by broker %d",
                c.broker_id,
                response.error_code,
                broker_id,
            )
            return
        previous = ctx.replicas_on_offline_dirs.get(broker_id, set())
        if not previous and not _any_storage_error(response):
            return  # the common case: nothing offline before or now
        offline: set[TopicPartition] = set()
        online: set[TopicPartition] = set()
        for tp, error in self._leader_and_isr_partition_errors(response):
            if error == KAFKA_STORAGE_ERROR:
                offline.add(tp)
            elif error == ErrorCode.none:
                online.add(tp)
        current = (previous - online) | offline
        if current:
            ctx.replicas_on_offline_dirs[broker_id] = current
        else:
            ctx.replicas_on_offline_dirs.pop(broker_id, None)
        back = previous & online
        if back:
            log.info(
                "controller %d: replicas %s on broker %d are online again",
                c.broker_id,
                sorted(back),
                broker_id,
            )
        new = current - previous
        if new:
            log.warning(
                "controller %d: replicas %s on broker %d are in a failed log dir; "
                "marking them offline",
                c.broker_id,
                sorted(new),
                broker_id,
            )
            await c.on_replicas_become_offline(
                [PartitionAndReplica(tp[0], tp[1], broker_id) for tp in sorted(new)]
            )

    def _leader_and_isr_partition_errors(self, response: Any) -> list[tuple[TopicPartition, int]]:
        """(partition, error) of a LeaderAndIsr response: by name up to v4, by topic id
        from v5 (ids of topics this controller no longer knows are skipped)."""
        out = [((e.topic_name, e.partition_index), e.error_code) for e in response.partition_errors]
        if response.topics:
            names = {tid: t for t, tid in self.controller.ctx.topic_ids.items() if tid != ZERO_UUID}
            for t in response.topics:
                name = names.get(t.topic_id)
                if name is not None:
                    out.extend(
                        ((name, e.partition_index), e.error_code) for e in t.partition_errors
                    )
        return out


def _any_storage_error(response: Any) -> bool:
    """Whether a LeaderAndIsr response names a replica in a failed log dir."""
    return any(e.error_code == KAFKA_STORAGE_ERROR for e in response.partition_errors) or any(
        e.error_code == KAFKA_STORAGE_ERROR for t in response.topics for e in t.partition_errors
    )
