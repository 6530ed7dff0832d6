"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): the KIP-848 protocol.

A heartbeat does the three steps of Kafka's ``consumerGroupHeartbeat``:

1. create or update the member; a new member, a changed subscription or a
   change of the subscribed topics (created, grown, matched by a regex) bumps
   the group epoch;
2. if the group epoch is ahead of the target assignment epoch, the preferred
   server assignor computes a new target assignment (sticky: it starts from
   the previous one);
3. the member takes one reconciliation step towards its target
   (:func:`consumer_group.next_member_state`), and the response carries its
   new epoch and, when it changed, the partitions it may use.

Members that stop heartbeating for ``group.consumer.session.timeout.ms``, or
that keep partitions they must revoke for their rebalance timeout, are fenced:
removed, which bumps the group epoch and frees their partitions.

The group lives in the same :class:`GroupMetadata` container as a classic
group (its ``consumer`` field), so committed offsets, expiry and deletion are
shared with the classic protocol. Every change is written to
``__consumer_offsets`` as Kafka's consumer group records
(:mod:`consumer_group_codec`) before the heartbeat is answered, so a restarted
or new coordinator rebuilds the group, members and epochs included.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkalite.coordinator.group import consumer_group_codec as cg_codec
from kafkalite.coordinator.group.assignors import ASSIGNORS, Assignment, MemberSpec
from kafkalite.coordinator.group.collaborators import TopicDescription
from kafkalite.coordinator.group.consumer_group import (
    CONSUMER_GROUP_TYPE,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    TopicInfo,
    copy_assignment,
    next_member_state,
)
from kafkalite.coordinator.group.group_metadata import GroupMetadata, GroupState
from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.coordinator.group.group_coordinator import GroupCoordinator

log = logging.getLogger(__name__)


class HeartbeatError(Exception):
    """An error answered to the heartbeat (Kafka's ApiException)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """One ConsumerGroupHeartbeat as the coordinator sees it (None: unchanged)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(slots=True)
class HeartbeatResult:
    error: int = 0
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass(slots=True)
class MemberDescription:
    member: ConsumerGroupMember
    target: Assignment


@dataclass(slots=True)
class ConsumerGroupDescription:
    error: int
    group_id: str
    message: str | None = None
    state: str = ""
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: list[MemberDescription] = field(default_factory=list)
    #: topic id -> name, for the answer
    topic_names: dict[uuid.UUID, str] = field(default_factory=dict)


def new_member_id() -> str:
    """Java's ``Uuid.randomUuid().toString()``: 22 URL-safe base64 characters."""
    return urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


# RE2/J has no lookaround, backreferences, conditionals, atomic groups or possessive
# quantifiers; Python re has them all. Rejecting them keeps a subscription meaning what
# it means on Kafka.
_RE2_UNSUPPORTED = re.compile(r"\(\?[=!]|\(\?<[=!]|\(\?P=|\(\?\(|\(\?>|\\[1-9]|\\g<|[*+?}]\+")


def compile_regex(pattern: str) -> re.Pattern[str]:
    """A topic regex as RE2/J would accept it, or HeartbeatError INVALID_REGULAR_EXPRESSION."""
    if _RE2_UNSUPPORTED.search(pattern):
        raise HeartbeatError(
            ErrorCode.invalid_regular_expression,
            f"SubscribedTopicRegex `{pattern}` uses a construct RE2/J does not support.",
        )
    try:
        return re.compile(pattern)
    except re.error as e:
        raise HeartbeatError(
            ErrorCode.invalid_regular_expression,
            f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {e}.",
        ) from None


class ConsumerGroupCoordinator:
    """The consumer-protocol half of the group coordinator (shares its groups cache)."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.gc = coordinator
        self.config = coordinator.config
        self._regex_cache: dict[str, re.Pattern[str]] = {}
        from kafkalite.coordinator.group.classic_bridge import ClassicBridge

        #: classic members in consumer groups, and online migration
        self.classic = ClassicBridge(self)

    # ---- helpers ------------------------------------------------------------------
    def _group_int(self, group_id: str, key: str, default: int) -> int:
        """A GROUP config override (consumer.*), else the broker's value."""
        overrides = getattr(self.gc, "group_configs", None)  # absent in unit-test fakes
        v = None if overrides is None else overrides(group_id).get(key)
        try:
            return default if v is None else int(v)
        except ValueError:
            return default

    def session_timeout_ms(self, group_id: str) -> int:
        return self._group_int(
            group_id, "consumer.session.timeout.ms", self.config.consumer_session_timeout_ms
        )

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_int(
            group_id, "consumer.heartbeat.interval.ms", self.config.consumer_heartbeat_interval_ms
        )

    @property
    def default_assignor(self) -> str:
        return self.config.consumer_assignors[0]

    def _topics(self) -> Mapping[str, TopicDescription]:
        return self.gc.metadata.topics

    def _resolve_regex(self, pattern: str) -> set[str]:
        rx = self._regex_cache.get(pattern)
        if rx is None:
            rx = compile_regex(pattern)
            self._regex_cache[pattern] = rx
        return {
            name
            for name, t in self._topics().items()
            if not t.is_internal and not name.startswith("__") and rx.fullmatch(name)
        }

    def _subscription_metadata(self, group: ConsumerGroup) -> dict[str, TopicInfo]:
        topics = self._topics()
        out = {}
        for name in sorted(group.subscribed_topic_names(self._resolve_regex)):
            t = topics.get(name)
            if t is not None and t.partitions:
                out[name] = TopicInfo(t.topic_id, name, len(t.partitions))
        return out

    def _schedule(self, delay_ms: int, fn: Callable[[], None]) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, fn)

    def _schedule_session_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        gid, mid = group.group_id, member.member_id
        member.session_timer = self._schedule(
            member.classic.session_timeout_ms
            if member.classic is not None
            else self.session_timeout_ms(gid),
            lambda: self._fence_if_current(gid, mid, None, "its session timed out"),
        )

    def _fence_if_current(
        self, group_id: str, member_id: str, epoch: int | None, reason: str
    ) -> None:
        container = self.gc.manager.get_group(group_id)
        group = None if container is None else container.consumer
        if group is None:
            return
        member = group.members.get(member_id)
        if member is None or (epoch is not None and member.member_epoch != epoch):
            return
        if epoch is not None and member.state != MemberState.UNREVOKED_PARTITIONS:
            return
        log.info("member %s fenced from consumer group %s: %s", member_id, group_id, reason)
        self._fence_member(group, member)

    def _fence_member(
        self, group: ConsumerGroup, member: ConsumerGroupMember, *, store: bool = True
    ) -> None:
        """Remove a member; the group epoch is bumped so the others are reassigned.

        If only classic members remain and the migration policy allows it, the group
        becomes a classic group instead (Kafka's validateOnlineDowngradeWithFencedMember)."""
        container = self.gc.manager.get_group(group.group_id)
        if (
            container is not None
            and container.consumer is group
            and self.classic.should_downgrade(group, member.member_id)
        ):
            group.remove_member(member.member_id)
            self.classic.downgrade(container)
            return
        group.remove_member(member.member_id)
        group.subscription_metadata = self._subscription_metadata(group)
        group.group_epoch += 1
        if store:  # a timer fenced it: nobody waits for the write
            self.gc._spawn(self.store(group))

    # ---- persistence ----------------------------------------------------------------
    def pending_records(self, group: ConsumerGroup) -> list[tuple[bytes, bytes | None]]:
        """The records that bring ``__consumer_offsets`` up to the group's state."""
        out: list[tuple[bytes, bytes | None]] = []
        current = cg_codec.group_level_records(group)
        for mid in sorted(group.dirty):
            m = group.members.get(mid)
            if m is not None:
                current.update(cg_codec.member_records(group, m))
            else:
                for k in cg_codec.member_keys(group.group_id, mid):
                    if group.persisted.pop(k, None) is not None:
                        out.append((k, None))
        group.dirty.clear()
        for k, v in current.items():
            if group.persisted.get(k) != v:
                group.persisted[k] = v
                out.append((k, v))
        return out

    async def store(self, group: ConsumerGroup) -> int:
        """Write what changed; returns the error a client should see (0: stored)."""
        records = self.pending_records(group)
        if not records:
            return 0
        error = await self.gc.manager.store_records(group.group_id, records)
        if error:
            # not written: forget that they were, so the next write carries them again
            for k, v in records:
                member = cg_codec.decode_key(k).member
                if member is not None:
                    group.dirty.add(member)
                if v is None:
                    group.persisted[k] = b""  # still to be tombstoned
                elif group.persisted.get(k) == v:
                    del group.persisted[k]
        return error

    async def heartbeat_and_store(self, r: HeartbeatRequest) -> HeartbeatResult:
        """A heartbeat answered once its changes are in ``__consumer_offsets``."""
        result = self.heartbeat(r)
        group = self.consumer_group(self.gc.manager.get_group(r.group_id))
        if group is not None and (group.dirty or result.error == 0):
            error = await self.store(group)
            if error and result.error == 0:
                return HeartbeatResult(error, member_id=result.member_id)
        return result

    def consumer_group(self, container: GroupMetadata | None) -> ConsumerGroup | None:
        return None if container is None else container.consumer

    # ---- ConsumerGroupHeartbeat ---------------------------------------------------
    def heartbeat(self, r: HeartbeatRequest) -> HeartbeatResult:
        if not self.gc.is_active:
            return HeartbeatResult(ErrorCode.coordinator_not_available)
        try:
            self._validate(r)  # before the coordinator checks, as Kafka's service does
            error = self.gc._validate_group_status(r.group_id)
            if error:
                return HeartbeatResult(error, member_id=r.member_id or None)
            if r.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(r)
            return self._heartbeat(r)
        except HeartbeatError as e:
            return HeartbeatResult(e.code, e.message, member_id=r.member_id or None)

    def _validate(self, r: HeartbeatRequest) -> None:
        def invalid(msg: str) -> HeartbeatError:
            return HeartbeatError(ErrorCode.invalid_request, msg)

        if r.group_id == "":
            raise invalid("GroupId can't be empty.")
        if r.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if r.rack_id == "":
            raise invalid("RackId can't be empty.")
        if r.api_version >= 1 and r.member_id == "":
            raise invalid("MemberId can't be empty.")
        if r.member_epoch > 0 or r.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if r.member_id == "":
                raise invalid("MemberId can't be empty.")
        elif r.member_epoch == 0:
            if r.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if r.owned is None or any(r.owned.values()):
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if r.subscribed_topic_names is None and r.subscribed_topic_regex is None:
                raise invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null "
                    "when (re-)joining."
                )
        elif r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if r.member_id == "":
                raise invalid("MemberId can't be empty.")
            if r.instance_id is None:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid("MemberEpoch is invalid.")
        if r.subscribed_topic_regex is not None:
            self._regex_cache[r.subscribed_topic_regex] = compile_regex(r.subscribed_topic_regex)
        if (
            r.server_assignor is not None
            and r.server_assignor not in self.config.consumer_assignors
        ):
            raise HeartbeatError(
                ErrorCode.unsupported_assignor,
                f"ServerAssignor {r.server_assignor} is not supported. Supported assignors: "
                + ", ".join(self.config.consumer_assignors)
                + ".",
            )

    def _get_or_create_group(self, group_id: str, create: bool) -> ConsumerGroup:
        container = self.gc.manager.live_group(group_id, self.gc.clock_ms(), create)
        if container is None:
            # after a coordinator move the group is gone: rejoining (epoch 0) rebuilds it
            raise HeartbeatError(
                ErrorCode.unknown_member_id, f"Consumer group {group_id} not found."
            )
        if container.consumer is not None:
            return container.consumer
        if container.share is not None and not container.share.dead:
            raise HeartbeatError(
                ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group."
            )
        if create and self.classic.can_upgrade(container):
            return self.classic.upgrade(container)
        if container.members or not container.is_state(GroupState.EMPTY):
            # answered as Kafka does when group.consumer.migration.policy forbids it
            raise HeartbeatError(
                ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group."
            )
        if not create:
            raise HeartbeatError(
                ErrorCode.unknown_member_id, f"Consumer group {group_id} not found."
            )
        # an empty classic group (offsets only) becomes a consumer group, as in Kafka
        container.consumer = ConsumerGroup(group_id)
        container.protocol_type = "consumer"
        container.protocol_name = None
        container.subscribed_topics = None
        return container.consumer

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, epoch: int, owned: Assignment | None) -> None:
        if epoch > member.member_epoch:
            raise HeartbeatError(
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has a greater member epoch ({epoch}) than the one "
                f"known by the group coordinator ({member.member_epoch}). The member must "
                "abandon all its partitions and rejoin.",
            )
        if epoch < member.member_epoch:
            subset = owned is not None and all(
                ps <= member.assigned.get(t, set()) for t, ps in owned.items() if ps
            )
            if epoch != member.previous_member_epoch or not subset:
                raise HeartbeatError(
                    ErrorCode.fenced_member_epoch,
                    f"The consumer group member has a smaller member epoch ({epoch}) than the "
                    f"one known by the group coordinator ({member.member_epoch}). The member "
                    "must abandon all its partitions and rejoin.",
                )

    def _member_for(
        self, group: ConsumerGroup, r: HeartbeatRequest, member_id: str
    ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """(the member to update, the static member it replaces if any)."""
        joining = r.member_epoch == 0
        if r.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise HeartbeatError(
                        ErrorCode.unknown_member_id,
                        f"Member {member_id} is not a member of group {group.group_id}.",
                    )
                return ConsumerGroupMember(member_id), None
            if joining:
                # the member lost its state and rejoins under the same id: start it over
                # with its target kept (its partitions were given up when it rejoined)
                return _fresh_copy(member, member_id), member
            self._check_epoch(member, r.member_epoch, r.owned)
            return member, None
        existing = group.static_member(r.instance_id)
        if joining:
            if existing is None:
                current = group.members.get(member_id)
                if current is not None:
                    return _fresh_copy(current, member_id), current
                return ConsumerGroupMember(member_id), None
            if existing.member_id == member_id or existing.member_epoch == (
                LEAVE_GROUP_STATIC_MEMBER_EPOCH
            ):
                return _fresh_copy(existing, member_id), existing
            raise HeartbeatError(
                ErrorCode.unreleased_instance_id,
                f"Static member {member_id} with instance id {r.instance_id} cannot join the "
                f"group because the instance id is owned by {existing.member_id} member.",
            )
        if existing is None:
            raise HeartbeatError(
                ErrorCode.unknown_member_id, f"Instance id {r.instance_id} is unknown."
            )
        if existing.member_id != member_id:
            raise HeartbeatError(
                ErrorCode.fenced_instance_id,
                f"Static member {member_id} with instance id {r.instance_id} was fenced by "
                f"member {existing.member_id}.",
            )
        self._check_epoch(existing, r.member_epoch, r.owned)
        return existing, None

    def _heartbeat(self, r: HeartbeatRequest) -> HeartbeatResult:
        joining = r.member_epoch == 0
        group = self._get_or_create_group(r.group_id, joining)
        member_id = r.member_id or new_member_id()
        if (
            len(group.members) >= self.config.consumer_max_size
            and member_id not in group.members
            and group.static_member(r.instance_id) is None
        ):
            raise HeartbeatError(
                ErrorCode.group_max_size_reached,
                "The consumer group has reached its maximum capacity of "
                f"{self.config.consumer_max_size} members.",
            )
        member, replaced = self._member_for(group, r, member_id)
        old_assigned = copy_assignment(member.assigned) if replaced is None else None
        member = self.apply(group, r, member, replaced)
        self._schedule_session_timeout(group, member)

        full = joining or (
            r.rebalance_timeout_ms != -1
            and r.subscribed_topic_names is not None
            and r.owned is not None
        )
        changed = old_assigned is None or old_assigned != member.assigned
        return HeartbeatResult(
            0,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
            assignment=copy_assignment(member.assigned) if full or changed else None,
        )

    def apply(
        self,
        group: ConsumerGroup,
        r: HeartbeatRequest,
        member: ConsumerGroupMember,
        replaced: ConsumerGroupMember | None,
    ) -> ConsumerGroupMember:
        """Kafka's three steps for one member (both protocols); returns the member as updated."""
        # 1. the member's new subscription; the group epoch follows what changed
        is_new = member.member_id not in group.members
        old_subscription = (member.subscribed_topic_names, member.subscribed_topic_regex)
        if replaced is not None:
            # a replaced member's old id gives way to the new one, target included
            target = group.target_assignment.get(replaced.member_id)
            group.remove_member(replaced.member_id)
            if target is not None:
                group.target_assignment[member.member_id] = target
            is_new = False
        if r.instance_id is not None:
            member.instance_id = r.instance_id
        if r.rack_id is not None:
            member.rack_id = r.rack_id
        if r.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = r.rebalance_timeout_ms
        if r.server_assignor is not None:
            member.server_assignor = r.server_assignor
        if r.subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(sorted(set(r.subscribed_topic_names)))
        if r.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = r.subscribed_topic_regex or None
        member.client_id = r.client_id
        member.client_host = r.client_host
        bump = is_new or old_subscription != (
            member.subscribed_topic_names,
            member.subscribed_topic_regex,
        )
        group.update_member(member)
        metadata = self._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
            log.info("consumer group %s: group epoch %d", group.group_id, group.group_epoch)

        # 2. a new target assignment when the group epoch moved on
        if group.group_epoch > group.target_assignment_epoch:
            self._update_target_assignment(group)

        # 3. one reconciliation step
        target = group.target_assignment.get(member.member_id, {})
        if not member.is_reconciled_to(group.target_assignment_epoch):
            own = member.pending_revocation

            def partition_epoch(tid: uuid.UUID, p: int) -> int:
                return -1 if p in own.get(tid, ()) else group.current_partition_epoch(tid, p)

            epoch, state, assigned, revoking = next_member_state(
                member, group.target_assignment_epoch, target, partition_epoch, r.owned
            )
            if (epoch, state, assigned, revoking) != (
                member.member_epoch,
                member.state,
                member.assigned,
                member.pending_revocation,
            ):
                updated = _with_assignment(member, epoch, state, assigned, revoking)
                group.update_member(updated)
                member = updated
                if state == MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(group, member)
                elif member.rebalance_timer is not None:
                    member.rebalance_timer.cancel()
                    member.rebalance_timer = None
        return member

    def _schedule_rebalance_timeout(
        self, group: ConsumerGroup, member: ConsumerGroupMember
    ) -> None:
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
        gid, mid, epoch = group.group_id, member.member_id, member.member_epoch
        member.rebalance_timer = self._schedule(
            member.rebalance_timeout_ms,
            lambda: self._fence_if_current(
                gid, mid, epoch, "it did not revoke its partitions within its rebalance timeout"
            ),
        )

    def _update_target_assignment(self, group: ConsumerGroup) -> None:
        group.dirty.update(group.members)
        group.dirty.update(group.target_assignment)
        name = group.preferred_assignor(self.default_assignor)
        assignor = ASSIGNORS[name]
        topics = {t.topic_id: t.num_partitions for t in group.subscription_metadata.values()}
        ids = {n: t.topic_id for n, t in group.subscription_metadata.items()}
        regex_topics: dict[str, set[str]] = {}
        specs = {}
        for mid, m in group.members.items():
            names = set(m.subscribed_topic_names)
            if m.subscribed_topic_regex is not None:
                if m.subscribed_topic_regex not in regex_topics:
                    regex_topics[m.subscribed_topic_regex] = self._resolve_regex(
                        m.subscribed_topic_regex
                    )
                names |= regex_topics[m.subscribed_topic_regex]
            specs[mid] = MemberSpec(
                frozenset(ids[n] for n in names if n in ids),
                m.instance_id,
                m.rack_id,
                group.target_assignment.get(mid, {}),
            )
        group.target_assignment = assignor.assign(specs, topics)
        group.target_assignment_epoch = group.group_epoch
        group.assignor_name = name
        log.info(
            "consumer group %s: target assignment for epoch %d computed with %s",
            group.group_id,
            group.group_epoch,
            name,
        )

    def _leave(self, r: HeartbeatRequest) -> HeartbeatResult:
        container = self.gc.manager.get_group(r.group_id)
        group = self.consumer_group(container)
        if group is None:
            raise HeartbeatError(
                ErrorCode.group_id_not_found, f"Group {r.group_id} is not a consumer group."
            )
        if r.instance_id is None:
            member = group.members.get(r.member_id)
            if member is None:
                raise HeartbeatError(
                    ErrorCode.unknown_member_id,
                    f"Member {r.member_id} is not a member of group {r.group_id}.",
                )
        else:
            member = group.static_member(r.instance_id)
            if member is None:
                raise HeartbeatError(
                    ErrorCode.unknown_member_id, f"Instance id {r.instance_id} is unknown."
                )
            if member.member_id != r.member_id:
                raise HeartbeatError(
                    ErrorCode.fenced_instance_id,
                    f"Static member {r.member_id} with instance id {r.instance_id} was fenced "
                    f"by member {member.member_id}.",
                )
            if r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # a temporary leave: the member keeps its place and partitions for the
                # session timeout, so its restart causes no rebalance
                log.info(
                    "static member %s (%s) temporarily left consumer group %s",
                    member.member_id,
                    r.instance_id,
                    r.group_id,
                )
                updated = _with_assignment(
                    member,
                    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                    MemberState.STABLE,
                    member.assigned,
                    {},
                )
                if member.rebalance_timer is not None:
                    member.rebalance_timer.cancel()
                    updated.rebalance_timer = None
                group.update_member(updated)
                self._schedule_session_timeout(group, updated)
                return HeartbeatResult(
                    0,
                    member_id=r.member_id,
                    member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                )
        log.info("member %s left consumer group %s", member.member_id, r.group_id)
        self._fence_member(group, member, store=False)
        return HeartbeatResult(0, member_id=r.member_id, member_epoch=r.member_epoch)

    # ---- ConsumerGroupDescribe ----------------------------------------------------
    def describe(self, group_id: str) -> ConsumerGroupDescription:
        error = self.gc._validate_group_status(group_id)
        if error:
            return ConsumerGroupDescription(error, group_id)
        container = self.gc.manager.get_group(group_id)
        if container is None or container.is_state(GroupState.DEAD):
            return ConsumerGroupDescription(
                ErrorCode.group_id_not_found, group_id, f"Group {group_id} not found."
            )
        group = container.consumer
        if group is None:
            return ConsumerGroupDescription(
                ErrorCode.group_id_not_found,
                group_id,
                f"Group {group_id} is not a consumer group.",
            )
        names = {t.topic_id: n for n, t in group.subscription_metadata.items()}
        for name, t in self._topics().items():
            names.setdefault(t.topic_id, name)
        return ConsumerGroupDescription(
            0,
            group_id,
            None,
            group.state.value,
            group.group_epoch,
            group.target_assignment_epoch,
            group.assignor_name or self.default_assignor,
            [
                MemberDescription(m, group.target_assignment.get(m.member_id, {}))
                for m in group.members.values()
            ],
            names,
        )

    # ---- offsets ------------------------------------------------------------------
    @staticmethod
    def validate_offset_commit(
        group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int
    ) -> int:
        """Kafka's ConsumerGroup.validateOffsetCommit: the member's current epoch only."""
        if member_epoch < 0 and group.is_empty:
            return 0  # admin clients and consumers without group management
        member = group.members.get(member_id)
        if member is None:
            return int(ErrorCode.unknown_member_id)
        if member.classic is not None:  # a classic member commits with its generation
            return 0 if member_epoch == member.member_epoch else int(ErrorCode.illegal_generation)
        if api_version < 9:
            return int(ErrorCode.unsupported_version)
        if member_epoch != member.member_epoch:
            return int(ErrorCode.stale_member_epoch)
        return 0

    @staticmethod
    def validate_offset_fetch(
        group: ConsumerGroup, member_id: str | None, member_epoch: int
    ) -> int:
        if member_id is None and member_epoch < 0:
            return 0
        member = group.members.get(member_id or "")
        if member is None:
            return int(ErrorCode.unknown_member_id)
        if member_epoch != member.member_epoch:
            return int(ErrorCode.stale_member_epoch)
        return 0

    # ---- lifecycle ----------------------------------------------------------------
    def on_loaded(self, container: GroupMetadata) -> None:
        """A group read back from the log: its members' sessions start now."""
        group = container.consumer
        if group is None:
            return
        for m in group.members.values():
            self._schedule_session_timeout(group, m)
            if m.state == MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(group, m)

    @staticmethod
    def on_unloaded(container: GroupMetadata) -> None:
        group = container.consumer
        if group is not None:
            for m in group.members.values():
                m.cancel_timers()
            group.dead = True

    def delete(self, container: GroupMetadata) -> int:
        """DeleteGroups of a consumer group: only when it has no members."""
        group = container.consumer
        if group is not None and not group.is_empty:
            return int(ErrorCode.non_empty_group)
        return 0


def _fresh_copy(member: ConsumerGroupMember, member_id: str) -> ConsumerGroupMember:
    """A (re)joining member: the old one's subscription and partitions, epoch 0."""
    return ConsumerGroupMember(
        member_id,
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        subscribed_topic_names=member.subscribed_topic_names,
        subscribed_topic_regex=member.subscribed_topic_regex,
        server_assignor=member.server_assignor,
        member_epoch=0,
        previous_member_epoch=0,
        state=MemberState.STABLE,
        assigned=copy_assignment(member.assigned) if member.instance_id is not None else {},
        pending_revocation={},
        classic=member.classic,
    )


def _with_assignment(
    member: ConsumerGroupMember,
    epoch: int,
    state: MemberState,
    assigned: Assignment,
    revoking: Assignment,
) -> ConsumerGroupMember:
    return ConsumerGroupMember(
        member.member_id,
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        subscribed_topic_names=member.subscribed_topic_names,
        subscribed_topic_regex=member.subscribed_topic_regex,
        server_assignor=member.server_assignor,
        member_epoch=epoch,
        previous_member_epoch=member.member_epoch
        if epoch != member.member_epoch
        else member.previous_member_epoch,
        state=state,
        assigned=copy_assignment(assigned),
        pending_revocation=copy_assignment(revoking),
        session_timer=member.session_timer,
        rebalance_timer=member.rebalance_timer,
        classic=member.classic,
        classic_timer=member.classic_timer,
    )


__all__ = [
    "CONSUMER_GROUP_TYPE",
    "ConsumerGroupCoordinator",
    "ConsumerGroupDescription",
    "HeartbeatRequest",
    "HeartbeatResult",
]
