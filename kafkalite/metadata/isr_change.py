"""How a partition leader publishes an ISR change (seed 002 §9, "ISR change notifications").

In Kafka's ZooKeeper mode the leader itself writes the new ISR into the
partition's state znode, conditionally on the znode version it last saw (so a
controller election in between makes the write fail instead of undoing it), and
then, batched, creates a sequential /isr_change_notification/isr_change_<n>
naming the changed partitions; the controller reacts by sending UpdateMetadata.

Replication (follower fetching, ISR shrink and expand) is a separate layer;
these are the store-side primitives it calls, usable on their own in tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from kafkalite.common.types import TopicPartition
from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.store import BadVersionError, MetadataStore, NoNodeError

__all__ = [
    "ISR_CHANGE_PROPAGATION_BLACKOUT_MS",
    "ISR_CHANGE_PROPAGATION_INTERVAL_MS",
    "IsrChangePropagator",
    "update_leader_and_isr",
    "write_isr_change_notification",
]

#: propagate once no ISR change happened for this long ...
ISR_CHANGE_PROPAGATION_BLACKOUT_MS = 5000
#: ... or at least this often while changes keep coming
ISR_CHANGE_PROPAGATION_INTERVAL_MS = 60000
#: how often Kafka's leader checks whether to propagate
ISR_CHANGE_CHECK_INTERVAL_MS = 2500


async def update_leader_and_isr(
    store: MetadataStore,
    tp: TopicPartition,
    *,
    leader: int,
    leader_epoch: int,
    isr: list[int],
    controller_epoch: int,
    zk_version: int,
) -> int | None:
    """Write the partition's new ISR as its leader; the new znode version, or None if
    the znode changed since ``zk_version`` (the leader must then re-read its state)."""
    state = zk_data.PartitionState(leader, leader_epoch, list(isr), controller_epoch)
    try:
        stat = await store.set(
            zk_paths.partition_state_path(*tp), state.encode(), version=zk_version
        )
    except (BadVersionError, NoNodeError):
        return None
    return stat.version


async def write_isr_change_notification(
    store: MetadataStore, partitions: Iterable[TopicPartition]
) -> str:
    """Create /isr_change_notification/isr_change_<seq> naming ``partitions``."""
    data = zk_data.IsrChangeNotification(
        tuple(zk_data.TopicPartition(t, p) for t, p in sorted(set(partitions)))
    ).encode()
    return await store.create(zk_paths.isr_change_notification_path(), data, sequential=True)


class IsrChangePropagator:
    """Kafka's ReplicaManager.maybePropagateIsrChanges: batches a leader's ISR changes.

    :meth:`record` after each ISR write; call :meth:`maybe_propagate` every
    ``ISR_CHANGE_CHECK_INTERVAL_MS``. It writes one notification for everything
    recorded once no change came for 5 s, or 60 s after the last propagation.
    """

    def __init__(self, store: MetadataStore, clock_ms: Callable[[], int] | None = None) -> None:
        self.store = store
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.pending: set[TopicPartition] = set()
        self.last_change_ms = 0
        self.last_propagation_ms = self.clock_ms()

    def record(self, tp: TopicPartition) -> None:
        self.pending.add(tp)
        self.last_change_ms = self.clock_ms()

    async def maybe_propagate(self) -> str | None:
        """The notification written, or None if it is not time yet (or nothing changed)."""
        now = self.clock_ms()
        if not self.pending:
            return None
        if (
            self.last_change_ms + ISR_CHANGE_PROPAGATION_BLACKOUT_MS < now
            or self.last_propagation_ms + ISR_CHANGE_PROPAGATION_INTERVAL_MS < now
        ):
            path = await write_isr_change_notification(self.store, self.pending)
            self.pending.clear()
            self.last_propagation_ms = now
            return path
        return None
