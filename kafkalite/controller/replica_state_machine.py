"""ReplicaStateMachine (seed 002 §8).

States: NewReplica, OnlineReplica, OfflineReplica, ReplicaDeletionStarted,
ReplicaDeletionSuccessful, ReplicaDeletionIneligible, NonExistentReplica.
As for partitions, invalid transitions are logged and skipped, the rest of the
batch goes on, and a replica's state changes only after its action succeeded.

OfflineReplica removes the replica from its partitions' ISR with conditional
writes (a leader that goes offline leaves leader -1), except that the last ISR
member stays when unclean leader election is disabled, so that it, and only
it, can lead again when it comes back.
"""

from __future__ import annotations

import enum
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence

from kafkalite.common.types import TopicPartition
from kafkalite.controller.controller_context import (
    NO_LEADER,
    ControllerContext,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
)
from kafkalite.controller.leader_selectors import StateChangeFailedException
from kafkalite.controller.partition_state_machine import leader_and_isr_of, state_znode
from kafkalite.controller.request_batch import ControllerBrokerRequestBatch, StopReplicaCallback
from kafkalite.metadata import zk_data
from kafkalite.metadata.kafka_zk_client import KafkaZkClient
from kafkalite.metadata.store import BadVersionError
from kafkalite.timer import loop_slices

log = logging.getLogger(__name__)
state_change_log = logging.getLogger("kafkalite.state.change.logger")


class ReplicaState(enum.Enum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


_S = ReplicaState
VALID_PREVIOUS_STATES: dict[ReplicaState, frozenset[ReplicaState]] = {
    _S.NEW: frozenset({_S.NON_EXISTENT}),
    _S.ONLINE: frozenset({_S.NEW, _S.ONLINE, _S.OFFLINE, _S.DELETION_INELIGIBLE}),
    _S.OFFLINE: frozenset({_S.NEW, _S.ONLINE, _S.OFFLINE, _S.DELETION_INELIGIBLE}),
    _S.DELETION_STARTED: frozenset({_S.OFFLINE}),
    _S.DELETION_SUCCESSFUL: frozenset({_S.DELETION_STARTED}),
    # from Offline too (Kafka 1.0+): replicas on dead brokers fail deletion directly
    _S.DELETION_INELIGIBLE: frozenset({_S.OFFLINE, _S.DELETION_STARTED}),
    _S.NON_EXISTENT: frozenset({_S.DELETION_SUCCESSFUL}),
}


class ReplicaStateMachine:
    def __init__(
        self,
        controller_id: int,
        ctx: Callable[[], ControllerContext],
        zk: KafkaZkClient,
        batch: ControllerBrokerRequestBatch,
        *,
        is_topic_queued_for_deletion: Callable[[str], bool],
        unclean_topics: Callable[[Iterable[str]], Awaitable[set[str]]],
        deletion_callback: StopReplicaCallback | None = None,
    ) -> None:
        self.controller_id = controller_id
        self._ctx = ctx
        self.zk = zk
        self.batch = batch
        self.is_topic_queued_for_deletion = is_topic_queued_for_deletion
        self._unclean_topics = unclean_topics
        self.deletion_callback = deletion_callback
        self.replica_state: dict[PartitionAndReplica, ReplicaState] = {}

    @property
    def ctx(self) -> ControllerContext:
        return self._ctx()

    # ---- life cycle -------------------------------------------------------------------
    async def startup(self) -> None:
        """Replicas on live brokers Online, on dead ones ReplicaDeletionIneligible; then
        every live replica learns its partition's state (LeaderAndIsr), and the dead ones
        go Offline, which takes them out of their ISRs (Kafka's startup does both: a new
        controller must not leave a broker that died with its predecessor in an ISR, where
        acks=all would wait for it until replica.lag.time.max.ms)."""
        self.initialize_replica_state()
        await self.handle_state_changes(self.ctx.all_live_replicas(), ReplicaState.ONLINE)
        offline = [
            r for r, s in self.replica_state.items() if s is ReplicaState.DELETION_INELIGIBLE
        ]
        if offline:
            await self.handle_state_changes(offline, ReplicaState.OFFLINE)

    def shutdown(self) -> None:
        self.replica_state.clear()

    def initialize_replica_state(self) -> None:
        ctx = self.ctx
        for topic, parts in ctx.assignments.items():
            for p, replicas in parts.items():
                for r in replicas:
                    self.replica_state[PartitionAndReplica(topic, p, r)] = (
                        ReplicaState.ONLINE
                        if ctx.is_replica_online(r, (topic, p))
                        else ReplicaState.DELETION_INELIGIBLE
                    )

    # ---- queries -------------------------------------------------------------------
    def state(self, replica: PartitionAndReplica) -> ReplicaState:
        return self.replica_state.get(replica, ReplicaState.NON_EXISTENT)

    def replicas_in_state(self, topic: str, state: ReplicaState) -> list[PartitionAndReplica]:
        return [r for r, s in self.replica_state.items() if r.topic == topic and s is state]

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return any(r.topic == topic and s is state for r, s in self.replica_state.items())

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        return all(self.state(r) is state for r in self.ctx.replicas_for_topic(topic))

    # ---- transitions ----------------------------------------------------------------
    async def handle_state_changes(
        self,
        replicas: Sequence[PartitionAndReplica],
        target: ReplicaState,
    ) -> dict[PartitionAndReplica, Exception]:
        if not replicas:
            return {}
        self.batch.new_batch()
        failures: dict[PartitionAndReplica, Exception] = {}
        try:
            by_broker: dict[int, list[PartitionAndReplica]] = defaultdict(list)
            for r in replicas:
                by_broker[r.replica].append(r)
            for replica_id in sorted(by_broker):
                failures.update(
                    await self._do_handle_state_changes(replica_id, by_broker[replica_id], target)
                )
        except BaseException:
            self.batch.clear()
            raise
        await self.batch.send_requests_to_brokers(self.ctx.epoch)
        return failures

    async def _do_handle_state_changes(
        self, replica_id: int, replicas: list[PartitionAndReplica], target: ReplicaState
    ) -> dict[PartitionAndReplica, Exception]:
        ctx = self.ctx
        failures: dict[PartitionAndReplica, Exception] = {}
        allowed = VALID_PREVIOUS_STATES[target]
        valid = []
        for r in replicas:
            current = self.state(r)
            if current in allowed:
                valid.append(r)
            else:
                e = StateChangeFailedException(
                    f"replica {r.replica} of {r.topic}-{r.partition} should be in one of "
                    f"{sorted(s.value for s in allowed)} before moving to {target.value}, "
                    f"but is in {current.value}"
                )
                state_change_log.error("controller %d: %s", self.controller_id, e)
                failures[r] = e
            await loop_slices.pause()
        if target is ReplicaState.NEW:
            for r in valid:
                tp = r.topic_partition
                lic = ctx.partition_leadership_info.get(tp)
                if lic is not None:
                    if lic.leader_and_isr.leader == replica_id:
                        e = StateChangeFailedException(
                            f"replica {replica_id} of {tp[0]}-{tp[1]} cannot become a new "
                            "replica: it is the partition's leader"
                        )
                        state_change_log.error("controller %d: %s", self.controller_id, e)
                        failures[r] = e
                        continue
                    self.batch.add_leader_and_isr_request_for_brokers(
                        [replica_id], tp, lic, ctx.partition_replica_assignment(tp), is_new=True
                    )
                self._change_state(r, target)
                await loop_slices.pause()
        elif target is ReplicaState.ONLINE:
            for r in valid:
                tp = r.topic_partition
                if self.state(r) is ReplicaState.NEW:
                    ar = ctx.partition_replica_assignment(tp)
                    if replica_id not in ar:
                        ctx.update_partition_replica_assignment(tp, [*ar, replica_id])
                else:
                    lic = ctx.partition_leadership_info.get(tp)
                    if lic is not None:
                        self.batch.add_leader_and_isr_request_for_brokers(
                            [replica_id], tp, lic, ctx.partition_replica_assignment(tp)
                        )
                self._change_state(r, target)
                await loop_slices.pause()
        elif target is ReplicaState.OFFLINE:
            for r in valid:
                self.batch.add_stop_replica_request_for_brokers(
                    [replica_id], r.topic_partition, delete_partition=False
                )
                await loop_slices.pause()
            with_leader = [r for r in valid if r.topic_partition in ctx.partition_leadership_info]
            updated, errors = await self.remove_replicas_from_isr(
                replica_id, [r.topic_partition for r in with_leader]
            )
            for tp, lic in updated.items():
                if not self.is_topic_queued_for_deletion(tp[0]):
                    receivers = [x for x in ctx.partition_replica_assignment(tp) if x != replica_id]
                    self.batch.add_leader_and_isr_request_for_brokers(
                        receivers, tp, lic, ctx.partition_replica_assignment(tp)
                    )
                await loop_slices.pause()
            for r in valid:
                error = errors.get(r.topic_partition)
                if error is not None:
                    failures[r] = error
                else:
                    self._change_state(r, target)
                await loop_slices.pause()
        elif target is ReplicaState.DELETION_STARTED:
            for r in valid:
                self._change_state(r, target)
                self.batch.add_stop_replica_request_for_brokers(
                    [replica_id],
                    r.topic_partition,
                    delete_partition=True,
                    callback=self.deletion_callback,
                )
                await loop_slices.pause()
        elif target is ReplicaState.NON_EXISTENT:
            for r in valid:
                tp = r.topic_partition
                ar = ctx.partition_replica_assignment(tp)
                if replica_id in ar and tp[0] in ctx.assignments:
                    ctx.update_partition_replica_assignment(tp, [x for x in ar if x != replica_id])
                self._change_state(r, target)
                self.replica_state.pop(r, None)
                await loop_slices.pause()
        else:  # DELETION_SUCCESSFUL, DELETION_INELIGIBLE
            for r in valid:
                self._change_state(r, target)
                await loop_slices.pause()
        return failures

    def _change_state(self, r: PartitionAndReplica, target: ReplicaState) -> None:
        previous = self.state(r)
        self.replica_state[r] = target
        state_change_log.debug(
            "controller %d epoch %d changed replica %d of %s-%d from %s to %s",
            self.controller_id,
            self.ctx.epoch,
            r.replica,
            r.topic,
            r.partition,
            previous.value,
            target.value,
        )

    async def remove_replicas_from_isr(
        self, replica_id: int, partitions: list[TopicPartition]
    ) -> tuple[dict[TopicPartition, LeaderIsrAndControllerEpoch], dict[TopicPartition, Exception]]:
        """Take ``replica_id`` out of the ISR of ``partitions`` (seed 002 §8).

        Re-reads each state znode; a partition whose ISR does not contain the replica
        is left as it is (its fresh state is cached, not returned). The leader becomes -1
        if it was the replica. The last ISR member is kept when unclean election is
        disabled for the topic. Leader epoch + 1; conditional writes, retried on
        conflict; a znode written by a newer controller epoch fails the partition.
        """
        ctx = self.ctx
        out: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        failures: dict[TopicPartition, Exception] = {}
        remaining = partitions
        while remaining:
            current = await self.zk.get_partition_states(remaining)
            last_member_topics = {
                tp[0] for tp, (st, _v) in current.items() if st.isr == [replica_id]
            }
            unclean = (
                await self._unclean_topics(last_member_topics) if last_member_topics else set()
            )
            updates: list[tuple[TopicPartition, zk_data.PartitionState, int]] = []
            planned: dict[TopicPartition, LeaderAndIsr] = {}
            for tp in remaining:
                got = current.get(tp)
                if got is None:
                    if not self.is_topic_queued_for_deletion(tp[0]):
                        failures[tp] = StateChangeFailedException(
                            f"cannot remove replica {replica_id} from the ISR of {tp[0]}-{tp[1]}: "
                            "no state znode"
                        )
                    continue
                st, version = got
                if st.controller_epoch > ctx.epoch:
                    failures[tp] = StateChangeFailedException(
                        f"the state znode of {tp[0]}-{tp[1]} was written by controller epoch "
                        f"{st.controller_epoch}, newer than {ctx.epoch}"
                    )
                    state_change_log.error("controller %d: %s", self.controller_id, failures[tp])
                    continue
                lic = leader_and_isr_of(st, version)
                lai = lic.leader_and_isr
                if replica_id not in lai.isr:
                    ctx.partition_leadership_info[tp] = lic  # unchanged, but now current
                    continue
                new_leader = NO_LEADER if lai.leader == replica_id else lai.leader
                new_isr = tuple(r for r in lai.isr if r != replica_id)
                if not new_isr and tp[0] not in unclean:
                    new_isr = lai.isr
                new = lai.new_leader_and_isr(new_leader, new_isr)
                planned[tp] = new
                updates.append((tp, state_znode(new, ctx.epoch), version))
                await loop_slices.pause()
            written, errors = await self.zk.update_partition_states(updates, ctx.epoch_zk_version)
            retry = []
            for tp, error in errors.items():
                if isinstance(error, BadVersionError):
                    retry.append(tp)
                else:
                    failures[tp] = error
            for tp, version in written.items():
                new = planned[tp]
                lic = LeaderIsrAndControllerEpoch(
                    LeaderAndIsr(new.leader, new.leader_epoch, new.isr, version), ctx.epoch
                )
                ctx.partition_leadership_info[tp] = lic
                out[tp] = lic
            remaining = retry
        return out, failures
