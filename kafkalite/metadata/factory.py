"""Pick the metadata backend from broker configuration.

``zookeeper.connect`` set -> :class:`ZooKeeperStore` (multi-process clusters).
Otherwise the embedded store: a session on the given in-process ensemble (the
in-process cluster shares one), or a private ensemble persisted under
``metadata.dir`` / the first of ``log.dirs`` (files only, see embedded_store.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from kafkalite.metadata.embedded_store import EmbeddedEnsemble
from kafkalite.metadata.store import MetadataStore
from kafkalite.metadata.zookeeper import ZooKeeperStore

__all__ = ["metadata_dir", "open_store"]

DEFAULT_SESSION_TIMEOUT_MS = 18000


class ConfigSource(Protocol):
    """A dict of Kafka property names, or anything with ``get`` (BrokerConfig)."""

    def get(self, key: str, /) -> Any: ...


def _get(config: ConfigSource, key: str) -> Any:
    value = config.get(key)
    if isinstance(value, str):
        value = value.strip()
    return value if value not in (None, "") else None


def metadata_dir(config: ConfigSource) -> Path | None:
    """Where the embedded store persists: ``metadata.dir``, else the first log dir.

    None means in-memory only (neither key is set).
    """
    explicit = _get(config, "metadata.dir")
    if explicit is not None:
        return Path(explicit)
    for key in ("log.dirs", "log.dir"):
        dirs = _get(config, key)
        if dirs is None:
            continue
        if isinstance(dirs, str):
            first = next((d.strip() for d in dirs.split(",") if d.strip()), None)
        else:
            first = next((str(d) for d in dirs), None)
        if first:
            return Path(first)
    return None


async def open_store(
    config: ConfigSource, *, ensemble: EmbeddedEnsemble | None = None
) -> MetadataStore:
    """Open a connected store for a broker configured by ``config`` (Kafka key names)."""
    timeout_ms = int(_get(config, "zookeeper.session.timeout.ms") or DEFAULT_SESSION_TIMEOUT_MS)
    connect = _get(config, "zookeeper.connect")
    if connect is not None:
        # Kafka: zookeeper.connection.timeout.ms defaults to the session timeout.
        connection_timeout_ms = int(_get(config, "zookeeper.connection.timeout.ms") or timeout_ms)
        return await ZooKeeperStore.open(
            str(connect),
            session_timeout_ms=timeout_ms,
            timeout=connection_timeout_ms / 1000,
        )
    if ensemble is not None:
        return ensemble.connect(timeout_ms)
    private = EmbeddedEnsemble(metadata_dir(config))
    try:
        return private.connect(timeout_ms, close_ensemble_on_close=True)
    except BaseException:
        private.close()
        raise
