"""Shared harness for the metadata tests: backends, a recording callback, waits."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from kafkalite.metadata import (
    EmbeddedEnsemble,
    EmbeddedStore,
    MetadataStore,
    WatchedEvent,
    ZooKeeperStore,
)
from kafkalite.testing.zookeeper import ZooKeeperServer


class Backend:
    """Opens sessions on one isolated namespace of a backend."""

    name = ""

    def __init__(self) -> None:
        self.stores: list[MetadataStore] = []

    async def connect(self, session_timeout_ms: int = 10000) -> MetadataStore:
        raise NotImplementedError

    async def expire(self, store: MetadataStore) -> None:
        assert isinstance(store, EmbeddedStore | ZooKeeperStore)
        await store.expire()

    async def aclose(self) -> None:
        for store in self.stores:
            await store.close()


class EmbeddedBackend(Backend):
    name = "embedded"

    def __init__(self) -> None:
        super().__init__()
        self.ensemble = EmbeddedEnsemble()

    async def connect(self, session_timeout_ms: int = 10000) -> MetadataStore:
        store = self.ensemble.connect(session_timeout_ms)
        self.stores.append(store)
        return store

    async def aclose(self) -> None:
        await super().aclose()
        self.ensemble.close()


class ZooKeeperBackend(Backend):
    name = "zookeeper"

    def __init__(self, server: ZooKeeperServer) -> None:
        super().__init__()
        self.server = server
        self.chroot = f"/test-{uuid.uuid4().hex[:12]}"

    async def connect(self, session_timeout_ms: int = 10000) -> MetadataStore:
        store = await ZooKeeperStore.open(
            self.server.connect_string + self.chroot, session_timeout_ms=session_timeout_ms
        )
        self.stores.append(store)
        return store


class Recorder:
    """A watch/state callback that records what it gets and can be awaited."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._changed = asyncio.Event()

    def __call__(self, item: Any) -> None:
        self.items.append(item)
        self._changed.set()

    async def wait(self, count: int = 1, timeout: float = 10.0) -> list[Any]:
        async def until() -> None:
            while len(self.items) < count:
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(until(), timeout)
        return self.items

    @property
    def events(self) -> list[WatchedEvent]:
        return [i for i in self.items if isinstance(i, WatchedEvent)]


async def wait_for(predicate: Callable[[], Any], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


async def barrier(store: MetadataStore, path: str = "/__barrier") -> None:
    """Wait until every watch event caused before now has been delivered to ``store``.

    Both backends deliver a session's events in order, so a fresh event on a sentinel
    znode arriving means all earlier ones did.
    """
    rec = Recorder()
    if await store.exists(path) is None:
        await store.create(path)
    await store.exists(path, watch=rec)
    await store.set(path, b"")
    await rec.wait(1)


class TcpProxy:
    """A loopback TCP proxy that can cut the network between clients and a server.

    ``cut()`` aborts every proxied connection and refuses new ones until
    ``restore()``: a clean, bounded network partition for tests.
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._transports: set[asyncio.BaseTransport] = set()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._transports |= {writer.transport, up_writer.transport}

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                dst.transport.abort()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        self._transports -= {writer.transport, up_writer.transport}

    async def cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for transport in list(self._transports):
            transport.abort()  # type: ignore[attr-defined]
        self._transports.clear()

    async def restore(self) -> None:
        if self._server is None:
            await self.start()

    async def close(self) -> None:
        await self.cut()
