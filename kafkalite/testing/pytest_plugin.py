"""pytest plugin, auto-loaded through the ``pytest11`` entry point.

Fixtures:
- ``kafka_broker``: a session-wide broker (embedded, or ``--kafka-bootstrap`` external);
- ``kafka_bootstrap``: its ``bootstrap.servers`` string;
- ``kafka_topic``: a fresh, uniquely named topic per test (3 partitions), deleted after;
- ``kafka_broker_factory``: start brokers with custom configs, stopped at teardown;
- ``kafka_cluster``: a fresh 3-broker in-process cluster per test (``crash``, ``pause``,
  ``restart``, ``leader_of``, ...; see ``kafkalite.testing.in_process_cluster``);
- ``kafka_faults``: the shared broker's fault injector, cleared after the test.

``--kafka-bootstrap HOST:PORT`` (or the ``kafka_bootstrap`` ini option, or the
``KAFKALITE_TEST_BOOTSTRAP`` environment variable) points the same fixtures at an
existing cluster, so a suite can also run against Apache Kafka: ``kafka_broker`` is
then an :class:`ExternalBroker` working over the protocol. ``kafka_broker_factory``,
``kafka_cluster`` and ``kafka_faults`` need brokers in the test process, so they
skip the test in that mode.
"""

from __future__ import annotations

import itertools
import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kafkalite.protocol.records import Record
    from kafkalite.testing.embedded_broker import SyncFaults, ThreadedBroker
    from kafkalite.testing.in_process_cluster import ThreadedCluster


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafkalite")
    group.addoption(
        "--kafka-bootstrap",
        default=None,
        help="use this external Kafka cluster instead of an embedded kafkalite broker",
    )
    parser.addini(
        "kafka_bootstrap", "external Kafka bootstrap.servers for the kafka_* fixtures", default=""
    )


class ExternalBroker:
    """The ``kafka_broker`` interface over a cluster we did not start (``--kafka-bootstrap``).

    Everything goes through the Kafka protocol with confluent-kafka (librdkafka),
    so it works against Apache Kafka as well as a separately started kafkalite.
    There is no fault injector and no in-process state (``kafka``, ``call``).
    """

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap_servers = bootstrap

    def _admin(self) -> Any:
        return _confluent("admin").AdminClient({"bootstrap.servers": self.bootstrap_servers})

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: dict[str, str] | None = None,
        *,
        timeout_s: float = 30.0,
    ) -> None:
        """Create ``name`` and wait until metadata shows every partition with a leader."""
        admin_mod = _confluent("admin")
        admin = self._admin()
        new = admin_mod.NewTopic(name, partitions, replication_factor, config=config or {})
        admin.create_topics([new], operation_timeout=timeout_s)[name].result(timeout_s)
        deadline = time.monotonic() + timeout_s
        while True:  # creation is asynchronous on a multi-broker Kafka cluster
            t = admin.list_topics(name, timeout=timeout_s).topics.get(name)
            if (
                t is not None
                and t.error is None
                and len(t.partitions) == partitions
                and all(p.leader >= 0 for p in t.partitions.values())
            ):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name} has no leaders after {timeout_s}s")
            time.sleep(0.05)

    def delete_topic(self, name: str, timeout_s: float = 30.0) -> None:
        admin = self._admin()  # referenced until the result: a destroyed handle fails it
        admin.delete_topics([name], operation_timeout=timeout_s)[name].result(timeout_s)

    def records(
        self, topic: str, partition: int | None = None, *, timeout_s: float = 30.0
    ) -> list[Record]:
        """Every record of ``topic`` (all partitions, or one) up to the high watermarks,
        read back by a consumer, in partition then offset order (as the embedded broker's)."""
        from kafkalite.protocol.records import Record

        ck = _confluent()
        c = ck.Consumer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": f"kafkalite-records-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_uncommitted",
            }
        )
        out: list[Record] = []
        try:
            t = c.list_topics(topic, timeout=timeout_s).topics.get(topic)
            if t is None or t.error is not None:
                return []
            for p in sorted(t.partitions) if partition is None else [partition]:
                low, high = c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=timeout_s)
                if high <= low:
                    continue
                c.assign([ck.TopicPartition(topic, p, low)])
                deadline = time.monotonic() + timeout_s
                while True:
                    m = c.poll(1.0)
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"reading {topic}-{p} up to offset {high} timed out")
                    if m is None:
                        continue
                    err = m.error()
                    if err is not None:
                        if err.code() == ck.KafkaError._PARTITION_EOF:
                            if m.offset() >= high:
                                break
                            continue
                        raise ck.KafkaException(err)
                    if m.offset() < high:
                        headers = [(k, v) for k, v in m.headers() or ()]
                        ts = m.timestamp()[1]
                        out.append(Record(m.offset(), ts, m.key(), m.value(), headers))
                c.unassign()
        finally:
            c.close()
        return out

    def stop(self) -> None:
        pass


def _confluent(sub: str = "") -> Any:
    """confluent_kafka (or a submodule of it), which external mode needs."""
    import importlib

    name = "confluent_kafka" + (f".{sub}" if sub else "")
    try:
        return importlib.import_module(name)
    except ImportError:
        raise pytest.UsageError(
            "--kafka-bootstrap (external mode) talks to the cluster with confluent-kafka: "
            "pip install confluent-kafka"
        ) from None


_EXTERNAL_MODE = "not available with --kafka-bootstrap / kafka_bootstrap / KAFKALITE_TEST_BOOTSTRAP"


def _external(config: pytest.Config) -> str | None:
    return (
        config.getoption("--kafka-bootstrap")
        or config.getini("kafka_bootstrap")
        or os.environ.get("KAFKALITE_TEST_BOOTSTRAP")
        or None
    )


@pytest.fixture(scope="session")
def kafka_broker(request: pytest.FixtureRequest) -> Iterator[Any]:
    ext = _external(request.config)
    if ext:
        yield ExternalBroker(ext)
        return
    from kafkalite.testing.embedded_broker import ThreadedBroker

    b = ThreadedBroker()
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def kafka_bootstrap(kafka_broker: Any) -> str:
    return str(kafka_broker.bootstrap_servers)


_counter = itertools.count()


@pytest.fixture
def kafka_topic(kafka_broker: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    base = "".join(c if c.isalnum() or c in "._-" else "-" for c in request.node.name)[:150]
    name = f"{base}-{next(_counter)}-{uuid.uuid4().hex[:6]}"
    kafka_broker.create_topic(name, partitions=3)
    yield name
    kafka_broker.delete_topic(name)


@pytest.fixture
def kafka_broker_factory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., ThreadedBroker]]:
    if _external(request.config):
        pytest.skip(f"kafka_broker_factory starts in-process brokers ({_EXTERNAL_MODE})")
    from kafkalite.testing.embedded_broker import ThreadedBroker

    started: list[ThreadedBroker] = []

    def factory(data_dir: Any = None, **config: Any) -> ThreadedBroker:
        b = ThreadedBroker(data_dir or tmp_path_factory.mktemp("kafkalite"), **config)
        b.start()
        started.append(b)
        return b

    yield factory
    for b in reversed(started):
        b.stop()


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest) -> Iterator[ThreadedCluster]:
    if _external(request.config):
        pytest.skip(f"kafka_cluster starts in-process brokers ({_EXTERNAL_MODE})")
    from kafkalite.testing.in_process_cluster import ThreadedCluster

    c = ThreadedCluster(3)
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def kafka_faults(kafka_broker: Any) -> Iterator[SyncFaults]:
    if isinstance(kafka_broker, ExternalBroker):
        pytest.skip(f"kafka_faults needs an in-process broker ({_EXTERNAL_MODE})")
    try:
        yield kafka_broker.faults
    finally:
        kafka_broker.faults.clear()
