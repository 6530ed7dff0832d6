"""PartitionStateMachine (seed 002 §6).

States: NonExistentPartition, NewPartition (AR assigned, no leader yet),
OnlinePartition (leader elected), OfflinePartition (its leader died).

A batch of transitions is validated per partition: an invalid previous state
is logged and that partition skipped, the others go on. A partition's state
changes only after its action succeeded. Leader changes are written to the
state znode conditionally on the version just read, and retried on conflict; a
znode written by a newer controller epoch is left alone (the writer of this
batch is a zombie for that partition). Writes are batched (see
:class:`~kafkalite.metadata.kafka_zk_client.KafkaZkClient`), so electing leaders
for thousands of partitions costs a handful of store transactions.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Sequence

from kafkalite.common.types import TopicPartition
from kafkalite.controller.controller_context import (
    INITIAL_LEADER_EPOCH,
    ControllerContext,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
)
from kafkalite.controller.leader_selectors import (
    LeaderElectionNotNeededException,
    NoReplicaOnlineException,
    PartitionLeaderSelector,
    StateChangeFailedException,
)
from kafkalite.controller.request_batch import ControllerBrokerRequestBatch
from kafkalite.metadata import zk_data
from kafkalite.metadata.kafka_zk_client import KafkaZkClient
from kafkalite.metadata.store import BadVersionError
from kafkalite.timer import loop_slices

log = logging.getLogger(__name__)
state_change_log = logging.getLogger("kafkalite.state.change.logger")


class PartitionState(enum.Enum):
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


VALID_PREVIOUS_STATES: dict[PartitionState, frozenset[PartitionState]] = {
    PartitionState.NEW: frozenset({PartitionState.NON_EXISTENT}),
    PartitionState.ONLINE: frozenset(
        {PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}
    ),
    PartitionState.OFFLINE: frozenset(
        {PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}
    ),
    PartitionState.NON_EXISTENT: frozenset({PartitionState.OFFLINE}),
}


def leader_and_isr_of(st: zk_data.PartitionState, version: int) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(
        LeaderAndIsr(st.leader, st.leader_epoch, tuple(st.isr), version), st.controller_epoch
    )


def state_znode(lai: LeaderAndIsr, controller_epoch: int) -> zk_data.PartitionState:
    return zk_data.PartitionState(lai.leader, lai.leader_epoch, list(lai.isr), controller_epoch)


class PartitionStateMachine:
    def __init__(
        self,
        controller_id: int,
        ctx: Callable[[], ControllerContext],
        zk: KafkaZkClient,
        batch: ControllerBrokerRequestBatch,
        offline_selector: PartitionLeaderSelector,
        *,
        is_topic_queued_for_deletion: Callable[[str], bool],
    ) -> None:
        self.controller_id = controller_id
        self._ctx = ctx
        self.zk = zk
        self.batch = batch
        self.offline_selector = offline_selector
        self.is_topic_queued_for_deletion = is_topic_queued_for_deletion
        self.partition_state: dict[TopicPartition, PartitionState] = {}

    @property
    def ctx(self) -> ControllerContext:
        return self._ctx()

    # ---- life cycle -------------------------------------------------------------------
    async def startup(self) -> None:
        self.initialize_partition_state()
        await self.trigger_online_partition_state_change()

    def shutdown(self) -> None:
        self.partition_state.clear()

    def initialize_partition_state(self) -> None:
        """Online if the cached leader is online, Offline if it is not, New without a leader."""
        ctx = self.ctx
        for tp in ctx.all_partitions():
            lic = ctx.partition_leadership_info.get(tp)
            if lic is None:
                self.partition_state[tp] = PartitionState.NEW
            elif ctx.is_replica_online(lic.leader_and_isr.leader, tp):
                self.partition_state[tp] = PartitionState.ONLINE
            else:
                self.partition_state[tp] = PartitionState.OFFLINE

    async def trigger_online_partition_state_change(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> None:
        """Elect leaders for New and Offline partitions (of topics not being deleted)."""
        candidates = self.partition_state if partitions is None else partitions
        todo = [
            tp
            for tp in candidates
            if self.partition_state.get(tp) in (PartitionState.NEW, PartitionState.OFFLINE)
            and not self.is_topic_queued_for_deletion(tp[0])
        ]
        await self.handle_state_changes(todo, PartitionState.ONLINE, self.offline_selector)

    # ---- queries -------------------------------------------------------------------
    def state(self, tp: TopicPartition) -> PartitionState:
        return self.partition_state.get(tp, PartitionState.NON_EXISTENT)

    def partitions_in_state(
        self, state: PartitionState, topic: str | None = None
    ) -> list[TopicPartition]:
        return [
            tp
            for tp, s in self.partition_state.items()
            if s is state and (topic is None or tp[0] == topic)
        ]

    def offline_partition_count(self) -> int:
        return sum(
            1
            for tp, s in self.partition_state.items()
            if s is PartitionState.OFFLINE and not self.is_topic_queued_for_deletion(tp[0])
        )

    # ---- transitions ----------------------------------------------------------------
    async def handle_state_changes(
        self,
        partitions: Sequence[TopicPartition],
        target: PartitionState,
        selector: PartitionLeaderSelector | None = None,
    ) -> dict[TopicPartition, Exception]:
        """Move ``partitions`` to ``target``; returns the failures (already logged)."""
        if not partitions:
            return {}
        self.batch.new_batch()
        try:
            failures = await self._do_handle_state_changes(partitions, target, selector)
        except BaseException:
            self.batch.clear()  # ControllerMovedException, a lost store connection, ...
            raise
        await self.batch.send_requests_to_brokers(self.ctx.epoch)
        self._log_offline_summary(failures, target)
        return failures

    def _log_offline_summary(
        self, failures: dict[TopicPartition, Exception], target: PartitionState
    ) -> None:
        offline = sorted(
            tp for tp, e in failures.items() if isinstance(e, NoReplicaOnlineException)
        )
        if not offline:
            return
        shown = ", ".join(f"{t}-{p}" for t, p in offline[:5])
        more = f" and {len(offline) - 5} more" if len(offline) > 5 else ""
        state_change_log.warning(
            "controller %d epoch %d: %d partitions stay offline, no replica can lead them "
            "(%s%s); first: %s",
            self.controller_id,
            self.ctx.epoch,
            len(offline),
            shown,
            more,
            failures[offline[0]],
        )

    async def _do_handle_state_changes(
        self,
        partitions: Sequence[TopicPartition],
        target: PartitionState,
        selector: PartitionLeaderSelector | None,
    ) -> dict[TopicPartition, Exception]:
        failures: dict[TopicPartition, Exception] = {}
        valid = []
        allowed = VALID_PREVIOUS_STATES[target]
        for tp in partitions:
            current = self.state(tp)
            if current in allowed:
                valid.append(tp)
            else:
                e = StateChangeFailedException(
                    f"partition {tp[0]}-{tp[1]} should be in one of "
                    f"{sorted(s.value for s in allowed)} before moving to {target.value}, "
                    f"but is in {current.value}"
                )
                state_change_log.error("controller %d: %s", self.controller_id, e)
                failures[tp] = e
            await loop_slices.pause()
        if target is PartitionState.ONLINE:
            uninitialized = [tp for tp in valid if self.state(tp) is PartitionState.NEW]
            to_elect = [tp for tp in valid if self.state(tp) is not PartitionState.NEW]
            if uninitialized:
                failures.update(await self._initialize_leader_and_isr_for_partitions(uninitialized))
            if to_elect:
                if selector is None:
                    raise ValueError("electing leaders needs a leader selector")
                failures.update(await self._elect_leader_for_partitions(to_elect, selector))
        elif target is PartitionState.NON_EXISTENT:
            for tp in valid:
                self._change_state(tp, target)
                del self.partition_state[tp]
                await loop_slices.pause()
        else:
            for tp in valid:
                self._change_state(tp, target)
                await loop_slices.pause()
        return failures

    def _change_state(self, tp: TopicPartition, target: PartitionState) -> None:
        previous = self.state(tp)
        self.partition_state[tp] = target
        state_change_log.debug(
            "controller %d epoch %d changed partition %s-%d from %s to %s",
            self.controller_id,
            self.ctx.epoch,
            tp[0],
            tp[1],
            previous.value,
            target.value,
        )

    def _fail(
        self,
        failures: dict[TopicPartition, Exception],
        tp: TopicPartition,
        message: str,
        *,
        expected: bool = False,
    ) -> None:
        """Record a failed transition; logged as an error unless ``expected`` (no replica
        online to lead), which is logged per partition at debug and summarized once per
        batch by :meth:`_log_offline_summary`."""
        e = (NoReplicaOnlineException if expected else StateChangeFailedException)(message)
        failures[tp] = e
        (state_change_log.debug if expected else state_change_log.error)(
            "controller %d epoch %d failed to change state of partition %s-%d: %s",
            self.controller_id,
            self.ctx.epoch,
            tp[0],
            tp[1],
            message,
        )

    async def _initialize_leader_and_isr_for_partitions(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, Exception]:
        """New → Online: leader = first online AR replica, ISR = online AR, leader epoch 0."""
        ctx = self.ctx
        failures: dict[TopicPartition, Exception] = {}
        planned: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp in partitions:
            ar = ctx.partition_replica_assignment(tp)
            live_ar = [r for r in ar if ctx.is_replica_online(r, tp)]
            if not live_ar:
                self._fail(
                    failures,
                    tp,
                    f"New → Online: no assigned replica is online (assigned {ar}, "
                    f"live brokers {sorted(ctx.live_broker_ids)})",
                )
                continue
            planned[tp] = LeaderIsrAndControllerEpoch(
                LeaderAndIsr(live_ar[0], INITIAL_LEADER_EPOCH, tuple(live_ar), 0), ctx.epoch
            )
            await loop_slices.pause()
        results = await self.zk.create_partition_states(
            [
                (tp, state_znode(lic.leader_and_isr, lic.controller_epoch))
                for tp, lic in planned.items()
            ],
            ctx.epoch_zk_version,
        )
        for tp, lic in planned.items():
            error = results.get(tp)
            if error is not None:
                self._fail(failures, tp, f"New → Online: cannot create the state znode: {error!r}")
                continue
            ctx.partition_leadership_info[tp] = lic
            self.batch.add_leader_and_isr_request_for_brokers(
                lic.leader_and_isr.isr,
                tp,
                lic,
                ctx.partition_replica_assignment(tp),
                is_new=True,
            )
            self._change_state(tp, PartitionState.ONLINE)
            await loop_slices.pause()
        return failures

    async def _elect_leader_for_partitions(
        self, partitions: list[TopicPartition], selector: PartitionLeaderSelector
    ) -> dict[TopicPartition, Exception]:
        """Offline/Online → Online: re-read, select, write conditionally; retry conflicts."""
        ctx = self.ctx
        failures: dict[TopicPartition, Exception] = {}
        remaining = partitions
        while remaining:
            current = await self.zk.get_partition_states(remaining)
            for tp, (st, version) in current.items():
                if st.controller_epoch <= ctx.epoch:  # the store is fresher than the cache
                    ctx.partition_leadership_info[tp] = leader_and_isr_of(st, version)
            await selector.prepare(remaining)
            updates: list[tuple[TopicPartition, zk_data.PartitionState, int]] = []
            planned: dict[TopicPartition, tuple[LeaderAndIsr, list[int]]] = {}
            for tp in remaining:
                got = current.get(tp)
                if got is None:
                    self._fail(failures, tp, "the leader and ISR znode does not exist")
                    continue
                st, version = got
                if st.controller_epoch > ctx.epoch:
                    self._fail(
                        failures,
                        tp,
                        f"aborted leader election: the state znode was written by controller "
                        f"epoch {st.controller_epoch}, newer than this controller's {ctx.epoch}; "
                        "another controller has been elected",
                    )
                    continue
                lic = leader_and_isr_of(st, version)
                try:
                    new, receivers = selector.select_leader(tp, lic.leader_and_isr)
                except LeaderElectionNotNeededException as e:
                    failures[tp] = e  # not an error: nothing to change
                    ctx.partition_leadership_info[tp] = lic
                    log.debug("%s", e)
                    continue
                except NoReplicaOnlineException as e:
                    # the partition stays offline: expected while its brokers are down (a
                    # cluster shutting down), counted by OfflinePartitionsCount; summarized
                    self._fail(failures, tp, f"leader election failed: {e}", expected=True)
                    ctx.partition_leadership_info[tp] = lic
                    continue
                except StateChangeFailedException as e:
                    self._fail(failures, tp, f"leader election failed: {e}")
                    ctx.partition_leadership_info[tp] = lic  # the re-read state is current
                    continue
                planned[tp] = (new, receivers)
                updates.append((tp, state_znode(new, ctx.epoch), version))
                await loop_slices.pause()
            written, errors = await self.zk.update_partition_states(updates, ctx.epoch_zk_version)
            retry = []
            for tp, error in errors.items():
                if isinstance(error, BadVersionError):
                    retry.append(tp)
                else:
                    self._fail(failures, tp, f"cannot write the new leader: {error!r}")
            for tp, version in written.items():
                new, receivers = planned[tp]
                lic = LeaderIsrAndControllerEpoch(
                    LeaderAndIsr(new.leader, new.leader_epoch, new.isr, version), ctx.epoch
                )
                ctx.partition_leadership_info[tp] = lic
                self.batch.add_leader_and_isr_request_for_brokers(
                    receivers, tp, lic, ctx.partition_replica_assignment(tp)
                )
                self._change_state(tp, PartitionState.ONLINE)
                await loop_slices.pause()
            if retry:
                log.info(
                    "controller %d: state znodes of %d partitions changed while electing; retrying",
                    self.controller_id,
                    len(retry),
                )
            remaining = retry
        return failures

    async def update_leader_epoch(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Bump the leader epoch (same leader and ISR), as reassignment needs; conditional
        and retried like an election. Returns the new state of each partition written."""
        ctx = self.ctx
        out: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        remaining = partitions
        while remaining:
            current = await self.zk.get_partition_states(remaining)
            updates = []
            planned: dict[TopicPartition, LeaderAndIsr] = {}
            for tp in remaining:
                got = current.get(tp)
                if got is None:
                    log.error("cannot bump the leader epoch of %s-%d: no state znode", *tp)
                    continue
                st, version = got
                if st.controller_epoch > ctx.epoch:
                    log.error(
                        "not bumping the leader epoch of %s-%d: written by controller epoch %d",
                        tp[0],
                        tp[1],
                        st.controller_epoch,
                    )
                    continue
                new = leader_and_isr_of(st, version).leader_and_isr.new_epoch()
                planned[tp] = new
                updates.append((tp, state_znode(new, ctx.epoch), version))
            written, errors = await self.zk.update_partition_states(updates, ctx.epoch_zk_version)
            remaining = [tp for tp, e in errors.items() if isinstance(e, BadVersionError)]
            for tp, version in written.items():
                new = planned[tp]
                lic = LeaderIsrAndControllerEpoch(
                    LeaderAndIsr(new.leader, new.leader_epoch, new.isr, version), ctx.epoch
                )
                ctx.partition_leadership_info[tp] = lic
                out[tp] = lic
        return out
