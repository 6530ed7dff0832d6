"""pytest plugin, auto-loaded through the ``pytest11`` entry point.

Fixtures:
- ``kafka_broker``: a session-wide broker (embedded, or ``--kafka-bootstrap`` external);
- ``kafka_bootstrap``: its ``bootstrap.servers`` string;
- ``kafka_topic``: a fresh, uniquely named topic per test (3 partitions), deleted after;
- ``kafka_broker_factory``: start brokers with custom configs, stopped at teardown;
- ``kafka_cluster``: a fresh 3-broker in-process cluster per test (``crash``, ``pause``,
  ``restart``, ``leader_of``, ...; see ``kafkalite.testing.in_process_cluster``);
- ``kafka_faults``: the shared broker's fault injector, cleared after the test.

``--kafka-bootstrap HOST:PORT`` (or the ``kafka_bootstrap`` ini option) points the
same fixtures at an existing cluster, so a suite can also run against Apache Kafka.
``kafka_cluster`` and ``kafka_faults`` need brokers in the test process, so they
skip the test in that mode.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kafkalite.testing.embedded import SyncFaults, ThreadedBroker
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
    """The fixture interface over a cluster we did not start."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap_servers = bootstrap

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: dict[str, str] | None = None,
    ) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        fs = admin.create_topics(
            [NewTopic(name, partitions, replication_factor, config=config or {})]
        )
        fs[name].result(30)

    def delete_topic(self, name: str) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        admin.delete_topics([name])[name].result(30)

    def stop(self) -> None:
        pass


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
    from kafkalite.testing.embedded import ThreadedBroker

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
    try:
        if isinstance(kafka_broker, ExternalBroker):
            kafka_broker.delete_topic(name)
        else:
            kafka_broker.call(kafka_broker.kafka.admin.delete_topics, [name], 10000)
    except Exception:
        pass


@pytest.fixture
def kafka_broker_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., ThreadedBroker]]:
    from kafkalite.testing.embedded import ThreadedBroker

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
        pytest.skip("kafka_cluster needs in-process brokers (not with --kafka-bootstrap)")
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
        pytest.skip("fault injection needs an in-process broker (not with --kafka-bootstrap)")
    try:
        yield kafka_broker.faults
    finally:
        kafka_broker.faults.clear()
