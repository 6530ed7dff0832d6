"""ReplicaManager: the partitions this broker hosts, and the produce/fetch paths.

Handlers call :meth:`append_records` and :meth:`fetch_messages`; both return a
result at once when they can, or a future completed by a delayed operation in
the purgatory (acks=all waiting for the ISR, a long-poll fetch waiting for
data). The controller's LeaderAndIsr and StopReplica are applied here
(:meth:`become_leader_or_follower`, :meth:`stop_replicas`, as Kafka's
``becomeLeaderOrFollower``/``stopReplicas``), fenced by the controller epoch the
broker keeps in its metadata cache; a failed log dir arrives through
:meth:`handle_log_dir_failure`, which takes its partitions offline.

Delayed fetches woken by an append are completed on a later loop iteration
(:meth:`_wake_fetches_later`), after the producer's response has been written:
like Kafka's action queue, which completes delayed requests only once the
request that triggered them has been handled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kafkalite.common.types import TopicPartition
from kafkalite.log.errors import LogError, OffsetOutOfRange
from kafkalite.log.fetch_data import FileSlice
from kafkalite.log.log_dir_move import FutureLog, copy_closed_segments
from kafkalite.metadata.isr_change import (
    ISR_CHANGE_CHECK_INTERVAL_MS,
    IsrChangePropagator,
    update_leader_and_isr,
)
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.record_batch import InvalidRecordBatch, ValidatedRecords
from kafkalite.protocol.record_validator import WritableBuffer
from kafkalite.protocol.sasl_client import SaslClientCredentials
from kafkalite.replica.delayed_delete_records import DelayedDeleteRecords, DeleteRecordsStatus
from kafkalite.replica.delayed_fetch import DelayedFetch, FetchPartitionStatus
from kafkalite.replica.delayed_produce import DelayedProduce, ProducePartitionStatus
from kafkalite.replica.partition import LeaderAndIsrState, Partition
from kafkalite.replica.replica_fetcher import (
    FetcherConfig,
    PartitionFetchState,
    ReplicaFetcherManager,
    SourceBroker,
)
from kafkalite.replica.replication_quota import (
    UNBOUNDED,
    ReplicationQuota,
    is_throttled_replica,
)
from kafkalite.replica.topic_stats import BrokerTopicStats
from kafkalite.timer import loop_slices
from kafkalite.timer.purgatory import DelayedOperationPurgatory

if TYPE_CHECKING:
    import ssl

    from kafkalite.log.log_config import LogConfig
    from kafkalite.log.log_manager import LogManager
    from kafkalite.metadata.store import MetadataStore

log = logging.getLogger(__name__)


LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
#: ListOffsets v11 (KIP-1023): the first offset not yet in remote storage
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6

READ_UNCOMMITTED = 0
#: a woken fetch's range up to this size is read into memory once and shared
INLINE_READ_BYTES = 64 * 1024
READ_COMMITTED = 1


@dataclass(slots=True)
class ProduceResult:
    error: int = 0
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


@dataclass(slots=True)
class FetchParams:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    #: a consumer's rack (Fetch v11+, KIP-392); None: no client metadata (older versions),
    #: such a consumer is served by leaders only
    client_rack: str | None = None

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def fetch_only_from_leader(self) -> bool:
        """Kafka's rule: followers, and consumers without client metadata."""
        return self.replica_id >= 0 or self.client_rack is None


@dataclass(slots=True)
class PartitionFetchInfo:
    fetch_offset: int
    max_bytes: int
    log_start_offset: int = -1
    current_leader_epoch: int = -1


@dataclass(slots=True)
class FetchPartitionResult:
    error: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Any = None  # FileSlice / bytes / None
    aborted_transactions: list[tuple[int, int]] | None = None
    log_end_offset: int = -1
    size: int = 0
    #: KIP-392: the replica the consumer should fetch from instead (-1: this one)
    preferred_read_replica: int = -1


@dataclass(slots=True)
class ReplicaManagerConfig:
    broker_id: int
    request_timeout_ms: int = 30000
    fetch_purge_interval: int = 1000  # fetch.purgatory.purge.interval.requests
    produce_purge_interval: int = 1000  # producer.purgatory.purge.interval.requests
    delete_records_purge_interval: int = 1  # delete.records.purgatory.purge.interval.requests
    default_min_insync_replicas: int = 1
    topic_min_isr: Callable[[str], int] = field(default=lambda _t: 1)
    #: a topic's effective log config, for the logs LeaderAndIsr creates
    log_config_for: Callable[[str], LogConfig | None] = field(default=lambda _t: None)
    #: fetch the configs of topics the broker has not seen yet (before their logs exist)
    ensure_topic_configs: Callable[[Iterable[str]], Awaitable[None]] | None = None
    #: replica.lag.time.max.ms: an ISR follower not caught up for this long is dropped
    replica_lag_time_max_ms: int = 30000
    fetcher: FetcherConfig | None = None
    #: replica.selector.class is Kafka's RackAwareReplicaSelector (KIP-392)
    rack_aware_selector: bool = False
    #: leader/follower.replication.throttled.rate, read live (dynamic broker configs)
    leader_throttled_rate: Callable[[], int] = field(default=lambda: UNBOUNDED)
    follower_throttled_rate: Callable[[], int] = field(default=lambda: UNBOUNDED)
    #: replication.quota.window.num and .size.seconds
    quota_windows: int = 11
    quota_window_s: float = 1.0

    @classmethod
    def from_broker_config(
        cls,
        cfg: Any,
        broker_id: int,
        log_config_for: Callable[[str], LogConfig],
        ensure_topic_configs: Callable[[Iterable[str]], Awaitable[None]],
    ) -> ReplicaManagerConfig:
        """From the broker config (Kafka's names) and the broker's topic configs."""
        return cls(
            broker_id=broker_id,
            request_timeout_ms=int(cfg["request.timeout.ms"]),
            fetch_purge_interval=int(cfg["fetch.purgatory.purge.interval.requests"]),
            produce_purge_interval=int(cfg["producer.purgatory.purge.interval.requests"]),
            delete_records_purge_interval=int(
                cfg["delete.records.purgatory.purge.interval.requests"]
            ),
            topic_min_isr=lambda t: log_config_for(t).min_insync_replicas,
            log_config_for=log_config_for,
            ensure_topic_configs=ensure_topic_configs,
            replica_lag_time_max_ms=int(cfg["replica.lag.time.max.ms"]),
            rack_aware_selector=str(cfg["replica.selector.class"] or "").endswith(
                "RackAwareReplicaSelector"
            ),
            leader_throttled_rate=lambda: int(cfg["leader.replication.throttled.rate"]),
            follower_throttled_rate=lambda: int(cfg["follower.replication.throttled.rate"]),
            quota_windows=int(cfg["replication.quota.window.num"]),
            quota_window_s=float(cfg["replication.quota.window.size.seconds"]),
            fetcher=FetcherConfig(
                broker_id=broker_id,
                fetch_wait_max_ms=int(cfg["replica.fetch.wait.max.ms"]),
                fetch_min_bytes=int(cfg["replica.fetch.min.bytes"]),
                fetch_max_bytes=int(cfg["replica.fetch.max.bytes"]),
                fetch_response_max_bytes=int(cfg["replica.fetch.response.max.bytes"]),
                backoff_ms=int(cfg["replica.fetch.backoff.ms"]),
                request_timeout_ms=int(cfg["request.timeout.ms"]),
            ),
        )


class ControllerEpochRecord(Protocol):
    """Where the broker keeps the latest controller epoch (its MetadataCache): LeaderAndIsr,
    StopReplica and UpdateMetadata are all fenced against this one value."""

    controller_epoch: int


class ReplicaManager:
    def __init__(
        self,
        config: ReplicaManagerConfig,
        log_manager: LogManager,
        epochs: ControllerEpochRecord,
        *,
        store: MetadataStore | None = None,
        broker_endpoint: Callable[[int], tuple[str, int] | None] = lambda _b: None,
        fetcher_ssl_context: Callable[[], ssl.SSLContext | None] = lambda: None,
        broker_rack: Callable[[int], str | None] = lambda _b: None,
        inter_broker_secret: Callable[[], bytes | None] = lambda: None,
        partition_known: Callable[[TopicPartition], bool] = lambda _tp: False,
        fetcher_sasl: Callable[[], SaslClientCredentials | None] = lambda: None,
    ) -> None:
        self.config = config
        #: the partition exists in the cluster's metadata (hosted here or not)
        self.partition_known = partition_known
        #: where a leader writes its ISR changes (the partition state znodes)
        self.store = store
        #: a broker's inter-broker (host, port), when LeaderAndIsr did not name it
        self.broker_endpoint = broker_endpoint
        #: a live broker's broker.rack (the rack-aware replica selector)
        self.broker_rack = broker_rack
        self.fetcher_manager = ReplicaFetcherManager(
            self,
            config.fetcher or FetcherConfig(config.broker_id),
            fetcher_ssl_context,
            inter_broker_secret,
            fetcher_sasl,
        )
        self.isr_propagator = IsrChangePropagator(store) if store is not None else None
        #: KIP-73 replication throttling, each side bounded by its live config
        self.leader_quota = ReplicationQuota(
            config.leader_throttled_rate,
            windows=config.quota_windows,
            window_s=config.quota_window_s,
        )
        self.follower_quota = ReplicationQuota(
            config.follower_throttled_rate,
            windows=config.quota_windows,
            window_s=config.quota_window_s,
        )
        self.isr_shrinks = 0
        self.isr_expands = 0
        #: Kafka's BrokerTopicMetrics counts (updated by Produce and Fetch)
        self.topic_stats = BrokerTopicStats()
        self._background: list[asyncio.Task[None]] = []
        self._isr_writes: set[asyncio.Task[None]] = set()
        self._epochs = epochs
        self.broker_id = config.broker_id
        self.log_manager = log_manager
        self.partitions: dict[TopicPartition, Partition] = {}
        #: partitions whose log dir failed (Kafka's HostedPartition.Offline): every
        #: request for them gets KAFKA_STORAGE_ERROR until the broker restarts
        self.offline_partitions: set[TopicPartition] = set()
        self.produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = (
            DelayedOperationPurgatory("Produce", purge_interval=config.produce_purge_interval)
        )
        self.fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] = DelayedOperationPurgatory(
            "Fetch", purge_interval=config.fetch_purge_interval
        )
        self.delete_records_purgatory: DelayedOperationPurgatory[DelayedDeleteRecords] = (
            DelayedOperationPurgatory(
                "DeleteRecords", purge_interval=config.delete_records_purge_interval
            )
        )
        # partitions whose parked fetches an append woke, completed on a later iteration
        self._fetch_wakeups: dict[TopicPartition, None] = {}
        #: partition reads shared by the fetches one wake-up pass completes
        self._read_memo: dict[tuple[Any, ...], FetchPartitionResult] | None = None
        #: listeners called after a leader append (e.g. metrics, tests)
        self.append_listeners: list[Callable[[TopicPartition, Any], None]] = []
        #: called as (partition, is_leader) when LeaderAndIsr/StopReplica set a partition's role
        #: here (the group coordinator loads and unloads __consumer_offsets partitions)
        self.on_leadership_change: list[Callable[[TopicPartition, bool], None]] = []
        #: called after StopReplica deleted replicas, with the topics no longer hosted here
        self.on_replicas_deleted: list[Callable[[set[str]], None]] = []

    # ---- partitions ---------------------------------------------------------
    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def missing_partition_error(self, tp: TopicPartition) -> int:
        """Error for a partition not (or no longer) led here: its log dir failed, or not leader."""
        if tp in self.offline_partitions:
            return ErrorCode.kafka_storage_error
        return ErrorCode.not_leader_or_follower

    def not_hosted_error(self, tp: TopicPartition) -> int:
        """Kafka's ReplicaManager.getPartitionOrError: a partition the cluster has but
        this broker does not host (a reassignment moved it away, or its replica is not
        created yet) is NOT_LEADER_OR_FOLLOWER, which makes clients refresh metadata;
        only a partition the metadata does not know is UNKNOWN_TOPIC_OR_PARTITION."""
        if self.partition_known(tp):
            return ErrorCode.not_leader_or_follower
        return ErrorCode.unknown_topic_or_partition

    def leader_partition_or_error(
        self, tp: TopicPartition, current_leader_epoch: int = -1
    ) -> Partition:
        p = self.partitions.get(tp)
        if p is None:
            if tp in self.offline_partitions:
                raise KafkaError(
                    ErrorCode.kafka_storage_error, f"{tp[0]}-{tp[1]} is in an offline log dir"
                )
            raise KafkaError(self.not_hosted_error(tp))
        p.check_leader(current_leader_epoch)
        return p

    async def become_leader_or_follower(
        self,
        controller_id: int,
        controller_epoch: int,
        states: list[dict[str, Any]],
        live_leaders: Mapping[int, tuple[str, int]] | None = None,
    ) -> dict[TopicPartition, int]:
        """Apply LeaderAndIsr's partition states: create logs as needed, switch roles.

        The states were admitted by the caller (``server/apis/controller_requests``); an
        older controller epoch than the latest is still refused here, as Kafka does.
        Returns an error per partition. The loop runs between partitions once a slice
        is used up: a new topic of 10,000 partitions creates as many log dirs (seconds
        of file system work).
        """
        if controller_epoch < self._epochs.controller_epoch:
            return {(s["topic"], s["partition"]): ErrorCode.stale_controller_epoch for s in states}
        self._epochs.controller_epoch = controller_epoch
        if self.config.ensure_topic_configs is not None:
            await self.config.ensure_topic_configs([s["topic"] for s in states])
        errors: dict[TopicPartition, int] = {}
        for s in states:
            tp = (s["topic"], s["partition"])
            state = LeaderAndIsrState(
                leader=s["leader"],
                leader_epoch=s["leader_epoch"],
                isr=list(s["isr"]),
                replicas=list(s["replicas"]),
                partition_epoch=s.get("partition_epoch", 0),
                controller_epoch=controller_epoch,
                is_new=bool(s.get("is_new", False)),
            )
            errors[tp] = self._become_leader_or_follower(tp, s["topic_id"], state, live_leaders)
            await loop_slices.pause()
        return errors

    def _become_leader_or_follower(
        self,
        tp: TopicPartition,
        topic_id: uuid.UUID,
        state: LeaderAndIsrState,
        live_leaders: Mapping[int, tuple[str, int]] | None = None,
    ) -> int:
        if tp in self.offline_partitions:
            return ErrorCode.kafka_storage_error  # the controller learns it is offline
        try:
            p = self.partitions.get(tp)
            if p is None or p.topic_id != topic_id:
                p = Partition(tp[0], tp[1], topic_id, self.broker_id)
                self.partitions[tp] = p
            if state.leader_epoch < p.leader_epoch:
                return ErrorCode.stale_controller_epoch  # stale leader epoch
            plog = self.log_manager.get_or_create_log(
                tp[0], tp[1], self.config.log_config_for(tp[0]), is_new=state.is_new
            )
            p.min_insync_replicas = self.config.topic_min_isr(tp[0])
            if state.leader == self.broker_id:
                self.fetcher_manager.remove_fetcher_for_partitions([tp])
                p.make_leader(state, plog)
            else:
                p.make_follower(state, plog)
                self._start_following(tp, p, live_leaders)
            for cb in self.on_leadership_change:
                cb(tp, state.leader == self.broker_id)
            # wake anything parked on this partition (leadership may have changed)
            self._complete_delayed_requests(tp)
            return 0
        except LogError as e:
            return e.error_code

    def _start_following(
        self,
        tp: TopicPartition,
        p: Partition,
        live_leaders: Mapping[int, tuple[str, int]] | None,
    ) -> None:
        """Fetch ``tp`` from its leader, truncating by leader epoch first (Kafka's makeFollower
        then addFetcherForPartitions); no leader (offline partition): fetch nothing."""
        fm = self.fetcher_manager
        leader = p.leader_id
        endpoint = (live_leaders or {}).get(leader) or self.broker_endpoint(leader)
        if leader < 0 or endpoint is None:
            if leader >= 0:
                log.warning(
                    "broker %d: no endpoint for leader %d of %s-%d", self.broker_id, leader, *tp
                )
            fm.remove_fetcher_for_partitions([tp])
            return
        source = SourceBroker(leader, endpoint[0], endpoint[1])
        current = fm.fetch_state(tp)
        if (
            current is not None
            and current[0] == source
            and current[1].leader_epoch == p.leader_epoch
        ):
            return
        fm.add_fetcher_for_partition(tp, source, PartitionFetchState(p.topic_id, p.leader_epoch))

    async def stop_replicas(
        self, controller_epoch: int, partitions: list[TopicPartition], delete: bool
    ) -> dict[TopicPartition, int]:
        """Apply StopReplica (admitted by the caller) to ``partitions``: stop serving them,
        and with ``delete`` delete their logs (in one batch: see LogManager.delete_logs).
        Returns an error per partition."""
        if controller_epoch < self._epochs.controller_epoch:
            return {tp: ErrorCode.stale_controller_epoch for tp in partitions}
        errors: dict[TopicPartition, int] = {}
        to_delete: list[TopicPartition] = []
        self.fetcher_manager.remove_fetcher_for_partitions(list(partitions))
        for tp in partitions:
            p = self.partitions.pop(tp, None)
            if p is not None:
                p.leader_id = -1
                for cb in self.on_leadership_change:
                    cb(tp, False)
            self._complete_delayed_requests(tp)
            if tp in self.offline_partitions:
                errors[tp] = ErrorCode.kafka_storage_error  # as Kafka: offline until restart
            elif delete:
                to_delete.append(tp)
            else:
                errors[tp] = 0
            await loop_slices.pause()
        if to_delete:
            refused = await self.log_manager.delete_logs(to_delete)
            for tp in to_delete:
                e = refused.get(tp)
                errors[tp] = 0 if e is None else e.error_code
        if delete:
            # a reassignment deletes one partition's replica while the broker keeps the
            # others: only topics without any replica left here are gone
            hosted = {t for t, _p in self.partitions}
            gone = {tp[0] for tp in partitions} - hosted
            for deleted in self.on_replicas_deleted:
                deleted(gone)
        return errors

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """A topic's effective config changed (AlterConfigs, dynamic broker defaults)."""
        self.log_manager.update_config(topic, config)
        for (t, _p), part in self.partitions.items():
            if t == topic:
                part.min_insync_replicas = config.min_insync_replicas

    def handle_log_dir_failure(self, log_dir: Path) -> list[TopicPartition]:
        """Stop serving the replicas whose logs are in ``log_dir`` (Kafka's handleLogDirFailure).

        They become offline partitions; requests parked on them complete now with
        KAFKA_STORAGE_ERROR instead of sitting out their timeouts. Returns them; the
        broker then tells the controller (/log_dir_event_notification).
        """
        failed = [
            tp
            for tp, p in self.partitions.items()
            if p.log is not None and p.log.dir.parent == log_dir
        ]
        self.fetcher_manager.remove_fetcher_for_partitions(failed)
        for tp in failed:
            p = self.partitions.pop(tp)
            self.offline_partitions.add(tp)
            p.leader_id = -1
            for cb in self.on_leadership_change:
                cb(tp, False)
        for tp in failed:
            self._complete_delayed_requests(tp)
        if failed:
            log.warning(
                "broker %d stopped serving %d replicas in failed log dir %s: %s",
                self.broker_id,
                len(failed),
                log_dir,
                ", ".join(f"{t}-{p}" for t, p in failed),
            )
        return failed

    def _complete_delayed_requests(self, tp: TopicPartition) -> None:
        self.fetch_purgatory.check_and_complete(tp)
        self.produce_purgatory.check_and_complete(tp)
        self.delete_records_purgatory.check_and_complete(tp)

    def truncate_to(self, tp: TopicPartition, offset: int) -> bool:
        """Truncate a replica's log (the follower's step after OffsetForLeaderEpoch).

        Fetches parked past the new end complete at once (seed 000 §3, case C).
        """
        p = self.partitions.get(tp)
        if p is None or p.log is None:
            raise KafkaError(self.missing_partition_error(tp))
        truncated = p.log.truncate_to(offset)
        if truncated:
            p.reset_producer_state()
            self.fetch_purgatory.check_and_complete(tp)
        return truncated

    def truncate_fully_and_start_at(self, tp: TopicPartition, offset: int) -> None:
        """A follower below its leader's log start offset restarts empty at it."""
        p = self.partitions.get(tp)
        if p is None or p.log is None:
            raise KafkaError(self.missing_partition_error(tp))
        p.log.truncate_fully_and_start_at(offset)
        p.reset_producer_state()

    def append_as_follower(
        self,
        tp: TopicPartition,
        leader_epoch: int,
        records: bytes | bytearray | memoryview,
        leader_hw: int,
        leader_log_start_offset: int,
    ) -> int:
        """Append what the leader sent, as it is; take its HW (up to our log end) and log
        start offset. Returns the new log end offset (the next fetch offset)."""
        p = self.partitions.get(tp)
        if p is None or p.log is None:
            raise KafkaError(self.missing_partition_error(tp))
        if p.leader_id == self.broker_id or p.leader_epoch != leader_epoch:
            raise KafkaError(ErrorCode.fenced_leader_epoch, "leadership changed meanwhile")
        plog = p.log
        if records:
            plog.append_as_follower(records)  # the log keeps its producer state
            self.topic_stats.replication_bytes_in += len(records)
        p.leader_hw_seen = leader_hw
        if plog.maybe_increment_high_watermark(min(leader_hw, plog.log_end_offset)):
            self._wake_fetches_later(tp)  # consumers reading from this follower (KIP-392)
        if leader_log_start_offset > plog.log_start_offset:
            target = min(leader_log_start_offset, plog.high_watermark)
            if target > plog.log_start_offset:
                plog.maybe_increment_log_start_offset(target)
        return plog.log_end_offset

    # ---- ISR ----------------------------------------------------------------
    def startup(self) -> None:
        """Start the ISR expiration and ISR change propagation tasks (Kafka's schedulers)."""
        loop = asyncio.get_running_loop()
        self._background.append(loop.create_task(self._isr_expiration(), name="isr-expiration"))
        if self.isr_propagator is not None:
            self._background.append(
                loop.create_task(self._isr_change_propagation(), name="isr-change-propagation")
            )

    async def _isr_expiration(self) -> None:
        interval = max(0.01, self.config.replica_lag_time_max_ms / 2000)
        while True:
            await asyncio.sleep(interval)
            try:
                self.maybe_shrink_isr()
            except Exception:
                log.exception("broker %d: ISR expiration failed", self.broker_id)

    async def _isr_change_propagation(self) -> None:
        assert self.isr_propagator is not None
        while True:
            await asyncio.sleep(ISR_CHANGE_CHECK_INTERVAL_MS / 1000)
            try:
                await self.isr_propagator.maybe_propagate()
            except Exception:
                log.warning("broker %d: ISR change notification failed", self.broker_id)

    def maybe_shrink_isr(self, now_ms: int | None = None) -> None:
        """Drop ISR followers that have not caught up within replica.lag.time.max.ms."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        lag = self.config.replica_lag_time_max_ms
        for tp, p in list(self.partitions.items()):
            out = p.out_of_sync_replicas(now, lag)
            if out:
                new_isr = [r for r in p.isr if r not in out]
                log.info(
                    "broker %d: shrinking ISR of %s-%d from %s to %s (out of sync: %s)",
                    self.broker_id,
                    tp[0],
                    tp[1],
                    p.isr,
                    new_isr,
                    out,
                )
                self._alter_isr(tp, p, new_isr, shrink=True)

    def _maybe_expand_isr(self, tp: TopicPartition, p: Partition, replica_id: int) -> None:
        if p.isr_expand_candidate(replica_id):
            new_isr = [*p.isr, replica_id]
            log.info(
                "broker %d: expanding ISR of %s-%d from %s to %s",
                self.broker_id,
                tp[0],
                tp[1],
                p.isr,
                new_isr,
            )
            self._alter_isr(tp, p, new_isr, shrink=False)

    def _alter_isr(
        self, tp: TopicPartition, p: Partition, new_isr: list[int], shrink: bool
    ) -> None:
        if self.store is None:
            return
        p.isr_change_pending = True
        task = asyncio.get_running_loop().create_task(self._write_isr(tp, p, new_isr, shrink))
        self._isr_writes.add(task)
        task.add_done_callback(self._isr_writes.discard)

    async def _write_isr(
        self, tp: TopicPartition, p: Partition, new_isr: list[int], shrink: bool
    ) -> None:
        """Kafka's ZooKeeper-mode Partition.updateIsr: a conditional write of the state znode
        on the version this leader last saw, then an ISR change notification (batched)."""
        assert self.store is not None
        epoch, version = p.leader_epoch, p.partition_epoch
        try:
            written = await update_leader_and_isr(
                self.store,
                tp,
                leader=self.broker_id,
                leader_epoch=epoch,
                isr=new_isr,
                controller_epoch=p.controller_epoch,
                zk_version=version,
            )
        except Exception as e:
            log.warning("broker %d: ISR write of %s-%d failed: %r", self.broker_id, *tp, e)
            written = None
        if self.partitions.get(tp) is not p or p.leader_epoch != epoch or not p.is_leader:
            return  # a LeaderAndIsr came meanwhile: its state wins
        p.isr_change_pending = False
        if written is None:
            # the controller changed the partition: its LeaderAndIsr will tell us
            log.info(
                "broker %d: ISR write of %s-%d at version %d refused; waiting for the controller",
                self.broker_id,
                *tp,
                version,
            )
            return
        p.isr = list(new_isr)
        p.partition_epoch = written
        if shrink:
            self.isr_shrinks += 1
        else:
            self.isr_expands += 1
        if self.isr_propagator is not None:
            self.isr_propagator.record(tp)
        p.maybe_increment_high_watermark()
        self.on_high_watermark_change(tp)

    # ---- produce ------------------------------------------------------------
    def append_records(
        self,
        timeout_ms: int,
        required_acks: int,
        entries: dict[TopicPartition, WritableBuffer],
        respond: Callable[[dict[TopicPartition, ProduceResult]], Any] | None = None,
        *,
        validated: Mapping[TopicPartition, ValidatedRecords] | None = None,
    ) -> Any:
        """Append on the leaders; the results, or a future of them for acks=all.

        With ``respond`` the return value (or the future's result) is
        ``respond(results)``, built as soon as the results are final.
        ``validated`` holds the caller's ``ValidatedRecords`` of some entries (the
        Produce handler's checks), so their batches are not parsed twice.
        """
        results: dict[TopicPartition, ProduceResult] = {}
        appended: dict[TopicPartition, int] = {}
        for tp, records in entries.items():
            try:
                p = self.leader_partition_or_error(tp)
                info = p.append_records_to_leader(
                    records, required_acks, validated.get(tp) if validated else None
                )
                results[tp] = ProduceResult(
                    0, info.first_offset, info.log_append_time, info.log_start_offset
                )
                appended[tp] = info.last_offset + 1
                # followers parked at the log end wake on the append itself
                self._wake_fetches_later(tp)
                for cb in self.append_listeners:
                    cb(tp, info)
            except KafkaError as e:
                results[tp] = ProduceResult(int(e.code), error_message=e.message)
            except (InvalidRecordBatch, LogError) as e:
                results[tp] = ProduceResult(e.error_code, error_message=str(e) or None)
            except Exception as e:  # never let one partition's failure take the request down
                log.exception("append to %s failed", tp)
                results[tp] = ProduceResult(ErrorCode.unknown_server_error, error_message=repr(e))
        if required_acks != -1 or not appended or self._acked_by_isr(appended, results):
            return results if respond is None else respond(results)
        statuses = {
            tp: ProducePartitionStatus(
                required_offset=appended.get(tp, -1), result=r, pending=tp in appended
            )
            for tp, r in results.items()
        }
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[dict[TopicPartition, ProduceResult]] = loop.create_future()
        op = DelayedProduce(timeout_ms, statuses, self, fut, respond)
        self.produce_purgatory.try_complete_else_watch(op, list(appended))
        return fut

    def _acked_by_isr(
        self, appended: dict[TopicPartition, int], results: dict[TopicPartition, ProduceResult]
    ) -> bool:
        """acks=all already satisfied (the ISR is just this leader): finish without a
        DelayedProduce, with its completion rules (NOT_ENOUGH_REPLICAS_AFTER_APPEND when
        the ISR is below min.insync.replicas). False leaves everything to the purgatory."""
        partitions = self.partitions
        for tp, required in appended.items():
            p = partitions.get(tp)
            if p is None or not p.is_leader or p.high_watermark < required:
                return False
        for tp in appended:
            p = partitions[tp]
            if len(p.isr) < p.min_insync_replicas:
                results[tp].error = ErrorCode.not_enough_replicas_after_append
        return True

    def _wake_fetches_later(self, tp: TopicPartition) -> None:
        """Check the fetches parked on ``tp`` once the current request is answered.

        Completing thousands of parked fetches inside the produce handler would hold
        its response back. Callbacks scheduled now run on the next loop iteration,
        as does the connection writer this request's response just woke; one more
        hop puts the wake-ups after it.
        """
        wakeups = self._fetch_wakeups
        if not wakeups:
            loop = asyncio.events._get_running_loop()
            if loop is None:  # no loop (a synchronous caller): complete now
                self.fetch_purgatory.check_and_complete(tp)
                return
            loop.call_soon(loop.call_soon, self._complete_woken_fetches)
        wakeups[tp] = None

    def _complete_woken_fetches(self) -> None:
        wakeups, self._fetch_wakeups = self._fetch_wakeups, {}
        # consumers parked at the log end all read the same range: read it once
        self._read_memo = {}
        try:
            for tp in wakeups:
                self.fetch_purgatory.check_and_complete(tp)
        finally:
            self._read_memo = None

    def on_high_watermark_change(self, tp: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(tp)
        self.delete_records_purgatory.check_and_complete(tp)
        self._wake_fetches_later(tp)

    # ---- fetch --------------------------------------------------------------
    def read_partition(
        self,
        params: FetchParams,
        tp: TopicPartition,
        info: PartitionFetchInfo,
        max_bytes: int,
        min_one_message: bool,
    ) -> FetchPartitionResult:
        """Read one partition for a fetch (memoised while woken fetches complete).

        While :meth:`_complete_woken_fetches` runs nothing can append, so fetches
        asking for the same range get the same result, and a small range is read
        into memory once and shared instead of a sendfile per response.
        """
        memo = self._read_memo
        if memo is None:
            return self._read_partition(params, tp, info, max_bytes, min_one_message)
        key = (
            tp,
            info.fetch_offset,
            info.current_leader_epoch,
            max_bytes,
            min_one_message,
            params.is_from_follower,
            params.isolation_level,
            params.client_rack,
        )
        r = memo.get(key)
        if r is None:
            r = self._read_partition(params, tp, info, max_bytes, min_one_message)
            if 0 < r.size <= INLINE_READ_BYTES and isinstance(r.records, FileSlice):
                try:
                    r.records = r.records.read_bytes()
                except OSError:
                    pass  # sent with sendfile, which drops the connection if it shrank
            memo[key] = r
        return r

    def _read_partition(
        self,
        params: FetchParams,
        tp: TopicPartition,
        info: PartitionFetchInfo,
        max_bytes: int,
        min_one_message: bool,
    ) -> FetchPartitionResult:
        try:
            if params.fetch_only_from_leader:
                p = self.leader_partition_or_error(tp, info.current_leader_epoch)
            else:
                p = self.replica_partition_or_error(tp, info.current_leader_epoch)
            plog = p.log
            assert plog is not None
            hw = plog.high_watermark
            lso = plog.last_stable_offset
            preferred = self._preferred_read_replica(p, params, info)
            if preferred >= 0:
                # KIP-392: no records, the consumer goes to the replica in its rack
                return FetchPartitionResult(
                    0,
                    hw,
                    lso,
                    plog.log_start_offset,
                    None,
                    None,
                    plog.log_end_offset,
                    0,
                    preferred,
                )
            if params.is_from_follower:
                max_offset = None
            elif params.isolation_level == READ_COMMITTED:
                max_offset = lso
            else:
                max_offset = hw
            data = plog.read(
                info.fetch_offset, max_bytes, max_offset=max_offset, min_one_message=min_one_message
            )
            # Kafka (fetch v3+): an incomplete first batch is replaced by an empty set, so the
            # request-level budget never hands a client a useless fragment
            records = b"" if data.first_entry_incomplete else data.records
            size = (
                len(records)
                if isinstance(records, bytes | bytearray)
                else int(getattr(records, "size", 0))
            )
            aborted = None
            if params.isolation_level == READ_COMMITTED and not params.is_from_follower:
                # Kafka's upper bound is the offset after the fetched data; the LSO is a
                # superset the client filters the same way
                aborted = (
                    [
                        (t.producer_id, t.first_offset)
                        for t in plog.collect_aborted_transactions(info.fetch_offset, lso)
                    ]
                    if size
                    else []
                )
            return FetchPartitionResult(
                0,
                hw,
                lso,
                plog.log_start_offset,
                records if size else None,
                aborted,
                plog.log_end_offset,
                size,
            )
        except OffsetOutOfRange:
            found = self.partitions.get(tp)
            plog = found.log if found else None
            return FetchPartitionResult(
                ErrorCode.offset_out_of_range,
                plog.high_watermark if plog else -1,
                plog.last_stable_offset if plog else -1,
                plog.log_start_offset if plog else -1,
            )
        except KafkaError as e:
            return FetchPartitionResult(int(e.code))
        except LogError as e:
            return FetchPartitionResult(e.error_code)

    def replica_partition_or_error(
        self, tp: TopicPartition, current_leader_epoch: int = -1
    ) -> Partition:
        """A partition hosted here as leader or follower (a KIP-392 consumer fetch)."""
        p = self.partitions.get(tp)
        if p is None or p.log is None:
            if tp in self.offline_partitions:
                raise KafkaError(ErrorCode.kafka_storage_error)
            raise KafkaError(self.not_hosted_error(tp))
        if current_leader_epoch >= 0:
            if current_leader_epoch < p.leader_epoch:
                raise KafkaError(ErrorCode.fenced_leader_epoch)
            if current_leader_epoch > p.leader_epoch:
                raise KafkaError(ErrorCode.unknown_leader_epoch)
        return p

    def _preferred_read_replica(
        self, p: Partition, params: FetchParams, info: PartitionFetchInfo
    ) -> int:
        """Kafka's RackAwareReplicaSelector, run by the leader: a replica in the consumer's
        rack that has the fetch offset (the leader itself if it is in that rack; else the
        most caught-up one); -1 for "fetch here"."""
        rack = params.client_rack
        if not rack or not self.config.rack_aware_selector or not p.is_leader:
            return -1
        if self.broker_rack(self.broker_id) == rack:
            return -1
        best, best_leo = -1, -1
        for r, rs in p.remote_replicas.items():
            if r not in p.isr or self.broker_rack(r) != rack:
                continue
            leo = rs.log_end_offset
            if (
                leo >= info.fetch_offset
                and rs.log_start_offset <= info.fetch_offset
                and leo > best_leo
            ):
                best, best_leo = r, leo
        return best

    def leader_throttled(self, tp: TopicPartition, replica_id: int) -> bool:
        """Kafka's isThrottled for a follower's fetch here: an out-of-sync replica of a
        partition whose leader replica is listed as throttled (the rate aside)."""
        p = self.partitions.get(tp)
        if p is None or p.log is None or replica_id in p.isr:
            return False
        listed = p.log.config.leader_replication_throttled_replicas
        return is_throttled_replica(listed, tp[1], self.broker_id)

    def follower_throttled(self, tp: TopicPartition) -> bool:
        """This broker is out of sync for ``tp`` and listed as a throttled follower."""
        p = self.partitions.get(tp)
        if p is None or p.log is None or self.broker_id in p.isr:
            return False
        listed = p.log.config.follower_replication_throttled_replicas
        return is_throttled_replica(listed, tp[1], self.broker_id)

    def read_from_local_log(
        self, params: FetchParams, infos: list[tuple[TopicPartition, PartitionFetchInfo]]
    ) -> list[tuple[TopicPartition, FetchPartitionResult]]:
        # as Kafka's ReplicaManager.readFromLog: a negative request or partition max_bytes
        # reaches the log read, which answers that partition UNKNOWN_SERVER_ERROR
        remaining = params.max_bytes
        min_one = True
        out = []
        quota = self.leader_quota if params.is_from_follower else None
        for tp, info in infos:
            if quota is not None and self.leader_throttled(tp, params.replica_id):
                if quota.is_exceeded():
                    quota.throttled += 1
                    # the HW and offsets as usual, no records (Kafka's shouldLeaderThrottle)
                    r = self.read_partition(params, tp, info, 0, False)
                    r.records, r.size = None, 0
                    out.append((tp, r))
                    continue
                r = self.read_partition(params, tp, info, min(info.max_bytes, remaining), min_one)
                quota.record(r.size)
            else:
                r = self.read_partition(params, tp, info, min(info.max_bytes, remaining), min_one)
            if r.size:
                min_one = False
            remaining = max(0, remaining - r.size)
            out.append((tp, r))
        return out

    def fetch_messages(
        self,
        params: FetchParams,
        infos: list[tuple[TopicPartition, PartitionFetchInfo]],
        respond: Callable[[list[tuple[TopicPartition, FetchPartitionResult]]], Any] | None = None,
    ) -> Any:
        """Read now, or park a DelayedFetch; the results or a future of them.

        With ``respond`` the return value (or the future's result) is
        ``respond(results)``: a parked fetch builds its response when it completes,
        with no task in between.
        """
        if params.is_from_follower:
            # a follower's fetch offset is its log end offset: it may move the HW
            for tp, info in infos:
                p = self.partitions.get(tp)
                if p is None or not p.is_leader:
                    continue
                if p.update_follower_fetch_state(
                    params.replica_id, info.fetch_offset, info.log_start_offset
                ):
                    self.on_high_watermark_change(tp)
                else:
                    # the follower's log start offset may have moved the low watermark
                    self.delete_records_purgatory.check_and_complete(tp)
                self._maybe_expand_isr(tp, p, params.replica_id)
        results = self.read_from_local_log(params, infos)
        total = sum(r.size for _, r in results)
        has_error = any(r.error or r.preferred_read_replica >= 0 for _, r in results)
        if params.max_wait_ms <= 0 or not infos or total >= params.min_bytes or has_error:
            return results if respond is None else respond(results)
        statuses = [(tp, FetchPartitionStatus(info.fetch_offset, info)) for tp, info in infos]
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        op = DelayedFetch(params.max_wait_ms, params, statuses, self, fut, respond)
        self.fetch_purgatory.try_complete_else_watch(op, [tp for tp, _ in infos])
        return fut

    # ---- offsets ------------------------------------------------------------
    def fetch_offset_for_timestamp(
        self,
        tp: TopicPartition,
        timestamp: int,
        isolation_level: int | None,
        current_leader_epoch: int = -1,
    ) -> tuple[int, int, int]:
        """ListOffsets for one partition: returns (offset, timestamp, leader_epoch)."""
        p = self.leader_partition_or_error(tp, current_leader_epoch)
        plog = p.log
        assert plog is not None
        if isolation_level == READ_COMMITTED:
            latest = plog.last_stable_offset
        elif isolation_level == READ_UNCOMMITTED:
            latest = plog.high_watermark
        else:
            latest = plog.log_end_offset  # replica / legacy
        epoch = p.leader_epoch
        if timestamp == LATEST_TIMESTAMP:
            return latest, -1, epoch
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return plog.log_start_offset, -1, epoch
        if timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
            return -1, -1, -1  # no tiered storage: Kafka's answer with remote storage off
        # every other lookup (max timestamp included) must land below the last fetchable offset
        found = plog.fetch_offset_by_timestamp(timestamp)
        if found is None or found[0] >= latest:
            return -1, -1, epoch
        return found[0], found[1], epoch

    def last_offset_for_leader_epoch(
        self, tp: TopicPartition, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch on the leader: (largest epoch <= ``leader_epoch``, its end
        offset), or (-1, -1) when unknown. Raises the leader-epoch errors."""
        p = self.leader_partition_or_error(tp, current_leader_epoch)
        assert p.log is not None
        return p.log.end_offset_for_epoch(leader_epoch)

    def delete_records(
        self, timeout_ms: int, offsets: dict[TopicPartition, int]
    ) -> (
        dict[TopicPartition, tuple[int, int]]
        | asyncio.Future[dict[TopicPartition, tuple[int, int]]]
    ):
        """Advance each log start offset on the leader, then wait (DelayedDeleteRecords)
        until every replica's log start offset — the low watermark — has followed.

        Results are ``{tp: (error_code, low_watermark)}``.
        """
        statuses: dict[TopicPartition, DeleteRecordsStatus] = {}
        for tp, offset in offsets.items():
            try:
                p = self.leader_partition_or_error(tp)
                plog = p.log
                assert plog is not None
                if "delete" not in plog.config.cleanup_policy:
                    raise KafkaError(ErrorCode.policy_violation, "cleanup.policy has no 'delete'")
                target = plog.high_watermark if offset == -1 else offset
                if target < 0 or target > plog.high_watermark:
                    raise KafkaError(ErrorCode.offset_out_of_range)
                plog.maybe_increment_log_start_offset(target)
                statuses[tp] = DeleteRecordsStatus(target)
            except KafkaError as e:
                statuses[tp] = DeleteRecordsStatus(-1, -1, int(e.code), pending=False)
            except LogError as e:
                statuses[tp] = DeleteRecordsStatus(-1, -1, e.error_code, pending=False)
        fut: asyncio.Future[dict[TopicPartition, tuple[int, int]]] = (
            asyncio.get_running_loop().create_future()
        )
        op = DelayedDeleteRecords(timeout_ms, statuses, self, fut)
        pending = [tp for tp, st in statuses.items() if st.pending]
        if not pending:
            return {tp: (st.error, st.low_watermark) for tp, st in statuses.items()}
        if self.delete_records_purgatory.try_complete_else_watch(op, pending) or fut.done():
            return fut.result()
        return fut

    def alter_replica_log_dirs(
        self, moves: dict[TopicPartition, str], rate: Callable[[], float]
    ) -> dict[TopicPartition, tuple[int, str | None]]:
        """Start moving each replica to its log dir (Kafka's alterReplicaLogDirs): per
        partition (error, message). The copy runs as a background task, ``rate`` bytes
        per second (replica.alter.log.dirs.io.max.bytes.per.second), then swaps the
        partition to the new log (:mod:`kafkalite.log.log_dir_move`)."""
        out: dict[TopicPartition, tuple[int, str | None]] = {}
        lm = self.log_manager
        for tp, dest in moves.items():
            try:
                fut = lm.begin_move(tp, Path(dest))
            except LogError as e:
                out[tp] = (int(e.error_code), str(e))
                continue
            out[tp] = (0, None)
            if fut is None:
                continue

            self._background.append(
                asyncio.get_running_loop().create_task(self._move_log(fut, rate))
            )
        return out

    async def _move_log(self, fut: FutureLog, rate: Callable[[], float]) -> None:

        lm, tp = self.log_manager, fut.tp
        lg = lm.get_log(*tp)
        if lg is None:
            return
        await copy_closed_segments(fut, lg.dir, lm.closed_segment_files(tp), rate)
        if fut.cancelled or lm.future_logs.get(tp) is not fut or lm.get_log(*tp) is not lg:
            return
        try:
            new = lm.complete_move(fut)
        except (OSError, LogError) as e:
            log.error("moving %s-%s to %s failed: %s", tp[0], tp[1], fut.dest, e)
            lm.abort_move(tp)
            return
        p = self.partitions.get(tp)
        if p is not None and p.log is lg:
            p.log = new

    async def stop_replication(self) -> None:
        """Stop the fetchers and the ISR tasks (before the logs close)."""
        for t in self._background:
            t.cancel()
        for t in [*self._background, *self._isr_writes]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._background.clear()
        await self.fetcher_manager.shutdown()

    def shutdown(self) -> None:
        for purg in (self.produce_purgatory, self.fetch_purgatory, self.delete_records_purgatory):
            purg.shutdown()
