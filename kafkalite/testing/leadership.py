"""Leadership changes for tests, driven through the active controller.

The controller's own paths do the work (reassignments, preferred elections, the
state znode and LeaderAndIsr/UpdateMetadata), as an operator's tools would drive
them; :func:`set_partition_leader` writes a leader (and epoch) directly, the way
the controller's elections do, for tests that need one without an election.
Used by :class:`~kafkalite.testing.faults.FaultInjector`'s ``move_leader`` and
``bump_leader_epoch`` and by the controller tests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafkalite.common.types import TopicPartition
from kafkalite.controller.controller_context import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
)
from kafkalite.controller.partition_state_machine import leader_and_isr_of, state_znode
from kafkalite.controller.replica_state_machine import ReplicaState
from kafkalite.metadata.store import BadVersionError
from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.controller.kafka_controller import KafkaController
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.server.broker import KafkaBroker

__all__ = [
    "active_controller",
    "is_follower_of",
    "leads_with",
    "partition_info",
    "partition_of",
    "peer",
    "produces_to",
    "reassign",
    "set_partition_leader",
    "until",
]


# --------------------------------------------------------------------------- the controller


def partition_info(
    ctrl: KafkaController, tp: TopicPartition
) -> tuple[LeaderAndIsr, list[int]] | None:
    """(current leader/ISR, AR) as this controller knows them; None if unknown."""
    lic = ctrl.ctx.partition_leadership_info.get(tp)
    ar = ctrl.ctx.partition_replica_assignment(tp)
    if lic is None or not ar or ctrl.is_topic_queued_for_deletion(tp[0]):
        return None
    return lic.leader_and_isr, ar


async def set_partition_leader(
    ctrl: KafkaController,
    tp: TopicPartition,
    leader: int,
    *,
    isr: list[int] | None = None,
    replicas: list[int] | None = None,
) -> int:
    """Make ``leader`` lead ``tp`` (leader epoch + 1), optionally with a new ISR and AR.

    It changes the controller's context, so it runs as a controller event:
    ``await ctrl.put(lambda: set_partition_leader(ctrl, tp, leader))``. Writes the
    state znode conditionally and sends LeaderAndIsr to the live replicas and
    UpdateMetadata to every broker. Returns the new leader epoch.
    """
    ctx = ctrl.ctx
    if replicas is not None:
        old = ctx.partition_replica_assignment(tp)
        await ctrl.reassignment.update_assigned_replicas(tp, list(replicas))
        rs = ctrl.replica_state_machine.replica_state
        for r in old:
            if r not in replicas:
                rs.pop(PartitionAndReplica(tp[0], tp[1], r), None)
        for r in replicas:
            rs.setdefault(PartitionAndReplica(tp[0], tp[1], r), ReplicaState.ONLINE)
    states = await ctrl.zk.get_partition_states([tp])
    if tp not in states:
        raise ValueError(f"{tp[0]}-{tp[1]} has no state znode")
    st, version = states[tp]
    current = leader_and_isr_of(st, version).leader_and_isr
    new = current.new_leader_and_isr(leader, current.isr if isr is None else isr)
    written, errors = await ctrl.zk.update_partition_states(
        [(tp, state_znode(new, ctx.epoch), version)], ctx.epoch_zk_version
    )
    if tp in errors:
        if isinstance(errors[tp], BadVersionError):
            raise RuntimeError(f"{tp[0]}-{tp[1]} changed concurrently; try again")
        raise errors[tp]
    lic = LeaderIsrAndControllerEpoch(
        LeaderAndIsr(new.leader, new.leader_epoch, new.isr, written[tp]), ctx.epoch
    )
    ctx.partition_leadership_info[tp] = lic
    ar = ctx.partition_replica_assignment(tp)
    ctrl.batch.new_batch()
    ctrl.batch.add_leader_and_isr_request_for_brokers(
        [r for r in ar if r in ctx.live_or_shutting_down_broker_ids], tp, lic, ar
    )
    await ctrl.batch.send_requests_to_brokers(ctx.epoch)
    return new.leader_epoch


# --------------------------------------------------------------------------- leader moves


def active_controller(broker: KafkaBroker) -> KafkaController:
    for b in list(broker.peers.values()) or [broker]:
        if b.started and b.controller is not None and b.controller.is_active:
            return b.controller
    raise RuntimeError("no active controller among the brokers of this process")


def partition_of(ctrl: KafkaController, tp: TopicPartition) -> tuple[Any, list[int]]:
    info = partition_info(ctrl, tp)
    if info is None:
        raise ValueError(f"unknown partition {tp[0]}-{tp[1]}")
    st, replicas = info
    if st.leader < 0:
        raise ValueError(f"{tp[0]}-{tp[1]} is offline")
    return st, list(replicas)


def peer(broker: KafkaBroker, broker_id: int) -> KafkaBroker | None:
    if broker.broker_id == broker_id:
        return broker
    return broker.peers.get(broker_id)


async def until(pred: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(f"leader move: condition not met within {timeout_s}s")
        await asyncio.sleep(0.002)


async def reassign(ctrl: KafkaController, tp: TopicPartition, replicas: list[int]) -> None:
    """AlterPartitionReassignments, as the admin API hands it to the controller."""
    result = await ctrl.alter_partition_reassignments({tp: replicas})
    if result is None:
        raise RuntimeError("the controller moved during the reassignment; try again")
    code, message = result[tp]
    if code != 0:
        raise RuntimeError(
            f"reassignment of {tp[0]}-{tp[1]} to {replicas} failed: {ErrorCode(code).name} {message or ''}"
        )


def produces_to(tp: TopicPartition) -> Callable[[RequestContext, Any], bool]:
    """A rule predicate: a Produce request carrying records for ``tp``."""

    def match(_ctx: RequestContext, req: Any) -> bool:
        for t in getattr(req, "topic_data", None) or ():
            if t.name == tp[0] and any(int(p.index) == tp[1] for p in t.partition_data):
                return True
        return False

    return match


def is_follower_of(b: KafkaBroker, tp: TopicPartition, leader: int) -> bool:
    p = b.replica_manager.get_partition(tp)
    return p is not None and p.log is not None and p.leader_id == leader


def leads_with(b: KafkaBroker, tp: TopicPartition, replica: int) -> bool:
    p = b.replica_manager.get_partition(tp)
    return p is not None and p.is_leader and replica in p.remote_replicas
