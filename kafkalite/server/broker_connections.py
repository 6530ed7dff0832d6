"""Requests from this broker to another, over the inter-broker listener: the
coordinators' markers and verification, the share-state RPCs and the console's cluster
view each hold a :class:`BrokerConnectionPool` (one reused connection per broker)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import struct
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kafkalite.common import structs
from kafkalite.protocol import messages, sasl_client
from kafkalite.protocol.headers import skip_tagged_fields
from kafkalite.protocol.sasl_client import SaslClientCredentials

if TYPE_CHECKING:
    from kafkalite.server.metadata_cache import MetadataCache

__all__ = [
    "BrokerConnection",
    "BrokerConnectionPool",
    "list_offsets_body",
    "listener_endpoints",
]

log = logging.getLogger(__name__)

#: what a call to another broker raises when the connection or the broker fails
NETWORK_ERRORS = (OSError, EOFError, TimeoutError, asyncio.IncompleteReadError, ConnectionError)


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


class BrokerConnectionPool:
    """One :class:`BrokerConnection` per broker endpoint, reused from call to call (a
    broker that moved to another address gets a new one)."""

    def __init__(
        self,
        endpoint: Callable[[int], tuple[str, int] | None],
        ssl_context: ssl.SSLContext | None,
        sasl: SaslClientCredentials | None,
        timeout_s: float,
    ) -> None:
        self._endpoint = endpoint
        self._ssl = ssl_context
        self._sasl = sasl
        self.timeout_s = timeout_s
        self._connections: dict[tuple[int, str, int], BrokerConnection] = {}

    def __len__(self) -> int:
        return len(self._connections)

    def get(self, node: int) -> BrokerConnection | None:
        """The connection to broker ``node``; None when it has no endpoint on the listener."""
        ep = self._endpoint(node)
        if ep is None:
            return None
        key = (node, ep[0], ep[1])
        conn = self._connections.get(key)
        if conn is None:
            conn = self._connections[key] = BrokerConnection(ep[0], ep[1], self._ssl, self._sasl)
        return conn

    async def call(self, node: int, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """The response of broker ``node``; None when it has no endpoint, does not answer
        within the timeout or the connection fails (logged at debug: callers retry)."""
        conn = self.get(node)
        if conn is None:
            return None
        try:
            async with asyncio.timeout(self.timeout_s):
                return await conn.call(api_key, version, body)
        except NETWORK_ERRORS as e:
            log.debug("api %d to broker %d failed: %r", api_key, node, e)
            return None

    def close(self) -> None:
        for c in self._connections.values():
            try:
                c.close()
            except Exception:  # closing a broken transport: nothing left to do
                log.debug("closing the connection to %s:%d", c.host, c.port, exc_info=True)
        self._connections.clear()


def listener_endpoints(
    cache: MetadataCache, listener_name: str
) -> Callable[[int], tuple[str, int] | None]:
    """A broker's (host, port) on ``listener_name`` from the metadata cache's broker list."""

    def endpoint(node: int) -> tuple[str, int] | None:
        broker = cache.brokers.get(node)
        return broker.endpoints.get(listener_name) if broker is not None else None

    return endpoint


def list_offsets_body(tps: Iterable[tuple[str, int]], timestamp: int) -> dict[str, Any]:
    """A ListOffsets (v1+) request asking every partition of ``tps`` for ``timestamp``
    (-1 latest, i.e. the high watermark under read_uncommitted; -2 earliest), as a client
    would: no replica id, no leader epoch."""
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    return {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": t,
                "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                    for p in ps
                ],
            }
            for t, ps in by_topic.items()
        ],
    }
