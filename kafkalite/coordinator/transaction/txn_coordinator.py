"""The transaction coordinator (Kafka's TransactionCoordinator + TransactionStateManager).

Each transactional id belongs to one ``__transaction_state`` partition; the
broker leading that partition is its coordinator. Every state change is first
appended to that partition (acks=all, through the normal replica path, so it
replicates like any partition) and takes effect once the append succeeded;
while a write is in flight the id has a ``pending_state`` and other requests
for it get CONCURRENT_TRANSACTIONS.

Ending a transaction (Kafka's transactions V1 protocol, EndTxn v0-4): EndTxn writes
PrepareCommit/PrepareAbort and answers the producer; markers are then sent
(WriteTxnMarkers, over the Kafka protocol, to each partition's leader, this
broker included) and retried until every partition acknowledged; then
CompleteCommit/CompleteAbort is written. A coordinator that loads a partition
finishes the Prepare* transactions it finds there.

Transactions V2 (KIP-890 part 2, EndTxn v5): partitions join the transaction
implicitly (the leader of a partition the producer writes to with Produce v12+,
or the group coordinator of a TxnOffsetCommit v5, sends AddPartitionsToTxn v5
without ``verify_only``), and every EndTxn bumps the producer epoch before the
markers are written, so the markers fence any late write of the transaction.
Both protocols are served at once: each request's version says which one.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafkalite.common.types import TopicPartition
from kafkalite.coordinator.group.collaborators import ClusterMetadata, CreateTopics, Replicas
from kafkalite.coordinator.load_summary import LoadSummary
from kafkalite.coordinator.transaction.producer_id_manager import ProducerIdManager
from kafkalite.coordinator.transaction.txn_log import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TRANSACTION_STATE_TOPIC,
    CodecError,
    TxnMetadata,
    TxnState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import build_batch, iter_batches

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"


@dataclass(slots=True)
class TxnConfig:
    num_partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    segment_bytes: int = 104857600
    max_timeout_ms: int = 900000
    id_expiration_ms: int = 604800000
    abort_check_interval_ms: int = 10000
    id_expiration_check_interval_ms: int = 3600000
    load_buffer_size: int = 5242880
    request_timeout_ms: int = 30000
    marker_retry_backoff_ms: int = 100

    @classmethod
    def from_broker_config(cls, cfg: Any) -> TxnConfig:
        def get(key: str, default: int) -> int:
            try:
                v = cfg[key]
            except KeyError:
                return default
            return default if v is None else int(v)

        return cls(
            num_partitions=get("transaction.state.log.num.partitions", 50),
            replication_factor=get("transaction.state.log.replication.factor", 3),
            min_isr=get("transaction.state.log.min.isr", 2),
            segment_bytes=get("transaction.state.log.segment.bytes", 104857600),
            max_timeout_ms=get("transaction.max.timeout.ms", 900000),
            id_expiration_ms=get("transactional.id.expiration.ms", 604800000),
            abort_check_interval_ms=get(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000
            ),
            id_expiration_check_interval_ms=get(
                "transaction.remove.expired.transaction.cleanup.interval.ms", 3600000
            ),
            load_buffer_size=get("transaction.state.log.load.buffer.size", 5242880),
            request_timeout_ms=get("request.timeout.ms", 30000),
        )


class SendMarkers(Protocol):
    """WriteTxnMarkers for one transaction to the partitions' leaders: an error per partition."""

    def __call__(
        self,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: list[TopicPartition],
    ) -> Awaitable[dict[TopicPartition, int]]: ...


@dataclass(frozen=True, slots=True)
class _NewTopic:
    name: str
    num_partitions: int
    replication_factor: int
    configs: tuple[Any, ...]
    assignments: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class _Config:
    name: str
    value: str


@dataclass(slots=True)
class InitResult:
    error: int
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(slots=True)
class TxnListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(slots=True)
class CoordinatorMetrics:
    """Counters exported by the broker's metrics (Kafka's transaction coordinator sensors)."""

    commits: int = 0
    aborts: int = 0
    timed_out_aborts: int = 0
    fenced: int = 0
    markers_sent: int = 0
    marker_retries: int = 0
    expired_ids: int = 0
    #: (finished at, ms taken) of the last ``__transaction_state`` partition loads
    #: (Kafka's partition-load-time-max / -avg over their window)
    load_times: collections.deque[tuple[float, float]] = field(
        default_factory=lambda: collections.deque(maxlen=1024)
    )
    #: markers waiting for a retry because their partition has no known leader
    #: (Kafka's TransactionMarkerChannelManager UnknownDestinationQueueSize)
    unknown_destination_markers: int = 0


@dataclass(slots=True)
class _Partition:
    coordinator_epoch: int
    txns: dict[str, TxnMetadata] = field(default_factory=dict)


class TransactionCoordinator:
    def __init__(
        self,
        config: TxnConfig,
        clock_ms: Callable[[], int],
        metadata: ClusterMetadata,
        replicas: Replicas,
        create_topics: CreateTopics,
        producer_ids: ProducerIdManager,
        send_markers: SendMarkers,
    ) -> None:
        self.config = config
        self.clock_ms = clock_ms
        self.metadata = metadata
        self.replicas = replicas
        self._create_topics = create_topics
        self.producer_ids = producer_ids
        self.send_markers = send_markers
        self.owned: dict[int, _Partition] = {}
        self.loading: set[int] = set()
        self._load_tokens: dict[int, object] = {}
        self._load_summary = LoadSummary(log, "transactional ids", TRANSACTION_STATE_TOPIC)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._creating_topic: asyncio.Task[None] | None = None
        self.is_active = False
        self.metrics = CoordinatorMetrics()

    # ---- lifecycle ----------------------------------------------------------------
    def startup(self) -> None:
        rm = self.replicas
        rm.on_leadership_change.append(self.on_leadership_change)
        for tp, p in list(rm.partitions.items()):
            if tp[0] == TRANSACTION_STATE_TOPIC and p.is_leader:
                self.on_leadership_change(tp, True)
        self._spawn(self._periodic(self.config.abort_check_interval_ms, self.abort_timed_out))
        self._spawn(
            self._periodic(
                self.config.id_expiration_check_interval_ms, self.expire_transactional_ids
            )
        )
        self.is_active = True

    async def shutdown(self) -> None:
        self.is_active = False
        rm = self.replicas
        if self.on_leadership_change in rm.on_leadership_change:
            rm.on_leadership_change.remove(self.on_leadership_change)
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.owned.clear()
        self.loading.clear()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _periodic(self, interval_ms: int, fn: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(max(interval_ms, 10) / 1000)
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transaction coordinator: %s failed", fn.__name__)

    # ---- the state topic ---------------------------------------------------------
    @property
    def num_partitions(self) -> int:
        t = self.metadata.get_topic(TRANSACTION_STATE_TOPIC)
        if t is not None and t.partitions:
            return len(t.partitions)
        return self.config.num_partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    async def ensure_state_topic(self, timeout_s: float = 10.0) -> None:
        """Create ``__transaction_state`` on first use (FindCoordinator) and wait for leaders."""
        if self.metadata.get_topic(TRANSACTION_STATE_TOPIC) is not None:
            return
        if self._creating_topic is None or self._creating_topic.done():
            self._creating_topic = self._spawn(self._create_state_topic())
        with contextlib.suppress(asyncio.TimeoutError, Exception):
            await asyncio.wait_for(asyncio.shield(self._creating_topic), timeout_s)

    async def _create_state_topic(self) -> None:
        if self.metadata.get_topic(TRANSACTION_STATE_TOPIC) is None:
            live = self.metadata.alive_broker_ids()
            rf = max(1, min(self.config.replication_factor, len(live)))
            topic = _NewTopic(
                TRANSACTION_STATE_TOPIC,
                self.config.num_partitions,
                rf,
                (
                    _Config("cleanup.policy", "compact"),
                    _Config("compression.type", "uncompressed"),
                    _Config("min.insync.replicas", str(min(self.config.min_isr, rf))),
                    _Config("segment.bytes", str(self.config.segment_bytes)),
                    _Config("unclean.leader.election.enable", "false"),
                ),
            )
            [r] = await self._create_topics([topic])
            if r.error and r.error != ErrorCode.topic_already_exists:
                log.warning(
                    "creating %s failed: %s %s",
                    TRANSACTION_STATE_TOPIC,
                    ErrorCode(r.error).name,
                    r.message or "",
                )
                return
        await self.metadata.wait_for_topics([TRANSACTION_STATE_TOPIC], 10.0)

    def coordinator_for(self, transactional_id: str) -> int:
        t = self.metadata.get_topic(TRANSACTION_STATE_TOPIC)
        if t is None:
            return -1
        p = t.partitions.get(self.partition_for(transactional_id))
        if p is None or p.leader < 0 or p.leader not in self.metadata.brokers:
            return -1
        return p.leader

    def _leader_unknown(self, tp: TopicPartition) -> bool:
        t = self.metadata.get_topic(tp[0])
        p = t.partitions.get(tp[1]) if t is not None else None
        return p is None or p.leader < 0 or p.leader not in self.metadata.brokers

    # ---- loading ------------------------------------------------------------------
    def on_leadership_change(self, tp: TopicPartition, is_leader: bool) -> None:
        if tp[0] != TRANSACTION_STATE_TOPIC:
            return
        partition = tp[1]
        if is_leader:
            p = self.replicas.get_partition(tp)
            epoch = int(getattr(p, "leader_epoch", 0))
            owned = self.owned.get(partition)
            if owned is not None and owned.coordinator_epoch == epoch:
                return
            if partition in self.loading:
                return
            self.owned.pop(partition, None)
            token = object()
            self._load_tokens[partition] = token
            self._load_summary.started(len(self.loading))
            self.loading.add(partition)
            self._spawn(self._load(partition, epoch, token, time.monotonic()))
        else:
            self._load_tokens.pop(partition, None)
            self.loading.discard(partition)
            self.owned.pop(partition, None)

    async def _load(self, partition: int, epoch: int, token: object, started: float) -> None:
        txns: dict[str, TxnMetadata] = {}
        try:
            txns = await self._read_partition(partition, token)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed", TRANSACTION_STATE_TOPIC, partition)
        if self._load_tokens.get(partition) is not token:
            return
        self.loading.discard(partition)
        self.owned[partition] = _Partition(epoch, txns)
        now = time.monotonic()
        self.metrics.load_times.append((now, (now - started) * 1000.0))
        self._load_summary.finished(partition, len(txns), len(self.loading))
        # finish what the previous coordinator (or this broker before a crash) left half done
        for m in txns.values():
            if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                m.pending_state = (
                    TxnState.COMPLETE_COMMIT
                    if m.state == TxnState.PREPARE_COMMIT
                    else TxnState.COMPLETE_ABORT
                )
                self._spawn(self._complete(m, epoch))
            elif m.state == TxnState.PREPARE_EPOCH_FENCE:
                self._spawn(self._abort(m, fence=True))

    async def _read_partition(self, partition: int, token: object) -> dict[str, TxnMetadata]:
        txns: dict[str, TxnMetadata] = {}
        p = self.replicas.get_partition((TRANSACTION_STATE_TOPIC, partition))
        plog = p.log if p is not None else None
        if plog is None:
            return txns
        position = plog.log_start_offset
        end = plog.log_end_offset
        while position < end:
            raw = plog.read(
                position, self.config.load_buffer_size, max_offset=None, min_one_message=True
            ).read_bytes()
            if not raw:
                break
            next_position = position
            for header, records in iter_batches(raw):
                next_position = header.next_offset
                if header.is_control:
                    continue
                for rec in records:
                    if rec.offset < position or rec.key is None:
                        continue
                    try:
                        tid = decode_key(rec.key)
                        if rec.value is None:
                            txns.pop(tid, None)
                        else:
                            txns[tid] = decode_value(tid, rec.value)
                    except CodecError as e:
                        log.warning(
                            "skipping undecodable %s record at %d: %s",
                            TRANSACTION_STATE_TOPIC,
                            rec.offset,
                            e,
                        )
            if next_position <= position:
                break
            position = next_position
            await asyncio.sleep(0)
            if self._load_tokens.get(partition) is not token:
                raise asyncio.CancelledError
        return txns

    # ---- lookups ------------------------------------------------------------------
    def _status(self, transactional_id: str) -> int:
        if not transactional_id:
            return ErrorCode.invalid_request
        if not self.is_active:
            return ErrorCode.coordinator_not_available
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            return ErrorCode.coordinator_load_in_progress
        if partition not in self.owned:
            return ErrorCode.not_coordinator
        return 0

    def get(self, transactional_id: str) -> TxnMetadata | None:
        owned = self.owned.get(self.partition_for(transactional_id))
        return None if owned is None else owned.txns.get(transactional_id)

    def all_transactions(self) -> Iterable[TxnMetadata]:
        for p in list(self.owned.values()):
            yield from list(p.txns.values())

    # ---- writes -------------------------------------------------------------------
    async def _write(self, current: TxnMetadata, target: TxnMetadata) -> int:
        """Append ``target`` for the id; on success it becomes ``current``'s state."""
        tid = current.transactional_id
        partition = self.partition_for(tid)
        owned = self.owned.get(partition)
        if owned is None:
            current.pending_state = None
            return ErrorCode.not_coordinator
        epoch = owned.coordinator_epoch
        value = None if target.state == TxnState.DEAD else encode_value(target)
        batch = build_batch([(encode_key(tid), value)], timestamp_ms=self.clock_ms())
        tp = (TRANSACTION_STATE_TOPIC, partition)
        try:
            result: Any = self.replicas.append_records(
                self.config.request_timeout_ms, -1, {tp: bytearray(batch)}
            )
            if not isinstance(result, dict):
                result = await result
            error = int(result[tp].error)
        except Exception:
            log.exception("writing the state of transactional id %s failed", tid)
            error = ErrorCode.unknown_server_error
        if error:
            current.pending_state = None
            if error in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
                return ErrorCode.not_coordinator
            if error in (
                ErrorCode.unknown_topic_or_partition,
                ErrorCode.not_enough_replicas,
                ErrorCode.not_enough_replicas_after_append,
                ErrorCode.request_timed_out,
            ):
                return ErrorCode.coordinator_not_available
            return ErrorCode.unknown_server_error
        now_owned = self.owned.get(partition)
        if now_owned is None or now_owned.coordinator_epoch != epoch:
            current.pending_state = None
            return ErrorCode.not_coordinator
        current.apply(target)
        if target.state == TxnState.DEAD:
            now_owned.txns.pop(tid, None)
        return 0

    # ---- InitProducerId -------------------------------------------------------------
    async def handle_init_producer_id(
        self,
        transactional_id: str,
        txn_timeout_ms: int,
        expected_pid: int = NO_PRODUCER_ID,
        expected_epoch: int = NO_PRODUCER_EPOCH,
    ) -> InitResult:
        error = self._status(transactional_id)
        if error:
            return InitResult(error)
        if txn_timeout_ms <= 0 or txn_timeout_ms > self.config.max_timeout_ms:
            return InitResult(ErrorCode.invalid_transaction_timeout)
        m = self.get(transactional_id)
        if m is None:
            pid = await self.producer_ids.generate_producer_id()
            owned = self.owned.get(self.partition_for(transactional_id))
            if owned is None:
                return InitResult(ErrorCode.not_coordinator)
            m = owned.txns.setdefault(
                transactional_id,
                TxnMetadata(
                    transactional_id,
                    pid,
                    NO_PRODUCER_ID,
                    NO_PRODUCER_EPOCH,
                    NO_PRODUCER_EPOCH,
                    txn_timeout_ms,
                    TxnState.EMPTY,
                    txn_last_update_ms=self.clock_ms(),
                ),
            )
        if m.pending_state is not None:
            return InitResult(ErrorCode.concurrent_transactions)
        if expected_pid != NO_PRODUCER_ID and m.producer_epoch != NO_PRODUCER_EPOCH:
            # KIP-360: the producer says which id and epoch it had. Metadata created
            # just now (no epoch yet) accepts any, as Kafka's does: a producer
            # recovering from UNKNOWN_PRODUCER_ID, or a client naming 0/0 at first.
            if expected_pid == m.producer_id:
                if expected_epoch != m.producer_epoch and not (
                    expected_epoch == m.last_producer_epoch != NO_PRODUCER_EPOCH
                ):
                    return InitResult(ErrorCode.producer_fenced)
            elif expected_pid != m.last_producer_id:
                return InitResult(ErrorCode.producer_fenced)
            elif m.state not in (TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT):
                return InitResult(ErrorCode.concurrent_transactions)
            else:
                # a retry whose response was lost: the id moved on already
                return InitResult(0, m.producer_id, m.producer_epoch)
        if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return InitResult(ErrorCode.concurrent_transactions)
        if m.state in (TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE):
            # fence the previous producer: abort its transaction with a bumped epoch;
            # the new one retries (CONCURRENT_TRANSACTIONS) until the abort completes
            self.metrics.fenced += 1
            self._spawn(self._abort(m, fence=True))
            return InitResult(ErrorCode.concurrent_transactions)
        now = self.clock_ms()
        if m.producer_epoch >= MAX_EPOCH - 1:
            new_pid = await self.producer_ids.generate_producer_id()
            if m.pending_state is not None:
                return InitResult(ErrorCode.concurrent_transactions)
            target = m.copy_for_write(
                producer_id=new_pid,
                last_producer_id=m.producer_id,
                producer_epoch=0,
                last_producer_epoch=NO_PRODUCER_EPOCH,
            )
        else:
            target = m.copy_for_write(
                producer_epoch=m.producer_epoch + 1,
                last_producer_epoch=m.producer_epoch,
            )
        target.state = TxnState.EMPTY
        target.partitions = set()
        target.txn_timeout_ms = txn_timeout_ms
        target.txn_start_ms = -1
        target.txn_last_update_ms = now
        m.pending_state = TxnState.EMPTY
        error = await self._write(m, target)
        if error:
            return InitResult(error)
        return InitResult(0, m.producer_id, m.producer_epoch)

    # ---- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------
    def _check_producer(self, m: TxnMetadata | None, pid: int, epoch: int) -> int:
        if m is None or m.producer_id != pid:
            return ErrorCode.invalid_producer_id_mapping
        if m.producer_epoch != epoch:
            return ErrorCode.producer_fenced
        return 0

    def verify_partitions(
        self, transactional_id: str, pid: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """KIP-890 verification (AddPartitionsToTxn v4+ ``verify_only``): is each in the txn?"""
        parts = list(partitions)
        error = self._status(transactional_id)
        m = self.get(transactional_id)
        if not error:
            error = self._check_producer(m, pid, epoch)
        if error:
            return dict.fromkeys(parts, error)
        assert m is not None
        ok = m.state == TxnState.ONGOING
        return {
            tp: 0 if ok and tp in m.partitions else int(ErrorCode.invalid_txn_state) for tp in parts
        }

    def partitions_added(
        self, transactional_id: str, pid: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> bool:
        """Are these partitions in the producer's ongoing transaction already (no write needed)?"""
        m = self.get(transactional_id)
        return (
            not self._status(transactional_id)
            and m is not None
            and not self._check_producer(m, pid, epoch)
            and m.pending_state is None
            and m.state == TxnState.ONGOING
            and m.partitions.issuperset(partitions)
        )

    async def handle_add_partitions(
        self,
        transactional_id: str,
        pid: int,
        epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        client_txn_version: int | None = None,
    ) -> dict[TopicPartition, int]:
        """Add partitions to the transaction: from a V1 producer (AddPartitionsToTxn v0-3,
        AddOffsetsToTxn), or implicitly for a V2 one (``client_txn_version`` 2: its first
        Produce v12+ or TxnOffsetCommit v5 there, forwarded by the partition's leader or
        group coordinator as AddPartitionsToTxn v5 without ``verify_only``)."""
        parts = list(partitions)
        error = self._status(transactional_id)
        m = self.get(transactional_id)
        if not error:
            error = self._check_producer(m, pid, epoch)
        if error:
            return dict.fromkeys(parts, error)
        assert m is not None
        if m.pending_state is not None or m.state in (
            TxnState.PREPARE_COMMIT,
            TxnState.PREPARE_ABORT,
            TxnState.PREPARE_EPOCH_FENCE,
        ):
            return dict.fromkeys(parts, int(ErrorCode.concurrent_transactions))
        if m.state == TxnState.ONGOING and m.partitions.issuperset(parts):
            return dict.fromkeys(parts, 0)
        now = self.clock_ms()
        target = m.copy_for_write(
            state=TxnState.ONGOING,
            partitions=m.partitions | set(parts),
            txn_start_ms=m.txn_start_ms if m.state == TxnState.ONGOING else now,
            txn_last_update_ms=now,
        )
        if client_txn_version is not None and m.state != TxnState.ONGOING:
            target.client_txn_version = client_txn_version
        m.pending_state = TxnState.ONGOING
        error = await self._write(m, target)
        return dict.fromkeys(parts, error)

    def offsets_partition_for(self, group_id: str, num_offsets_partitions: int) -> TopicPartition:
        from kafkalite.coordinator.group.offset_codec import partition_for as group_partition

        return (OFFSETS_TOPIC, group_partition(group_id, num_offsets_partitions))

    # ---- EndTxn ---------------------------------------------------------------------
    async def handle_end_txn(
        self, transactional_id: str, pid: int, epoch: int, commit: bool
    ) -> int:
        """EndTxn v0-4 (transactions V1: the epoch stays)."""
        error = self._status(transactional_id)
        m = self.get(transactional_id)
        if not error:
            error = self._check_producer(m, pid, epoch)
        if error:
            return error
        assert m is not None
        if m.pending_state is not None:
            return ErrorCode.concurrent_transactions
        if m.state == TxnState.ONGOING:
            return await self._end(m, commit)
        if m.state == TxnState.COMPLETE_COMMIT:
            return 0 if commit else ErrorCode.invalid_txn_state
        if m.state == TxnState.COMPLETE_ABORT:
            return ErrorCode.invalid_txn_state if commit else 0
        if m.state == TxnState.PREPARE_COMMIT:
            return ErrorCode.concurrent_transactions if commit else ErrorCode.invalid_txn_state
        if m.state == TxnState.PREPARE_ABORT:
            return ErrorCode.invalid_txn_state if commit else ErrorCode.concurrent_transactions
        return ErrorCode.invalid_txn_state

    async def handle_end_txn_v2(
        self, transactional_id: str, pid: int, epoch: int, commit: bool
    ) -> InitResult:
        """EndTxn v5 (transactions V2, KIP-890 part 2): every end bumps the producer epoch
        (a fresh producer id once the epoch is exhausted), the markers carry the bumped
        epoch, so a late write of the old epoch is fenced on every partition; the
        producer learns its next id and epoch from the response. A retry names the epoch
        before the bump (Kafka's ``retryOnEpochBump`` / ``retryOnOverflow``)."""
        error = self._status(transactional_id)
        if error:
            return InitResult(error)
        m = self.get(transactional_id)
        if m is None:
            return InitResult(ErrorCode.invalid_producer_id_mapping)
        retry_on_overflow = (
            m.last_producer_id == pid and epoch == MAX_EPOCH - 1 and m.producer_epoch == 0
        )
        retry_on_bump = m.producer_epoch == epoch + 1
        if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            valid = retry_on_bump
        elif m.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            valid = retry_on_bump or retry_on_overflow or epoch == m.producer_epoch
        else:
            valid = epoch == m.producer_epoch
        is_retry = retry_on_bump or retry_on_overflow
        if m.producer_id != pid and not retry_on_overflow:
            return InitResult(ErrorCode.invalid_producer_id_mapping)
        if not valid:
            return InitResult(ErrorCode.producer_fenced)
        if m.pending_state is not None:
            return InitResult(ErrorCode.concurrent_transactions)
        done = InitResult(0, m.producer_id, m.producer_epoch)
        invalid = InitResult(ErrorCode.invalid_txn_state)
        if m.state == TxnState.ONGOING:
            return await self._end_v2(m, commit)
        if m.state == TxnState.COMPLETE_COMMIT:
            if commit:
                return done if is_retry else invalid
            return invalid if is_retry else await self._end_v2(m, False)
        if m.state == TxnState.COMPLETE_ABORT:
            if commit:
                return invalid
            return done if is_retry else await self._end_v2(m, False)
        if m.state == TxnState.EMPTY:
            return invalid if commit else await self._end_v2(m, False)
        if m.state == TxnState.PREPARE_COMMIT:
            return InitResult(ErrorCode.concurrent_transactions) if commit else invalid
        if m.state == TxnState.PREPARE_ABORT:
            return invalid if commit else InitResult(ErrorCode.concurrent_transactions)
        return invalid

    async def _end_v2(self, m: TxnMetadata, commit: bool) -> InitResult:
        next_pid = NO_PRODUCER_ID
        if m.producer_epoch >= MAX_EPOCH - 1:
            next_pid = await self.producer_ids.generate_producer_id()
            if m.pending_state is not None:
                return InitResult(ErrorCode.concurrent_transactions)
        error = await self._end(m, commit, bump=True, v2=True, next_producer_id=next_pid)
        if error:
            return InitResult(error)
        if m.next_producer_id != NO_PRODUCER_ID:
            return InitResult(0, m.next_producer_id, 0)
        return InitResult(0, m.producer_id, m.producer_epoch)

    async def _end(
        self,
        m: TxnMetadata,
        commit: bool,
        *,
        bump: bool = False,
        v2: bool = False,
        next_producer_id: int = NO_PRODUCER_ID,
    ) -> int:
        """Write PrepareCommit/PrepareAbort, then complete in the background."""
        now = self.clock_ms()
        changes: dict[str, object] = {
            "state": TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
            "txn_last_update_ms": now,
        }
        if v2:
            # transactions V2: the epoch goes up to MAX_EPOCH itself (the markers' epoch);
            # the producer then moves to next_producer_id at epoch 0
            changes["producer_epoch"] = m.producer_epoch + 1
            changes["last_producer_epoch"] = m.producer_epoch
            changes["next_producer_id"] = next_producer_id
            changes["client_txn_version"] = 2
            if m.state != TxnState.ONGOING:
                # an abort with nothing added (Empty / Complete*): only the epoch moves
                changes["partitions"] = set()
                changes["txn_start_ms"] = now
        elif bump and m.producer_epoch < MAX_EPOCH - 1:
            # fencing a V2 producer bumps twice (Kafka: the fence, then the V2 end), so
            # its EndTxn retry (one below the stored epoch) is fenced, not taken for a retry
            step = 2 if m.client_txn_version >= 2 and m.producer_epoch < MAX_EPOCH - 2 else 1
            changes["producer_epoch"] = m.producer_epoch + step
            changes["last_producer_epoch"] = m.producer_epoch + step - 1
        target = m.copy_for_write(**changes)
        m.pending_state = target.state
        error = await self._write(m, target)
        if error:
            return error
        owned = self.owned.get(self.partition_for(m.transactional_id))
        if owned is None:
            return ErrorCode.not_coordinator
        m.pending_state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        self._spawn(self._complete(m, owned.coordinator_epoch))
        return 0

    async def _abort(self, m: TxnMetadata, *, fence: bool) -> None:
        """Abort an open transaction with a bumped epoch (fencing or timeout)."""
        if m.pending_state is not None or m.state not in (
            TxnState.ONGOING,
            TxnState.PREPARE_EPOCH_FENCE,
        ):
            return
        error = await self._end(m, False, bump=True)
        if error:
            log.warning(
                "aborting the transaction of %s failed: %s",
                m.transactional_id,
                ErrorCode(error).name,
            )

    async def _complete(self, m: TxnMetadata, coordinator_epoch: int) -> None:
        """Send the markers until every partition took them, then write Complete*."""
        commit = m.state == TxnState.PREPARE_COMMIT
        remaining = sorted(m.partitions)
        backoff = self.config.marker_retry_backoff_ms / 1000
        while remaining:
            owned = self.owned.get(self.partition_for(m.transactional_id))
            if owned is None or owned.coordinator_epoch != coordinator_epoch:
                m.pending_state = None
                return  # no longer the coordinator: the next one finishes it
            try:
                errors = await self.send_markers(
                    m.producer_id, m.producer_epoch, commit, coordinator_epoch, remaining
                )
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("sending markers for %s failed", m.transactional_id)
                errors = dict.fromkeys(remaining, int(ErrorCode.unknown_server_error))
            left = []
            for tp in remaining:
                e = errors.get(tp, ErrorCode.unknown_server_error)
                if e == 0:
                    self.metrics.markers_sent += 1
                    continue
                if e == ErrorCode.unknown_topic_or_partition and (
                    self.metadata.get_topic(tp[0]) is None
                ):
                    continue  # the topic was deleted: nothing left to mark
                if e in (ErrorCode.invalid_producer_epoch, ErrorCode.producer_fenced):
                    log.warning(
                        "marker for %s on %s-%d refused (%s): a newer epoch wrote there",
                        m.transactional_id,
                        tp[0],
                        tp[1],
                        ErrorCode(e).name,
                    )
                    continue
                left.append(tp)
            remaining = left
            if remaining:
                self.metrics.marker_retries += 1
                unknown = sum(1 for tp in remaining if self._leader_unknown(tp))
                self.metrics.unknown_destination_markers += unknown
                try:
                    await asyncio.sleep(backoff)
                finally:
                    self.metrics.unknown_destination_markers -= unknown
        target = m.copy_for_write(
            state=TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
            partitions=set(),
            txn_last_update_ms=self.clock_ms(),
        )
        if m.next_producer_id != NO_PRODUCER_ID:
            # transactions V2 with the epoch exhausted: the producer goes on with a new id
            target.last_producer_id = m.producer_id
            target.producer_id = m.next_producer_id
            target.producer_epoch = 0
            target.last_producer_epoch = NO_PRODUCER_EPOCH
            target.next_producer_id = NO_PRODUCER_ID
        m.pending_state = target.state
        error = await self._write(m, target)
        if error:
            log.warning(
                "completing the transaction of %s failed: %s",
                m.transactional_id,
                ErrorCode(error).name,
            )
            return
        if commit:
            self.metrics.commits += 1
        else:
            self.metrics.aborts += 1

    # ---- timeouts and expiry ------------------------------------------------------
    async def abort_timed_out(self) -> int:
        """Abort transactions open longer than their timeout (bumping the epoch)."""
        now = self.clock_ms()
        n = 0
        for m in list(self.all_transactions()):
            if (
                m.state == TxnState.ONGOING
                and m.pending_state is None
                and m.txn_start_ms + m.txn_timeout_ms < now
            ):
                log.info(
                    "aborting the transaction of %s (producer %d): open longer than %d ms",
                    m.transactional_id,
                    m.producer_id,
                    m.txn_timeout_ms,
                )
                self.metrics.timed_out_aborts += 1
                await self._abort(m, fence=True)
                n += 1
        return n

    async def expire_transactional_ids(self) -> int:
        """Remove ids idle past transactional.id.expiration.ms (a tombstone in the log)."""
        now = self.clock_ms()
        n = 0
        for m in list(self.all_transactions()):
            if (
                m.pending_state is None
                and m.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
                and m.txn_last_update_ms + self.config.id_expiration_ms <= now
            ):
                m.pending_state = TxnState.DEAD
                if not await self._write(m, m.copy_for_write(state=TxnState.DEAD)):
                    n += 1
                    self.metrics.expired_ids += 1
        return n

    # ---- admin --------------------------------------------------------------------
    def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        min_duration_ms: int = -1,
        pattern: Callable[[str], bool] | None = None,
    ) -> list[TxnListing]:
        wanted_states = set(states)
        wanted_pids = set(producer_ids)
        now = self.clock_ms()
        out = []
        for m in self.all_transactions():
            name = m.state.kafka_name
            if wanted_states and name not in wanted_states:
                continue
            if wanted_pids and m.producer_id not in wanted_pids:
                continue
            if min_duration_ms >= 0 and (
                m.state != TxnState.ONGOING or now - m.txn_start_ms < min_duration_ms
            ):
                continue
            if pattern is not None and not pattern(m.transactional_id):
                continue
            out.append(TxnListing(m.transactional_id, m.producer_id, name))
        return out

    async def wait_idle(self, transactional_id: str, timeout_s: float = 10.0) -> None:
        """Tests and the CLI: wait until the id has no write or marker in flight."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while asyncio.get_running_loop().time() < deadline:
            m = self.get(transactional_id)
            if m is None or m.pending_state is None:
                return
            await asyncio.sleep(0.01)


__all__ = [
    "CoordinatorMetrics",
    "InitResult",
    "SendMarkers",
    "TransactionCoordinator",
    "TxnConfig",
    "TxnListing",
]
