"""An in-process cluster of real brokers for controller tests, and helpers to observe it.

Brokers share one metadata store (an EmbeddedEnsemble, or a real ZooKeeper through
``zookeeper.connect``) and talk to each other over TCP exactly as separate
processes would. Stock clients reach them on their ephemeral ports. The test acts
as an admin tool through its own store session (``cluster.admin``), and every
broker's accepted controller requests are recorded (``cluster.received[i]``) by
wrapping, not replacing, the broker's handlers.
"""

from __future__ import annotations

import asyncio
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.embedded_store import EmbeddedEnsemble
from kafkalite.metadata.kafka_zk_client import parse_controller_id
from kafkalite.metadata.store import MetadataStore, NoNodeError
from kafkalite.metadata.zookeeper import ZooKeeperStore
from kafkalite.protocol import inter_broker as ib
from kafkalite.server.broker import KafkaBroker
from kafkalite.testing import AsyncBroker
from kafkalite.testing.embedded_broker import _make_config
from kafkalite.testing.faults import Delay
from kafkalite.testing.in_process_cluster import _crash

_I32 = struct.Struct(">i")

TopicPartition = tuple[str, int]

#: what the tests configure unless they say otherwise: a short session timeout, no
#: surprise rebalances, and controlled shutdown that gives up fast
CONTROLLER_TEST_DEFAULTS: dict[str, Any] = {
    "auto.leader.rebalance.enable": False,
    "controlled.shutdown.max.retries": 2,
    "controlled.shutdown.retry.backoff.ms": 100,
}


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


@dataclass(slots=True)
class Received:
    """One controller request a broker accepted (after its epoch fencing)."""

    api: str  # LeaderAndIsr, UpdateMetadata, StopReplica
    controller_epoch: int
    partitions: dict[TopicPartition, dict[str, Any]] = field(default_factory=dict)
    deleted_topics: list[str] = field(default_factory=list)
    live_brokers: list[int] = field(default_factory=list)
    delete: bool | None = None


def spy(broker: KafkaBroker, log: list[Received]) -> None:
    """Record what ``broker`` applies of LeaderAndIsr / UpdateMetadata / StopReplica.

    Installed before the broker starts: the replica manager is created during
    start(), so it is wrapped as soon as it exists, before the listeners open."""
    start_listeners = broker.socket_server.start

    async def spy_then_start_listeners() -> None:
        _spy(broker, log)
        await start_listeners()

    broker.socket_server.start = spy_then_start_listeners  # type: ignore[method-assign]


def _spy(broker: KafkaBroker, log: list[Received]) -> None:
    rm, cache = broker.replica_manager, broker.metadata_cache
    lair, um, stop = rm.become_leader_or_follower, cache.update_metadata, rm.stop_replicas

    async def handle_leader_and_isr(
        controller_id: int, epoch: int, states: list[Any], live_leaders: Any = None
    ) -> Any:
        log.append(
            Received("LeaderAndIsr", epoch, {(s["topic"], s["partition"]): s for s in states})
        )
        return await lair(controller_id, epoch, states, live_leaders)

    async def handle_update_metadata(
        controller_id: int, epoch: int, states: list[Any], live: list[Any], deleted: list[str]
    ) -> Any:
        log.append(
            Received(
                "UpdateMetadata",
                epoch,
                {(s["topic"], s["partition"]): s for s in states},
                list(deleted),
                sorted(int(b["id"]) for b in live),
            )
        )
        return await um(controller_id, epoch, states, live, deleted)

    async def handle_stop_replica(
        epoch: int, partitions: list[TopicPartition], delete: bool
    ) -> Any:
        log.append(
            Received("StopReplica", epoch, {tp: {} for tp in partitions}, delete=bool(delete))
        )
        return await stop(epoch, partitions, delete)

    rm.become_leader_or_follower = handle_leader_and_isr  # type: ignore[method-assign]
    cache.update_metadata = handle_update_metadata  # type: ignore[method-assign]
    rm.stop_replicas = handle_stop_replica  # type: ignore[method-assign]


class Cluster:
    """``n`` brokers (ids 0..n-1) on one metadata store, started one after another
    (so broker 0 is the first controller)."""

    def __init__(
        self,
        tmp_path: Path,
        n: int = 3,
        *,
        zookeeper_connect: str | None = None,
        session_timeout_ms: int | None = None,
        replication: bool = False,
        **config: Any,
    ) -> None:
        if session_timeout_ms is None:
            # a real ZooKeeper connection must survive a loaded machine's scheduling
            # hiccups (kazoo drops it after 2/3 of the timeout without a ping answer)
            session_timeout_ms = 6000 if zookeeper_connect else 1500
        self.tmp_path = tmp_path
        #: False: every follower fetch is held at its leader (replication paused), so
        #: the ISR changes only by the controller's and the test's own writes, which
        #: these controller tests observe step by step
        self.replication = replication
        self.zookeeper_connect = zookeeper_connect
        self.ensemble = None if zookeeper_connect else EmbeddedEnsemble(fsync=False)
        self.session_timeout_ms = session_timeout_ms
        self.config: dict[str, Any] = {
            **CONTROLLER_TEST_DEFAULTS,
            "zookeeper.session.timeout.ms": session_timeout_ms,
            **config,
        }
        if zookeeper_connect:
            self.config["zookeeper.connect"] = zookeeper_connect
        self.nodes = [self._node(i) for i in range(n)]
        #: brokers killed or stopped; partitioned brokers still run but are not "live"
        self.stopped: set[int] = set()
        self.partitioned: set[int] = set()
        self.received: dict[int, list[Received]] = {i: [] for i in range(n)}
        self.admin: MetadataStore = None  # type: ignore[assignment]

    def _node(self, i: int, **overrides: Any) -> AsyncBroker:
        node = AsyncBroker(
            self.tmp_path / f"b{i}",
            ensemble=self.ensemble,
            **{**self.config, "broker.id": i, **overrides},
        )
        if not self.replication:
            node.faults.add(
                "FETCH", Delay(None), when=lambda _ctx, req: req.replica_id >= 0, times=None
            )
        return node

    async def start(self, *, concurrently: bool = False) -> Cluster:
        """Start every broker, one after another (broker 0 is then the first controller)
        or ``concurrently``, as a cluster's first start often is."""
        if self.ensemble is not None:
            self.admin = self.ensemble.connect(30000)
        else:
            assert self.zookeeper_connect is not None
            self.admin = await ZooKeeperStore.open(self.zookeeper_connect, session_timeout_ms=30000)
        if concurrently:
            await asyncio.gather(*(self._start_node(i) for i in range(len(self.nodes))))
            return self
        for i in range(len(self.nodes)):
            await self._start_node(i)
        return self

    async def _start_node(self, i: int) -> None:
        """AsyncBroker.start, with the request spy in place before the broker starts."""
        node = self.nodes[i]
        broker = KafkaBroker(
            _make_config(node.data_dir, node.overrides), ensemble=node.ensemble, peers=node.peers
        )
        node.broker = broker
        node.faults.attach(broker)
        spy(broker, self.received[i])
        try:
            await broker.start()
        except BaseException:
            await broker.stop()
            raise

    async def stop(self) -> None:
        # the controller last, so that no election runs while the others go
        order = sorted(
            range(len(self.nodes)),
            key=lambda i: (
                i not in self.stopped
                and (b := self.nodes[i].broker) is not None
                and b.controller is not None
                and b.controller.is_active,
                i,
            ),
        )
        for i in order:
            node = self.nodes[i]
            if i not in self.stopped and node.broker is not None:
                if i in self.partitioned:
                    await _crash(node.broker)
                else:
                    await node.stop(cleanup=False)
        if self.admin is not None:
            await self.admin.close()
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
    def live_ids(self) -> list[int]:
        gone = self.stopped | self.partitioned
        return [i for i in range(len(self.nodes)) if i not in gone]

    @property
    def live(self) -> list[KafkaBroker]:
        return [self.broker(i) for i in self.live_ids]

    def active_controllers(self) -> list[int]:
        return [b.broker_id for b in self.live if b.controller.is_active]

    def controller(self) -> KafkaBroker:
        [c] = self.active_controllers()
        return self.broker(c)

    async def wait_for_controller(self, *, not_: int | None = None, timeout: float = 10.0) -> int:
        """Until one live broker is active controller (not ``not_``) and all live brokers know it."""

        def ok() -> int | None:
            actives = self.active_controllers()
            if len(actives) != 1 or actives[0] == not_:
                return None
            c = actives[0]
            if all(b.metadata_cache.controller_id == c for b in self.live):
                return c + 1  # truthy for broker 0 too
            return None

        return int(await eventually(ok, timeout)) - 1

    def bootstrap(self, only: list[KafkaBroker] | None = None) -> str:
        return ",".join(
            f"{b.advertised[0].host}:{b.advertised[0].port}" for b in (only or self.live)
        )

    # ---- failures ---------------------------------------------------------------
    async def kill(self, i: int) -> None:
        """Broker ``i`` dies (no controlled shutdown): its session ends at once."""
        self.stopped.add(i)
        await _crash(self.broker(i))

    async def shutdown(self, i: int) -> None:
        """A clean stop, with controlled shutdown if enabled."""
        self.stopped.add(i)
        await self.nodes[i].stop(cleanup=False)

    async def restart(self, i: int, **overrides: Any) -> KafkaBroker:
        """Start a stopped or killed broker again on its data dir (a new broker epoch)."""
        if overrides:
            self.nodes[i] = self._node(i, **overrides)
        self.received[i] = []
        await self._start_node(i)
        self.stopped.discard(i)
        return self.broker(i)

    def partition(self, i: int) -> None:
        """Cut broker ``i`` off the embedded store: its session expires after the timeout."""
        self.partitioned.add(i)
        self.broker(i).store.pause()  # type: ignore[attr-defined]

    # ---- the store, as an admin tool sees it ---------------------------------------
    async def znode(self, path: str) -> bytes:
        raw, _ = await self.admin.get(path)
        return raw

    async def controller_in_store(self) -> int:
        return parse_controller_id(await self.znode(zk_paths.CONTROLLER))

    async def controller_epoch_in_store(self) -> int:
        return int(await self.znode(zk_paths.CONTROLLER_EPOCH))

    async def state(self, topic: str, partition: int) -> tuple[zk_data.PartitionState, int] | None:
        try:
            raw, stat = await self.admin.get(zk_paths.partition_state_path(topic, partition))
        except NoNodeError:
            return None
        return zk_data.PartitionState.decode(raw), stat.version

    async def create_topic_znode(
        self, topic: str, assignment: dict[int, list[int]], config: dict[str, str] | None = None
    ) -> None:
        """Create a topic as an admin tool does: /config/topics/<t>, then /brokers/topics/<t>."""
        await self.admin.create(
            zk_paths.topic_config_path(topic),
            zk_data.EntityConfig(config or {}).encode(),
            makepath=True,
        )
        await self.admin.create(
            zk_paths.topic_path(topic),
            zk_data.TopicAssignment(
                assignment, topic_id=zk_data.topic_id_to_str(uuid.uuid4())
            ).encode(),
            makepath=True,
        )

    async def add_partitions_znode(self, topic: str, added: dict[int, list[int]]) -> None:
        raw, stat = await self.admin.get(zk_paths.topic_path(topic))
        a = zk_data.TopicAssignment.decode(raw)
        new = zk_data.TopicAssignment(
            {**a.partitions, **added}, a.adding_replicas, a.removing_replicas, a.topic_id
        )
        await self.admin.set(zk_paths.topic_path(topic), new.encode(), version=stat.version)

    async def delete_topic_znode(self, topic: str) -> None:
        await self.admin.create(zk_paths.delete_topic_path(topic), b"", makepath=True)

    async def wait_state(
        self,
        topic: str,
        partition: int,
        pred: Callable[[zk_data.PartitionState], bool],
        timeout: float = 10.0,
    ) -> tuple[zk_data.PartitionState, int]:
        async def check() -> Any:
            got = await self.state(topic, partition)
            return got if got is not None and pred(got[0]) else None

        return await eventually(check, timeout)

    # ---- the brokers' metadata ------------------------------------------------------
    def cached(self, i: int, topic: str, partition: int) -> Any:
        """Broker ``i``'s metadata-cache entry for the partition (None if unknown)."""
        t = self.broker(i).metadata_cache.get_topic(topic)
        return None if t is None else t.partitions.get(partition)

    def all_see(self, topic: str, partition: int, pred: Callable[[Any], bool]) -> bool:
        return all(
            (p := self.cached(i, topic, partition)) is not None and pred(p) for i in self.live_ids
        )

    def requests(self, i: int, api: str, topic: str | None = None) -> list[Received]:
        return [
            r
            for r in self.received[i]
            if r.api == api
            and (
                topic is None
                or any(tp[0] == topic for tp in r.partitions)
                or topic in r.deleted_topics
            )
        ]


async def client_controller_id(bootstrap: str) -> int:
    """Metadata.controller_id as librdkafka (confluent-kafka AdminClient) sees it."""

    def ask() -> int:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
        return int(md.controller_id)

    return await asyncio.to_thread(ask)


async def client_partition(
    bootstrap: str, topic: str, partition: int
) -> tuple[int, list[int], list[int]] | None:
    """(leader, replicas, isr) of a partition as librdkafka's Metadata shows it; None if absent."""

    def ask() -> tuple[int, list[int], list[int]] | None:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is None or t.error is not None and not t.partitions:
            return None
        p = t.partitions.get(partition)
        if p is None:
            return None
        return int(p.leader), list(p.replicas), list(p.isrs)

    return await asyncio.to_thread(ask)


async def client_topics(bootstrap: str) -> set[str]:
    def ask() -> set[str]:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
        return set(md.topics)

    return await asyncio.to_thread(ask)


async def call(
    port: int,
    api_key: int,
    version: int,
    request: Any,
    *,
    host: str = "127.0.0.1",
    client_id: str | None = "raw-controller",
    signed_for: KafkaBroker | None = None,
) -> Any:
    """Send one inter-broker request on a fresh connection and return the decoded response.

    Unsigned, it is what any client can send; ``signed_for`` signs it for that (receiving)
    broker with the cluster's inter-broker secret, as only a broker can, so a test can
    reach the checks that come after the authenticator's."""
    secret = None if signed_for is None else signed_for.inter_broker_secret
    target = -1 if signed_for is None else signed_for.broker_id
    frame = ib.request_frame(
        api_key, version, 1, client_id, request, secret=secret, target_broker_id=target
    )
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(frame)
        await writer.drain()
        (size,) = _I32.unpack(await asyncio.wait_for(reader.readexactly(4), 10))
        cid, response = ib.parse_response_frame(api_key, version, await reader.readexactly(size))
        assert cid == 1
        return response
    finally:
        writer.close()
