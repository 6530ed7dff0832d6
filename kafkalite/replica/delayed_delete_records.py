"""DelayedDeleteRecords: DeleteRecords waiting for every replica's log start offset.

The request is answered when the partition's low watermark (the smallest log
start offset over its replicas) reaches the requested offset, or with
REQUEST_TIMED_OUT on expiry; NOT_LEADER_OR_FOLLOWER if leadership moved,
KAFKA_STORAGE_ERROR if the partition's log dir went offline.
On a single replica the low watermark moves with the leader's own log start
offset, so the operation completes at once.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.common.types import TopicPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.timer.delayed_operation import DelayedOperation

if TYPE_CHECKING:
    from kafkalite.replica.replica_manager import ReplicaManager


@dataclass(slots=True)
class DeleteRecordsStatus:
    required_offset: int
    low_watermark: int = -1
    error: int = ErrorCode.request_timed_out
    pending: bool = True


class DelayedDeleteRecords(DelayedOperation):
    def __init__(
        self,
        delay_ms: int,
        statuses: dict[TopicPartition, DeleteRecordsStatus],
        replica_manager: ReplicaManager,
        future: asyncio.Future[Any],
    ) -> None:
        super().__init__(delay_ms)
        self.statuses = statuses
        self.replica_manager = replica_manager
        self.future = future

    def try_complete(self) -> bool:
        rm = self.replica_manager
        for tp, st in self.statuses.items():
            if not st.pending:
                continue
            p = rm.get_partition(tp)
            if p is None or not p.is_leader:
                st.pending, st.error = False, rm.missing_partition_error(tp)
                continue
            low = p.low_watermark
            if low >= st.required_offset:
                st.pending, st.error, st.low_watermark = False, ErrorCode.none, low
        if any(st.pending for st in self.statuses.values()):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        if not self.future.done():
            self.future.set_result(
                {tp: (st.error, st.low_watermark) for tp, st in self.statuses.items()}
            )
