"""Classic members in a consumer group, and online migration between the protocols.

Kafka 4 serves a JoinGroup/SyncGroup/Heartbeat/LeaveGroup member inside a
consumer group (``classicGroupJoinToConsumerGroup`` and its siblings): the
member's subscription comes from its JoinGroup metadata, the broker computes
its assignment with the server assignor like any other member's, the JoinGroup
answers with the member epoch as generation (no leader, no member list), and
SyncGroup hands out the member's partitions in the consumer protocol's format.
Reconciliation is the same as for consumer-protocol members: a classic member
learns on its Heartbeat (REBALANCE_IN_PROGRESS) that it must rejoin, its
rejoin reports what it still owns (nothing for an eager client; Subscription
v1+ lists them for a cooperative one), and partitions it held reach others
only after that.

``group.consumer.migration.policy`` (``bidirectional`` by default) allows:

* **upgrade**: the first consumer-protocol member of a classic group with
  members turns it into a consumer group; its classic members keep their
  assignment (and their generation as member epoch) and are asked to rejoin;
* **downgrade**: when the last consumer-protocol member leaves a consumer group
  whose remaining members are all classic, it becomes a classic group again
  (generation = group epoch), and a classic rebalance starts.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkalite.coordinator.group import consumer_protocol
from kafkalite.coordinator.group.assignors import Assignment
from kafkalite.coordinator.group.consumer_coordinator import (
    HeartbeatError,
    HeartbeatRequest,
    new_member_id,
)
from kafkalite.coordinator.group.consumer_group import (
    ClassicMember,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    copy_assignment,
)
from kafkalite.coordinator.group.group_metadata import (
    GroupMetadata,
    GroupState,
    JoinGroupResult,
    MemberMetadata,
    SyncGroupResult,
)
from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.coordinator.group.consumer_coordinator import ConsumerGroupCoordinator
    from kafkalite.coordinator.group.group_coordinator import JoinRequest

log = logging.getLogger(__name__)


class ClassicBridge:
    def __init__(self, cc: ConsumerGroupCoordinator) -> None:
        self.cc = cc

    @property
    def policy(self) -> str:
        return self.cc.config.consumer_migration_policy

    # ---- topic names <-> ids ---------------------------------------------------------
    def _ids(self, parts: dict[str, list[int]]) -> Assignment:
        topics = self.cc._topics()
        out: Assignment = {}
        for name, ps in parts.items():
            t = topics.get(name)
            if t is not None and ps:
                out.setdefault(t.topic_id, set()).update(ps)
        return out

    def _names(self, a: Assignment) -> dict[str, list[int]]:
        by_id = {t.topic_id: name for name, t in self.cc._topics().items()}
        return {by_id[t]: sorted(ps) for t, ps in a.items() if t in by_id and ps}

    # ---- upgrade --------------------------------------------------------------------
    def can_upgrade(self, container: GroupMetadata) -> bool:
        return (
            self.policy in ("upgrade", "bidirectional")
            and bool(container.members)
            and container.protocol_type == consumer_protocol.PROTOCOL_TYPE
            and len(container.members) <= self.cc.config.consumer_max_size
            and not container.is_state(GroupState.DEAD)
        )

    def upgrade(self, container: GroupMetadata) -> ConsumerGroup:
        """A live classic group becomes a consumer group; its members stay, as classic."""
        gid = container.group_id
        generation = container.generation_id
        g = ConsumerGroup(gid)
        members = []
        for m in container.members.values():
            meta = (
                m.metadata(container.protocol_name)
                if container.protocol_name and container.protocol_name in m.protocols
                else m.supported_protocols[0][1]
            )
            names = consumer_protocol.subscribed_topics(meta) or set()
            assigned = self._ids(consumer_protocol.assigned_partitions(m.assignment) or {})
            members.append(
                ConsumerGroupMember(
                    m.member_id,
                    instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    subscribed_topic_names=tuple(sorted(names)),
                    member_epoch=generation,
                    previous_member_epoch=generation - 1,
                    state=MemberState.STABLE,
                    assigned=assigned,
                    classic=ClassicMember(m.session_timeout_ms, list(m.supported_protocols)),
                )
            )
        try:
            for cm in members:
                g.update_member(cm)
                g.target_assignment[cm.member_id] = copy_assignment(cm.assigned)
        except RuntimeError as e:  # two members claim a partition: the leader's fault
            raise HeartbeatError(
                ErrorCode.group_id_not_found, f"Cannot upgrade classic group {gid}: {e}."
            ) from None
        g.group_epoch = g.target_assignment_epoch = generation
        g.subscription_metadata = self.cc._subscription_metadata(g)
        # the classic side is emptied; waiting joins and syncs rejoin into the new group
        for m in list(container.members.values()):
            container.complete_join(
                m, JoinGroupResult(m.member_id, ErrorCode.rebalance_in_progress)
            )
            container.complete_sync(m, SyncGroupResult(ErrorCode.rebalance_in_progress))
            container.remove(m.member_id)
        container.pending_members.clear()
        container.pending_sync_members.clear()
        container.state = GroupState.EMPTY
        container.protocol_name = None
        container.leader_id = None
        container.subscribed_topics = None
        container.consumer = g
        for cm in g.members.values():
            self.cc._schedule_session_timeout(g, cm)
        self.cc.gc._spawn(self.cc.gc.manager.store_records(gid, [(_classic_key(gid), None)]))
        log.info("classic group %s upgraded to a consumer group at epoch %d", gid, generation)
        return g

    # ---- downgrade ------------------------------------------------------------------
    def should_downgrade(self, g: ConsumerGroup, leaving: str) -> bool:
        rest = [m for mid, m in g.members.items() if mid != leaving]
        return (
            self.policy in ("downgrade", "bidirectional")
            and bool(rest)
            and all(m.classic is not None for m in rest)
            and len(rest) <= self.cc.gc.config.group_max_size
        )

    def downgrade(self, container: GroupMetadata) -> None:
        """The group's members are all classic: it becomes a classic group and rebalances."""
        g = container.consumer
        assert g is not None
        gc = self.cc.gc
        gone: list[tuple[bytes, bytes | None]] = [(k, None) for k in g.persisted]
        g.persisted.clear()
        container.consumer = None
        container.protocol_type = consumer_protocol.PROTOCOL_TYPE
        container.generation_id = g.group_epoch
        container.state = GroupState.EMPTY
        for m in g.members.values():
            m.cancel_timers()
            assert m.classic is not None
            mm = MemberMetadata(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.classic.session_timeout_ms,
                consumer_protocol.PROTOCOL_TYPE,
                m.classic.protocols,
            )
            mm.assignment = consumer_protocol.encode_assignment(self._names(m.assigned))
            container.add(mm)
        container.protocol_name = container.select_protocol()
        container.subscribed_topics = container._compute_subscribed_topics()
        container.state = GroupState.STABLE
        g.dead = True
        for mm in container.members.values():
            gc._complete_and_schedule_next_heartbeat_expiration(container, mm)
        if gone:
            gc._spawn(gc.manager.store_records(container.group_id, gone))
        log.info("consumer group %s downgraded to a classic group", container.group_id)
        gc._maybe_prepare_rebalance(container)

    # ---- JoinGroup / SyncGroup / Heartbeat / LeaveGroup of classic members ------------
    def _deadline(self, g: ConsumerGroup, m: ConsumerGroupMember, what: str) -> None:
        """The member must send its next JoinGroup (``join``) or SyncGroup (``sync``)
        within its rebalance timeout, or it is fenced (Kafka's join and sync timeouts)."""
        if m.classic_timer is not None:
            if what == "join":
                return  # one is pending already (scheduled if absent, as in Kafka)
            m.classic_timer.cancel()
        gid, mid = g.group_id, m.member_id

        def expire() -> None:
            container = self.cc.gc.manager.get_group(gid)
            group = None if container is None else container.consumer
            member = None if group is None else group.members.get(mid)
            if group is None or member is None or member.classic_timer is not handle:
                return
            member.classic_timer = None
            log.info("classic member %s of consumer group %s: no %s in time", mid, gid, what)
            self.cc._fence_member(group, member)

        handle = self.cc._schedule(m.rebalance_timeout_ms, expire)
        m.classic_timer = handle

    @staticmethod
    def _met_deadline(m: ConsumerGroupMember) -> None:
        if m.classic_timer is not None:
            m.classic_timer.cancel()
            m.classic_timer = None

    def _validate(
        self, g: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> ConsumerGroupMember:
        if instance_id is not None:
            m = g.static_member(instance_id)
            if m is None:
                raise HeartbeatError(ErrorCode.unknown_member_id)
            if m.member_id != member_id:
                raise HeartbeatError(ErrorCode.fenced_instance_id)
        else:
            m = g.members.get(member_id)
            if m is None:
                raise HeartbeatError(ErrorCode.unknown_member_id)
        if m.classic is None:
            raise HeartbeatError(ErrorCode.unknown_member_id)
        return m

    async def join(self, container: GroupMetadata, req: JoinRequest) -> JoinGroupResult:
        g = container.consumer
        assert g is not None
        if req.protocol_type != consumer_protocol.PROTOCOL_TYPE or not req.protocols:
            return JoinGroupResult(req.member_id, ErrorCode.inconsistent_group_protocol)
        member_id = req.member_id or new_member_id()
        if (
            len(g.members) >= self.cc.config.consumer_max_size
            and member_id not in g.members
            and g.static_member(req.group_instance_id) is None
        ):
            return JoinGroupResult(req.member_id, ErrorCode.group_max_size_reached)
        if req.member_id == "" and req.require_known_member_id:
            return JoinGroupResult(member_id, ErrorCode.member_id_required)
        replaced = None
        existing = g.static_member(req.group_instance_id)
        if existing is not None and existing.member_id != member_id:
            member = ConsumerGroupMember(
                member_id,
                instance_id=existing.instance_id,
                subscribed_topic_names=existing.subscribed_topic_names,
                assigned=copy_assignment(existing.assigned),
                member_epoch=0,
                previous_member_epoch=0,
            )
            replaced = existing
        else:
            member = g.members.get(member_id) or ConsumerGroupMember(member_id)
        meta = req.protocols[0][1]
        names = consumer_protocol.subscribed_topics(meta) or set()
        owned = self._ids(consumer_protocol.owned_partitions(meta))
        member.classic = ClassicMember(req.session_timeout_ms, list(req.protocols))
        r = HeartbeatRequest(
            group_id=container.group_id,
            member_id=member_id,
            member_epoch=member.member_epoch,
            instance_id=req.group_instance_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(names)),
            owned=owned,
            client_id=req.client_id,
            client_host=req.client_host,
        )
        member = self.cc.apply(g, r, member, replaced)
        self.cc._schedule_session_timeout(g, member)
        self._deadline(g, member, "sync")
        error = await self.cc.store(g)
        if error:
            return JoinGroupResult(member_id, error)
        return JoinGroupResult(
            member.member_id,
            0,
            member.member_epoch,
            consumer_protocol.PROTOCOL_TYPE,
            req.protocols[0][0],
        )

    def sync(
        self,
        container: GroupMetadata,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncGroupResult:
        g = container.consumer
        assert g is not None
        try:
            m = self._validate(g, member_id, instance_id)
        except HeartbeatError as e:
            return SyncGroupResult(e.code)
        if generation_id != m.member_epoch:
            return SyncGroupResult(ErrorCode.illegal_generation)
        assert m.classic is not None
        name = m.classic.protocols[0][0]
        if (protocol_type is not None and protocol_type != consumer_protocol.PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != name
        ):
            return SyncGroupResult(ErrorCode.inconsistent_group_protocol)
        if g.group_epoch > m.member_epoch and m.state != MemberState.UNREVOKED_PARTITIONS:
            return SyncGroupResult(ErrorCode.rebalance_in_progress)
        self.cc._schedule_session_timeout(g, m)
        self._met_deadline(m)
        version = int.from_bytes(m.classic.protocols[0][1][:2] or b"\x00\x00", "big")
        return SyncGroupResult(
            0,
            consumer_protocol.encode_assignment(self._names(m.assigned), version),
            consumer_protocol.PROTOCOL_TYPE,
            name,
        )

    def heartbeat(
        self, container: GroupMetadata, member_id: str, instance_id: str | None, generation: int
    ) -> int:
        g = container.consumer
        assert g is not None
        try:
            m = self._validate(g, member_id, instance_id)
        except HeartbeatError as e:
            return e.code
        if generation != m.member_epoch:
            return int(ErrorCode.illegal_generation)
        self.cc._schedule_session_timeout(g, m)
        if (
            m.member_epoch < g.group_epoch
            or m.state == MemberState.UNREVOKED_PARTITIONS
            or (m.state == MemberState.UNRELEASED_PARTITIONS and self._unreleased_free(g, m))
        ):
            self._deadline(g, m, "join")
            return int(ErrorCode.rebalance_in_progress)
        return 0

    @staticmethod
    def _unreleased_free(g: ConsumerGroup, m: ConsumerGroupMember) -> bool:
        target = g.target_assignment.get(m.member_id, {})
        for tid, parts in target.items():
            for p in parts - m.assigned.get(tid, set()):
                if g.current_partition_epoch(tid, p) == -1:
                    return True
        return False

    def leave(self, container: GroupMetadata, members: list[tuple[str, str | None]]) -> list[int]:
        g = container.consumer
        assert g is not None
        errors = []
        for member_id, instance_id in members:
            if container.consumer is not g:
                # downgraded by an earlier leave of this batch: a classic group now
                mid = container.static_member_id(instance_id) if member_id == "" else member_id
                error = container.validate_member(mid or "", instance_id)
                if not error and mid is not None:
                    self.cc.gc._remove_current_member(container, container.get(mid))
                errors.append(error)
                continue
            m = g.static_member(instance_id) if member_id == "" else g.members.get(member_id)
            if m is None or (instance_id is not None and m.instance_id != instance_id):
                errors.append(
                    int(
                        ErrorCode.fenced_instance_id
                        if m is None and g.static_member(instance_id) is not None
                        else ErrorCode.unknown_member_id
                    )
                )
                continue
            log.info("member %s left consumer group %s (LeaveGroup)", m.member_id, g.group_id)
            self.cc._fence_member(g, m)
            errors.append(0)
        return errors


def _classic_key(group_id: str) -> bytes:
    from kafkalite.coordinator.group import offset_codec

    return offset_codec.encode_group_metadata_key(group_id)


__all__ = ["ClassicBridge"]
