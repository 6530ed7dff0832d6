"""Read-modify-write of one ``/config/<type>/<name>`` znode, with its change notification.

Several owners share a znode: ``/config/users/<user>`` holds a user's quotas
(``producer_byte_rate`` ...) and its SCRAM credentials (``SCRAM-SHA-256`` ...),
as in Kafka's ZooKeeper mode. Each owner changes only its own keys here, with a
version check, so neither clobbers the other's.
"""

from __future__ import annotations

from collections.abc import Callable

from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.store import BadVersionError, MetadataStore, NodeExistsError, NoNodeError

__all__ = ["update_entity_config"]


async def update_entity_config(
    store: MetadataStore,
    path: str,
    change_path: str,
    update: Callable[[dict[str, str]], dict[str, str]],
) -> dict[str, str]:
    """Apply ``update`` to the znode's config (retried on a concurrent change), then write
    ``/config/changes/config_change_<seq>`` naming ``change_path`` (``users/alice``).
    Returns the config written."""
    while True:
        try:
            raw, stat = await store.get(path)
            current, version = dict(zk_data.EntityConfig.decode(raw).config), stat.version
        except NoNodeError:
            current, version = {}, None
        new = update(dict(current))
        data = zk_data.EntityConfig(new).encode()
        try:
            if version is None:
                await store.create(path, data, makepath=True)
            else:
                await store.set(path, data, version=version)
        except (NodeExistsError, BadVersionError):
            continue
        break
    await store.create(
        zk_paths.config_change_path(),
        zk_data.ConfigChangeNotification(change_path).encode(),
        sequential=True,
        makepath=True,
    )
    return new
