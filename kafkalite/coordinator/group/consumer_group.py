"""The consumer group of KIP-848: members, epochs, target assignment and reconciliation.

Three epochs drive the group (Kafka's ``ConsumerGroup``):

* the **group epoch** is bumped whenever the group changes in a way that needs a
  new assignment (a member joins, leaves or changes its subscription, a
  subscribed topic appears or grows);
* the **target assignment epoch** is the group epoch the target assignment was
  computed for; while it lags, the group is Assigning;
* each **member epoch** says which target the member has reconciled to. A
  member moves towards its target one step per heartbeat
  (:func:`next_member_state`, Kafka's ``CurrentAssignmentBuilder``): it first
  gives up the partitions it must revoke (UNREVOKED_PARTITIONS, keeping its old
  epoch), and only gets a partition once no other member holds it
  (UNRELEASED_PARTITIONS otherwise). ``partition_epochs`` records who holds
  what, so a partition is never handed to two members at once.

The group state follows: Empty (no members), Assigning (group epoch ahead of
the target), Reconciling (some member not at the target epoch or not stable),
Stable.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from kafkalite.coordinator.group.assignors import Assignment

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
#: the type name ListGroups and DescribeGroups use
CONSUMER_GROUP_TYPE = "consumer"


class MemberState(Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


def copy_assignment(a: Mapping[uuid.UUID, set[int] | frozenset[int]]) -> Assignment:
    return {t: set(ps) for t, ps in a.items() if ps}


@dataclass(slots=True)
class ClassicMember:
    """What a classic member of a consumer group joined with (Kafka's ClassicMemberMetadata)."""

    session_timeout_ms: int
    #: (name, metadata) in the member's preference order
    protocols: list[tuple[str, bytes]]


@dataclass(slots=True)
class ConsumerGroupMember:
    """One member of a consumer group as the coordinator knows it."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300000
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    #: partitions the member may use now
    assigned: Assignment = field(default_factory=dict)
    #: partitions the member still holds and must give up
    pending_revocation: Assignment = field(default_factory=dict)
    session_timer: asyncio.TimerHandle | None = None
    rebalance_timer: asyncio.TimerHandle | None = None
    #: set for a member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat)
    classic: ClassicMember | None = None
    #: a classic member's join or sync deadline (Kafka's join and sync timeouts)
    classic_timer: asyncio.TimerHandle | None = None

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == target_epoch

    def cancel_timers(self) -> None:
        for t in (self.session_timer, self.rebalance_timer, self.classic_timer):
            if t is not None:
                t.cancel()
        self.session_timer = self.rebalance_timer = self.classic_timer = None


@dataclass(slots=True)
class TopicInfo:
    """A subscribed topic as the group last saw it (Kafka's subscription metadata)."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int


class ConsumerGroup:
    """The consumer-protocol state of one group (offsets stay with the classic container)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.target_assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.target_assignment: dict[str, Assignment] = {}
        #: (topic id, partition) -> epoch of the member holding it
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        #: subscribed topic name -> its id and partition count (by name, sorted)
        self.subscription_metadata: dict[str, TopicInfo] = {}
        self.assignor_name = ""
        self.dead = False
        #: what __consumer_offsets holds for the group (key -> value), to write only changes
        self.persisted: dict[bytes, bytes] = {}
        #: members whose records may have changed since the last write
        self.dirty: set[str] = set()

    # ---- state --------------------------------------------------------------------
    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.target_assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if not m.is_reconciled_to(self.target_assignment_epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def is_empty(self) -> bool:
        return not self.members

    # ---- members ------------------------------------------------------------------
    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        if instance_id is None:
            return None
        mid = self.static_members.get(instance_id)
        return None if mid is None else self.members.get(mid)

    def update_member(self, member: ConsumerGroupMember) -> None:
        """Add or replace a member, moving its partition epochs along."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._drop_epochs(old)
        self.members[member.member_id] = member
        self.dirty.add(member.member_id)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._add_epochs(member)

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._drop_epochs(member)
        self.dirty.add(member_id)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == (
            member_id
        ):
            del self.static_members[member.instance_id]
        self.target_assignment.pop(member_id, None)
        member.cancel_timers()
        return member

    def _add_epochs(self, m: ConsumerGroupMember) -> None:
        for a in (m.assigned, m.pending_revocation):
            for tid, parts in a.items():
                for p in parts:
                    held = self.partition_epochs.get((tid, p))
                    if held is not None:
                        raise RuntimeError(
                            f"group {self.group_id}: partition {tid}-{p} is already held "
                            f"at epoch {held}; {m.member_id} cannot take it"
                        )
                    self.partition_epochs[(tid, p)] = m.member_epoch

    def _drop_epochs(self, m: ConsumerGroupMember) -> None:
        for a in (m.assigned, m.pending_revocation):
            for tid, parts in a.items():
                for p in parts:
                    self.partition_epochs.pop((tid, p), None)

    def current_partition_epoch(self, tid: uuid.UUID, p: int) -> int:
        return self.partition_epochs.get((tid, p), -1)

    def subscribed_topic_names(self, resolve_regex: Callable[[str], set[str]]) -> set[str]:
        """Every topic a member names or matches (each distinct regex resolved once)."""
        names: set[str] = set()
        regexes: set[str] = set()
        for m in self.members.values():
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex is not None:
                regexes.add(m.subscribed_topic_regex)
        for rx in regexes:
            names |= resolve_regex(rx)
        return names

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members ask for (Kafka's computePreferredServerAssignor)."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return default
        return max(sorted(votes), key=lambda a: votes[a])


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Whether the member still reports any of ``partitions`` (None: assume it does)."""
    if owned is None:
        return True
    for tid, parts in owned.items():
        if parts & partitions.get(tid, set()):
            return True
    return False


def next_member_state(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    current_partition_epoch: Callable[[uuid.UUID, int], int],
    owned: Assignment | None,
) -> tuple[int, MemberState, Assignment, Assignment]:
    """One reconciliation step: (member epoch, state, assigned, pending revocation).

    ``owned`` is what the member reported holding in this heartbeat (None when it
    did not say)."""
    if member.state == MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member.member_epoch, member.state, member.assigned, member.pending_revocation
        return _compute(
            member, member.member_epoch, target_epoch, target, current_partition_epoch, owned
        )
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member.member_epoch, member.state, member.assigned, member.pending_revocation
        return _compute(
            member, member.member_epoch + 1, target_epoch, target, current_partition_epoch, owned
        )
    return _compute(
        member, member.member_epoch, target_epoch, target, current_partition_epoch, owned
    )


def _compute(
    member: ConsumerGroupMember,
    revoking_epoch: int,
    target_epoch: int,
    target: Assignment,
    current_partition_epoch: Callable[[uuid.UUID, int], int],
    owned: Assignment | None,
) -> tuple[int, MemberState, Assignment, Assignment]:
    assigned: Assignment = {}
    revoking: Assignment = {}
    pending: Assignment = {}
    unreleased = False
    for tid in set(target) | set(member.assigned):
        want = target.get(tid, set())
        have = member.assigned.get(tid, set())
        keep = have & want
        drop = have - keep
        new = set()
        for p in want - keep:
            if current_partition_epoch(tid, p) != -1:
                unreleased = True
            else:
                new.add(p)
        if keep:
            assigned[tid] = keep
        if drop:
            revoking[tid] = drop
        if new:
            pending[tid] = new
    if revoking and _owns_any(owned, revoking):
        return revoking_epoch, MemberState.UNREVOKED_PARTITIONS, assigned, revoking
    for tid, parts in pending.items():
        assigned.setdefault(tid, set()).update(parts)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return target_epoch, state, assigned, {}
