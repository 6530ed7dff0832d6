"""Preferred replica election, auto leader rebalance and ElectLeaders (seed 002 §9).

Leadership goes back to a partition's preferred replica (AR[0]) three ways, all
as controller events: an admin writes /admin/preferred_replica_election
(trigger "zk": the znode is deleted after), a client sends ElectLeaders
(trigger "admin", KIP-460; its UNCLEAN type runs the offline selector instead),
or the auto-rebalance tick finds a broker whose preferred partitions are led
elsewhere beyond ``leader.imbalance.per.broker.percentage`` (trigger "auto").
A topic is ineligible for deletion while its partitions are in an election.

The :class:`KafkaController` owns the event queue and the watches; this module
holds the event bodies (Kafka keeps them in ``KafkaController`` itself).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kafkalite.common.types import TopicPartition
from kafkalite.controller.leader_selectors import (
    LeaderElectionNotNeededException,
    OfflinePartitionLeaderSelector,
    PreferredReplicaPartitionLeaderSelector,
)
from kafkalite.controller.partition_state_machine import PartitionState
from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.controller.kafka_controller import KafkaController

log = logging.getLogger(__name__)

ElectionResults = dict[TopicPartition, tuple[int, str | None]]

#: ElectLeaders election types (KIP-460)
PREFERRED_ELECTION = 0
UNCLEAN_ELECTION = 1


class PreferredElectionManager:
    """Moves leadership to preferred replicas, inside the controller's events."""

    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller
        self.selector = PreferredReplicaPartitionLeaderSelector(controller.ctx)
        self._rebalance_timer: asyncio.TimerHandle | None = None

    # ---- /admin/preferred_replica_election ----------------------------------------------
    async def read_pending(self) -> set[TopicPartition] | None:
        """The partitions the admin znode asks for (None without one), watching it."""
        c = self.controller
        return await c.zk.get_preferred_replica_election(
            watch=c.watch("PreferredReplicaLeaderElection", self.on_admin_znode)
        )

    async def on_admin_znode(self) -> None:
        partitions = await self.read_pending()
        if partitions is None:
            return
        await self.on_preferred_replica_election(partitions, trigger="zk")

    async def on_preferred_replica_election(
        self, partitions: Iterable[TopicPartition], *, trigger: str
    ) -> dict[TopicPartition, Exception]:
        """Move leadership to AR[0]; ``trigger`` is "zk" (admin node, deleted after),
        "admin" (ElectLeaders API) or "auto" (rebalance)."""
        c = self.controller
        ctx = c.ctx
        todo = []
        for tp in sorted(set(partitions)):
            if not ctx.partition_replica_assignment(tp):
                log.warning("skipping preferred replica election for unknown partition %s-%d", *tp)
            elif c.is_topic_queued_for_deletion(tp[0]):
                # a client's ElectLeaders racing its DeleteTopics: not a broker error
                log.warning(
                    "skipping preferred replica election for %s-%d: topic being deleted", *tp
                )
            elif tp not in ctx.partitions_undergoing_preferred_replica_election:
                todo.append(tp)
        topics = {tp[0] for tp in todo}
        try:
            ctx.partitions_undergoing_preferred_replica_election.update(todo)
            c.topic_deletion_manager.mark_topic_ineligible_for_deletion(
                topics, "preferred replica election in progress"
            )
            return await c.partition_state_machine.handle_state_changes(
                todo, PartitionState.ONLINE, self.selector
            )
        finally:
            ctx.partitions_undergoing_preferred_replica_election.difference_update(todo)
            if trigger == "zk":
                await c.zk.delete_preferred_replica_election(ctx.epoch_zk_version)
            await c.topic_deletion_manager.resume_deletion_for_topics(topics)

    # ---- auto leader rebalance ---------------------------------------------------------
    def schedule_auto_leader_rebalance(self, delay_s: float) -> None:
        """Queue a rebalance check in ``delay_s``; each check schedules the next one for
        as long as this controllership lasts."""
        c = self.controller
        generation = c.generation

        async def process() -> None:
            if generation != c.generation or not c.is_active:
                return
            try:
                await self.check_and_trigger_auto_leader_rebalance()
            finally:
                if generation == c.generation and c.is_active:
                    self.schedule_auto_leader_rebalance(
                        c.config.leader_imbalance_check_interval_seconds
                    )

        self._rebalance_timer = asyncio.get_running_loop().call_later(
            delay_s, c.put_nowait, "AutoPreferredReplicaLeaderElection", process
        )

    def cancel_auto_leader_rebalance(self) -> None:
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None

    async def check_and_trigger_auto_leader_rebalance(self) -> list[TopicPartition]:
        """Per preferred broker B: if more than leader.imbalance.per.broker.percentage % of
        the partitions preferring B are led elsewhere, elect B where it is live and in the
        ISR (unless reassignments or elections are in progress). Returns what it elected."""
        c = self.controller
        ctx = c.ctx
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp in ctx.all_partitions():
            ar = ctx.partition_replica_assignment(tp)
            if ar and not c.is_topic_queued_for_deletion(tp[0]):
                by_preferred.setdefault(ar[0], []).append(tp)
        threshold = c.config.leader_imbalance_per_broker_percentage / 100
        elected: list[TopicPartition] = []
        for broker, tps in sorted(by_preferred.items()):
            not_led = [
                tp
                for tp in tps
                if (lic := ctx.partition_leadership_info.get(tp)) is not None
                and lic.leader_and_isr.leader != broker
            ]
            ratio = len(not_led) / len(tps)
            log.debug(
                "controller %d: leader imbalance of broker %d is %.3f",
                c.broker_id,
                broker,
                ratio,
            )
            if ratio <= threshold:
                continue
            if (
                broker not in ctx.live_broker_ids
                or ctx.partitions_being_reassigned
                or ctx.partitions_undergoing_preferred_replica_election
            ):
                continue
            candidates = [
                tp
                for tp in not_led
                if not c.is_topic_queued_for_deletion(tp[0])
                and tp[0] in ctx.all_topics
                and broker in ctx.partition_leadership_info[tp].leader_and_isr.isr
                and ctx.is_replica_online(broker, tp)
            ]
            if candidates:
                log.info(
                    "controller %d: rebalancing leadership of %d partitions back to broker %d",
                    c.broker_id,
                    len(candidates),
                    broker,
                )
                failures = await self.on_preferred_replica_election(candidates, trigger="auto")
                elected += [tp for tp in candidates if tp not in failures]
        return elected

    # ---- ElectLeaders (api key 43) --------------------------------------------------------
    async def elect_leaders(
        self, partitions: list[TopicPartition] | None, election_type: int
    ) -> ElectionResults | None:
        """The ReplicaLeaderElection event: None if this broker is no longer the controller.

        Per partition: (error code, message); ``partitions`` None means all of them,
        and then partitions that needed no election are left out, as Kafka does.
        """
        c = self.controller
        if not c.is_active:
            return None
        ctx = c.ctx
        wanted = sorted(ctx.all_partitions()) if partitions is None else partitions
        out: ElectionResults = {}
        todo = []
        for tp in wanted:
            if not ctx.partition_replica_assignment(tp):
                out[tp] = (int(ErrorCode.unknown_topic_or_partition), None)
            elif c.is_topic_queued_for_deletion(tp[0]):
                out[tp] = (
                    int(ErrorCode.invalid_topic_exception),
                    "Deletion of topic is in progress",
                )
            else:
                todo.append(tp)
        if election_type == UNCLEAN_ELECTION:
            leaderless = []
            for tp in todo:
                lic = ctx.partition_leadership_info.get(tp)
                if lic is not None and ctx.is_replica_online(lic.leader_and_isr.leader, tp):
                    out[tp] = (int(ErrorCode.election_not_needed), None)
                else:
                    leaderless.append(tp)
            selector = OfflinePartitionLeaderSelector(ctx, _all_topics)
            failures = await c.partition_state_machine.handle_state_changes(
                leaderless, PartitionState.ONLINE, selector
            )
            c.offline_selector.unclean_elections += selector.unclean_elections
            for tp in leaderless:
                e = failures.get(tp)
                out[tp] = (
                    (0, None)
                    if e is None
                    else (int(ErrorCode.eligible_leaders_not_available), str(e))
                )
        else:
            failures = await self.on_preferred_replica_election(todo, trigger="admin")
            for tp in todo:
                e = failures.get(tp)
                if e is None:
                    out[tp] = (0, None)
                elif isinstance(e, LeaderElectionNotNeededException):
                    out[tp] = (int(ErrorCode.election_not_needed), None)
                else:
                    out[tp] = (int(ErrorCode.preferred_leader_not_available), str(e))
        if partitions is None:
            out = {tp: r for tp, r in out.items() if r[0] != ErrorCode.election_not_needed}
        return out


async def _all_topics(topics: Iterable[str]) -> set[str]:
    """An unclean-election policy that allows it for every topic (ElectLeaders UNCLEAN)."""
    return set(topics)
