"""open_store: backend selection from Kafka-style broker configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafkalite.metadata import EmbeddedEnsemble, EmbeddedStore, ZooKeeperStore, open_store
from kafkalite.metadata.embedded_store import JOURNAL_FILE, SNAPSHOT_FILE
from kafkalite.metadata.factory import metadata_dir
from kafkalite.testing.zookeeper import ZooKeeperServer


def test_metadata_dir_resolution(tmp_path: Path) -> None:
    assert metadata_dir({}) is None
    assert metadata_dir({"log.dirs": f"{tmp_path}/a, {tmp_path}/b"}) == tmp_path / "a"
    assert metadata_dir({"log.dirs": [tmp_path / "c"]}) == tmp_path / "c"
    assert metadata_dir({"log.dir": str(tmp_path / "d")}) == tmp_path / "d"
    assert metadata_dir({"log.dirs": "x", "metadata.dir": str(tmp_path / "m")}) == tmp_path / "m"


async def test_embedded_persisted_in_first_log_dir(tmp_path: Path) -> None:
    config = {"log.dirs": f"{tmp_path}/logs1,{tmp_path}/logs2", "zookeeper.connect": ""}
    store = await open_store(config)
    assert isinstance(store, EmbeddedStore)
    await store.create("/cluster/id", b"abc", makepath=True)
    await store.close()  # owns its ensemble: closing it releases the dir
    assert (tmp_path / "logs1" / SNAPSHOT_FILE).is_file()
    assert (tmp_path / "logs1" / JOURNAL_FILE).is_file()
    again = await open_store(config)
    try:
        assert (await again.get("/cluster/id"))[0] == b"abc"
    finally:
        await again.close()


async def test_shared_ensemble_for_in_process_cluster() -> None:
    with EmbeddedEnsemble() as ensemble:
        a = await open_store({"zookeeper.session.timeout.ms": 6000}, ensemble=ensemble)
        b = await open_store({}, ensemble=ensemble)
        assert isinstance(a, EmbeddedStore) and a.session_timeout_ms == 6000
        await a.create("/brokers", b"shared")
        assert (await b.get("/brokers"))[0] == b"shared"
        await a.close()
        assert not ensemble.closed  # a broker leaving does not stop the cluster's store


class ConfigObject:
    """Anything with ``get`` works, like the broker's config class."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


async def test_zookeeper_when_connect_is_set(zookeeper_server: ZooKeeperServer) -> None:
    config = ConfigObject(
        {
            "zookeeper.connect": zookeeper_server.connect_string + "/factory",
            "zookeeper.session.timeout.ms": 8000,
            "log.dirs": "/nonexistent",
        }
    )
    store = await open_store(config, ensemble=EmbeddedEnsemble())
    try:
        assert isinstance(store, ZooKeeperStore)
        assert store.chroot == "/factory"
        await store.ensure_path("/brokers/ids")
        assert await store.get_children("/brokers") == ["ids"]
    finally:
        await store.close()
