"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77): share group membership.

As Kafka's ``shareGroupHeartbeat``: a member joins with epoch 0 and its subscribed
topic names, heartbeats with its current epoch, leaves with -1. A new member, a
changed subscription or a change of the subscribed topics bumps the group epoch; the
``simple`` assignment is then recomputed (every member gets every partition of its
subscription) and every member takes the group epoch at its next heartbeat: nothing
is revoked, so there is no reconciliation. Members that stop heartbeating for
``share.session.timeout.ms`` are fenced.

The group lives in the coordinator's :class:`GroupMetadata` container (its ``share``
field), so ListGroups, DeleteGroups and the group id namespace are shared with the
other group types; its existence and epoch are written to ``__consumer_offsets`` as
Kafka's ``ShareGroupMetadata`` record. Members are not persisted: after a coordinator
move or restart they get UNKNOWN_MEMBER_ID and rejoin, as KIP-932 lets them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkalite.coordinator.share import share_codec, share_loader
from kafkalite.coordinator.share.share_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ShareGroup,
    ShareMember,
)
from kafkalite.coordinator.share.share_partition_manager import SharePartitionManager
from kafkalite.coordinator.share.share_state import ShareStateStore
from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.coordinator.group.group_coordinator import GroupCoordinator
    from kafkalite.coordinator.group.group_metadata import GroupMetadata

log = logging.getLogger(__name__)

SHARE_ASSIGNOR = "simple"


class ShareHeartbeatError(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(slots=True)
class ShareHeartbeatResult:
    error: int = 0
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    #: topic id -> partitions; None: unchanged
    assignment: dict[uuid.UUID, list[int]] | None = None


@dataclass(slots=True)
class ShareGroupDescription:
    error: int
    group_id: str
    message: str | None = None
    state: str = ""
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: list[ShareMember] = field(default_factory=list)
    topic_names: dict[uuid.UUID, str] = field(default_factory=dict)


class ShareGroupCoordinator:
    """The share-group half of the group coordinator (shares its groups cache)."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.gc = coordinator
        self.config = coordinator.config
        self.partitions = SharePartitionManager(coordinator, self)
        #: the share-state coordinator (APIs 83–87) for the groups coordinated here
        self.state = ShareStateStore(coordinator)

    # ---- group configs ----------------------------------------------------------------
    def _int_config(self, group_id: str, key: str, default: int) -> int:
        v = self.gc.group_configs(group_id).get(key)
        try:
            return default if v is None else int(v)
        except ValueError:
            return default

    def session_timeout_ms(self, group_id: str) -> int:
        return self._int_config(
            group_id, "share.session.timeout.ms", self.config.share_session_timeout_ms
        )

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._int_config(
            group_id, "share.heartbeat.interval.ms", self.config.share_heartbeat_interval_ms
        )

    # ---- lookups ------------------------------------------------------------------------
    def share_group(self, group_id: str) -> ShareGroup | None:
        container = self.gc.manager.get_group(group_id)
        if container is None or container.share is None or container.share.dead:
            return None
        return container.share

    def _topics(self) -> Mapping[str, tuple[uuid.UUID, int]]:
        return {
            n: (t.topic_id, len(t.partitions))
            for n, t in self.gc.metadata.topics.items()
            if t.partitions
        }

    # ---- ShareGroupHeartbeat --------------------------------------------------------------
    async def heartbeat(self, r: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        if not self.gc.is_active:
            return ShareHeartbeatResult(ErrorCode.coordinator_not_available)
        try:
            self._validate(r)
            error = self.gc._validate_group_status(r.group_id)
            if error:
                return ShareHeartbeatResult(error, member_id=r.member_id or None)
            if r.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                result = self._leave(r)
            else:
                result = self._heartbeat(r)
        except ShareHeartbeatError as e:
            return ShareHeartbeatResult(e.code, e.message, member_id=r.member_id or None)
        group = self.share_group(r.group_id)
        if group is not None:
            error = await self.store(group)
            if error and result.error == 0:
                return ShareHeartbeatResult(error, member_id=r.member_id)
        return result

    @staticmethod
    def _validate(r: ShareHeartbeatRequest) -> None:
        def invalid(msg: str) -> ShareHeartbeatError:
            return ShareHeartbeatError(ErrorCode.invalid_request, msg)

        if not r.group_id:
            raise invalid("GroupId can't be empty.")
        if r.rack_id == "":
            raise invalid("RackId can't be empty.")
        if not r.member_id:
            raise invalid("MemberId can't be empty.")
        if r.member_epoch == 0:
            if not r.subscribed_topic_names:
                raise invalid("SubscribedTopicNames must be set in first request.")
        elif r.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            raise invalid(
                f"MemberEpoch is {r.member_epoch}, but must be greater than or equal to -1."
            )

    def _get_or_create(self, group_id: str, create: bool) -> ShareGroup:
        from kafkalite.coordinator.group.group_metadata import GroupState

        container = self.gc.manager.live_group(group_id, self.gc.clock_ms(), create)
        if container is None:
            raise ShareHeartbeatError(
                ErrorCode.unknown_member_id, f"Share group {group_id} not found."
            )
        if container.share is not None and not container.share.dead:
            return container.share
        if (
            container.consumer is not None
            or container.members
            or not container.is_state(GroupState.EMPTY)
            or container.offsets
        ):
            raise ShareHeartbeatError(
                ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."
            )
        container.share = ShareGroup(group_id)
        container.protocol_type = "share"
        return container.share

    def _heartbeat(self, r: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        joining = r.member_epoch == 0
        group = self._get_or_create(r.group_id, joining)
        member = group.members.get(r.member_id)
        if member is None:
            if not joining:
                raise ShareHeartbeatError(
                    ErrorCode.unknown_member_id,
                    f"Member {r.member_id} is not a member of group {r.group_id}.",
                )
            if len(group.members) >= self.config.share_max_size:
                raise ShareHeartbeatError(
                    ErrorCode.group_max_size_reached,
                    "The share group has reached its maximum capacity of "
                    f"{self.config.share_max_size} members.",
                )
            member = ShareMember(r.member_id)
        elif not joining and r.member_epoch != member.member_epoch:
            raise ShareHeartbeatError(
                ErrorCode.fenced_member_epoch,
                f"The share group member has a {'greater' if r.member_epoch > member.member_epoch else 'smaller'} "
                f"member epoch ({r.member_epoch}) than the one known by the group coordinator "
                f"({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        is_new = r.member_id not in group.members
        bump = is_new or joining
        if r.rack_id is not None:
            member.rack_id = r.rack_id
        if r.subscribed_topic_names is not None:
            names = tuple(sorted(set(r.subscribed_topic_names)))
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                bump = True
        member.client_id, member.client_host = r.client_id, r.client_host
        group.members[member.member_id] = member
        metadata = {n: v for n, v in self._topics().items() if n in group.subscribed_topics()}
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
            self._assign(group)
        old = member.assigned
        if member.member_epoch != group.group_epoch:
            member.previous_member_epoch, member.member_epoch = (
                member.member_epoch,
                group.group_epoch,
            )
            member.assigned = self._assignment_for(group, member)
        self._schedule_session_timeout(group, member)
        changed = joining or old != member.assigned
        return ShareHeartbeatResult(
            0,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
            assignment=dict(member.assigned) if changed else None,
        )

    def _assign(self, group: ShareGroup) -> None:
        group.assignment_epoch = group.group_epoch
        log.info("share group %s: group epoch %d", group.group_id, group.group_epoch)

    @staticmethod
    def _assignment_for(group: ShareGroup, member: ShareMember) -> dict[uuid.UUID, list[int]]:
        """The simple assignor: every partition of every subscribed topic."""
        out: dict[uuid.UUID, list[int]] = {}
        for name in member.subscribed_topic_names:
            meta = group.subscription_metadata.get(name)
            if meta is not None:
                out[meta[0]] = list(range(meta[1]))
        return out

    def _leave(self, r: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        group = self.share_group(r.group_id)
        if group is None:
            raise ShareHeartbeatError(
                ErrorCode.group_id_not_found, f"Group {r.group_id} is not a share group."
            )
        member = group.members.get(r.member_id)
        if member is None:
            raise ShareHeartbeatError(
                ErrorCode.unknown_member_id,
                f"Member {r.member_id} is not a member of group {r.group_id}.",
            )
        log.info("member %s left share group %s", r.member_id, r.group_id)
        self._remove_member(group, member)
        return ShareHeartbeatResult(0, member_id=r.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH)

    def _remove_member(self, group: ShareGroup, member: ShareMember) -> None:
        member.cancel_timers()
        # its share sessions and acquired records are left alone, as in Kafka: a
        # closing consumer leaves the group before its final ShareAcknowledge, and a
        # dead one's records come back when their locks run out
        group.members.pop(member.member_id, None)
        group.subscription_metadata = {
            n: v for n, v in self._topics().items() if n in group.subscribed_topics()
        }
        group.group_epoch += 1
        self._assign(group)

    def _schedule_session_timeout(self, group: ShareGroup, member: ShareMember) -> None:
        member.cancel_timers()
        gid, mid = group.group_id, member.member_id
        member.session_timer = asyncio.get_running_loop().call_later(
            self.session_timeout_ms(gid) / 1000, self._expire, gid, mid
        )

    def _expire(self, group_id: str, member_id: str) -> None:
        group = self.share_group(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None:
            return
        log.info("member %s fenced from share group %s: its session timed out", member_id, group_id)
        self._remove_member(group, member)
        self.gc._spawn(self.store(group))

    # ---- persistence ------------------------------------------------------------------------
    async def store(self, group: ShareGroup) -> int:
        """Write what changed: the group's ShareGroupMetadata record when its epoch moved,
        each member's ShareGroupMemberMetadata and ShareGroupCurrentMemberAssignment
        records when they changed (tombstones for members gone), as Kafka does, so a
        new coordinator carries on with the same members and epochs."""
        gid = group.group_id
        records: list[tuple[bytes, bytes | None]] = []
        epoch = group.group_epoch
        if group.persisted_epoch != epoch:
            records.append(
                (share_codec.group_metadata_key(gid), share_codec.group_metadata_value(epoch))
            )
        views: dict[str, tuple[object, ...]] = {}
        for mid, m in group.members.items():
            view = share_loader.persisted_view(m)
            views[mid] = view
            if group.persisted_members.get(mid) == view:
                continue
            records.append(
                (
                    share_codec.member_key(share_codec.SHARE_MEMBER_METADATA, gid, mid),
                    share_codec.member_metadata_value(
                        m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names
                    ),
                )
            )
            records.append(
                (
                    share_codec.member_key(share_codec.SHARE_CURRENT_MEMBER_ASSIGNMENT, gid, mid),
                    share_codec.member_assignment_value(
                        m.member_epoch, m.previous_member_epoch, m.assigned
                    ),
                )
            )
        for mid in [k for k in group.persisted_members if k not in group.members]:
            # Kafka's order: the assignment first, then the member
            records.append(
                (
                    share_codec.member_key(share_codec.SHARE_CURRENT_MEMBER_ASSIGNMENT, gid, mid),
                    None,
                )
            )
            records.append(
                (share_codec.member_key(share_codec.SHARE_MEMBER_METADATA, gid, mid), None)
            )
        if not records:
            return 0
        before_epoch, before_members = group.persisted_epoch, group.persisted_members
        group.persisted_epoch, group.persisted_members = epoch, views
        error = await self.gc.manager.store_records(gid, records)
        if error and group.persisted_members is views:
            # written nothing: the next store writes it all again
            group.persisted_epoch, group.persisted_members = before_epoch, before_members
        return error

    def on_loaded(self, container: GroupMetadata) -> None:
        """A share group read back from the log: its members' sessions start now."""
        group = container.share
        if group is None:
            return
        group.subscription_metadata = {
            n: v for n, v in self._topics().items() if n in group.subscribed_topics()
        }
        for m in group.members.values():
            self._schedule_session_timeout(group, m)

    # ---- ShareGroupDescribe -------------------------------------------------------------
    def describe(self, group_id: str) -> ShareGroupDescription:
        error = self.gc._validate_group_status(group_id)
        if error:
            return ShareGroupDescription(error, group_id)
        container = self.gc.manager.get_group(group_id)
        from kafkalite.coordinator.group.group_metadata import GroupState

        if container is None or container.is_state(GroupState.DEAD):
            return ShareGroupDescription(
                ErrorCode.group_id_not_found, group_id, f"Group {group_id} not found."
            )
        group = container.share
        if group is None or group.dead:
            return ShareGroupDescription(
                ErrorCode.group_id_not_found, group_id, f"Group {group_id} is not a share group."
            )
        names = {t.topic_id: n for n, t in self.gc.metadata.topics.items()}
        return ShareGroupDescription(
            0,
            group_id,
            None,
            group.state,
            group.group_epoch,
            group.assignment_epoch,
            SHARE_ASSIGNOR,
            list(group.members.values()),
            names,
        )

    # ---- lifecycle ----------------------------------------------------------------------------
    @staticmethod
    def on_unloaded(container: GroupMetadata) -> None:
        group = container.share
        if group is not None:
            for m in group.members.values():
                m.cancel_timers()
            group.dead = True

    async def delete(self, container: GroupMetadata) -> int:
        """DeleteGroups of a share group: only empty; its share-partition state goes too."""
        group = container.share
        if group is None:
            return 0
        if not group.is_empty:
            return int(ErrorCode.non_empty_group)
        return await self.partitions.delete_group_state(container)
