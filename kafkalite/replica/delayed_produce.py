"""DelayedProduce: an acks=all produce waiting for the ISR to reach its offsets.

Completion rules (seed 000 §3): per partition, a locally failed append keeps
its error; a pending one defaults to REQUEST_TIMED_OUT; leadership lost →
NOT_LEADER_OR_FOLLOWER; the partition's log dir went offline →
KAFKA_STORAGE_ERROR; HW >= required offset → NONE, or
NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below min.insync.replicas.
The operation completes when no partition is pending, or on expiry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.common.types import TopicPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.timer.delayed_operation import DelayedOperation

if TYPE_CHECKING:
    from kafkalite.replica.replica_manager import ProduceResult, ReplicaManager


@dataclass(slots=True)
class ProducePartitionStatus:
    required_offset: int
    result: ProduceResult
    pending: bool


class DelayedProduce(DelayedOperation):
    __slots__ = ("statuses", "replica_manager", "future", "respond")

    def __init__(
        self,
        delay_ms: int,
        statuses: dict[TopicPartition, ProducePartitionStatus],
        replica_manager: ReplicaManager,
        future: asyncio.Future[Any],
        respond: Callable[[dict[TopicPartition, ProduceResult]], Any] | None = None,
    ) -> None:
        super().__init__(delay_ms)
        self.statuses = statuses
        self.replica_manager = replica_manager
        self.future = future
        #: builds the response from the results; the future gets what it returns
        self.respond = respond
        for st in statuses.values():
            if st.pending:
                st.result.error = ErrorCode.request_timed_out

    def try_complete(self) -> bool:
        rm = self.replica_manager
        for tp, st in self.statuses.items():
            if not st.pending:
                continue
            p = rm.get_partition(tp)
            if p is None or not p.is_leader:
                st.pending = False
                st.result.error = rm.missing_partition_error(tp)
                continue
            if p.high_watermark >= st.required_offset:
                st.pending = False
                if len(p.isr) < p.min_insync_replicas:
                    st.result.error = ErrorCode.not_enough_replicas_after_append
                else:
                    st.result.error = ErrorCode.none
        if any(st.pending for st in self.statuses.values()):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        fut = self.future
        if fut.done():
            return
        result = {tp: st.result for tp, st in self.statuses.items()}
        respond = self.respond
        if respond is None:
            fut.set_result(result)
            return
        try:
            value = respond(result)
        except Exception as e:  # the connection logs it and closes
            fut.set_exception(e)
        else:
            fut.set_result(value)
