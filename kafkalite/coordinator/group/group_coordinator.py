"""GroupCoordinator: the classic consumer group protocol (JoinGroup/SyncGroup/Heartbeat/...).

One broker coordinates a group: the leader of its ``__consumer_offsets``
partition. A rebalance moves the group Stable → PreparingRebalance (members
rejoin; DelayedJoin waits for all of them or the rebalance timeout) →
CompletingRebalance (the leader, chosen at join, sends the assignment in
SyncGroup; it is persisted, then handed to every member) → Stable. Session
timeouts are DelayedHeartbeats; static members (group.instance.id) keep their
place and assignment across restarts within the session timeout.

The semantics and error codes are Apache Kafka's (the classic protocol as the
Kafka 4 group coordinator serves it). Methods run on the broker's event loop;
the ones that wait (join, sync, writes to the log) are coroutines.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalite.common.types import TopicPartition
from kafkalite.coordinator.group import consumer_protocol
from kafkalite.coordinator.group.collaborators import ClusterMetadata, CreateTopics, Replicas
from kafkalite.coordinator.group.consumer_coordinator import ConsumerGroupCoordinator
from kafkalite.coordinator.group.delayed_heartbeat import DelayedHeartbeat
from kafkalite.coordinator.group.delayed_join import DelayedJoin, DelayedSync, InitialDelayedJoin
from kafkalite.coordinator.group.group_configs import GroupConfigs
from kafkalite.coordinator.group.group_metadata import (
    GroupMetadata,
    GroupState,
    JoinGroupResult,
    MemberMetadata,
    OffsetAndMetadata,
    SyncGroupResult,
)
from kafkalite.coordinator.group.group_metadata_manager import (
    OFFSETS_TOPIC,
    GroupConfig,
    GroupMetadataManager,
)
from kafkalite.coordinator.share.share_coordinator import ShareGroupCoordinator
from kafkalite.protocol.errors import ErrorCode
from kafkalite.timer.delayed_operation import DelayedOperation
from kafkalite.timer.purgatory import DelayedOperationPurgatory

log = logging.getLogger(__name__)

#: a new member's JoinGroup cannot outlive this (it has no member id to heartbeat with)
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
#: the group types of ListGroups v5 (types filter) and DescribeGroups
CLASSIC_GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """One JoinGroup as the coordinator sees it, passed whole down the join path.

    The API layer fills it from the request and its version: KIP-394's
    ``require_known_member_id`` (v4+, dynamic members) and KIP-814's
    ``supports_skip_assignment`` (v9+). ``rebalance_timeout_ms`` is the session
    timeout before v1, which had no rebalance timeout.
    """

    group_id: str
    member_id: str
    group_instance_id: str | None
    require_known_member_id: bool
    supports_skip_assignment: bool
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    #: (name, metadata) in the member's preference order
    protocols: list[tuple[str, bytes]]


@dataclass(slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupSummary:
    error: int
    group_id: str
    state: str = GroupState.DEAD.value
    protocol_type: str = ""
    protocol: str = ""
    members: list[MemberDescription] = field(default_factory=list)
    message: str | None = None


@dataclass(slots=True)
class _NewOffsetsTopic:
    """The CreateTopics shape AdminManager.create_topics reads."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: tuple[Any, ...]
    assignments: tuple[Any, ...] = ()


@dataclass(slots=True)
class _Config:
    name: str
    value: str


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig,
        clock_ms: Callable[[], int],
        metadata: ClusterMetadata,
        replicas: Replicas,
        create_topics: CreateTopics,
    ) -> None:
        self.config = config
        self.clock_ms = clock_ms
        self.metadata = metadata
        self.replicas = replicas
        self._create_topics = create_topics
        self.manager = GroupMetadataManager(metadata, replicas, config, clock_ms)
        self.is_active = False
        self.join_purgatory: DelayedOperationPurgatory[DelayedOperation] = None  # type: ignore[assignment]
        self.heartbeat_purgatory: DelayedOperationPurgatory[DelayedHeartbeat] = None  # type: ignore[assignment]
        self._tasks: set[asyncio.Task[Any]] = set()
        self._creating_topic: asyncio.Task[None] | None = None
        #: the KIP-848 protocol: ConsumerGroupHeartbeat and ConsumerGroupDescribe
        self.consumer = ConsumerGroupCoordinator(self)
        #: the groups' dynamic configs (GROUP config resources); the broker loads them
        self.group_config_store: GroupConfigs | None = None
        #: share groups (KIP-932): membership, share partitions and sessions
        self.share = ShareGroupCoordinator(self)

    def group_configs(self, group_id: str) -> Mapping[str, str]:
        """A group's dynamic config overrides (empty: the broker's values)."""
        store = self.group_config_store
        return {} if store is None else store.get(group_id)

    # ---- lifecycle ----------------------------------------------------------------
    def startup(self) -> None:
        """Start after the replica manager exists and before LeaderAndIsr can arrive."""
        self.join_purgatory = DelayedOperationPurgatory("Rebalance")
        self.heartbeat_purgatory = DelayedOperationPurgatory("Heartbeat")
        rm = self.replicas
        rm.on_leadership_change.append(self.on_leadership_change)
        for tp, p in list(rm.partitions.items()):
            if tp[0] == OFFSETS_TOPIC and p.is_leader:
                self.on_leadership_change(tp, True)
        self._spawn(self.manager.run_expiry())
        self.share.partitions.startup()
        listeners = getattr(rm, "append_listeners", None)
        if listeners is not None:
            listeners.append(self._on_append)
        self.is_active = True

    def _on_append(self, tp: TopicPartition, _info: Any) -> None:
        self.share.partitions.on_data(tp)

    async def shutdown(self) -> None:
        self.is_active = False
        self.manager.shutdown()
        rm = self.replicas
        if self.on_leadership_change in rm.on_leadership_change:
            rm.on_leadership_change.remove(self.on_leadership_change)
        for partition in list(self.manager.owned_partitions | self.manager.loading_partitions):
            self.manager.unload(partition, self._on_group_unloaded)
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        listeners = getattr(rm, "append_listeners", None)
        if listeners is not None and self._on_append in listeners:
            listeners.remove(self._on_append)
        self.share.partitions.shutdown()
        if self.join_purgatory is not None:
            self.join_purgatory.shutdown()
            self.heartbeat_purgatory.shutdown()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ---- leadership of __consumer_offsets ---------------------------------------------
    def on_leadership_change(self, tp: TopicPartition, is_leader: bool) -> None:
        if tp[0] != OFFSETS_TOPIC or self.manager.shutting_down:
            return
        if is_leader:
            self.manager.schedule_load(tp[1], self._on_group_loaded)
        else:
            self.manager.unload(tp[1], self._on_group_unloaded)

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        self.consumer.on_loaded(group)
        self.share.on_loaded(group)
        for member in group.members.values():
            self._complete_and_schedule_next_heartbeat_expiration(group, member)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        ConsumerGroupCoordinator.on_unloaded(group)
        # the group's share partitions stay with their leaders: they write to
        # whichever broker coordinates the group next (ShareGroupState APIs)
        ShareGroupCoordinator.on_unloaded(group)
        previous = group.state
        group.transition_to(GroupState.DEAD, self.clock_ms())
        for member in group.members.values():
            group.complete_join(
                member, JoinGroupResult(member.member_id, ErrorCode.not_coordinator)
            )
            group.complete_sync(member, SyncGroupResult(ErrorCode.not_coordinator))
            self.heartbeat_purgatory.check_and_complete(
                _member_key(group.group_id, member.member_id)
            )
        if previous == GroupState.PREPARING_REBALANCE:
            self.join_purgatory.check_and_complete(_join_key(group.group_id))

    # ---- the offsets topic ------------------------------------------------------------
    async def ensure_offsets_topic(self, timeout_s: float = 10.0) -> None:
        """Create ``__consumer_offsets`` on first use and wait until it has leaders.

        Kafka answers COORDINATOR_NOT_AVAILABLE while the topic is created and lets the
        client retry; waiting here saves every client that round trip. A topic that
        already exists is never waited for: its leaders are whatever they are."""
        if self.metadata.get_topic(OFFSETS_TOPIC) is not None:
            return
        if self._creating_topic is None or self._creating_topic.done():
            self._creating_topic = self._spawn(self._create_offsets_topic())
        with contextlib.suppress(asyncio.TimeoutError, Exception):
            await asyncio.wait_for(asyncio.shield(self._creating_topic), timeout_s)

    async def _create_offsets_topic(self) -> None:
        if self.metadata.get_topic(OFFSETS_TOPIC) is None:
            live = self.metadata.alive_broker_ids()
            rf = max(1, min(self.config.offsets_topic_replication_factor, len(live)))
            topic = _NewOffsetsTopic(
                OFFSETS_TOPIC,
                self.config.offsets_topic_num_partitions,
                rf,
                (
                    _Config("cleanup.policy", "compact"),
                    _Config("compression.type", "producer"),
                    _Config("segment.bytes", str(self.config.offsets_topic_segment_bytes)),
                ),
            )
            [r] = await self._create_topics([topic])
            if r.error and r.error != ErrorCode.topic_already_exists:
                log.warning(
                    "creating %s failed: %s %s",
                    OFFSETS_TOPIC,
                    ErrorCode(r.error).name,
                    r.message or "",
                )
                return
        await self.metadata.wait_for_topics([OFFSETS_TOPIC], 10.0)

    def coordinator_for(self, group_id: str) -> int:
        """Broker id leading the group's offsets partition, or -1."""
        t = self.metadata.get_topic(OFFSETS_TOPIC)
        if t is None:
            return -1
        p = t.partitions.get(self.manager.partition_for(group_id))
        if p is None or p.leader < 0 or p.leader not in self.metadata.brokers:
            return -1
        return p.leader

    # ---- validation ---------------------------------------------------------------
    def _validate_group_status(self, group_id: str | None, *, allow_empty: bool = False) -> int:
        if group_id is None or (not allow_empty and group_id == ""):
            return int(ErrorCode.invalid_group_id)
        if not self.is_active:
            return int(ErrorCode.coordinator_not_available)
        if self.manager.is_group_loading(group_id):
            return int(ErrorCode.coordinator_load_in_progress)
        if not self.manager.is_group_local(group_id):
            return int(ErrorCode.not_coordinator)
        return 0

    # ---- JoinGroup ----------------------------------------------------------------
    async def handle_join_group(self, req: JoinRequest) -> JoinGroupResult:
        member_id = req.member_id
        error = self._validate_group_status(req.group_id)
        if error:
            return JoinGroupResult(member_id, error)
        if not (
            self.config.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            return JoinGroupResult(member_id, ErrorCode.invalid_session_timeout)
        is_unknown = member_id == ""
        group = self.manager.get_group(req.group_id)
        if group is None:
            if not is_unknown:
                return JoinGroupResult(member_id, ErrorCode.unknown_member_id)
            group = self.manager.add_group(
                GroupMetadata(req.group_id, GroupState.EMPTY, self.clock_ms())
            )
        if group.share is not None and not group.share.dead:
            return JoinGroupResult(member_id, ErrorCode.inconsistent_group_protocol)
        if group.consumer is not None:
            if not group.consumer.is_empty:
                # a classic member of a consumer group: the broker assigns (KIP-848 migration)
                if self.config.consumer_migration_policy == "disabled" and not any(
                    m.classic is not None for m in group.consumer.members.values()
                ):
                    return JoinGroupResult(member_id, ErrorCode.inconsistent_group_protocol)
                return await self.consumer.classic.join(group, req)
            if not is_unknown:
                return JoinGroupResult(member_id, ErrorCode.unknown_member_id)
            # an empty consumer group becomes a classic group, as in Kafka; its records go
            gone: list[tuple[bytes, bytes | None]] = [(k, None) for k in group.consumer.persisted]
            group.consumer = None
            group.protocol_type = None
            if gone:
                self._spawn(self.manager.store_records(group.group_id, gone))
        if not self._accept_joining_member(group, member_id):
            return JoinGroupResult(member_id, ErrorCode.group_max_size_reached)

        fut: asyncio.Future[JoinGroupResult] = asyncio.get_running_loop().create_future()
        if group.is_state(GroupState.DEAD):
            # deleted or unloaded meanwhile: let the member find the coordinator again
            fut.set_result(JoinGroupResult(member_id, ErrorCode.coordinator_not_available))
        elif not group.supports_protocols(req.protocol_type, [p for p, _ in req.protocols]):
            fut.set_result(JoinGroupResult(member_id, ErrorCode.inconsistent_group_protocol))
        elif is_unknown:
            await self._do_new_member_join(group, req, fut)
        else:
            self._do_current_member_join(group, req, fut)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self.join_purgatory.check_and_complete(_join_key(req.group_id))
        # the member stays in the group even if its connection goes away meanwhile
        return await asyncio.shield(fut)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        max_size = self.config.group_max_size
        if group.is_state(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_state(GroupState.PREPARING_REBALANCE):
            known = group.members.get(member_id)
            return (
                known is not None and known.is_awaiting_join
            ) or group.num_awaiting_join < max_size
        return group.has(member_id) or group.size < max_size

    async def _do_new_member_join(
        self, group: GroupMetadata, req: JoinRequest, fut: asyncio.Future[JoinGroupResult]
    ) -> None:
        instance_id = req.group_instance_id
        new_member_id = new_member_id_for(instance_id if instance_id is not None else req.client_id)
        if instance_id is not None:
            old_member_id = group.static_member_id(instance_id)
            if old_member_id is not None:
                await self._update_static_member_and_rebalance(
                    group, instance_id, old_member_id, new_member_id, req, fut
                )
                return
        elif req.require_known_member_id:
            # KIP-394: hand out the id first, so a retried JoinGroup cannot leave a ghost member
            group.pending_members.add(new_member_id)
            self._schedule_pending_member_expiration(group, new_member_id, req.session_timeout_ms)
            fut.set_result(JoinGroupResult(new_member_id, ErrorCode.member_id_required))
            return
        self._add_member_and_rebalance(group, new_member_id, req, fut)

    def _do_current_member_join(
        self, group: GroupMetadata, req: JoinRequest, fut: asyncio.Future[JoinGroupResult]
    ) -> None:
        member_id = req.member_id
        if member_id in group.pending_members:
            # the second JoinGroup of a KIP-394 member (pending members are never static)
            self._add_member_and_rebalance(group, member_id, req, fut)
            return
        error = group.validate_member(member_id, req.group_instance_id)
        if error:
            fut.set_result(JoinGroupResult(member_id, error))
            return
        member = group.get(member_id)
        state = group.state
        if state == GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, req, fut)
        elif state == GroupState.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # it lost our JoinGroup response: send it again
                fut.set_result(self._current_join_result(group, member_id))
            else:
                self._update_member_and_rebalance(group, member, req, fut)
        elif state == GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # a leader rejoining or a member changing its metadata forces a rebalance
                self._update_member_and_rebalance(group, member, req, fut)
            else:
                fut.set_result(self._current_join_result(group, member_id, with_members=False))
        else:
            fut.set_result(JoinGroupResult(member_id, ErrorCode.unknown_member_id))

    def _current_join_result(
        self, group: GroupMetadata, member_id: str, *, with_members: bool = True
    ) -> JoinGroupResult:
        leader = group.is_leader(member_id)
        return JoinGroupResult(
            member_id,
            0,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            members=group.current_member_metadata() if leader and with_members else [],
        )

    def _add_member_and_rebalance(
        self,
        group: GroupMetadata,
        member_id: str,
        req: JoinRequest,
        fut: asyncio.Future[JoinGroupResult],
    ) -> None:
        member = MemberMetadata(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            req.protocols,
        )
        member.is_new = True
        if group.is_state(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True  # lets InitialDelayedJoin wait a little longer
        group.add(member, fut)
        # a new member cannot heartbeat while its JoinGroup waits, so that wait is bounded instead
        self._complete_and_schedule_next_heartbeat_expiration(
            group, member, NEW_MEMBER_JOIN_TIMEOUT_MS
        )
        self._maybe_prepare_rebalance(group)

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        req: JoinRequest,
        fut: asyncio.Future[JoinGroupResult],
    ) -> None:
        group.update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, fut
        )
        self._maybe_prepare_rebalance(group)

    async def _update_static_member_and_rebalance(
        self,
        group: GroupMetadata,
        instance_id: str,
        old_member_id: str,
        new_member_id: str,
        req: JoinRequest,
        fut: asyncio.Future[JoinGroupResult],
    ) -> None:
        """A known static member rejoined with a new process: it takes over the old member id's place."""
        current_leader = group.leader_id or ""
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self._complete_and_schedule_next_heartbeat_expiration(group, member)
        old = (member.supported_protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, fut
        )
        state = group.state
        if state == GroupState.STABLE:
            if group.protocol_name != group.select_protocol():
                self._maybe_prepare_rebalance(group)
                return
            # same protocol: no rebalance, the member keeps the assignment of the id it replaces
            assignment = {m.member_id: m.assignment for m in group.members.values()}
            generation = group.generation_id
            error = await self.manager.store_group(group, assignment)
            if member.join_future is not fut or group.generation_id != generation:
                return  # a rebalance started meanwhile and will answer this member
            if error:
                member.join_future = None
                group.update_member(member, old[0], old[1], old[2], None)
                restored = group.replace_static_member(instance_id, new_member_id, old_member_id)
                self._complete_and_schedule_next_heartbeat_expiration(group, restored)
                fut.set_result(
                    JoinGroupResult(
                        "",
                        error,
                        group.generation_id,
                        group.protocol_type,
                        group.protocol_name,
                        current_leader,
                    )
                )
                return
            if req.supports_skip_assignment:
                # JoinGroup v9+: the leader learns it leads but must not run the assignor
                is_leader = group.is_leader(new_member_id)
                result = JoinGroupResult(
                    new_member_id,
                    0,
                    group.generation_id,
                    group.protocol_type,
                    group.protocol_name,
                    group.leader_id or "",
                    skip_assignment=is_leader,
                    members=group.current_member_metadata() if is_leader else [],
                )
            else:
                # older clients: name the old leader id, so a static leader does not reassign
                result = JoinGroupResult(
                    new_member_id,
                    0,
                    group.generation_id,
                    group.protocol_type,
                    group.protocol_name,
                    current_leader,
                )
            group.complete_join(member, result)
        elif state == GroupState.COMPLETING_REBALANCE:
            # the leader may be assigning to the old member id: start over
            self._prepare_rebalance(group)
        elif state != GroupState.PREPARING_REBALANCE:
            raise RuntimeError(f"static member rejoin in unexpected state {state.value}")

    # ---- rebalance --------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        self._remove_sync_expiration(group)
        if group.is_state(GroupState.EMPTY):
            delay = self.config.group_initial_rebalance_delay_ms
            op: DelayedJoin = InitialDelayedJoin(
                self, group, delay, max(group.rebalance_timeout_ms() - delay, 0)
            )
        else:
            op = DelayedJoin(self, group, group.rebalance_timeout_ms())
        group.transition_to(GroupState.PREPARING_REBALANCE, self.clock_ms())
        log.info(
            "preparing to rebalance group %s in state PreparingRebalance with old generation %d",
            group.group_id,
            group.generation_id,
        )
        self.watch_join(op)

    def watch_join(self, op: DelayedJoin) -> None:
        self.join_purgatory.try_complete_else_watch(op, [_join_key(op.group.group_id)])

    def try_complete_join(self, group: GroupMetadata, force_complete: Callable[[], bool]) -> bool:
        if group.has_all_members_joined():
            return force_complete()
        return False

    def on_complete_join(self, group: GroupMetadata) -> None:
        if group.consumer is not None:
            return  # upgraded to a consumer group while the rebalance waited
        for m in group.not_yet_rejoined_members():
            if not m.is_static:  # static members keep their place until their session expires
                self._remove_heartbeat_for_leaving_member(group, m)
                group.remove(m.member_id)
        if group.is_state(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # only silent static members left: wait another round for them
            log.info(
                "group %s could not complete rebalance because no members rejoined", group.group_id
            )
            self.watch_join(DelayedJoin(self, group, group.rebalance_timeout_ms()))
            return
        group.init_next_generation(self.clock_ms())
        if group.is_state(GroupState.EMPTY):
            log.info(
                "group %s with generation %d is now empty", group.group_id, group.generation_id
            )
            self._spawn(self._store_empty_group(group))
            return
        log.info(
            "stabilized group %s generation %d with %d members",
            group.group_id,
            group.generation_id,
            group.size,
        )
        for member in list(group.members.values()):
            result = self._current_join_result(group, member.member_id)
            group.complete_join(member, result)
            self._complete_and_schedule_next_heartbeat_expiration(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self.join_purgatory.try_complete_else_watch(
            DelayedSync(self, group, group.generation_id, group.rebalance_timeout_ms()),
            [_sync_key(group.group_id)],
        )

    async def _store_empty_group(self, group: GroupMetadata) -> None:
        error = await self.manager.store_group(group, {})
        if error:
            log.warning(
                "failed to write the empty metadata of group %s: %s",
                group.group_id,
                ErrorCode(error).name,
            )

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self.join_purgatory.check_and_complete(_sync_key(group.group_id))

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None:
        if generation_id != group.generation_id or not group.pending_sync_members:
            return
        if group.is_state(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            missing = list(group.pending_sync_members)
            log.info(
                "removing members %s of group %s: no SyncGroup within the rebalance timeout",
                missing,
                group.group_id,
            )
            for member_id in missing:
                member = group.members.get(member_id)
                if member is not None:
                    self._remove_heartbeat_for_leaving_member(group, member)
                group.remove(member_id)
            self._prepare_rebalance(group)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: int) -> None:
        for member in list(group.members.values()):
            result = SyncGroupResult(
                error, member.assignment, group.protocol_type, group.protocol_name
            )
            if group.complete_sync(member, result):
                self._complete_and_schedule_next_heartbeat_expiration(group, member)

    # ---- SyncGroup ----------------------------------------------------------------
    async def handle_sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncGroupResult:
        error = self._validate_group_status(group_id)
        if error:
            return SyncGroupResult(error)
        group = self.manager.get_group(group_id)
        if group is None:
            return SyncGroupResult(ErrorCode.unknown_member_id)
        if group.is_state(GroupState.DEAD):
            return SyncGroupResult(ErrorCode.coordinator_not_available)
        if group.consumer is not None:
            return self.consumer.classic.sync(
                group, generation_id, member_id, group_instance_id, protocol_type, protocol_name
            )
        error = group.validate_member(member_id, group_instance_id)
        if error:
            return SyncGroupResult(error)
        if generation_id != group.generation_id:
            return SyncGroupResult(ErrorCode.illegal_generation)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncGroupResult(ErrorCode.inconsistent_group_protocol)
        member = group.get(member_id)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return SyncGroupResult(ErrorCode.rebalance_in_progress)
        if group.is_state(GroupState.STABLE):
            self._remove_pending_sync_member(group, member_id)
            self._complete_and_schedule_next_heartbeat_expiration(group, member)
            return SyncGroupResult(0, member.assignment, group.protocol_type, group.protocol_name)
        if not group.is_state(GroupState.COMPLETING_REBALANCE):
            return SyncGroupResult(ErrorCode.unknown_member_id)

        fut: asyncio.Future[SyncGroupResult] = asyncio.get_running_loop().create_future()
        member.sync_future = fut
        self._remove_pending_sync_member(group, member_id)
        self._complete_and_schedule_next_heartbeat_expiration(group, member)
        if group.is_leader(member_id):
            full = {m: assignments.get(m, b"") for m in group.members}
            generation = group.generation_id
            error = await self.manager.store_group(group, full)
            # the group may have moved on while the record was written
            if (
                group.is_state(GroupState.COMPLETING_REBALANCE)
                and group.generation_id == generation
            ):
                if error:
                    self._reset_and_propagate_assignment_error(group, error)
                    self._maybe_prepare_rebalance(group)
                else:
                    for m in group.members.values():
                        m.assignment = full.get(m.member_id, b"")
                    self._propagate_assignment(group, 0)
                    group.transition_to(GroupState.STABLE, self.clock_ms())
        return await asyncio.shield(fut)

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        if member_id in group.pending_sync_members:
            group.pending_sync_members.discard(member_id)
            self.join_purgatory.check_and_complete(_sync_key(group.group_id))

    # ---- Heartbeat ----------------------------------------------------------------
    def handle_heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        error = self._validate_group_status(group_id)
        if error == ErrorCode.coordinator_load_in_progress:
            return 0  # Kafka answers blindly while loading: the member will find out soon enough
        if error:
            return error
        group = self.manager.get_group(group_id)
        if group is None:
            return int(ErrorCode.unknown_member_id)
        if group.is_state(GroupState.DEAD):
            return int(ErrorCode.coordinator_not_available)
        if group.consumer is not None:
            return self.consumer.classic.heartbeat(
                group, member_id, group_instance_id, generation_id
            )
        error = group.validate_member(member_id, group_instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return int(ErrorCode.illegal_generation)
        if group.is_state(GroupState.EMPTY):
            return int(ErrorCode.unknown_member_id)
        self._complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return int(ErrorCode.rebalance_in_progress)
        return 0

    def _complete_and_schedule_next_heartbeat_expiration(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None
    ) -> None:
        key = _member_key(group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self.heartbeat_purgatory.check_and_complete(key)
        member.heartbeat_satisfied = False
        op = DelayedHeartbeat(
            self,
            group,
            member.member_id,
            False,
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
        )
        self.heartbeat_purgatory.try_complete_else_watch(op, [key])

    def _schedule_pending_member_expiration(
        self, group: GroupMetadata, member_id: str, timeout_ms: int
    ) -> None:
        op = DelayedHeartbeat(self, group, member_id, True, timeout_ms)
        self.heartbeat_purgatory.try_complete_else_watch(
            op, [_member_key(group.group_id, member_id)]
        )

    def _remove_heartbeat_for_leaving_member(
        self, group: GroupMetadata, member: MemberMetadata
    ) -> None:
        member.is_leaving = True
        self.heartbeat_purgatory.check_and_complete(_member_key(group.group_id, member.member_id))

    def try_complete_heartbeat(
        self,
        group: GroupMetadata,
        member_id: str,
        is_pending: bool,
        force_complete: Callable[[], bool],
    ) -> bool:
        if group.is_state(GroupState.DEAD):
            return force_complete()
        if is_pending:
            return force_complete() if group.has(member_id) else False
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return force_complete()
        return False

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None:
        if group.is_state(GroupState.DEAD):
            return
        if is_pending:
            if member_id in group.pending_members:
                log.info("pending member %s of group %s expired", member_id, group.group_id)
                group.pending_members.discard(member_id)
                if group.is_state(GroupState.PREPARING_REBALANCE):
                    self.join_purgatory.check_and_complete(_join_key(group.group_id))
            return
        member = group.members.get(member_id)
        if member is not None and not member.has_satisfied_heartbeat():
            log.info(
                "member %s of group %s has failed (session timeout), removing it",
                member_id,
                group.group_id,
            )
            self._remove_member_and_update_group(group, member)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata) -> None:
        # answer a JoinGroup it may still be waiting in, so the client retries if it lives
        group.complete_join(member, JoinGroupResult("", ErrorCode.unknown_member_id))
        group.complete_sync(member, SyncGroupResult(ErrorCode.unknown_member_id))
        group.remove(member.member_id)
        if group.is_state(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self.join_purgatory.check_and_complete(_join_key(group.group_id))

    # ---- LeaveGroup ---------------------------------------------------------------
    def handle_leave_group(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[int, list[int]]:
        """Returns the group-level error and one error per leaving member."""
        error = self._validate_group_status(group_id)
        if error:
            return error, []
        group = self.manager.get_group(group_id)
        if group is None:
            return int(ErrorCode.unknown_member_id), []
        if group.is_state(GroupState.DEAD):
            return int(ErrorCode.coordinator_not_available), []
        if group.consumer is not None:
            return 0, self.consumer.classic.leave(group, members)
        errors = []
        for member_id, instance_id in members:
            if member_id == "":
                # administrative removal by group.instance.id (KIP-345)
                current = group.static_member_id(instance_id)
                if current is None:
                    errors.append(int(ErrorCode.unknown_member_id))
                    continue
                self._remove_current_member(group, group.get(current))
                errors.append(0)
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self.heartbeat_purgatory.check_and_complete(_member_key(group_id, member_id))
                if group.is_state(GroupState.PREPARING_REBALANCE):
                    self.join_purgatory.check_and_complete(_join_key(group_id))
                errors.append(0)
            else:
                error = group.validate_member(member_id, instance_id)
                if not error:
                    self._remove_current_member(group, group.get(member_id))
                errors.append(error)
        return 0, errors

    def _remove_current_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        log.info("member %s has left group %s", member.member_id, group.group_id)
        self._remove_heartbeat_for_leaving_member(group, member)
        self._remove_member_and_update_group(group, member)

    # ---- OffsetCommit -------------------------------------------------------------
    async def handle_commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        api_version: int,
    ) -> dict[TopicPartition, int]:
        error = self._validate_group_status(group_id, allow_empty=True)
        if error:
            return dict.fromkeys(offsets, error)
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                # v9+ says so plainly; older versions keep their historical error
                code = (
                    ErrorCode.group_id_not_found
                    if api_version >= 9
                    else ErrorCode.illegal_generation
                )
                return dict.fromkeys(offsets, int(code))
            # a "simple" group: it only stores offsets (assign() + commit)
            group = self.manager.add_group(
                GroupMetadata(group_id, GroupState.EMPTY, self.clock_ms())
            )
        if group.share is not None and not group.share.dead:
            # share groups have no committed offsets (their state is per share partition)
            return dict.fromkeys(offsets, int(ErrorCode.group_id_not_found))
        if group.consumer is not None:
            error = self.consumer.validate_offset_commit(
                group.consumer, member_id, generation_id, api_version
            )
        else:
            error = self._validate_offset_commit(group, member_id, group_instance_id, generation_id)
        if error:
            return dict.fromkeys(offsets, error)
        member = group.members.get(member_id)
        if member is not None:
            self._complete_and_schedule_next_heartbeat_expiration(group, member)
        results: dict[TopicPartition, int] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if len(om.metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[tp] = int(ErrorCode.offset_metadata_too_large)
            else:
                valid[tp] = om
        results.update(await self.manager.store_offsets(group, valid))
        return {tp: results[tp] for tp in offsets}

    @staticmethod
    def _validate_offset_commit(
        group: GroupMetadata, member_id: str, instance_id: str | None, generation_id: int
    ) -> int:
        if group.is_state(GroupState.DEAD):
            return int(ErrorCode.coordinator_not_available)
        if generation_id < 0 and group.is_state(GroupState.EMPTY):
            return 0  # admin clients and consumers without group management
        if generation_id >= 0 or member_id or instance_id is not None:
            error = group.validate_member(member_id, instance_id)
            if error:
                return error
            if generation_id != group.generation_id:
                return int(ErrorCode.illegal_generation)
        elif not group.is_state(GroupState.EMPTY):
            return int(ErrorCode.unknown_member_id)
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            # the member has the new generation but not its assignment yet
            return int(ErrorCode.rebalance_in_progress)
        return 0

    # ---- OffsetFetch --------------------------------------------------------------
    def handle_fetch_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[int, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets (None = no commit) for the partitions, or all of them.

        A consumer group checks the member epoch of OffsetFetch v9+ (STALE_MEMBER_EPOCH)."""
        error = self._validate_group_status(group_id, allow_empty=True)
        if error:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is not None and group.consumer is not None:
            error = self.consumer.validate_offset_fetch(group.consumer, member_id, member_epoch)
            if error:
                return error, {}
        committed = {} if group is None or group.is_state(GroupState.DEAD) else group.offsets
        if partitions is None:
            return 0, dict(committed)
        return 0, {tp: committed.get(tp) for tp in partitions}

    # ---- DescribeGroups / ListGroups / DeleteGroups / OffsetDelete ----------------------
    def handle_describe_group(self, group_id: str) -> GroupSummary:
        error = self._validate_group_status(group_id, allow_empty=True)
        if error:
            return GroupSummary(error, group_id)
        group = self.manager.get_group(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return GroupSummary(int(ErrorCode.group_id_not_found), group_id)
        if group.consumer is not None or group.share is not None:
            # Kafka 4 answers DescribeGroups for classic groups only
            return GroupSummary(
                int(ErrorCode.group_id_not_found),
                group_id,
                message=f"Group {group_id} is not a classic group.",
            )
        stable = group.is_state(GroupState.STABLE) and group.protocol_name is not None
        members = []
        for m in group.members.values():
            members.append(
                MemberDescription(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                    m.assignment if stable else b"",
                )
            )
        return GroupSummary(
            0,
            group_id,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    def handle_list_groups(
        self, states: set[str], types: set[str]
    ) -> tuple[int, list[GroupMetadata]]:
        """Groups this broker coordinates; filters are lower-cased names (empty = any)."""
        if not self.is_active:
            return int(ErrorCode.coordinator_not_available), []
        if self.manager.is_loading:
            return int(ErrorCode.coordinator_load_in_progress), []
        out = [
            g
            for g in self.manager.current_groups()
            if not g.is_state(GroupState.DEAD)
            and (not states or g.state_name.lower() in states)
            and (not types or g.group_type in types)
        ]
        return 0, out

    async def handle_delete_group(self, group_id: str) -> int:
        error = self._validate_group_status(group_id, allow_empty=True)
        if error:
            return error
        group = self.manager.get_group(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return int(ErrorCode.group_id_not_found)
        if not group.is_empty:
            return int(ErrorCode.non_empty_group)
        if group.consumer is not None:
            group.consumer.dead = True
        if group.share is not None:
            error = await self.share.delete(group)
            if error:
                return error
            group.share.dead = True
        return await self.manager.delete_group(group)

    async def handle_delete_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition],
    ) -> tuple[int, dict[TopicPartition, int]]:
        """OffsetDelete: (group error, per-partition errors)."""
        error = self._validate_group_status(group_id)
        if error:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return int(ErrorCode.group_id_not_found), {}
        results: dict[TopicPartition, int] = {}
        if group.consumer is not None and not group.consumer.is_empty:
            subscribed = group.consumer.subscription_metadata
            deletable = []
            for tp in partitions:
                if tp[0] in subscribed:
                    results[tp] = int(ErrorCode.group_subscribed_to_topic)
                else:
                    deletable.append(tp)
        elif group.is_state(GroupState.EMPTY):
            deletable = list(partitions)
        elif group.protocol_type == consumer_protocol.PROTOCOL_TYPE:
            deletable = []
            for tp in partitions:
                if group.is_subscribed_to_topic(tp[0]):
                    results[tp] = int(ErrorCode.group_subscribed_to_topic)
                else:
                    deletable.append(tp)
        else:
            return int(ErrorCode.non_empty_group), {}
        error = await self.manager.delete_offsets(group, deletable)
        for tp in deletable:
            results[tp] = error
        return 0, results


def _join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def _sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


def _member_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("member", group_id, member_id)


#: a member id is sent back as a string, at most 32767 bytes in every version
_MAX_MEMBER_ID_BYTES = 0x7FFF


def new_member_id_for(prefix: str) -> str:
    """Kafka's ``<group.instance.id or client.id>-<uuid>``, its prefix cut so the id fits
    in a string field (a 32767-byte client id made every response naming it unwritable)."""
    room = _MAX_MEMBER_ID_BYTES - 37  # "-" and a UUID
    raw = prefix.encode()
    if len(raw) > room:
        prefix = raw[:room].decode("utf-8", "ignore")
    return f"{prefix}-{uuid.uuid4()}"
