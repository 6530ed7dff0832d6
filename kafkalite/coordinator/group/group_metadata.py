"""GroupMetadata and MemberMetadata: one classic group's state machine and members.

States and their legal predecessors follow Kafka's GroupMetadata::

    Empty               <- PreparingRebalance
    PreparingRebalance  <- Empty, Stable, CompletingRebalance
    CompletingRebalance <- PreparingRebalance
    Stable              <- CompletingRebalance
    Dead                <- any

A member waiting in JoinGroup or SyncGroup holds an asyncio future that the
coordinator resolves (Kafka's awaitingJoinCallback / awaitingSyncCallback).
Everything runs on the broker's event loop, so the group needs no lock.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from kafkalite.common.types import TopicPartition
from kafkalite.coordinator.group import consumer_protocol
from kafkalite.coordinator.group.consumer_group import ConsumerGroup
from kafkalite.coordinator.group.offset_codec import GroupMetadataValue, MemberMetadataValue
from kafkalite.coordinator.share.share_group import ShareGroup
from kafkalite.protocol.errors import ErrorCode

NO_GENERATION = -1
NO_LEADER = ""
NO_PROTOCOL = ""


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass(slots=True)
class JoinGroupResult:
    member_id: str
    error: int = 0
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = NO_LEADER
    skip_assignment: bool = False
    #: (member_id, group_instance_id, metadata) — only the leader gets them
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncGroupResult:
    error: int = 0
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True)
class OffsetAndMetadata:
    """A committed offset. ``record_offset`` is where its record sits in the log (-1: not yet)."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1
    record_offset: int = -1


class MemberMetadata:
    """One member of a classic group, as the coordinator knows it."""

    __slots__ = (
        "member_id",
        "group_instance_id",
        "client_id",
        "client_host",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "protocol_type",
        "supported_protocols",
        "assignment",
        "join_future",
        "sync_future",
        "is_new",
        "is_leaving",
        "heartbeat_satisfied",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        supported_protocols: list[tuple[str, bytes]],
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols = supported_protocols
        self.assignment = b""
        self.join_future: asyncio.Future[JoinGroupResult] | None = None
        self.sync_future: asyncio.Future[SyncGroupResult] | None = None
        self.is_new = False
        self.is_leaving = False
        self.heartbeat_satisfied = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_future is not None

    @property
    def protocols(self) -> list[str]:
        """Protocol names, each once: a request may repeat one (the group counts members
        per protocol, and a name counted twice made "supported by every member" fail)."""
        return list(dict.fromkeys(name for name, _ in self.supported_protocols))

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.supported_protocols:
            if name == protocol:
                return meta
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata: a rejoin that changes nothing."""
        return protocols == self.supported_protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_leaving:
            return True
        if self.is_new:
            # a new member can expire while it waits in JoinGroup
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            # a rebalance in progress stands in for heartbeats
            return True
        return self.heartbeat_satisfied

    def __repr__(self) -> str:
        return f"MemberMetadata({self.member_id!r}, instance={self.group_instance_id!r})"


class GroupMetadata:
    """A classic group: members, generation, selected protocol and committed offsets."""

    def __init__(self, group_id: str, state: GroupState, now_ms: int) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.supported_protocols: Counter[str] = Counter()
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        #: commits appended but not yet acknowledged, per partition (never expired)
        self.pending_offset_commits: Counter[TopicPartition] = Counter()
        #: set when the group runs the consumer protocol (KIP-848); the classic state
        #: then stays Empty and this holds the members
        self.consumer: ConsumerGroup | None = None
        #: set when the group is a share group (KIP-932)
        self.share: ShareGroup | None = None

    @property
    def group_type(self) -> str:
        if self.share is not None:
            return "share"
        return "classic" if self.consumer is None else "consumer"

    @property
    def is_empty(self) -> bool:
        """No member of any protocol."""
        return (
            self.is_state(GroupState.EMPTY)
            and (self.consumer is None or self.consumer.is_empty)
            and (self.share is None or self.share.is_empty)
        )

    @property
    def state_name(self) -> str:
        """The state as ListGroups and the CLI name it for the group's type."""
        if self.share is not None and not self.is_state(GroupState.DEAD):
            return self.share.state
        if self.consumer is not None and not self.is_state(GroupState.DEAD):
            return self.consumer.state.value
        return self.state.value

    # ---- state --------------------------------------------------------------------
    def is_state(self, *states: GroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return GroupState.PREPARING_REBALANCE in _valid_next(self.state)

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise RuntimeError(
                f"group {self.group_id}: illegal transition {self.state.value} -> {target.value}"
            )
        self.state = target
        self.state_timestamp = now_ms

    # ---- members ------------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.members)

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(
        self, member: MemberMetadata, join_future: asyncio.Future[JoinGroupResult] | None = None
    ) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocols)
        member.join_future = join_future
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self.supported_protocols.subtract(member.protocols)
        self.supported_protocols += Counter()  # drop zero counts
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        self.pending_sync_members.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def update_member(
        self,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_future: asyncio.Future[JoinGroupResult] | None,
    ) -> None:
        self.supported_protocols.subtract(member.protocols)
        self.supported_protocols += Counter()
        member.supported_protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        self.supported_protocols.update(member.protocols)
        if join_future is not None:
            member.join_future = join_future

    def replace_static_member(
        self, instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """Give a static member a new member id; the old id is fenced from now on."""
        member = self.members.pop(old_member_id)
        fenced = JoinGroupResult(old_member_id, ErrorCode.fenced_instance_id)
        self.complete_join(member, fenced)
        self.complete_sync(member, SyncGroupResult(ErrorCode.fenced_instance_id))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_member_fenced(self, instance_id: str | None, member_id: str) -> bool:
        current = self.static_member_id(instance_id)
        return current is not None and current != member_id

    def validate_member(self, member_id: str, instance_id: str | None) -> int:
        """Kafka's validateMember: a static id must map to this member, which must exist."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return int(ErrorCode.unknown_member_id)
            if current != member_id:
                return int(ErrorCode.fenced_instance_id)
        if member_id not in self.members:
            return int(ErrorCode.unknown_member_id)
        return 0

    def complete_join(self, member: MemberMetadata, result: JoinGroupResult) -> bool:
        fut = member.join_future
        member.join_future = None
        if fut is None:
            return False
        if not fut.done():
            fut.set_result(result)
        return True

    def complete_sync(self, member: MemberMetadata, result: SyncGroupResult) -> bool:
        fut = member.sync_future
        member.sync_future = None
        if fut is None:
            return False
        if not fut.done():
            fut.set_result(result)
        return True

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """If the leader has not rejoined, hand leadership to a member that has.

        False when no member has rejoined (all of them static and silent)."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for m in self.members.values():
            if m.is_awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    # ---- protocols ----------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def supports_protocols(self, protocol_type: str, protocols: list[str]) -> bool:
        if self.is_state(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(p, 0) == n for p in protocols
        )

    def select_protocol(self) -> str:
        """Each member votes for its favourite candidate; most votes wins.

        Ties go to the protocol the leader prefers, so the choice is deterministic."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id}: no protocol supported by every member")
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        leader = self.members.get(self.leader_id or "")
        order = leader.protocols if leader is not None else []
        winners = [p for p, c in votes.items() if c == best]
        winners.sort(key=lambda p: order.index(p) if p in order else len(order))
        return winners[0]

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        if self.protocol_name is None:
            raise RuntimeError(f"group {self.group_id} has no selected protocol")
        return [
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        ]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def _compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != consumer_protocol.PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = consumer_protocol.subscribed_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return True if self.subscribed_topics is None else topic in self.subscribed_topics

    # ---- offsets ------------------------------------------------------------------
    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Offsets past retention, by Kafka's rules (KIP-211).

        Empty groups expire offsets once they have been empty for the retention
        period; stable consumer groups only offsets of topics they no longer
        subscribe to; simple (protocol-less) groups per offset since its commit.
        An explicit expire timestamp (OffsetCommit v2-v4) always wins."""

        def expired(base: dict[TopicPartition, int], keep: set[str]) -> list[TopicPartition]:
            out = []
            for tp, o in self.offsets.items():
                if tp[0] in keep or self.pending_offset_commits.get(tp):
                    continue
                if o.expire_timestamp >= 0:
                    if now_ms >= o.expire_timestamp:
                        out.append(tp)
                elif now_ms - base[tp] >= retention_ms:
                    out.append(tp)
            return out

        if self.consumer is not None and not self.consumer.is_empty:
            # a live consumer group keeps the offsets of the topics it subscribes to
            keep = set(self.consumer.subscription_metadata)
            return expired({tp: o.commit_timestamp for tp, o in self.offsets.items()}, keep)
        if self.protocol_type is None:
            return expired({tp: o.commit_timestamp for tp, o in self.offsets.items()}, set())
        if self.is_state(GroupState.EMPTY):
            return expired(
                {
                    tp: self.state_timestamp if self.state_timestamp >= 0 else o.commit_timestamp
                    for tp, o in self.offsets.items()
                },
                set(),
            )
        if (
            self.protocol_type == consumer_protocol.PROTOCOL_TYPE
            and self.subscribed_topics is not None
            and self.is_state(GroupState.STABLE)
        ):
            return expired(
                {tp: o.commit_timestamp for tp, o in self.offsets.items()}, self.subscribed_topics
            )
        return []

    # ---- persistence --------------------------------------------------------------
    def to_record_value(self, assignment: dict[str, bytes]) -> GroupMetadataValue:
        protocol = self.protocol_name
        members = []
        if protocol is not None:
            for m in self.members.values():
                members.append(
                    MemberMetadataValue(
                        member_id=m.member_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        session_timeout=m.session_timeout_ms,
                        subscription=m.metadata(protocol),
                        assignment=assignment.get(m.member_id, b""),
                        rebalance_timeout=m.rebalance_timeout_ms,
                        group_instance_id=m.group_instance_id,
                    )
                )
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=protocol,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp,
            members=members,
        )

    @classmethod
    def from_record_value(
        cls, group_id: str, value: GroupMetadataValue, now_ms: int
    ) -> GroupMetadata:
        """Rebuild a loaded group: Stable with its members, or Empty without any."""
        state = GroupState.STABLE if value.members else GroupState.EMPTY
        g = cls(
            group_id,
            state,
            value.current_state_timestamp if value.current_state_timestamp >= 0 else now_ms,
        )
        g.protocol_type = value.protocol_type or None
        g.generation_id = value.generation
        g.protocol_name = value.protocol
        for mv in value.members:
            protocols = [(value.protocol or "", mv.subscription)]
            m = MemberMetadata(
                mv.member_id,
                mv.group_instance_id,
                mv.client_id,
                mv.client_host,
                mv.rebalance_timeout if mv.rebalance_timeout >= 0 else mv.session_timeout,
                mv.session_timeout,
                g.protocol_type or "",
                protocols,
            )
            m.assignment = mv.assignment
            g.add(m)
        g.leader_id = value.leader if value.leader in g.members else next(iter(g.members), None)
        g.subscribed_topics = g._compute_subscribed_topics()
        return g

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id!r}, {self.state.value}, generation={self.generation_id}, "
            f"members={list(self.members)})"
        )


def _valid_next(state: GroupState) -> set[GroupState]:
    return {t for t, prev in _VALID_PREVIOUS.items() if state in prev}
