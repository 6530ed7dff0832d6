"""An in-process cluster of real brokers for controller tests, and a raw controller client.

Brokers share one metadata store (an EmbeddedEnsemble, or a real ZooKeeper through
``zookeeper.connect``) and talk to each other over TCP exactly as separate
processes would. Stock clients reach them on their ephemeral ports.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from kafkalite.metadata import paths
from kafkalite.metadata.embedded import EmbeddedEnsemble
from kafkalite.protocol import inter_broker as ib
from kafkalite.server.broker import KafkaBroker
from kafkalite.testing import AsyncBroker

_I32 = struct.Struct(">i")


async def eventually(pred: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll ``pred`` (sync or async) until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)


class Cluster:
    """``n`` brokers (ids 0..n-1) on one metadata store, started one after another."""

    def __init__(
        self,
        tmp_path: Path,
        n: int = 3,
        *,
        zookeeper_connect: str | None = None,
        session_timeout_ms: int = 1500,
        **config: Any,
    ) -> None:
        self.tmp_path = tmp_path
        self.ensemble = None if zookeeper_connect else EmbeddedEnsemble(fsync=False)
        self.config: dict[str, Any] = {
            "zookeeper.session.timeout.ms": session_timeout_ms,
            **config,
        }
        if zookeeper_connect:
            self.config["zookeeper.connect"] = zookeeper_connect
        self.nodes = [
            AsyncBroker(
                tmp_path / f"b{i}", ensemble=self.ensemble, **{**self.config, "broker.id": i}
            )
            for i in range(n)
        ]
        #: brokers stopped by kill(); partitioned brokers still run but are not "live"
        self.stopped: set[int] = set()
        self.partitioned: set[int] = set()

    async def start(self) -> Cluster:
        for node in self.nodes:
            await node.start()
        return self

    async def stop(self) -> None:
        for i, node in enumerate(self.nodes):
            if i not in self.stopped and node.broker is not None:
                await node.stop(cleanup=False)
        if self.ensemble is not None:
            self.ensemble.close()

    async def __aenter__(self) -> Cluster:
        try:
            return await self.start()
        except BaseException:
            await self.stop()
            raise

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    # ---- views ------------------------------------------------------------------
    def broker(self, i: int) -> KafkaBroker:
        b = self.nodes[i].broker
        assert b is not None
        return b

    @property
    def live(self) -> list[KafkaBroker]:
        gone = self.stopped | self.partitioned
        return [self.broker(i) for i in range(len(self.nodes)) if i not in gone]

    def active_controllers(self) -> list[int]:
        return [b.broker_id for b in self.live if b.controller.is_active]

    def bootstrap(self, only: list[KafkaBroker] | None = None) -> str:
        return ",".join(
            f"{b.advertised[0].host}:{b.advertised[0].port}" for b in (only or self.live)
        )

    async def kill(self, i: int) -> None:
        """Stop broker ``i`` (its session closes: /controller and its registration vanish)."""
        self.stopped.add(i)
        await self.nodes[i].stop(cleanup=False)

    def partition(self, i: int) -> None:
        """Cut broker ``i`` off the embedded store: its session expires after the timeout."""
        self.partitioned.add(i)
        self.broker(i).store.pause()  # type: ignore[attr-defined]

    async def znode(self, path: str) -> bytes:
        raw, _ = await self.live[0].store.get(path)
        return raw

    async def controller_in_store(self) -> int:
        return int(json.loads(await self.znode(paths.CONTROLLER))["brokerid"])

    async def controller_epoch_in_store(self) -> int:
        return int(await self.znode(paths.CONTROLLER_EPOCH))


async def client_controller_id(bootstrap: str) -> int:
    """Metadata.controller_id as librdkafka (confluent-kafka AdminClient) sees it."""

    def ask() -> int:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
        return int(md.controller_id)

    return await asyncio.to_thread(ask)


async def call(
    port: int,
    api_key: int,
    version: int,
    request: Any,
    *,
    host: str = "127.0.0.1",
    client_id: str | None = "raw-controller",
) -> Any:
    """Send one inter-broker request on a fresh connection and return the decoded response."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(ib.request_frame(api_key, version, 1, client_id, request))
        await writer.drain()
        (size,) = _I32.unpack(await asyncio.wait_for(reader.readexactly(4), 10))
        cid, response = ib.parse_response_frame(api_key, version, await reader.readexactly(size))
        assert cid == 1
        return response
    finally:
        writer.close()
