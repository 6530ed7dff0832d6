"""WriteTxnMarkers from the transaction coordinator to partition leaders, over TCP.

Kafka's TransactionMarkerChannelManager sends markers through the broker's
inter-broker network client, to every leader this broker included. This one
does the same: one connection per leader on the inter-broker listener, one
request at a time per connection; the coordinator retries partitions that
failed (leader moved, connection lost) until each has acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections import defaultdict
from typing import TYPE_CHECKING

from kafkalite.common.types import TopicPartition
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.sasl_client import SaslClientCredentials
from kafkalite.server.broker_connections import BrokerConnectionPool, listener_endpoints

if TYPE_CHECKING:
    from kafkalite.server.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1


class TxnMarkerSender:
    """The coordinator's ``send_markers``: groups partitions by leader, one request each."""

    def __init__(
        self,
        metadata_cache: MetadataCache,
        listener_name: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        request_timeout_ms: int = 30000,
        sasl: SaslClientCredentials | None = None,
    ) -> None:
        self.cache = metadata_cache
        self._pool = BrokerConnectionPool(
            listener_endpoints(metadata_cache, listener_name),
            ssl_context,
            sasl,
            request_timeout_ms / 1000,
        )
        self.requests_sent = 0

    def _leader(self, tp: TopicPartition) -> int:
        t = self.cache.get_topic(tp[0])
        if t is None:
            return -1
        p = t.partitions.get(tp[1])
        return -1 if p is None else p.leader

    async def __call__(
        self,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, int]:
        errors: dict[TopicPartition, int] = {}
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in partitions:
            if self.cache.get_topic(tp[0]) is None:
                errors[tp] = ErrorCode.unknown_topic_or_partition
                continue
            leader = self._leader(tp)
            if leader < 0:
                errors[tp] = ErrorCode.not_leader_or_follower
            else:
                by_leader[leader].append(tp)
        results = await asyncio.gather(
            *(
                self._send(leader, producer_id, producer_epoch, committed, coordinator_epoch, tps)
                for leader, tps in by_leader.items()
            )
        )
        for r in results:
            errors.update(r)
        return errors

    async def _send(
        self,
        leader: int,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        tps: list[TopicPartition],
    ) -> dict[TopicPartition, int]:
        if self._pool.get(leader) is None:
            return dict.fromkeys(tps, int(ErrorCode.not_leader_or_follower))
        by_topic: dict[str, list[int]] = defaultdict(list)
        for t, p in tps:
            by_topic[t].append(p)
        body = {
            "markers": [
                {
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "transaction_result": committed,
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
                    "coordinator_epoch": coordinator_epoch,
                }
            ]
        }
        resp = await self._pool.call(
            leader, ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body
        )
        if resp is None:
            return dict.fromkeys(tps, int(ErrorCode.network_exception))
        self.requests_sent += 1
        out: dict[TopicPartition, int] = {}
        for marker in resp.markers:
            for t in marker.topics:
                for p in t.partitions:
                    out[(t.name, int(p.partition_index))] = int(p.error_code)
        for tp in tps:
            out.setdefault(tp, int(ErrorCode.unknown_server_error))
        return out

    async def close(self) -> None:
        self._pool.close()
