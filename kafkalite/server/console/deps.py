"""What the console reads: the broker's live services, handed over by ``KafkaBroker``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkalite.coordinator.group import GroupCoordinator
    from kafkalite.log.log import Log
    from kafkalite.log.log_manager import LogManager
    from kafkalite.network.request_channel import RequestChannel
    from kafkalite.replica.replica_manager import ReplicaManager
    from kafkalite.server.admin_manager import AdminManager
    from kafkalite.server.config import BrokerConfig
    from kafkalite.server.console.cluster import ClusterReader
    from kafkalite.server.metadata_cache import MetadataCache


@dataclass(frozen=True, slots=True)
class ConsoleDeps:
    broker_id: int
    config: BrokerConfig
    clock_ms: Callable[[], int]
    metadata_cache: MetadataCache
    log_manager: LogManager
    replica_manager: ReplicaManager
    admin: AdminManager
    group_coordinator: GroupCoordinator
    channel: RequestChannel
    #: the broker's Prometheus registry (``BrokerMetrics.registry``)
    registry: Any
    #: time.time() when the broker started
    started_at: float
    #: asks the other brokers of a cluster for what they hold (None: this broker only)
    cluster: ClusterReader | None = None

    def local_log(self, topic: str, partition: int) -> Log | None:
        """The partition's log if this broker has a replica of it."""
        p = self.replica_manager.partitions.get((topic, partition))
        return None if p is None else p.log

    def leader_log(self, topic: str, partition: int) -> Log | None:
        """The log if this broker leads the partition (what consumers read here)."""
        p = self.replica_manager.partitions.get((topic, partition))
        return p.log if p is not None and p.is_leader else None
