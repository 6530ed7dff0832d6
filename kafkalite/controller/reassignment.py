"""Partition reassignment (seed 002 §9 "Reassignment", KIP-455).

A reassignment is asked for in /admin/reassign_partitions (by an admin tool or
AlterPartitionReassignments) and runs as controller events in two phases:

- phase A: AR := RAR ∪ OAR in the topic znode (with KIP-455's adding/removing
  replicas) and on every replica, leader epoch + 1, the new replicas start;
  a data watch on the partition's state znode waits for RAR ⊆ ISR;
- phase B: leadership moves into RAR if needed, the old replicas are stopped
  and deleted, AR := RAR, the partition leaves the admin znode, and every
  broker gets UpdateMetadata.

Cancelling (AlterPartitionReassignments with null replicas) reassigns back to
the original replicas. A topic is ineligible for deletion while a partition of
it is being reassigned.

The :class:`KafkaController` owns the event queue and the watches; this module
holds the event bodies (Kafka keeps them in ``KafkaController`` itself).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkalite.common.types import TopicPartition
from kafkalite.controller.controller_context import (
    NO_LEADER,
    PartitionAndReplica,
    ReassignedPartitionsContext,
)
from kafkalite.controller.leader_selectors import ReassignedPartitionLeaderSelector
from kafkalite.controller.partition_state_machine import PartitionState, leader_and_isr_of
from kafkalite.controller.replica_state_machine import ReplicaState
from kafkalite.metadata import zk_data, zk_paths
from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.controller.kafka_controller import KafkaController

log = logging.getLogger(__name__)

#: per partition: (error code, message)
ReassignmentResults = dict[TopicPartition, tuple[int, str | None]]


class PartitionReassignmentManager:
    """Moves partitions to new replica sets, inside the controller's events."""

    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller
        self.selector = ReassignedPartitionLeaderSelector(controller.ctx)

    # ---- /admin/reassign_partitions -------------------------------------------------
    async def initialize(self) -> None:
        """At failover: load the pending reassignments into the context, watching the znode."""
        c = self.controller
        ctx = c.ctx
        wanted = await c.zk.get_partition_reassignment(
            watch=c.watch("PartitionReassignment", self.on_admin_znode)
        )
        # KIP-455's adding_replicas in the topic znode tell the original replicas of a
        # reassignment already in phase A (AR is then RAR ∪ OAR): what a cancellation
        # goes back to
        assignments = await c.zk.get_topic_assignments(sorted({t for t, _p in wanted}))
        for tp, rar in wanted.items():
            original: list[int] = []
            got = assignments.get(tp[0])
            if got is not None:
                adding = got[0].adding_replicas.get(tp[1])
                if adding:
                    ar = got[0].partitions.get(tp[1], [])
                    original = [r for r in ar if r not in adding]
            ctx.partitions_being_reassigned[tp] = ReassignedPartitionsContext(list(rar), original)

    async def on_admin_znode(self) -> None:
        """/admin/reassign_partitions changed: start the reassignments not running yet."""
        c = self.controller
        ctx = c.ctx
        wanted = await c.zk.get_partition_reassignment(
            watch=c.watch("PartitionReassignment", self.on_admin_znode)
        )
        fresh = {tp: rar for tp, rar in wanted.items() if tp not in ctx.partitions_being_reassigned}
        for tp, rar in sorted(fresh.items()):
            if c.is_topic_queued_for_deletion(tp[0]):
                # a client's request racing a deletion: not a broker error
                log.warning(
                    "skipping reassignment of %s-%d: its topic is being deleted", tp[0], tp[1]
                )
                await self._remove_partition_from_reassigned_partitions(tp)
                continue
            await self._initiate_reassign_replicas(tp, ReassignedPartitionsContext(list(rar)))

    async def maybe_trigger_partition_reassignment(self, partitions: set[TopicPartition]) -> None:
        """At failover: (re)start the loaded reassignments of ``partitions``."""
        ctx = self.controller.ctx
        for tp in sorted(partitions):
            rctx = ctx.partitions_being_reassigned.get(tp)
            if rctx is None:
                continue
            if self.controller.is_topic_queued_for_deletion(tp[0]):
                await self._remove_partition_from_reassigned_partitions(tp)
                continue
            del ctx.partitions_being_reassigned[tp]
            await self._initiate_reassign_replicas(tp, rctx)

    async def _initiate_reassign_replicas(
        self, tp: TopicPartition, rctx: ReassignedPartitionsContext
    ) -> None:
        c = self.controller
        ctx = c.ctx
        ar = ctx.partition_replica_assignment(tp)
        rar = rctx.new_replicas
        reason = None
        if not ar:
            reason = "the partition does not exist"
        elif ar == rar:
            reason = f"it is already assigned to {rar}"
        elif not rar or len(set(rar)) != len(rar):
            reason = f"the new replica list {rar} is empty or has duplicates"
        elif any(r not in ctx.live_broker_ids for r in rar):
            reason = f"some of the new replicas {rar} are not alive"
        if reason is not None:
            # a client's request (AlterPartitionReassignments): not a broker error
            log.warning("dropping reassignment of %s-%d to %s: %s", tp[0], tp[1], rar, reason)
            await self._remove_partition_from_reassigned_partitions(tp)
            return
        if not rctx.original_replicas:
            rctx.original_replicas = list(ar)
        ctx.partitions_being_reassigned[tp] = rctx
        c.topic_deletion_manager.mark_topic_ineligible_for_deletion(
            {tp[0]}, "partition reassignment in progress"
        )
        await self._watch_isr_for_reassignment(tp)
        await self.on_partition_reassignment(tp, rctx)

    # ---- the per-partition ISR listener -----------------------------------------------
    async def _watch_isr_for_reassignment(self, tp: TopicPartition) -> None:
        """The ISR listener of a reassigned partition: a data watch on its state znode."""
        c = self.controller
        await c.store.exists(
            zk_paths.partition_state_path(*tp),
            watch=c.watch(
                _isr_watch_name(tp),
                lambda: self._partition_reassignment_isr_change(tp),
            ),
        )

    async def _partition_reassignment_isr_change(self, tp: TopicPartition) -> None:
        c = self.controller
        ctx = c.ctx
        rctx = ctx.partitions_being_reassigned.get(tp)
        if rctx is None:
            return
        await self._watch_isr_for_reassignment(tp)
        states = await c.zk.get_partition_states([tp])
        if tp not in states:
            return
        st, version = states[tp]
        ctx.partition_leadership_info[tp] = leader_and_isr_of(st, version)
        if set(rctx.new_replicas) <= set(st.isr):
            await self.on_partition_reassignment(tp, rctx)
        else:
            log.info(
                "reassigned replicas %s of %s-%d not caught up yet (ISR %s)",
                rctx.new_replicas,
                tp[0],
                tp[1],
                st.isr,
            )

    # ---- the two phases ---------------------------------------------------------------
    async def on_partition_reassignment(
        self, tp: TopicPartition, rctx: ReassignedPartitionsContext
    ) -> None:
        """Seed 002 §9 "Reassignment": phase A until RAR ⊆ ISR, then phase B."""
        c = self.controller
        ctx = c.ctx
        rar = rctx.new_replicas
        lic = ctx.partition_leadership_info.get(tp)
        isr = set(lic.leader_and_isr.isr) if lic is not None else set()
        current = ctx.partition_replica_assignment(tp)
        if not set(rar) <= isr:
            # phase A: AR := RAR ∪ OAR everywhere, new replicas start and catch up
            union = list(dict.fromkeys([*rar, *current]))
            orig = rctx.original_replicas or current
            await self.update_assigned_replicas(
                tp,
                union,
                adding=[r for r in rar if r not in orig],
                removing=[r for r in orig if r not in rar],
            )
            await self._update_leader_epoch_and_send_request(tp, union, union)
            new_replicas = [PartitionAndReplica(tp[0], tp[1], r) for r in rar if r not in current]
            await c.replica_state_machine.handle_state_changes(new_replicas, ReplicaState.NEW)
            log.info("reassignment of %s-%d: waiting for %s to join the ISR", tp[0], tp[1], rar)
            return
        # phase B: the new replicas are in sync
        old = [r for r in current if r not in rar]
        rsm = c.replica_state_machine
        await rsm.handle_state_changes(
            [PartitionAndReplica(tp[0], tp[1], r) for r in rar], ReplicaState.ONLINE
        )
        await self._move_reassigned_partition_leader_if_required(tp, rctx, current)
        old_replicas = [PartitionAndReplica(tp[0], tp[1], r) for r in old]
        await rsm.handle_state_changes(old_replicas, ReplicaState.OFFLINE)
        await rsm.handle_state_changes(old_replicas, ReplicaState.DELETION_STARTED)
        await rsm.handle_state_changes(old_replicas, ReplicaState.DELETION_SUCCESSFUL)
        await rsm.handle_state_changes(old_replicas, ReplicaState.NON_EXISTENT)
        await self.update_assigned_replicas(tp, rar)
        await self._remove_partition_from_reassigned_partitions(tp)
        await c.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, [tp])
        await c.topic_deletion_manager.resume_deletion_for_topics({tp[0]})
        log.info("reassignment of %s-%d to %s completed", tp[0], tp[1], rar)

    async def _move_reassigned_partition_leader_if_required(
        self, tp: TopicPartition, rctx: ReassignedPartitionsContext, old_and_new: list[int]
    ) -> None:
        c = self.controller
        ctx = c.ctx
        rar = rctx.new_replicas
        lic = ctx.partition_leadership_info.get(tp)
        leader = lic.leader_and_isr.leader if lic is not None else NO_LEADER
        # LeaderAndIsr from now on carries AR = RAR, so the leader drops the old replicas
        ctx.update_partition_replica_assignment(tp, rar)
        if leader not in rar or not ctx.is_replica_online(leader, tp):
            await c.partition_state_machine.handle_state_changes(
                [tp], PartitionState.ONLINE, self.selector
            )
        else:
            await self._update_leader_epoch_and_send_request(tp, old_and_new, rar)

    async def update_assigned_replicas(
        self,
        tp: TopicPartition,
        replicas: list[int],
        *,
        adding: list[int] | None = None,
        removing: list[int] | None = None,
    ) -> None:
        """Write the partition's AR to the topic znode and the context, with KIP-455's
        adding/removing replicas while it is being reassigned (cleared otherwise)."""
        c = self.controller
        ctx = c.ctx
        got = await c.zk.get_topic_assignment(tp[0])
        if got is None:
            raise RuntimeError(f"topic {tp[0]} vanished during reassignment")
        assignment, version = got
        partitions = dict(assignment.partitions)
        partitions[tp[1]] = list(replicas)
        adding_map = dict(assignment.adding_replicas)
        removing_map = dict(assignment.removing_replicas)
        for m, v in ((adding_map, adding), (removing_map, removing)):
            if v:
                m[tp[1]] = list(v)
            else:
                m.pop(tp[1], None)
        new = zk_data.TopicAssignment(
            partitions,
            adding_map,
            removing_map,
            assignment.topic_id,
        )
        await c.zk.set_topic_assignment(
            tp[0], new, expected_version=version, epoch_zk_version=ctx.epoch_zk_version
        )
        ctx.update_partition_replica_assignment(tp, replicas)

    async def _update_leader_epoch_and_send_request(
        self, tp: TopicPartition, receivers: list[int], replicas: list[int]
    ) -> None:
        c = self.controller
        updated = await c.partition_state_machine.update_leader_epoch([tp])
        lic = updated.get(tp)
        if lic is None:
            log.error("could not bump the leader epoch of %s-%d for reassignment", *tp)
            return
        c.batch.new_batch()
        c.batch.add_leader_and_isr_request_for_brokers(receivers, tp, lic, replicas)
        await c.batch.send_requests_to_brokers(c.ctx.epoch)

    async def _remove_partition_from_reassigned_partitions(self, tp: TopicPartition) -> None:
        c = self.controller
        ctx = c.ctx
        ctx.partitions_being_reassigned.pop(tp, None)
        c.unwatch(_isr_watch_name(tp))
        wanted = await c.zk.get_partition_reassignment()
        if tp in wanted:
            del wanted[tp]
            await c.zk.set_partition_reassignment(wanted, ctx.epoch_zk_version)

    # ---- AlterPartitionReassignments / ListPartitionReassignments ---------------------
    async def alter_partition_reassignments(
        self, wanted: dict[TopicPartition, list[int] | None]
    ) -> ReassignmentResults | None:
        """The ApiPartitionReassignment event: add reassignments to
        /admin/reassign_partitions (the znode's watch does the rest), or cancel them
        (replicas None, KIP-455); None if this broker is no longer the controller."""
        c = self.controller
        if not c.is_active:
            return None
        ctx = c.ctx
        out: ReassignmentResults = {}
        current = await c.zk.get_partition_reassignment()
        changed = False
        cancel: list[TopicPartition] = []
        for tp, replicas in wanted.items():
            if not ctx.partition_replica_assignment(tp):
                out[tp] = (int(ErrorCode.unknown_topic_or_partition), None)
            elif replicas is None:
                if tp in ctx.partitions_being_reassigned:
                    cancel.append(tp)
                    out[tp] = (0, None)
                elif tp in current:  # queued, not started yet: dropping it cancels it
                    out[tp] = (0, None)
                else:
                    out[tp] = (int(ErrorCode.no_reassignment_in_progress), None)
                if tp in current:
                    del current[tp]
                    changed = True
            elif not replicas or len(set(replicas)) != len(replicas):
                out[tp] = (
                    int(ErrorCode.invalid_replica_assignment),
                    "empty or duplicate replicas",
                )
            elif any(r not in ctx.live_broker_ids for r in replicas):
                out[tp] = (
                    int(ErrorCode.invalid_replica_assignment),
                    f"replicas {replicas} include brokers that are not alive",
                )
            elif tp in ctx.partitions_being_reassigned:
                out[tp] = (
                    int(ErrorCode.invalid_replica_assignment),
                    "a reassignment of this partition is already in progress",
                )
            else:
                current[tp] = list(replicas)
                changed = True
                out[tp] = (0, None)
        if changed:
            await c.zk.set_partition_reassignment(current, ctx.epoch_zk_version)
        for tp in cancel:
            await self._cancel_reassignment(tp)
        return out

    async def _cancel_reassignment(self, tp: TopicPartition) -> None:
        """KIP-455 cancellation: reassign back to the original replicas.

        As Kafka's ``onPartitionReassignment`` with the target set to the origin
        replicas: the AR goes back to the original replicas (adding/removing cleared),
        the replicas that were being added are stopped and deleted, and then the
        reassignment to the original replicas completes as any other (at once when they
        are all in the ISR: leader moved back if an added replica led, leader epoch
        bumped, UpdateMetadata).
        """
        ctx = self.controller.ctx
        rctx = ctx.partitions_being_reassigned[tp]
        current = ctx.partition_replica_assignment(tp)
        origin = list(rctx.original_replicas) or list(current)
        log.info(
            "cancelling the reassignment of %s-%d to %s: back to %s",
            tp[0],
            tp[1],
            rctx.new_replicas,
            origin,
        )
        back = ReassignedPartitionsContext(origin, origin)
        ctx.partitions_being_reassigned[tp] = back
        unneeded = [r for r in current if r not in origin]
        if current != origin:
            await self.update_assigned_replicas(tp, origin)
        if unneeded:
            stopped = [PartitionAndReplica(tp[0], tp[1], r) for r in unneeded]
            rsm = self.controller.replica_state_machine
            await rsm.handle_state_changes(stopped, ReplicaState.OFFLINE)
            await rsm.handle_state_changes(stopped, ReplicaState.DELETION_STARTED)
            await rsm.handle_state_changes(stopped, ReplicaState.DELETION_SUCCESSFUL)
            await rsm.handle_state_changes(stopped, ReplicaState.NON_EXISTENT)
        await self.on_partition_reassignment(tp, back)

    def list_partition_reassignments(
        self,
    ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """(replicas, adding, removing) per partition being reassigned."""
        ctx = self.controller.ctx
        out = {}
        for tp, rctx in ctx.partitions_being_reassigned.items():
            orig = rctx.original_replicas
            rar = rctx.new_replicas
            out[tp] = (
                list(ctx.partition_replica_assignment(tp)),
                [r for r in rar if r not in orig],
                [r for r in orig if r not in rar],
            )
        return out


def _isr_watch_name(tp: TopicPartition) -> str:
    return f"PartitionReassignmentIsrChange:{tp[0]}:{tp[1]}"
