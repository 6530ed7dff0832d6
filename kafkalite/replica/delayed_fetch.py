"""DelayedFetch: a fetch parked until min_bytes are available or max_wait expires.

Completion is forced (seed 000 §3) when a partition is no longer led here (for
follower fetches too: a follower must go and fetch from the new leader), became
unknown or went offline with its log dir, the client's leader epoch no longer
matches, or the log was truncated below the fetch offset; otherwise when the
bytes available up to the end offset (LEO for followers, HW for
read_uncommitted, LSO for read_committed) reach min_bytes. On completion the
partitions are read again and the response is built and handed to the
connection in one step: no task per parked fetch, so thousands of them can
complete cheaply after one append.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.common.types import TopicPartition
from kafkalite.timer.delayed_operation import DelayedOperation

if TYPE_CHECKING:
    from kafkalite.replica.replica_manager import (
        FetchParams,
        FetchPartitionResult,
        PartitionFetchInfo,
        ReplicaManager,
    )

    FetchResults = list[tuple[TopicPartition, FetchPartitionResult]]


@dataclass(slots=True)
class FetchPartitionStatus:
    fetch_offset: int
    info: PartitionFetchInfo


class DelayedFetch(DelayedOperation):
    __slots__ = ("params", "statuses", "replica_manager", "future", "respond")

    def __init__(
        self,
        delay_ms: int,
        params: FetchParams,
        statuses: list[tuple[TopicPartition, FetchPartitionStatus]],
        replica_manager: ReplicaManager,
        future: asyncio.Future[Any],
        respond: Callable[[FetchResults], Any] | None = None,
    ) -> None:
        super().__init__(delay_ms)
        self.params = params
        self.statuses = statuses
        self.replica_manager = replica_manager
        self.future = future
        #: builds the response from the results; the future gets what it returns
        self.respond = respond

    def try_complete(self) -> bool:
        if self.future.done():  # the client went away
            return self.force_complete()
        rm = self.replica_manager
        params = self.params
        from_follower = params.is_from_follower
        accumulated = 0
        for tp, st in self.statuses:
            p = rm.get_partition(tp)
            plog = p.log if p is not None else None
            if p is None or plog is None or plog.is_offline:
                return self.force_complete()  # unknown, deleted or its log dir offline
            if not p.is_leader and params.fetch_only_from_leader:
                return self.force_complete()  # leadership moved (followers included)
            epoch = st.info.current_leader_epoch
            if epoch >= 0 and epoch != p.leader_epoch:
                return self.force_complete()  # fenced or unknown leader epoch
            if from_follower:
                end = plog.log_end_offset
            elif params.isolation_level == 1:
                end = plog.last_stable_offset
            else:
                end = plog.high_watermark
            if st.fetch_offset > end or st.fetch_offset < plog.log_start_offset:
                return self.force_complete()  # truncation / out of range
            if end > st.fetch_offset:
                if from_follower and rm.leader_quota.is_exceeded():
                    if rm.leader_throttled(tp, params.replica_id):
                        continue  # held back by the replication quota: not available
                if params.min_bytes <= 1:
                    return self.force_complete()  # a batch is at least one byte
                r = rm.read_partition(params, tp, st.info, st.info.max_bytes, False)
                if r.error:
                    return self.force_complete()
                accumulated += r.size if r.size else 1
                if accumulated >= params.min_bytes:
                    return self.force_complete()
        return False

    def on_complete(self) -> None:
        fut = self.future
        if fut.done():
            return
        result = self.replica_manager.read_from_local_log(
            self.params, [(tp, st.info) for tp, st in self.statuses]
        )
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
