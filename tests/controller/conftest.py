"""A real Apache ZooKeeper for the controller tests (one per session, a chroot per test)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kafkalite.testing.zookeeper import ZooKeeperServer, zookeeper_available


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[ZooKeeperServer]:
    if not zookeeper_available():
        pytest.skip("Apache ZooKeeper not installed (apt-get install zookeeper; needs java)")
    server = ZooKeeperServer()
    server.start()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def zookeeper_connect(zookeeper: ZooKeeperServer) -> str:
    """Kafka's ``zookeeper.connect`` with a fresh chroot, so tests never share znodes."""
    return f"{zookeeper.connect_string}/kafkalite-{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["embedded", "zookeeper"])
def backend(request: pytest.FixtureRequest) -> str | None:
    """Run the test on the embedded store and on a real ZooKeeper: the ``zookeeper.connect``
    to pass to :class:`tests.controller.cluster.Cluster` (None for embedded)."""
    if request.param == "embedded":
        return None
    return str(request.getfixturevalue("zookeeper_connect"))
