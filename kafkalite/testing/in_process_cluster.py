"""An in-process Kafka cluster for tests: n real brokers sharing one metadata ensemble.

``async with AsyncCluster(3) as c:`` runs the brokers on the caller's loop;
``with cluster(3) as c:`` runs them on one loop in a background thread for
synchronous clients. Brokers have ids 0..n-1, ephemeral ports (kept across
restarts, so a client's bootstrap list stays valid), their own data dirs, one
shared :class:`~kafkalite.metadata.embedded_store.EmbeddedEnsemble` and a shared
``peers`` dict. They elect a controller and send each other controller requests
over TCP as separate processes would.

Failures:

- ``crash(i)``: the process dies — sockets close, the metadata session ends
  (its registration and, if it was the controller, /controller vanish and the
  others react), files are closed without flushing or checkpointing, and no
  clean-shutdown marker is written, so ``restart(i)`` runs log recovery.
- ``pause(i)``: the process freezes — requests are held (not answered) and the
  metadata session is suspended, so after ``zookeeper.session.timeout.ms`` the
  broker is considered dead. ``resume(i)`` answers the held requests; if the
  session expired meanwhile, the broker registers again and re-runs the
  controller election, as Kafka does on a new ZooKeeper session.
- ``restart(i)``: a clean stop (or nothing, after a crash) and a start on the
  same data dir and port.

Partitions replicate as in a real cluster (followers fetch from their leaders,
see ``docs/replication.md``): with replication factor > 1 a crashed leader's
partitions move to another ISR member.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from kafkalite.metadata.embedded_store import EmbeddedEnsemble, EmbeddedStore
from kafkalite.server.broker import KafkaBroker
from kafkalite.testing.embedded_broker import AsyncBroker, LoopThread, SyncFaults
from kafkalite.testing.faults import Delay, FaultInjector, Rule

__all__ = ["AsyncCluster", "ThreadedCluster", "cluster", "CLUSTER_DEFAULTS"]

#: on top of the embedded broker's test defaults; a short session timeout so that
#: a paused broker is declared dead in seconds (Kafka's default is 18 s)
CLUSTER_DEFAULTS: dict[str, Any] = {"zookeeper.session.timeout.ms": 6000}


async def _eventually(pred: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(f"in-process cluster: {what} within {timeout_s}s")
        await asyncio.sleep(0.002)


class AsyncCluster:
    """``async with AsyncCluster(n=3, **config) as c:`` — n brokers on the running loop."""

    def __init__(
        self,
        n: int = 3,
        data_dir: str | Path | None = None,
        *,
        broker_configs: Mapping[int, Mapping[str, Any]] | None = None,
        **config: Any,
    ) -> None:
        """``config`` applies to every broker; ``broker_configs`` adds per-broker keys
        (e.g. ``{0: {"broker.rack": "a"}}``)."""
        if n < 1:
            raise ValueError("a cluster needs at least one broker")
        self.broker_configs = {i: dict(c) for i, c in (broker_configs or {}).items()}
        self._own_dir = data_dir is None
        self.data_dir = (
            Path(data_dir)
            if data_dir is not None
            else Path(tempfile.mkdtemp(prefix="kafkalite-cluster-"))
        )
        self.config = {**CLUSTER_DEFAULTS, **config}
        self.ensemble: EmbeddedEnsemble | None = None
        self.peers: dict[int, KafkaBroker] = {}
        self.nodes: list[AsyncBroker] = []
        self.n = n
        #: brokers that are not running (crashed or stopped)
        self.down: set[int] = set()
        self._pause_rules: dict[int, Rule] = {}
        self._ports: dict[int, int] = {}

    # ---- lifecycle --------------------------------------------------------------
    async def start(self) -> AsyncCluster:
        self.ensemble = EmbeddedEnsemble(fsync=False)
        self.nodes = [
            AsyncBroker(
                self.data_dir / f"broker-{i}",
                ensemble=self.ensemble,
                peers=self.peers,
                **{**self.config, **self.broker_configs.get(i, {}), "broker.id": i},
            )
            for i in range(self.n)
        ]
        try:
            # concurrently: the first to create /controller wins, the others follow it
            await asyncio.gather(*(node.start() for node in self.nodes))
            for i, node in enumerate(self.nodes):
                self._ports[i] = node.port
            await self.wait_until_ready()
        except BaseException:
            await self.stop()
            raise
        return self

    async def stop(self) -> None:
        # the controller last, so that no election runs while the others go
        ctrl = self.controller_id
        for i in sorted(self.live_ids, key=lambda i: (i == ctrl, i)):
            if self.nodes[i].broker is not None:
                with contextlib.suppress(Exception):
                    await self.nodes[i].stop(cleanup=False)
        self.down = set(range(len(self.nodes)))
        if self.ensemble is not None:
            self.ensemble.close()
            self.ensemble = None
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    async def __aenter__(self) -> AsyncCluster:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    async def wait_until_ready(self, timeout_s: float = 10.0) -> None:
        """Until one controller is active and every running, unpaused broker knows all of those."""
        live = self.responsive_ids

        def ready() -> bool:
            if self.controller_id not in live:
                return False
            return all(
                set(self.kafka(i).metadata_cache.brokers) == set(live)
                and self.kafka(i).metadata_cache.controller_id == self.controller_id
                for i in live
            )

        await _eventually(ready, timeout_s, "no controller or brokers disagree on who is alive")

    # ---- views ------------------------------------------------------------------
    @property
    def live_ids(self) -> list[int]:
        """Running brokers (paused ones included)."""
        return [i for i in range(len(self.nodes)) if i not in self.down]

    @property
    def paused_ids(self) -> list[int]:
        return sorted(self._pause_rules)

    @property
    def responsive_ids(self) -> list[int]:
        """Running brokers that are not paused."""
        return [i for i in self.live_ids if i not in self._pause_rules]

    def node(self, broker_id: int) -> AsyncBroker:
        return self.nodes[broker_id]

    def kafka(self, broker_id: int) -> KafkaBroker:
        b = self.nodes[broker_id].broker
        assert b is not None, f"broker {broker_id} was never started"
        return b

    def faults(self, broker_id: int) -> FaultInjector:
        return self.nodes[broker_id].faults

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's address (stopped ones included: clients skip those)."""
        return ",".join(f"127.0.0.1:{self._ports[i]}" for i in sorted(self._ports))

    def bootstrap_of(self, broker_id: int) -> str:
        return f"127.0.0.1:{self._ports[broker_id]}"

    @property
    def controller_id(self) -> int:
        """The unpaused broker whose controller is active, or -1 during an election.

        A paused controller may still believe it is active (it has not heard that
        its session expired), as a frozen Kafka controller would.
        """
        for i in self.responsive_ids:
            c = self.kafka(i).controller
            if c is not None and c.is_active:
                return i
        return -1

    def leader_of(self, topic: str, partition: int) -> int:
        """The partition's leader as clients see it in Metadata (-1: none).

        That is the controller's UpdateMetadata, except that a leader which is not a
        live broker counts as none (LEADER_NOT_AVAILABLE), as in a Metadata response:
        after a controller crash the state znode may still name the dead broker.
        """
        ctrl = self.controller_id
        for i in ([ctrl] if ctrl >= 0 else []) + self.responsive_ids:
            cache = self.kafka(i).metadata_cache
            t = cache.get_topic(topic)
            if t is not None and partition in t.partitions:
                leader = t.partitions[partition].leader
                return leader if leader in cache.brokers else -1
        raise KeyError(f"unknown partition {topic}-{partition}")

    async def wait_for_controller(self, *, not_: int | None = None, timeout_s: float = 10.0) -> int:
        """Until a controller (other than ``not_``) is active and every unpaused broker knows it."""
        live = self.responsive_ids

        def ok() -> bool:
            c = self.controller_id
            return (
                c >= 0
                and c != not_
                and all(self.kafka(i).metadata_cache.controller_id == c for i in live)
            )

        await _eventually(ok, timeout_s, "no new controller")
        return self.controller_id

    # ---- topics -----------------------------------------------------------------
    async def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, str] | None = None,
        *,
        assignments: Mapping[int, list[int]] | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        """Create through the controller's broker, then wait until every running broker serves it."""
        via = self.controller_id if self.controller_id >= 0 else self.responsive_ids[0]
        await self.nodes[via].create_topic(
            name, partitions, replication_factor, config, assignments=assignments
        )
        count = len(assignments) if assignments else partitions
        await _eventually(
            lambda: all(self._serves(i, name, count) for i in self.responsive_ids),
            timeout_s,
            f"topic {name} not online everywhere",
        )

    def _serves(self, i: int, topic: str, count: int) -> bool:
        b = self.kafka(i)
        t = b.metadata_cache.get_topic(topic)
        if t is None or len(t.partitions) < count:
            return False
        for p in t.partitions.values():
            if p.leader < 0:
                return False
            if p.leader == i:
                part = b.replica_manager.get_partition((topic, p.partition))
                if part is None or part.leader_id != i:
                    return False
        return True

    async def delete_topic(self, name: str, timeout_ms: int = 10000) -> None:
        via = self.controller_id if self.controller_id >= 0 else self.responsive_ids[0]
        await self.kafka(via).admin.delete_topics([name], timeout_ms)

    def records(self, topic: str, partition: int | None = None) -> list[Any]:
        """Every record of ``topic`` (or of one partition), read from the running brokers' logs."""
        out: list[Any] = []
        for i in self.live_ids:
            for tp in sorted(self.kafka(i).replica_manager.partitions):
                if tp[0] == topic and (partition is None or tp[1] == partition):
                    out += self.nodes[i].records(topic, tp[1])
        return out

    # ---- failures ---------------------------------------------------------------
    async def crash(self, broker_id: int) -> None:
        """Kill broker ``broker_id`` without a clean shutdown (see the module docstring)."""
        if broker_id in self.down:
            raise ValueError(f"broker {broker_id} is not running")
        self.down.add(broker_id)
        self._pause_rules.pop(broker_id, None)
        await _crash(self.kafka(broker_id))

    async def pause(self, broker_id: int) -> None:
        """Stop answering requests and suspend the metadata session (see the module docstring)."""
        if broker_id in self.down or broker_id in self._pause_rules:
            raise ValueError(f"broker {broker_id} is not running or already paused")
        node = self.nodes[broker_id]
        self._pause_rules[broker_id] = node.faults.add(None, Delay(None), times=None)
        store = self.kafka(broker_id).store
        if isinstance(store, EmbeddedStore):
            store.pause()

    async def resume(self, broker_id: int) -> None:
        rule = self._pause_rules.pop(broker_id, None)
        if rule is None:
            raise ValueError(f"broker {broker_id} is not paused")
        kb = self.kafka(broker_id)
        store = kb.store
        if isinstance(store, EmbeddedStore):
            epoch = kb.broker_epoch
            store.resume()
            if store.session_id is not None and not await store.exists(f"/brokers/ids/{broker_id}"):
                # a new session: the broker registers again by itself (a new broker
                # epoch) and rejoins the election, as Kafka does; wait for that
                await _eventually(
                    lambda: kb.broker_epoch != epoch,
                    10.0,
                    f"broker {broker_id} did not register again after its session expired",
                )
        self.nodes[broker_id].faults.remove(rule)

    async def restart(self, broker_id: int, timeout_s: float = 10.0) -> None:
        """Stop cleanly (unless down) and start again on the same data dir and port."""
        node = self.nodes[broker_id]
        rule = self._pause_rules.pop(broker_id, None)
        if rule is not None:
            node.faults.remove(rule)
        if broker_id not in self.down:
            self.down.add(broker_id)
            await node.stop(cleanup=False)
        node.overrides = {
            **node.overrides,
            "listeners": f"PLAINTEXT://127.0.0.1:{self._ports[broker_id]}",
        }
        await node.start()
        self.down.discard(broker_id)
        await self.wait_until_ready(timeout_s)

    async def move_leader(self, topic: str, partition: int, to_broker: int) -> int:
        """See :meth:`FaultInjector.move_leader`; returns the new leader epoch."""
        return await self.faults(self.responsive_ids[0]).move_leader(topic, partition, to_broker)

    async def bump_leader_epoch(self, topic: str, partition: int) -> int:
        return await self.faults(self.responsive_ids[0]).bump_leader_epoch(topic, partition)


async def _crash(kb: KafkaBroker) -> None:
    """What a killed broker process leaves behind, minus the process."""
    kb.started = False
    # the network goes: listeners and every client connection (and the metrics endpoint)
    await kb.socket_server.stop()
    if kb.metrics_server is not None:
        await kb.metrics_server.stop()
    if kb.console is not None:
        await kb.console.stop()
    # the metadata session ends, as ZooKeeper expires it (without the wait):
    # the registration and /controller vanish and the other brokers' watches fire
    store = kb.store
    if isinstance(store, EmbeddedStore) and not store.closed:
        with contextlib.suppress(Exception):
            if not store.paused:
                store.pause()
            await store.expire()
    with contextlib.suppress(Exception):
        await store.close()
    # in-memory work stops (the controller cannot delete /controller: the store is closed)
    for t in kb._tasks:
        t.cancel()
    for t in kb._tasks:
        with contextlib.suppress(BaseException):
            await t
    if kb.controller is not None:
        with contextlib.suppress(Exception):
            await kb.controller.shutdown()
    with contextlib.suppress(Exception):
        await kb.group_coordinator.shutdown()
    with contextlib.suppress(Exception):
        await kb.transaction_coordinator.shutdown()
    for client in (kb.txn_marker_sender, kb.txn_verifier):
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
    if kb.replica_manager is not None:
        with contextlib.suppress(Exception):
            await kb.replica_manager.stop_replication()
        kb.replica_manager.shutdown()
    # the loop-lag sampler and the store watchers go with the process too (left running,
    # they outlive the broker and are destroyed pending when the cluster's loop closes)
    stoppers = [kb.quota_store.stop, kb.credential_store.stop, kb.client_metrics.stop]
    if kb.metrics.loop_monitor is not None:
        stoppers.append(kb.metrics.loop_monitor.stop)
    if kb.authorizer is not None:
        stoppers.append(kb.authorizer.stop)
    for stop in stoppers:
        with contextlib.suppress(Exception):
            await stop()
    # files: descriptors closed as the OS would; no flush, checkpoint or clean-shutdown marker
    lm = kb.log_manager
    if lm is not None:
        lm.cleaner.shutdown()
        for lg in lm.all_logs():
            lg.close_handlers()
        lm._unlock_dirs()
        lm._closed = True
    kb.peers.pop(kb.broker_id, None)


class ThreadedCluster:
    """An :class:`AsyncCluster` on its own loop in a daemon thread, for synchronous tests."""

    def __init__(self, n: int = 3, data_dir: str | Path | None = None, **config: Any) -> None:
        self.aio = AsyncCluster(n, data_dir, **config)
        self._lt = LoopThread("kafkalite-cluster")

    def start(self) -> ThreadedCluster:
        self._lt.start()
        try:
            self._lt.run(self.aio.start())
        except BaseException:
            self._lt.stop()
            raise
        return self

    def stop(self) -> None:
        if self._lt.loop is None:
            return
        with contextlib.suppress(Exception):
            self._lt.run(self.aio.stop())
        self._lt.stop()

    def __enter__(self) -> ThreadedCluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args)`` on the cluster's loop (sync functions or coroutines)."""
        return self._lt.call(fn, *args, **kwargs)

    @property
    def bootstrap_servers(self) -> str:
        return self.aio.bootstrap_servers

    def bootstrap_of(self, broker_id: int) -> str:
        return self.aio.bootstrap_of(broker_id)

    @property
    def controller_id(self) -> int:
        return int(self.call(lambda: self.aio.controller_id))

    @property
    def live_ids(self) -> list[int]:
        return list(self.call(lambda: self.aio.live_ids))

    @property
    def paused_ids(self) -> list[int]:
        return list(self.call(lambda: self.aio.paused_ids))

    def kafka(self, broker_id: int) -> KafkaBroker:
        return self.aio.kafka(broker_id)

    def faults(self, broker_id: int) -> SyncFaults:
        return SyncFaults(self.aio.faults(broker_id), self._lt)

    def leader_of(self, topic: str, partition: int) -> int:
        return int(self.call(self.aio.leader_of, topic, partition))

    def wait_for_controller(self, *, not_: int | None = None, timeout_s: float = 10.0) -> int:
        return int(self._lt.run(self.aio.wait_for_controller(not_=not_, timeout_s=timeout_s)))

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, str] | None = None,
        *,
        assignments: Mapping[int, list[int]] | None = None,
    ) -> None:
        self._lt.run(
            self.aio.create_topic(
                name, partitions, replication_factor, config, assignments=assignments
            )
        )

    def delete_topic(self, name: str) -> None:
        self._lt.run(self.aio.delete_topic(name))

    def records(self, topic: str, partition: int | None = None) -> list[Any]:
        return list(self.call(self.aio.records, topic, partition))

    def crash(self, broker_id: int) -> None:
        self._lt.run(self.aio.crash(broker_id))

    def pause(self, broker_id: int) -> None:
        self._lt.run(self.aio.pause(broker_id))

    def resume(self, broker_id: int) -> None:
        self._lt.run(self.aio.resume(broker_id))

    def restart(self, broker_id: int) -> None:
        self._lt.run(self.aio.restart(broker_id))

    def move_leader(self, topic: str, partition: int, to_broker: int) -> int:
        return int(self._lt.run(self.aio.move_leader(topic, partition, to_broker)))

    def bump_leader_epoch(self, topic: str, partition: int) -> int:
        return int(self._lt.run(self.aio.bump_leader_epoch(topic, partition)))


@contextlib.contextmanager
def cluster(
    n: int = 3, data_dir: str | Path | None = None, **config: Any
) -> Iterator[ThreadedCluster]:
    """``with kafkalite.testing.cluster(n=3) as c: Producer({"bootstrap.servers": c.bootstrap_servers})``."""
    c = ThreadedCluster(n, data_dir, **config)
    c.start()
    try:
        yield c
    finally:
        c.stop()
