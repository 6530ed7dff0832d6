"""Fixtures for the metadata store tests: a real ZooKeeper and a backend harness.

``backend`` is parametrised over the embedded store and a real ZooKeeper (one shared
server per test session; each test gets its own chroot so tests never see each
other's znodes).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from metadata_helpers import Backend, EmbeddedBackend, ZooKeeperBackend

from kafkalite.metadata import MetadataStore
from kafkalite.testing.zookeeper import ZooKeeperServer, zookeeper_available


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[ZooKeeperServer]:
    if not zookeeper_available():
        pytest.skip("Apache ZooKeeper not installed (apt-get install zookeeper; needs java)")
    server = ZooKeeperServer()
    server.start()
    try:
        yield server
    finally:
        server.cleanup()


@pytest_asyncio.fixture(params=["embedded", "zookeeper"])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    harness: Backend
    if request.param == "embedded":
        harness = EmbeddedBackend()
    else:
        harness = ZooKeeperBackend(request.getfixturevalue("zookeeper_server"))
    try:
        yield harness
    finally:
        await harness.aclose()


@pytest_asyncio.fixture
async def store(backend: Backend) -> MetadataStore:
    return await backend.connect()
