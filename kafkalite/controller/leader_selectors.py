"""Partition leader selectors (seed 002 §7, seed 000 §6.4.3).

Each takes the partition's current LeaderAndIsr and returns the new one (leader
epoch + 1) and the brokers that must receive LeaderAndIsr. AR order is the
preference order: AR is fixed at assignment time while the ISR order changes,
so "the first live AR replica that is in the ISR" is the same on every
controller. A replica counts as live when it is online in Kafka's sense
(:meth:`ControllerContext.is_replica_online`): its broker is live and its log
dir has not failed. Selectors raise instead of returning "no leader"; the
partition state machine then leaves the partition as it was (no znode write).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from kafkalite.common.types import TopicPartition
from kafkalite.controller.controller_context import ControllerContext, LeaderAndIsr

log = logging.getLogger(__name__)


class StateChangeFailedException(Exception):
    """A state transition could not be made; the partition or replica keeps its state."""


class NoReplicaOnlineException(StateChangeFailedException):
    """No replica can become leader."""


class LeaderElectionNotNeededException(StateChangeFailedException):
    """The wanted leader already leads: nothing to write."""


class PartitionLeaderSelector(Protocol):
    async def prepare(self, partitions: Iterable[TopicPartition]) -> None:
        """Load what selection needs from the store before a batch (may do nothing)."""

    def select_leader(
        self, tp: TopicPartition, current: LeaderAndIsr
    ) -> tuple[LeaderAndIsr, list[int]]: ...


class NoOpLeaderSelector:
    """Keeps the current leader and ISR; the receivers are the AR."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx

    async def prepare(self, partitions: Iterable[TopicPartition]) -> None:
        return None

    def select_leader(
        self, tp: TopicPartition, current: LeaderAndIsr
    ) -> tuple[LeaderAndIsr, list[int]]:
        log.warning("no-op leader selector for %s-%d keeps %s", tp[0], tp[1], current)
        return current, list(self.ctx.partition_replica_assignment(tp))


class OfflinePartitionLeaderSelector:
    """New leader after the leader died, or at start-up for offline partitions.

    The first live AR replica in the live ISR, ISR = live ISR. With no live ISR
    member: if unclean election is enabled for the topic (the broker's
    ``unclean.leader.election.enable`` overlaid by /config/topics/<t>), the
    first live AR replica with ISR [it] (data loss); otherwise no leader.
    """

    def __init__(
        self,
        ctx: ControllerContext,
        unclean_enabled: Callable[[Iterable[str]], Awaitable[set[str]]],
    ) -> None:
        self.ctx = ctx
        self._load_unclean = unclean_enabled
        #: topics whose unclean election is enabled, as of the last :meth:`prepare`
        self.unclean_topics: set[str] = set()
        self.unclean_elections = 0

    async def prepare(self, partitions: Iterable[TopicPartition]) -> None:
        """Read the unclean setting of the topics that may need it (no live ISR)."""
        ctx = self.ctx
        topics = set()
        for tp in partitions:
            lic = ctx.partition_leadership_info.get(tp)
            if lic is None or not any(ctx.is_replica_online(r, tp) for r in lic.leader_and_isr.isr):
                topics.add(tp[0])
        self.unclean_topics = await self._load_unclean(topics) if topics else set()

    def select_leader(
        self, tp: TopicPartition, current: LeaderAndIsr
    ) -> tuple[LeaderAndIsr, list[int]]:
        ctx = self.ctx
        ar = ctx.partition_replica_assignment(tp)
        live_ar = [r for r in ar if ctx.is_replica_online(r, tp)]
        live_isr = [r for r in current.isr if ctx.is_replica_online(r, tp)]
        if live_isr:
            leader = next((r for r in live_ar if r in live_isr), None)
            if leader is None:  # an ISR member outside the AR: cannot happen with a sane store
                raise NoReplicaOnlineException(
                    f"no live ISR replica of {tp[0]}-{tp[1]} is in its assignment {ar}"
                )
            return current.new_leader_and_isr(leader, live_isr), live_ar
        if tp[0] not in self.unclean_topics:
            raise NoReplicaOnlineException(
                f"no replica in ISR {list(current.isr)} of {tp[0]}-{tp[1]} is online "
                f"(online replicas {live_ar}) and unclean leader election is disabled"
            )
        if not live_ar:
            raise NoReplicaOnlineException(
                f"no replica of {tp[0]}-{tp[1]} (assigned {ar}) is online"
            )
        leader = live_ar[0]
        self.unclean_elections += 1
        log.warning(
            "unclean leader election for %s-%d: %d becomes leader although it is not in "
            "the ISR %s; data may be lost",
            tp[0],
            tp[1],
            leader,
            list(current.isr),
        )
        return current.new_leader_and_isr(leader, [leader]), live_ar


class ReassignedPartitionLeaderSelector:
    """During reassignment: the first RAR replica that is live and in the ISR; ISR unchanged."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx

    async def prepare(self, partitions: Iterable[TopicPartition]) -> None:
        return None

    def select_leader(
        self, tp: TopicPartition, current: LeaderAndIsr
    ) -> tuple[LeaderAndIsr, list[int]]:
        reassignment = self.ctx.partitions_being_reassigned.get(tp)
        if reassignment is None:
            raise StateChangeFailedException(f"{tp[0]}-{tp[1]} is not being reassigned")
        rar = reassignment.new_replicas
        candidates = [r for r in rar if self.ctx.is_replica_online(r, tp) and r in current.isr]
        if not candidates:
            raise NoReplicaOnlineException(
                f"none of the reassigned replicas {rar} of {tp[0]}-{tp[1]} is alive and in "
                f"the ISR {list(current.isr)}"
            )
        return current.new_leader_and_isr(candidates[0], current.isr), list(rar)


class PreferredReplicaPartitionLeaderSelector:
    """Moves leadership to AR[0] if it is live and in the ISR; ISR unchanged."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx

    async def prepare(self, partitions: Iterable[TopicPartition]) -> None:
        return None

    def select_leader(
        self, tp: TopicPartition, current: LeaderAndIsr
    ) -> tuple[LeaderAndIsr, list[int]]:
        ar = self.ctx.partition_replica_assignment(tp)
        if not ar:
            raise StateChangeFailedException(f"{tp[0]}-{tp[1]} has no assignment")
        preferred = ar[0]
        if current.leader == preferred:
            raise LeaderElectionNotNeededException(
                f"preferred replica {preferred} is already the leader of {tp[0]}-{tp[1]}"
            )
        if self.ctx.is_replica_online(preferred, tp) and preferred in current.isr:
            return current.new_leader_and_isr(preferred, current.isr), list(ar)
        raise StateChangeFailedException(
            f"preferred replica {preferred} of {tp[0]}-{tp[1]} is not alive or not in the "
            f"ISR {list(current.isr)}"
        )


class ControlledShutdownLeaderSelector:
    """Moves leadership off shutting-down brokers, which also leave the ISR."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx

    async def prepare(self, partitions: Iterable[TopicPartition]) -> None:
        return None

    def select_leader(
        self, tp: TopicPartition, current: LeaderAndIsr
    ) -> tuple[LeaderAndIsr, list[int]]:
        ctx = self.ctx
        ar = ctx.partition_replica_assignment(tp)
        shutting = ctx.shutting_down_broker_ids
        live_ar = [r for r in ar if ctx.is_replica_online(r, tp, include_shutting_down=True)]
        new_isr = [r for r in current.isr if r not in shutting]
        leader = next((r for r in live_ar if r in new_isr), None)
        if leader is None:
            raise StateChangeFailedException(
                f"no online replica of {tp[0]}-{tp[1]} outside the shutting-down brokers "
                f"{sorted(shutting)} is in the ISR {list(current.isr)}"
            )
        return current.new_leader_and_isr(leader, new_isr), live_ar
