"""DynamicBrokerConfig: broker configs changed at runtime (AlterConfigs on a broker).

Two layers over the static config, as in Kafka: this broker's own
(``/config/brokers/<id>``) and the cluster default (``/config/brokers/<default>``),
stored as strings. A change is validated, written to the store, then applied to
:class:`BrokerConfig`; the broker-level log defaults (:attr:`default_log_config`)
are recomputed and every registered reconfigurable is told (Kafka's
``addReconfigurable``): the broker registers one that gives every topic its
new effective log config.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kafkalite.log.log_config import LogConfig
from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.store import MetadataStore, NoNodeError
from kafkalite.server.config import BrokerConfig

log = logging.getLogger(__name__)


def broker_log_defaults(config: BrokerConfig) -> LogConfig:
    """The topic defaults this broker's explicit (static or dynamic) settings give."""
    props: dict[str, Any] = {}
    for k, v in config.items():
        if v is None or not config.is_explicit(k):
            continue
        props[k] = (
            ",".join(v) if isinstance(v, list) else (str(v).lower() if isinstance(v, bool) else v)
        )
    return LogConfig.from_broker_properties(props)


class DynamicBrokerConfig:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        #: AlterConfigs on this broker's id and on the cluster default "", as stored
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}
        #: the log config of a topic without overrides (read by AdminManager.log_config)
        self.default_log_config = broker_log_defaults(config)
        #: called after every applied change (Kafka's reconfigurables)
        self.reconfigurables: list[Callable[[], None]] = []
        self._store: MetadataStore | None = None
        self._broker_id = -1

    def _path(self, per_broker: bool) -> str:
        return zk_paths.config_entity_path(
            "brokers", str(self._broker_id) if per_broker else "<default>"
        )

    async def load(self, store: MetadataStore, broker_id: int) -> None:
        """Read both layers at start-up; a stored value no longer valid is skipped."""
        self._store, self._broker_id = store, broker_id
        layers: list[dict[str, str]] = []
        for per_broker in (True, False):
            try:
                raw, _ = await store.get(self._path(per_broker))
                stored = dict(zk_data.EntityConfig.decode(raw).config)
            except (NoNodeError, zk_data.MetadataFormatError):
                stored = {}
            layer = {}
            for k, v in stored.items():
                try:
                    self.config.coerce_dynamic({k: v})
                    layer[k] = v
                except ValueError as e:
                    log.warning("ignoring stored dynamic broker config %s: %s", k, e)
            layers.append(layer)
        self.per_broker, self.cluster_default = layers
        self.config.apply_dynamic(*layers)
        self.default_log_config = broker_log_defaults(self.config)

    def candidate(self, configs: dict[str, Any], *, per_broker: bool) -> BrokerConfig:
        """The config ``configs`` would give as one layer (raises ValueError if invalid)."""
        return self.config.with_dynamic(
            configs if per_broker else self.per_broker,
            self.cluster_default if per_broker else configs,
        )

    async def set(self, configs: dict[str, str], *, per_broker: bool = True) -> None:
        """Replace this broker's (or the cluster-default) dynamic configs.

        Validated first, then stored, then applied: a failed write changes nothing.
        """
        assert self._store is not None, "load() first"
        broker_layer = dict(configs) if per_broker else self.per_broker
        default_layer = self.cluster_default if per_broker else dict(configs)
        self.config.with_dynamic(broker_layer, default_layer)  # raises before any change
        data = zk_data.EntityConfig(configs).encode()
        path = self._path(per_broker)
        try:
            await self._store.set(path, data)
        except NoNodeError:
            await self._store.create(path, data, makepath=True)
        self.per_broker, self.cluster_default = broker_layer, default_layer
        self.config.apply_dynamic(broker_layer, default_layer)
        self.default_log_config = broker_log_defaults(self.config)
        for reconfigure in self.reconfigurables:
            reconfigure()
