"""KIP-890 part 1: a partition leader verifies a transaction before its first batch.

Before appending the first transactional batch of a producer to a partition
(no transaction of that producer is open there), the leader asks the
transaction coordinator whether the partition is part of the producer's
ongoing transaction: AddPartitionsToTxn v4 with ``verify_only``, sent over the
Kafka protocol to the coordinator's broker, or answered in process when the
coordinator is this broker (Kafka's AddPartitionsToTxnManager). A late write
of an aborted or timed-out transaction is so refused instead of opening a
transaction nobody will close (a "hanging" transaction holding the LSO back).

Errors for the producer (Kafka's mapping): the coordinator being unavailable,
moving or busy is NOT_ENOUGH_REPLICAS (retriable for every producer version);
a partition not in the transaction is INVALID_TXN_STATE; a fenced epoch is
INVALID_PRODUCER_EPOCH.

``transaction.partition.verification.enable`` (default true) turns it off.

Transactions V2 (KIP-890 part 2): a Produce v12+ (or a TxnOffsetCommit v5) adds
the partition to the transaction instead of verifying it (AddPartitionsToTxn v5
without ``verify_only``): the producer sends no AddPartitionsToTxn itself. That
path runs whatever the verification setting, since the transaction needs it.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kafkalite.common.types import TopicPartition
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.sasl_client import SaslClientCredentials
from kafkalite.server.broker_connections import BrokerConnectionPool, listener_endpoints

if TYPE_CHECKING:
    from kafkalite.coordinator.transaction.txn_coordinator import TransactionCoordinator
    from kafkalite.server.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

_RETRIABLE = {
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.concurrent_transactions,
    ErrorCode.network_exception,
    ErrorCode.request_timed_out,
}


def produce_error(code: int) -> int:
    """What a failed verification tells the producer."""
    if code == 0:
        return 0
    if code in _RETRIABLE:
        return int(ErrorCode.not_enough_replicas)
    if code in (ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch):
        return int(ErrorCode.invalid_producer_epoch)
    if code == ErrorCode.invalid_producer_id_mapping:
        return int(ErrorCode.invalid_producer_id_mapping)
    return int(ErrorCode.invalid_txn_state)


class TxnVerifier:
    def __init__(
        self,
        broker_id: int,
        coordinator: TransactionCoordinator,
        metadata_cache: MetadataCache,
        listener_name: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        request_timeout_ms: int = 30000,
        enabled: bool = True,
        sasl: SaslClientCredentials | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.coordinator = coordinator
        self.cache = metadata_cache
        self.enabled = enabled
        self._connections = BrokerConnectionPool(
            listener_endpoints(metadata_cache, listener_name),
            ssl_context,
            sasl,
            request_timeout_ms / 1000,
        )
        #: Kafka's AddPartitionsToTxnManager VerificationTimeMs (a histogram, as
        #: ApiStats': slot = bit length of the µs) and VerificationFailureRate
        self.time_slots = [0] * 64
        self.time_s = 0.0
        self.failures = 0

    def verify(
        self,
        transactional_id: str,
        pid: int,
        epoch: int,
        partitions: list[TopicPartition],
        *,
        add: bool = False,
        errors_for: Callable[[int], int] = produce_error,
    ) -> dict[TopicPartition, int] | Awaitable[dict[TopicPartition, int]]:
        """Errors per partition (``errors_for`` maps the coordinator's codes; Produce's by
        default): at once when this broker is the coordinator and no write is needed (so
        the caller appends in the same step, in request order), else an awaitable.
        ``add``: transactions V2, add the partitions rather than only verify them.
        Timed and counted as Kafka's AddPartitionsToTxnManager metrics."""
        started = time.perf_counter()
        leader = self.coordinator.coordinator_for(transactional_id)
        if leader == self.broker_id:
            tc = self.coordinator
            if add and not tc.partitions_added(transactional_id, pid, epoch, partitions):
                return self._timed_async(
                    started, self._local_add(transactional_id, pid, epoch, partitions, errors_for)
                )
            errors = tc.verify_partitions(transactional_id, pid, epoch, partitions)
            return self._timed(started, {tp: errors_for(e) for tp, e in errors.items()})
        if leader < 0:
            return self._timed(
                started,
                dict.fromkeys(partitions, errors_for(ErrorCode.coordinator_not_available)),
            )
        return self._timed_async(
            started,
            self._remote(leader, transactional_id, pid, epoch, partitions, add, errors_for),
        )

    def _timed(
        self, started: float, errors: dict[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        d = time.perf_counter() - started
        self.time_slots[int(d * 1e6).bit_length()] += 1
        self.time_s += d
        if any(errors.values()):
            self.failures += 1
        return errors

    async def _timed_async(
        self, started: float, pending: Awaitable[dict[TopicPartition, int]]
    ) -> dict[TopicPartition, int]:
        return self._timed(started, await pending)

    async def _local_add(
        self,
        transactional_id: str,
        pid: int,
        epoch: int,
        partitions: list[TopicPartition],
        errors_for: Callable[[int], int],
    ) -> dict[TopicPartition, int]:
        errors = await self.coordinator.handle_add_partitions(
            transactional_id, pid, epoch, partitions, client_txn_version=2
        )
        return {tp: errors_for(e) for tp, e in errors.items()}

    async def _remote(
        self,
        leader: int,
        transactional_id: str,
        pid: int,
        epoch: int,
        partitions: list[TopicPartition],
        add: bool,
        errors_for: Callable[[int], int],
    ) -> dict[TopicPartition, int]:
        unavailable = errors_for(ErrorCode.coordinator_not_available)
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        body: dict[str, Any] = {
            "transactions": [
                {
                    "transactional_id": transactional_id,
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "verify_only": not add,
                    "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                }
            ]
        }
        resp = await self._connections.call(
            leader, ApiKey.ADD_PARTITIONS_TO_TXN, 5 if add else 4, body
        )
        if resp is None:  # no endpoint, no answer or the connection failed
            return dict.fromkeys(partitions, unavailable)
        out: dict[TopicPartition, int] = {}
        if int(resp.error_code):
            return dict.fromkeys(partitions, errors_for(int(resp.error_code)))
        for txn in resp.results_by_transaction:
            for t in txn.topic_results:
                for p in t.results_by_partition:
                    out[(t.name, int(p.partition_index))] = errors_for(int(p.partition_error_code))
        return {tp: out.get(tp, errors_for(ErrorCode.invalid_txn_state)) for tp in partitions}

    async def close(self) -> None:
        self._connections.close()
