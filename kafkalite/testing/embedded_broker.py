"""A real kafkalite broker inside a test process.

``AsyncBroker`` runs on the caller's event loop; ``broker()`` runs one on its
own loop in a background thread so synchronous clients (confluent-kafka,
kafka-python, kcat) can talk to it. Either way clients connect over TCP to an
ephemeral port: nothing is mocked. Test-friendly defaults (no fsync, small
segments, no initial rebalance delay) apply unless overridden.

Each broker has a :class:`~kafkalite.testing.faults.FaultInjector` as ``b.faults``
(rules survive restarts).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.broker import KafkaBroker
from kafkalite.server.config import BrokerConfig
from kafkalite.testing.faults import FaultInjector

TEST_DEFAULTS: dict[str, Any] = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "broker.id": 0,
    "num.partitions": 1,
    "default.replication.factor": 1,
    "offsets.topic.num.partitions": 4,
    "offsets.topic.replication.factor": 1,
    "transaction.state.log.num.partitions": 4,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "group.initial.rebalance.delay.ms": 0,
    "log.segment.bytes": 16 * 1024 * 1024,
    "log.segment.delete.delay.ms": 0,
    "kafkalite.log.fsync": False,
}


def _make_config(data_dir: Path, overrides: Mapping[str, Any]) -> BrokerConfig:
    values = dict(TEST_DEFAULTS)
    values["log.dirs"] = str(data_dir / "logs")
    values.update(
        {k.replace("_", ".") if "." not in k and "_" in k else k: v for k, v in overrides.items()}
    )
    return BrokerConfig(values)


class AsyncBroker:
    """``async with AsyncBroker(**config) as b:`` — a broker on the running loop."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        ensemble: Any = None,
        peers: dict[int, KafkaBroker] | None = None,
        **config: Any,
    ) -> None:
        self._own_dir = data_dir is None
        self.data_dir = (
            Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="kafkalite-"))
        )
        self.overrides = config
        self.ensemble = ensemble
        #: brokers of the same in-process cluster, by id (shared with them)
        self.peers = peers
        self.broker: KafkaBroker | None = None
        self.faults = FaultInjector()

    @property
    def bootstrap_servers(self) -> str:
        assert self.broker is not None, "broker not started"
        ep = self.broker.advertised[0]
        return f"{ep.host}:{ep.port}"

    @property
    def port(self) -> int:
        assert self.broker is not None
        return self.broker.advertised[0].port

    async def start(self) -> AsyncBroker:
        cfg = _make_config(self.data_dir, self.overrides)
        self.broker = KafkaBroker(cfg, ensemble=self.ensemble, peers=self.peers)
        self.faults.attach(self.broker)
        try:
            await self.broker.start()
        except BaseException:
            await self.broker.stop()
            raise
        return self

    async def stop(self, *, cleanup: bool | None = None) -> None:
        if self.broker is not None:
            await self.broker.stop()
        if cleanup if cleanup is not None else self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    async def restart(self) -> None:
        """Stop cleanly and start again on the same data dir and port."""
        assert self.broker is not None
        port = self.port
        await self.broker.stop()
        overrides = dict(self.overrides)
        overrides.setdefault("listeners", f"PLAINTEXT://127.0.0.1:{port}")
        overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{port}"
        self.overrides = overrides
        await self.start()

    async def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, str] | None = None,
        *,
        assignments: Mapping[int, list[int]] | None = None,
    ) -> None:
        """``assignments`` ({partition: [broker ids]}) places replicas by hand, overriding the counts."""
        assert self.broker is not None
        t = _NewTopic(name, partitions, replication_factor, config or {}, assignments)
        [r] = await self.broker.admin.create_topics([t], validate_only=False, timeout_ms=10000)
        if r.error:
            raise RuntimeError(f"create_topic({name}) failed: error {r.error} {r.message or ''}")

    async def delete_topic(self, name: str, timeout_ms: int = 10000) -> None:
        """Delete ``name`` as DeleteTopics does (an unknown topic is not an error here)."""
        assert self.broker is not None
        [code] = (await self.broker.admin.delete_topics([name], timeout_ms)).values()
        if code not in (0, ErrorCode.unknown_topic_or_partition):
            raise RuntimeError(f"delete_topic({name}) failed: {ErrorCode(code).name}")

    def records(self, topic: str, partition: int | None = None) -> list[Any]:
        """Every record stored in ``topic`` (all partitions, or one), decoded."""
        from kafkalite.protocol.records import iter_records

        assert self.broker is not None
        out = []
        for (t, p), part in sorted(self.broker.replica_manager.partitions.items()):
            if t != topic or (partition is not None and p != partition) or part.log is None:
                continue
            offset = part.log.log_start_offset
            while offset < part.log.log_end_offset:
                data = part.log.read(offset, 1 << 20, max_offset=None, min_one_message=True).records
                raw = data if isinstance(data, bytes | bytearray) else data.read_bytes()
                if not raw:
                    break
                last = offset
                for h, rec in iter_records(raw):
                    if rec.offset >= offset and not h.is_control:
                        out.append(rec)
                    last = h.last_offset
                offset = last + 1
        return out

    async def __aenter__(self) -> AsyncBroker:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()


class _NewTopic:
    """The shape AdminManager.create_topics expects (as decoded from CreateTopics)."""

    def __init__(
        self,
        name: str,
        partitions: int,
        rf: int,
        config: Mapping[str, str],
        assignments: Mapping[int, list[int]] | None = None,
    ) -> None:
        self.name = name
        self.num_partitions = -1 if assignments else partitions
        self.replication_factor = -1 if assignments else rf
        self.assignments: tuple[Any, ...] = tuple(
            _Assignment(p, list(b)) for p, b in sorted((assignments or {}).items())
        )
        self.configs = tuple(_Cfg(k, str(v)) for k, v in config.items())


class _Assignment:
    def __init__(self, partition_index: int, broker_ids: list[int]) -> None:
        self.partition_index = partition_index
        self.broker_ids = broker_ids


class _Cfg:
    def __init__(self, name: str, value: str) -> None:
        self.name = name
        self.value = value


class LoopThread:
    """An event loop (uvloop when installed) running in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        ready = threading.Event()

        def run() -> None:
            try:
                import uvloop

                loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
            except ImportError:
                loop = asyncio.new_event_loop()
            self.loop = loop
            asyncio.set_event_loop(loop)
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        ready.wait()

    def run(self, coro: Any, timeout: float = 60) -> Any:
        """Run a coroutine on the loop and wait for its result."""
        assert self.loop is not None, "loop not running"
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(timeout)

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args)`` on the loop (sync functions or coroutines)."""

        async def go() -> Any:
            r = fn(*args, **kwargs)
            if asyncio.iscoroutine(r):
                r = await r
            return r

        return self.run(go())

    def stop(self) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self.loop = None


class SyncFaults:
    """``FaultInjector`` for synchronous tests: loop-bound operations block until done."""

    def __init__(self, injector: FaultInjector, loop: LoopThread) -> None:
        self._injector = injector
        self._loop = loop

    def __getattr__(self, name: str) -> Any:  # add, drop, delay, error, sever, remove, clear, rules
        return getattr(self._injector, name)

    def sever_connections(self, client_id: str | None = None) -> int:
        return int(self._loop.call(self._injector.sever_connections, client_id))

    def move_leader(self, topic: str, partition: int, to_broker: int) -> int:
        return int(self._loop.run(self._injector.move_leader(topic, partition, to_broker)))

    def bump_leader_epoch(self, topic: str, partition: int) -> int:
        return int(self._loop.run(self._injector.bump_leader_epoch(topic, partition)))


class ThreadedBroker:
    """A broker on its own event loop in a daemon thread, for synchronous tests."""

    def __init__(self, data_dir: str | Path | None = None, **config: Any) -> None:
        self._async = AsyncBroker(data_dir, **config)
        self._lt = LoopThread("kafkalite-broker")
        self.faults = SyncFaults(self._async.faults, self._lt)

    @property
    def _loop(self) -> asyncio.AbstractEventLoop | None:
        return self._lt.loop

    def _run(self, coro: Any, timeout: float = 60) -> Any:
        return self._lt.run(coro, timeout)

    def start(self) -> ThreadedBroker:
        self._lt.start()
        try:
            self._run(self._async.start())
        except BaseException:
            self._lt.stop()
            raise
        return self

    def stop(self, *, cleanup: bool | None = None) -> None:
        if self._lt.loop is None:
            return
        with contextlib.suppress(Exception):
            self._run(self._async.stop(cleanup=cleanup))
        self._lt.stop()

    def restart(self) -> None:
        self._run(self._async.restart())

    def call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the broker's loop (sync functions or coroutines)."""
        return self._lt.call(fn, *args)

    @property
    def bootstrap_servers(self) -> str:
        return self._async.bootstrap_servers

    @property
    def port(self) -> int:
        return self._async.port

    @property
    def data_dir(self) -> Path:
        return self._async.data_dir

    @property
    def kafka(self) -> KafkaBroker:
        assert self._async.broker is not None
        return self._async.broker

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, str] | None = None,
        *,
        assignments: Mapping[int, list[int]] | None = None,
    ) -> None:
        self._run(
            self._async.create_topic(
                name, partitions, replication_factor, config, assignments=assignments
            )
        )

    def delete_topic(self, name: str, timeout_ms: int = 10000) -> None:
        self._run(self._async.delete_topic(name, timeout_ms))

    def records(self, topic: str, partition: int | None = None) -> list[Any]:
        return self.call(self._async.records, topic, partition)

    def __enter__(self) -> ThreadedBroker:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@contextlib.contextmanager
def broker(data_dir: str | Path | None = None, **config: Any) -> Iterator[ThreadedBroker]:
    """``with kafkalite.testing.broker() as b: Producer({"bootstrap.servers": b.bootstrap_servers})``."""
    b = ThreadedBroker(data_dir, **config)
    b.start()
    try:
        yield b
    finally:
        b.stop()
