"""ShareFetch (78) and ShareAcknowledge (79): share sessions and share partitions.

Kafka's ``SharePartitionManager`` and ``ShareSessionCache``. A member opens a share
session with epoch 0, then every ShareFetch or ShareAcknowledge carries the next
epoch (INVALID_SHARE_SESSION_EPOCH otherwise; SHARE_SESSION_NOT_FOUND when there is
none); -1 closes it and releases the member's acquired records. A ShareFetch first
applies its acknowledgements, then acquires records of the session's partitions; with
nothing to acquire it waits in the share-fetch purgatory (like a Fetch) until records
are appended or released, or ``max_wait`` runs out.

Durable state: every change that matters across a restart (acknowledged, archived and
released records, delivery counts, the start offset) is written as a full snapshot of
the share partition to the group's ``__consumer_offsets`` partition (replicated like
offset commits, see docs/share-groups.md), and ShareAcknowledge and the
acknowledgements in a ShareFetch are answered only once written. Writes for one share
partition are serialised and coalesced: the latest state is always the last written.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from kafkalite.common.types import TopicPartition
from kafkalite.coordinator.share import share_codec
from kafkalite.coordinator.share.share_codec import ShareSnapshot
from kafkalite.coordinator.share.share_partition import (
    AcquiredRange,
    Settings,
    ShareError,
    SharePartition,
)
from kafkalite.coordinator.share.share_state import StateResult
from kafkalite.protocol.errors import ErrorCode
from kafkalite.timer.delayed_operation import DelayedOperation
from kafkalite.timer.purgatory import DelayedOperationPurgatory

if TYPE_CHECKING:
    from kafkalite.coordinator.group.group_coordinator import GroupCoordinator
    from kafkalite.coordinator.group.group_metadata import GroupMetadata
    from kafkalite.coordinator.share.share_coordinator import ShareGroupCoordinator
    from kafkalite.log.log import Log

log = logging.getLogger(__name__)

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
#: how long a state read (a fetch waits on it) and a write (an acknowledgement waits on
#: it) retry while the share-state coordinator moves
READ_RETRY_S, WRITE_RETRY_S = 5.0, 20.0
#: how long a ShareFetch waits for its partitions' states before going on without them
LOAD_WAIT_S = 0.1
_RETRIABLE = frozenset(
    {
        int(ErrorCode.not_coordinator),
        int(ErrorCode.coordinator_not_available),
        int(ErrorCode.coordinator_load_in_progress),
    }
)
SessionKey = tuple[str, str]  # (group id, member id)
#: a partition as the share APIs name it
SharePartitionKey = tuple[uuid.UUID, int]


class RemotePersister(Protocol):
    """ReadShareGroupState and WriteShareGroupState to another broker (server layer)."""

    async def read(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> StateResult: ...

    async def write(
        self, group_id: str, topic_id: uuid.UUID, partition: int, snapshot: ShareSnapshot
    ) -> StateResult: ...

    async def high_watermarks(
        self, leader: int, tps: list[TopicPartition]
    ) -> dict[TopicPartition, int]: ...


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1
    partitions: dict[SharePartitionKey, TopicPartition] = field(default_factory=dict)
    #: the connection that opened it (its close ends the session)
    connection: object = None


@dataclass(slots=True)
class PartitionResult:
    topic_id: uuid.UUID
    partition: int
    error: int = 0
    message: str | None = None
    ack_error: int | None = None
    ack_message: str | None = None
    records: bytes = b""
    acquired: list[AcquiredRange] = field(default_factory=list)
    leader_id: int = -1
    leader_epoch: int = -1


@dataclass(slots=True)
class FetchOutcome:
    error: int = 0
    message: str | None = None
    lock_timeout_ms: int = 0
    partitions: list[PartitionResult] = field(default_factory=list)


class _Writer:
    """Serialised, coalesced snapshot writes of one share partition."""

    __slots__ = ("sp", "changed", "written", "running", "waiters")

    def __init__(self, sp: SharePartition) -> None:
        self.sp = sp
        self.changed = 0
        self.written = 0
        self.running = False
        self.waiters: list[tuple[int, asyncio.Future[int]]] = []


class DelayedShareFetch(DelayedOperation):
    """A ShareFetch waiting for records to acquire (Kafka's DelayedShareFetch)."""

    __slots__ = ("attempt", "result", "done_future")

    def __init__(self, delay_ms: int, attempt: Callable[[bool], list[PartitionResult] | None]):
        super().__init__(delay_ms)
        self.attempt = attempt
        self.result: list[PartitionResult] = []
        self.done_future: asyncio.Future[list[PartitionResult]] = (
            asyncio.get_running_loop().create_future()
        )

    def try_complete(self) -> bool:
        r = self.attempt(False)
        if r is None:
            return False
        self.result = r
        return self.force_complete()

    def on_complete(self) -> None:
        if not self.result:
            self.result = self.attempt(True) or []
        if not self.done_future.done():
            self.done_future.set_result(self.result)


class SharePartitionManager:
    def __init__(self, coordinator: GroupCoordinator, share: ShareGroupCoordinator) -> None:
        self.gc = coordinator
        self.share = share
        self.config = coordinator.config
        self.sessions: dict[SessionKey, ShareSession] = {}
        self.partitions: dict[tuple[str, TopicPartition], SharePartition] = {}
        self._by_tp: dict[TopicPartition, set[str]] = {}
        self._writers: dict[tuple[str, TopicPartition], _Writer] = {}
        self._loading: dict[tuple[str, TopicPartition], asyncio.Future[SharePartition]] = {}
        #: why a partition could not be loaded, reported once by the next fetch
        self._load_errors: dict[tuple[str, TopicPartition], ShareError] = {}
        #: the inter-broker persister (set by the broker): state of groups coordinated
        #: elsewhere is read and written with APIs 84 and 85
        self.remote: RemotePersister | None = None
        self.purgatory: DelayedOperationPurgatory[DelayedShareFetch] | None = None
        self._woken: set[TopicPartition] = set()

    def _broker_id(self) -> int:
        return int(getattr(self.gc.replicas, "broker_id", -1))

    def startup(self) -> None:
        self.purgatory = DelayedOperationPurgatory("ShareFetch")
        rm = self.gc.replicas
        listeners = getattr(rm, "on_leadership_change", None)
        if listeners is not None and self.on_leadership_change not in listeners:
            listeners.append(self.on_leadership_change)

    def shutdown(self) -> None:
        listeners = getattr(self.gc.replicas, "on_leadership_change", None)
        if listeners is not None and self.on_leadership_change in listeners:
            listeners.remove(self.on_leadership_change)
        for sp in self.partitions.values():
            sp.close()
        self.partitions.clear()
        self._by_tp.clear()
        if self.purgatory is not None:
            self.purgatory.shutdown()
            self.purgatory = None

    def on_data(self, tp: TopicPartition) -> None:
        """Records were appended to ``tp``: waiting share fetches may complete (checked
        once the append's request is answered, not inside it)."""
        if self.purgatory is None or tp not in self._by_tp:
            return
        if not self._woken:
            asyncio.get_running_loop().call_soon(self._wake)
        self._woken.add(tp)

    def _wake(self) -> None:
        woken, self._woken = self._woken, set()
        if self.purgatory is not None:
            for tp in woken:
                self.purgatory.check_and_complete(tp)

    # ---- settings ---------------------------------------------------------------------
    def settings_for(self, group_id: str) -> Callable[[], Settings]:
        def settings() -> Settings:
            overrides = self.gc.group_configs(group_id)
            cfg = self.config

            def num(key: str, default: int) -> int:
                v = overrides.get(key)
                try:
                    return default if v is None else int(v)
                except ValueError:
                    return default

            return Settings(
                num("share.record.lock.duration.ms", cfg.share_record_lock_duration_ms),
                num("share.delivery.count.limit", cfg.share_delivery_count_limit),
                num("share.partition.max.record.locks", cfg.share_partition_max_record_locks),
                str(overrides.get("share.auto.offset.reset") or "latest").lower(),
                str(overrides.get("share.isolation.level") or "") == "read_committed",
                str(overrides.get("share.renew.acknowledge.enable") or "true") == "true",
            )

        return settings

    # ---- share partitions -----------------------------------------------------------------
    def _log_for(self, tp: TopicPartition) -> tuple[Log | None, int]:
        p = self.gc.replicas.get_partition(tp)
        if p is None or p.log is None:
            raise ShareError(ErrorCode.unknown_topic_or_partition)
        if not p.is_leader:
            raise ShareError(ErrorCode.not_leader_or_follower)
        return p.log, int(getattr(p, "leader_epoch", -1))

    def _loaded(self, group_id: str, tp: TopicPartition) -> SharePartition | None:
        sp = self.partitions.get((group_id, tp))
        return None if sp is None or sp.closed else sp

    async def _share_partition(
        self, group_id: str, tp: TopicPartition, topic_id: uuid.UUID
    ) -> SharePartition:
        """The leader's share partition, loaded on first use through ReadShareGroupState
        (Kafka's SharePartition.maybeInitialize); concurrent first uses share one read."""
        sp = self._loaded(group_id, tp)
        if sp is not None:
            return sp
        key = (group_id, tp)
        loading = self._loading.get(key)
        if loading is None:
            loading = asyncio.ensure_future(self._load(group_id, tp, topic_id))
            self._loading[key] = loading
            loading.add_done_callback(lambda _f: self._loading.pop(key, None))
        return await asyncio.shield(loading)

    async def _load(self, group_id: str, tp: TopicPartition, topic_id: uuid.UUID) -> SharePartition:
        _, leader_epoch = self._log_for(tp)
        w = self._writers.get((group_id, tp))
        if w is not None and w.waiters:
            await w.waiters[-1][1]  # the previous incarnation's last write lands first
        res = await self.read_state(group_id, topic_id, tp[1], leader_epoch)
        if res.error:
            if res.error == ErrorCode.fenced_leader_epoch:
                raise ShareError(ErrorCode.not_leader_or_follower, "A newer leader read the state.")
            raise ShareError(res.error, res.message)
        plog, epoch_now = self._log_for(tp)  # leadership may have moved while reading
        if epoch_now != leader_epoch:
            raise ShareError(ErrorCode.not_leader_or_follower)
        assert plog is not None
        sp = SharePartition(
            group_id,
            tp,
            topic_id,
            self.settings_for(group_id),
            self._released,
            self._persist_later,
        )
        sp.leader_epoch = leader_epoch
        sp.initialize(res.snapshot, plog)
        self.partitions[(group_id, tp)] = sp
        self._load_errors.pop((group_id, tp), None)
        self._by_tp.setdefault(tp, set()).add(group_id)
        log.info(
            "share partition %s %s-%d initialized at start offset %d (leader epoch %d)",
            group_id,
            tp[0],
            tp[1],
            sp.start_offset,
            leader_epoch,
        )
        return sp

    async def _load_all(
        self, group_id: str, wanted: dict[SharePartitionKey, TopicPartition]
    ) -> None:
        """Load the session's partitions this broker leads that are not loaded yet. A
        load that takes longer than a moment (the share-state coordinator is moving)
        goes on in the background and wakes the waiting fetches when done, so one slow
        partition never holds up the others; its errors that the client must see come
        back from the next acquisition attempt."""
        todo = [
            (pkey, tp)
            for pkey, tp in wanted.items()
            if self._loaded(group_id, tp) is None and self._is_leader(tp)
        ]
        if not todo:
            return
        futs = []
        for pkey, tp in todo:
            fut = asyncio.ensure_future(self._share_partition(group_id, tp, pkey[0]))
            fut.add_done_callback(partial(self._loaded_one, group_id, tp))
            futs.append(fut)
        await asyncio.wait(futs, timeout=LOAD_WAIT_S)

    def _loaded_one(self, group_id: str, tp: TopicPartition, fut: asyncio.Future[Any]) -> None:
        if fut.cancelled():
            return
        e = fut.exception()
        if isinstance(e, ShareError):
            if e.code not in _RETRIABLE:  # a moving coordinator is just retried
                self._load_errors[(group_id, tp)] = e
        elif e is not None:
            log.warning("loading share partition %s %s failed: %r", group_id, tp, e)
        if self.purgatory is not None:
            self.purgatory.check_and_complete(tp)

    def _is_leader(self, tp: TopicPartition) -> bool:
        p = self.gc.replicas.get_partition(tp)
        return p is not None and p.log is not None and bool(p.is_leader)

    def on_leadership_change(self, tp: TopicPartition, is_leader: bool) -> None:
        """The partition's leadership moved (or its leader epoch did): its share
        partitions are dropped; the next leader loads them through ReadShareGroupState."""
        groups = self._by_tp.get(tp)
        if not groups:
            return
        epoch = -1
        if is_leader:
            p = self.gc.replicas.get_partition(tp)
            epoch = -1 if p is None else int(getattr(p, "leader_epoch", -1))
        for gid in list(groups):
            sp = self.partitions.get((gid, tp))
            if sp is None or (is_leader and sp.leader_epoch == epoch):
                continue
            self._drop(sp)
        if self.purgatory is not None:
            asyncio.get_running_loop().call_soon(self.purgatory.check_and_complete, tp)

    def _drop(self, sp: SharePartition) -> None:
        sp.close()
        key = (sp.group_id, sp.tp)
        if self.partitions.get(key) is sp:
            del self.partitions[key]
            groups = self._by_tp.get(sp.tp)
            if groups is not None:
                groups.discard(sp.group_id)
                if not groups:
                    del self._by_tp[sp.tp]
        log.info("share partition %s %s-%d unloaded", sp.group_id, sp.tp[0], sp.tp[1])

    def _released(self, sp: SharePartition) -> None:
        if self.purgatory is not None:
            asyncio.get_running_loop().call_soon(self.purgatory.check_and_complete, sp.tp)

    def close_group(self, group_id: str) -> None:
        for (gid, tp), sp in list(self.partitions.items()):
            if gid == group_id:
                sp.close()
                del self.partitions[(gid, tp)]
                groups = self._by_tp.get(tp)
                if groups is not None:
                    groups.discard(gid)
                    if not groups:
                        del self._by_tp[tp]
        for key in [k for k in self.sessions if k[0] == group_id]:
            del self.sessions[key]

    # ---- the share-state persister (Kafka's Persister) ---------------------------------------
    async def read_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> StateResult:
        """ReadShareGroupState: in-process when this broker is the group's coordinator,
        otherwise over the inter-broker listener."""

        async def once() -> StateResult:
            if self.remote is None or self.gc.manager.is_group_local(group_id):
                return self.share.state.read(group_id, topic_id, partition, leader_epoch)
            return await self.remote.read(group_id, topic_id, partition, leader_epoch)

        return await self._retrying(once, READ_RETRY_S)

    async def write_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, snapshot: ShareSnapshot
    ) -> StateResult:
        """WriteShareGroupState, in-process or to the group's coordinator."""

        async def once() -> StateResult:
            if self.remote is None or self.gc.manager.is_group_local(group_id):
                return await self.share.state.write(group_id, topic_id, partition, snapshot)
            return await self.remote.write(group_id, topic_id, partition, snapshot)

        return await self._retrying(once, WRITE_RETRY_S)

    async def _retrying(
        self, once: Callable[[], Awaitable[StateResult]], budget_s: float
    ) -> StateResult:
        """Kafka's persister retries while the coordinator moves or loads."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget_s
        backoff = 0.05
        while True:
            res = await once()
            if res.error not in _RETRIABLE or loop.time() + backoff > deadline:
                return res
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    # ---- persistence ------------------------------------------------------------------------
    def _persist_later(self, sp: SharePartition) -> None:
        """A change nobody waits for (a lock ran out, a session closed)."""
        self._persist(sp)

    def _persist(self, sp: SharePartition) -> asyncio.Future[int]:
        """Write ``sp``'s state; the future gets the error (0: written)."""
        key = (sp.group_id, sp.tp)
        w = self._writers.get(key)
        if w is None or w.sp is not sp:
            w = self._writers[key] = _Writer(sp)
        w.changed += 1
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        w.waiters.append((w.changed, fut))
        if not w.running:
            w.running = True
            self.gc._spawn(self._write_loop(sp, w))
        return fut

    async def _write_loop(self, sp: SharePartition, w: _Writer) -> None:
        try:
            while w.written < w.changed:
                target = w.changed
                snapshot = sp.snapshot()
                res = await self.write_state(sp.group_id, sp.topic_id, sp.tp[1], snapshot)
                error = res.error
                w.written = target
                if error:
                    log.warning(
                        "writing share state of %s %s failed: %s",
                        sp.group_id,
                        sp.tp,
                        ErrorCode(error).name,
                    )
                    if error in (ErrorCode.fenced_leader_epoch, ErrorCode.fenced_state_epoch):
                        # a newer leader (or an offsets reset) owns the state now
                        self._drop(sp)
                        error = int(ErrorCode.not_leader_or_follower)
                keep = []
                for gen, fut in w.waiters:
                    if gen <= target:
                        if not fut.done():
                            fut.set_result(error)
                    else:
                        keep.append((gen, fut))
                w.waiters = keep
        finally:
            w.running = False
            if self._writers.get((sp.group_id, sp.tp)) is w and not w.waiters:
                del self._writers[(sp.group_id, sp.tp)]

    # ---- sessions ---------------------------------------------------------------------------
    def _session(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        *,
        for_fetch: bool,
        connection: object = None,
    ) -> ShareSession | tuple[int, str]:
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if not for_fetch:
                return (
                    int(ErrorCode.invalid_share_session_epoch),
                    "Share session epoch 0 is not valid for ShareAcknowledge.",
                )
            self.sessions.pop(key, None)
            if len(self.sessions) >= self.config.share_max_share_sessions:
                return (
                    int(ErrorCode.share_session_limit_reached),
                    "The share session cache is full.",
                )
            fresh = ShareSession(group_id, member_id, connection=connection)
            self.sessions[key] = fresh
            return fresh
        s = self.sessions.get(key)
        if s is None:
            return (int(ErrorCode.share_session_not_found), "Share session not found.")
        if epoch == FINAL_EPOCH:
            return s
        if epoch != s.epoch:
            return (
                int(ErrorCode.invalid_share_session_epoch),
                f"Share session epoch {epoch} does not match the expected {s.epoch}.",
            )
        s.epoch = next_epoch(s.epoch)
        return s

    def connection_closed(self, connection: object) -> None:
        """Kafka's share-session disconnect listener: a client gone without closing its
        session gets its acquired records released now, not when their locks run out."""
        for s in [s for s in self.sessions.values() if s.connection is connection]:
            self._close_session(s)

    def _close_session(self, s: ShareSession) -> None:
        self.sessions.pop((s.group_id, s.member_id), None)
        for _key, tp in s.partitions.items():
            sp = self.partitions.get((s.group_id, tp))
            if sp is not None:
                sp.release_member(s.member_id)
        if not any(k[0] == s.group_id for k in self.sessions):
            # nobody of the group reads here any more: nothing is acquired, so the
            # partitions are unloaded and read again when the group comes back (an
            # offsets reset done meanwhile by the coordinator is then seen)
            for (gid, _tp), sp in list(self.partitions.items()):
                if gid == s.group_id:
                    self._drop(sp)

    # ---- acknowledgements ---------------------------------------------------------------------
    async def _acknowledge(
        self,
        group_id: str,
        member_id: str,
        acks: list[
            tuple[SharePartitionKey, TopicPartition | None, list[tuple[int, int, tuple[int, ...]]]]
        ],
        allow_renew: bool,
    ) -> dict[SharePartitionKey, tuple[int, str | None]]:
        out: dict[SharePartitionKey, tuple[int, str | None]] = {}
        pending: list[tuple[SharePartitionKey, asyncio.Future[int]]] = []
        for pkey, tp, batches in acks:
            if tp is None:
                out[pkey] = (int(ErrorCode.unknown_topic_id), None)
                continue
            try:
                sp = await self._share_partition(group_id, tp, pkey[0])
                sp.acknowledge(member_id, batches, allow_renew and sp.settings().renew_enabled)
                pending.append((pkey, self._persist(sp)))
                out[pkey] = (0, None)
            except ShareError as e:
                out[pkey] = (e.code, e.message)
        for pkey, fut in pending:
            error = await fut
            if error:
                out[pkey] = (error, None)
        return out

    # ---- ShareFetch ---------------------------------------------------------------------------
    async def share_fetch(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        topics: list[
            tuple[SharePartitionKey, TopicPartition | None, list[tuple[int, int, tuple[int, ...]]]]
        ],
        forgotten: list[SharePartitionKey],
        max_wait_ms: int,
        max_records: int,
        max_bytes: int,
        allow_renew: bool,
        connection: object = None,
    ) -> FetchOutcome:
        lock_ms = self.settings_for(group_id)().lock_duration_ms
        has_acks = any(batches for _, _, batches in topics)
        if epoch == INITIAL_EPOCH and has_acks:
            return FetchOutcome(
                int(ErrorCode.invalid_request), "Acknowledge data present on initial ShareFetch."
            )
        if epoch == FINAL_EPOCH and any(not b for _, _, b in topics):
            # a closing request fetches nothing (Kafka's newContext)
            return FetchOutcome(
                int(ErrorCode.invalid_request), "ShareFetch with the final epoch fetches nothing."
            )
        s = self._session(group_id, member_id, epoch, for_fetch=True, connection=connection)
        if isinstance(s, tuple):
            return FetchOutcome(s[0], s[1], lock_ms)
        for pkey in forgotten:
            s.partitions.pop(pkey, None)
        unknown: dict[SharePartitionKey, PartitionResult] = {}
        for pkey, tp, _ in topics:
            if tp is None:
                unknown[pkey] = PartitionResult(pkey[0], pkey[1], int(ErrorCode.unknown_topic_id))
            elif epoch != FINAL_EPOCH:
                s.partitions[pkey] = tp
        ack_results = await self._acknowledge(
            group_id, member_id, [t for t in topics if t[2]], allow_renew
        )
        if epoch == FINAL_EPOCH:
            self._close_session(s)
            results = [
                PartitionResult(pkey[0], pkey[1], 0, None, e, m)
                for pkey, (e, m) in ack_results.items()
            ]
            return FetchOutcome(0, None, lock_ms, results)

        wanted = dict(s.partitions)
        await self._load_all(group_id, wanted)

        def attempt(final: bool) -> list[PartitionResult] | None:
            out: list[PartitionResult] = []
            got = False
            budget = max_records if max_records > 0 else 500
            for pkey, tp in wanted.items():
                r = PartitionResult(pkey[0], pkey[1])
                try:
                    plog, epoch_ = self._log_for(tp)
                    r.leader_id, r.leader_epoch = self._broker_id(), epoch_
                    sp = self._loaded(group_id, tp)
                    if sp is None:
                        failed = self._load_errors.pop((group_id, tp), None)
                        if failed is not None:
                            raise failed
                        out.append(r)  # its state is not readable yet: next time
                        continue
                    assert plog is not None
                    if budget > 0 and sp.has_acquirable(plog):
                        r.records, r.acquired = sp.acquire(member_id, budget, max_bytes, plog)
                        budget -= sum(a.last_offset - a.first_offset + 1 for a in r.acquired)
                        got = got or bool(r.acquired)
                except ShareError as e:
                    r.error, r.message = e.code, e.message
                    got = True
                out.append(r)
            if not got and not final:
                return None
            return out

        first = attempt(max_wait_ms <= 0 or not wanted)
        if first is None:
            assert self.purgatory is not None
            op = DelayedShareFetch(max_wait_ms, attempt)
            self.purgatory.try_complete_else_watch(op, list(wanted.values()))
            results = await op.done_future
        else:
            results = first
        by_key = {(r.topic_id, r.partition): r for r in results}
        for pkey, (e, m) in ack_results.items():
            r = by_key.get(pkey)
            if r is None:
                r = by_key[pkey] = PartitionResult(pkey[0], pkey[1])
            r.ack_error, r.ack_message = e, m
        for pkey, r in unknown.items():
            by_key.setdefault(pkey, r)
        # partitions with nothing to say are left out, as in an incremental fetch
        final = [r for r in by_key.values() if r.acquired or r.error or r.ack_error is not None]
        return FetchOutcome(0, None, lock_ms, final)

    # ---- ShareAcknowledge ---------------------------------------------------------------------
    async def share_acknowledge(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        topics: list[
            tuple[SharePartitionKey, TopicPartition | None, list[tuple[int, int, tuple[int, ...]]]]
        ],
        allow_renew: bool,
    ) -> FetchOutcome:
        s = self._session(group_id, member_id, epoch, for_fetch=False)
        if isinstance(s, tuple):
            return FetchOutcome(s[0], s[1])
        ack_results = await self._acknowledge(group_id, member_id, topics, allow_renew)
        if epoch == FINAL_EPOCH:
            self._close_session(s)
        results = []
        for pkey, (e, m) in ack_results.items():
            r = PartitionResult(pkey[0], pkey[1], e, m)
            tp = next((t for k, t, _ in topics if k == pkey), None)
            if tp is not None:
                p = self.gc.replicas.get_partition(tp)
                if p is not None:
                    r.leader_id = self._broker_id()
                    r.leader_epoch = int(getattr(p, "leader_epoch", -1))
            results.append(r)
        return FetchOutcome(0, None, 0, results)

    # ---- offsets (admin) ------------------------------------------------------------------------
    def describe_offsets(
        self,
        group_id: str,
        tp: TopicPartition,
        topic_id: uuid.UUID,
        high_watermark: int | None = None,
    ) -> tuple[int, int, int]:
        """(start offset, leader epoch, lag); -1s when the partition has no state.

        The lag needs the partition's high watermark: the local log's, else
        ``high_watermark`` (asked of the leader by the caller), else it is -1."""
        sp = self.partitions.get((group_id, tp))
        p = self.gc.replicas.get_partition(tp)
        plog = None if p is None else p.log
        epoch = -1 if p is None else int(getattr(p, "leader_epoch", -1))
        if sp is not None and not sp.closed:
            return sp.start_offset, epoch, sp.lag(plog)
        group = self.share.share_group(group_id)
        snap = None if group is None else group.snapshots.get((topic_id, tp[1]))
        if snap is None:
            return -1, -1, -1
        done = sum(
            b.last_offset - b.first_offset + 1 for b in snap.batches if b.delivery_state in (2, 4)
        )
        hw = plog.high_watermark if plog is not None else high_watermark
        lag = -1 if hw is None else max(0, hw - snap.start_offset - done)
        return snap.start_offset, epoch, lag

    async def alter_offset(
        self, group_id: str, tp: TopicPartition, topic_id: uuid.UUID, offset: int
    ) -> int:
        group = self.share.share_group(group_id)
        if group is None:
            return int(ErrorCode.group_id_not_found)
        if self._is_leader(tp):
            sp = await self._share_partition(group_id, tp, topic_id)
            sp.reset_to(offset)
            return await self._persist(sp)
        # led elsewhere: a fresh state with the next state epoch, as Kafka's
        # InitializeShareGroupState; the leader's older state is fenced by it
        snap = group.snapshots.get((topic_id, tp[1]))
        epoch = 0 if snap is None else snap.state_epoch + 1
        res = await self.share.state.initialize(group_id, topic_id, tp[1], epoch, offset)
        return res.error

    async def delete_offsets(
        self, group_id: str, keys: list[tuple[TopicPartition, uuid.UUID]]
    ) -> int:
        group = self.share.share_group(group_id)
        if group is None:
            return int(ErrorCode.group_id_not_found)
        records: list[tuple[bytes, bytes | None]] = []
        for tp, tid in keys:
            sp = self.partitions.pop((group_id, tp), None)
            if sp is not None:
                sp.close()
            group.snapshots.pop((tid, tp[1]), None)
            records.append((share_codec.snapshot_key(group_id, tid, tp[1]), None))
        if not records:
            return 0
        return await self.gc.manager.store_records(group_id, records)

    async def delete_group_state(self, container: GroupMetadata) -> int:
        """DeleteGroups: tombstones for the group's share state (the group record is
        tombstoned with the group)."""
        group = container.share
        self.close_group(container.group_id)
        if group is None:
            return 0
        records: list[tuple[bytes, bytes | None]] = [
            (share_codec.snapshot_key(container.group_id, tid, p), None)
            for tid, p in group.snapshots
        ]
        for mid in group.persisted_members:
            for version in (
                share_codec.SHARE_CURRENT_MEMBER_ASSIGNMENT,
                share_codec.SHARE_MEMBER_METADATA,
            ):
                records.append((share_codec.member_key(version, container.group_id, mid), None))
        group.persisted_members = {}
        records.append((share_codec.group_metadata_key(container.group_id), None))
        group.snapshots.clear()
        return await self.gc.manager.store_records(container.group_id, records)


__all__ = ["FetchOutcome", "PartitionResult", "SharePartitionManager"]
