"""DelayedFetch: a fetch parked until min_bytes are available or max_wait expires.

Completion is forced (seed 000 §3) when a partition is no longer led here,
became unknown, was truncated below the fetch offset, or its log dir went
offline; otherwise when the bytes available up to the end offset (LEO for
followers, HW for read_uncommitted, LSO for read_committed) reach min_bytes.
On completion the partitions are read again and the future gets the result.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.timer.delayed_operation import DelayedOperation

if TYPE_CHECKING:
    from kafkalite.replica.replica_manager import FetchParams, PartitionFetchInfo, ReplicaManager


@dataclass(slots=True)
class FetchPartitionStatus:
    fetch_offset: int
    info: PartitionFetchInfo


class DelayedFetch(DelayedOperation):
    def __init__(
        self,
        delay_ms: int,
        params: FetchParams,
        statuses: list[tuple[tuple[str, int], FetchPartitionStatus]],
        replica_manager: ReplicaManager,
        future: asyncio.Future[Any],
    ) -> None:
        super().__init__(delay_ms)
        self.params = params
        self.statuses = statuses
        self.replica_manager = replica_manager
        self.future = future

    def try_complete(self) -> bool:
        if self.future.done():  # the client went away
            return self.force_complete()
        rm = self.replica_manager
        accumulated = 0
        for tp, st in self.statuses:
            p = rm.get_partition(tp)
            if p is None or p.log is None:
                return self.force_complete()
            if not self.params.is_from_follower and not p.is_leader:
                return self.force_complete()
            plog = p.log
            if self.params.is_from_follower:
                end = plog.log_end_offset
            elif self.params.isolation_level == 1:
                end = plog.last_stable_offset
            else:
                end = plog.high_watermark
            if st.fetch_offset > end or st.fetch_offset < plog.log_start_offset:
                return self.force_complete()  # truncation / out of range
            if end > st.fetch_offset:
                r = rm.read_partition(self.params, tp, st.info, st.info.max_bytes, False)
                if r.error:
                    return self.force_complete()
                accumulated += r.size if r.size else 1
                if accumulated >= self.params.min_bytes:
                    return self.force_complete()
        return False

    def on_expiration(self) -> None:
        pass

    def on_complete(self) -> None:
        if self.future.done():
            return
        result = self.replica_manager.read_from_local_log(
            self.params, [(tp, st.info) for tp, st in self.statuses]
        )
        self.future.set_result(result)
