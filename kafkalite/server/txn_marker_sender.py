"""WriteTxnMarkers from the transaction coordinator to partition leaders, over TCP.

Kafka's TransactionMarkerChannelManager sends markers through the broker's
inter-broker network client, to every leader this broker included. This one
does the same: one connection per leader on the inter-broker listener, one
request at a time per connection; the coordinator retries partitions that
failed (leader moved, connection lost) until each has acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
import struct
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from kafkalite.common import structs
from kafkalite.common.types import TopicPartition
from kafkalite.protocol import messages, sasl_client
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.headers import skip_tagged_fields
from kafkalite.protocol.sasl_client import SaslClientCredentials

if TYPE_CHECKING:
    from kafkalite.server.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1


class BrokerConnection:
    def __init__(
        self,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None,
        sasl: SaslClientCredentials | None = None,
    ) -> None:
        self.host, self.port, self.ssl_context = host, port, ssl_context
        self.sasl = sasl
        self.lock = asyncio.Lock()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = itertools.count(1)

    async def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        async with self.lock:
            try:
                return await self._call(api_key, version, body)
            except BaseException:
                self.close()
                raise

    async def _call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        if self._writer is None:
            self._reader, self._writer = await sasl_client.open_connection(
                self.host, self.port, ssl=self.ssl_context, sasl=self.sasl
            )
        assert self._reader is not None
        req_cls = messages.request_type(api_key, version)
        flexible = bool(req_cls.__flexible__)  # type: ignore[attr-defined]
        cid = next(self._correlation) & 0x7FFFFFFF
        client_id = b"kafkalite-txn-coordinator"
        header = struct.pack(">hhih", api_key, version, cid, len(client_id)) + client_id
        if flexible:
            header += b"\x00"
        payload = header + messages.encode(messages.build(req_cls, body))
        self._writer.write(structs.I32.pack(len(payload)) + payload)
        await self._writer.drain()
        (size,) = structs.I32.unpack(await self._reader.readexactly(4))
        frame = await self._reader.readexactly(size)
        got = structs.I32.unpack_from(frame, 0)[0]
        if got != cid:
            raise ConnectionError(f"correlation id {got}, expected {cid}")
        pos = skip_tagged_fields(frame, 4) if flexible else 4
        return messages.decode_response(api_key, version, frame, pos)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


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
        self.sasl = sasl
        self.listener_name = listener_name
        self.ssl_context = ssl_context
        self.request_timeout_s = request_timeout_ms / 1000
        self._connections: dict[tuple[int, str, int], BrokerConnection] = {}
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
        broker = self.cache.brokers.get(leader)
        endpoint = broker.endpoints.get(self.listener_name) if broker is not None else None
        if endpoint is None:
            return dict.fromkeys(tps, int(ErrorCode.not_leader_or_follower))
        key = (leader, endpoint[0], endpoint[1])
        conn = self._connections.get(key)
        if conn is None:
            conn = self._connections[key] = BrokerConnection(
                endpoint[0], endpoint[1], self.ssl_context, self.sasl
            )
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
        try:
            async with asyncio.timeout(self.request_timeout_s):
                resp = await conn.call(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body)
        except (OSError, EOFError, TimeoutError, asyncio.IncompleteReadError, ConnectionError) as e:
            log.debug("WriteTxnMarkers to broker %d failed: %r", leader, e)
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
        for c in self._connections.values():
            with contextlib.suppress(Exception):
                c.close()
        self._connections.clear()
