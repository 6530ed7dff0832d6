"""GROUP config resources (resource type 32): Kafka 4.2's per-group dynamic configs.

DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on a group name read and
write these, validated as Kafka's ``GroupConfig.validate`` does (known names only,
each value within the broker's ``group.consumer.*`` / ``group.share.*`` bounds, the
session timeout above the heartbeat interval). They are kept in the metadata store
under ``/config/groups/<group>`` (where ZooKeeper-era Kafka keeps every entity's
configs) and read by the coordinators at each use, so a change takes effect at the
group's next heartbeat, fetch or lock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.coordinator.share.iso_duration import parse_duration_ms
from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.change_watcher import ChangeWatcher
from kafkalite.metadata.store import MetadataStoreError, NoNodeError
from kafkalite.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkalite.coordinator.group.group_metadata_manager import GroupConfig
    from kafkalite.metadata.store import MetadataStore

CONFIG_GROUPS = "/config/groups"
GROUP = 32
SRC_GROUP = 8  # DescribeConfigsResponse.ConfigSource GROUP_CONFIG
SRC_DEFAULT = 5
_BOOLEAN, _STRING, _INT = 1, 2, 3  # ConfigType


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    type: int
    #: the broker's value for it (the default of an unset group config)
    default: Callable[[GroupConfig], Any]
    #: (min, max) from the broker, or allowed strings
    bounds: Callable[[GroupConfig], tuple[int, int]] | None = None
    choices: tuple[str, ...] = ()
    doc: str = ""


GROUP_CONFIG_DEFS: dict[str, GroupConfigDef] = {
    d.name: d
    for d in (
        GroupConfigDef(
            "consumer.session.timeout.ms",
            _INT,
            lambda c: c.consumer_session_timeout_ms,
            lambda c: (c.consumer_min_session_timeout_ms, c.consumer_max_session_timeout_ms),
            doc="The timeout to detect client failures when using the consumer group protocol.",
        ),
        GroupConfigDef(
            "consumer.heartbeat.interval.ms",
            _INT,
            lambda c: c.consumer_heartbeat_interval_ms,
            lambda c: (c.consumer_min_heartbeat_interval_ms, c.consumer_max_heartbeat_interval_ms),
            doc="The heartbeat interval given to the members of a consumer group.",
        ),
        GroupConfigDef(
            "share.session.timeout.ms",
            _INT,
            lambda c: c.share_session_timeout_ms,
            lambda c: (c.share_min_session_timeout_ms, c.share_max_session_timeout_ms),
            doc="The timeout to detect client failures when using the share group protocol.",
        ),
        GroupConfigDef(
            "share.heartbeat.interval.ms",
            _INT,
            lambda c: c.share_heartbeat_interval_ms,
            lambda c: (c.share_min_heartbeat_interval_ms, c.share_max_heartbeat_interval_ms),
            doc="The heartbeat interval given to the members of a share group.",
        ),
        GroupConfigDef(
            "share.record.lock.duration.ms",
            _INT,
            lambda c: c.share_record_lock_duration_ms,
            lambda c: (c.share_min_record_lock_duration_ms, c.share_max_record_lock_duration_ms),
            doc="The record acquisition lock duration in milliseconds for share groups.",
        ),
        GroupConfigDef(
            "share.delivery.count.limit",
            _INT,
            lambda c: c.share_delivery_count_limit,
            lambda c: (c.share_min_delivery_count_limit, c.share_max_delivery_count_limit),
            doc="The maximum number of delivery attempts for a record delivered to a share group.",
        ),
        GroupConfigDef(
            "share.partition.max.record.locks",
            _INT,
            lambda c: c.share_partition_max_record_locks,
            lambda c: (100, c.share_partition_max_record_locks),
            doc="Share-group record lock limit per share-partition.",
        ),
        GroupConfigDef(
            "share.auto.offset.reset",
            _STRING,
            lambda c: "latest",
            choices=("latest", "earliest", "by_duration:<ISO 8601 duration>"),
            doc="The strategy to initialize the share-partition start offset: earliest, "
            "latest, or by_duration:<duration> (ISO 8601, e.g. PT1H).",
        ),
        GroupConfigDef(
            "share.renew.acknowledge.enable",
            _BOOLEAN,
            lambda c: "true",
            choices=("true", "false"),
            doc="Whether the renew acknowledge type is enabled for the share group.",
        ),
        GroupConfigDef(
            "share.isolation.level",
            _STRING,
            lambda c: "read_uncommitted",
            choices=("read_uncommitted", "read_committed"),
            doc="Controls how to read records written transactionally.",
        ),
    )
}

#: the broker config each group config defaults to (Kafka's ALL_GROUP_CONFIG_SYNONYMS)
BROKER_SYNONYMS = {
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
    "share.session.timeout.ms": "group.share.session.timeout.ms",
    "share.heartbeat.interval.ms": "group.share.heartbeat.interval.ms",
    "share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
    "share.delivery.count.limit": "group.share.delivery.count.limit",
    "share.partition.max.record.locks": "group.share.partition.max.record.locks",
}

#: Kafka's bound key names, for its error messages
_BOUND_KEYS = {
    "consumer.session.timeout.ms": "group.consumer.{}.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.{}.heartbeat.interval.ms",
    "share.session.timeout.ms": "group.share.{}.session.timeout.ms",
    "share.heartbeat.interval.ms": "group.share.{}.heartbeat.interval.ms",
    "share.record.lock.duration.ms": "group.share.{}.record.lock.duration.ms",
    "share.delivery.count.limit": "group.share.{}.delivery.count.limit",
    "share.partition.max.record.locks": "group.share.partition.max.record.locks ({})",
}


def _invalid(msg: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_config, msg)


def validate(configs: Mapping[str, Any], bounds: GroupConfig) -> dict[str, str]:
    """Kafka's GroupConfig.validate; returns the normalised strings."""
    out: dict[str, str] = {}
    for name, value in configs.items():
        d = GROUP_CONFIG_DEFS.get(name)
        if d is None:
            raise _invalid(f"Unknown group config name: {name}")
        if value is None:
            raise _invalid(f"Null value not supported for group configs: {name}")
        text = str(value).strip()
        if d.type == _INT:
            try:
                n = int(text)
            except ValueError:
                raise _invalid(
                    f"Invalid value {value} for configuration {name}: Not a number of type INT"
                ) from None
            assert d.bounds is not None
            lo, hi = d.bounds(bounds)
            if n < lo:
                raise _invalid(
                    f"{name} must be greater than or equal to {_BOUND_KEYS[name].format('min')}"
                )
            if n > hi:
                raise _invalid(
                    f"{name} must be less than or equal to {_BOUND_KEYS[name].format('max')}"
                )
            out[name] = str(n)
        elif name == "share.auto.offset.reset" and text.lower().startswith("by_duration:"):
            if parse_duration_ms(text.split(":", 1)[1]) is None:
                raise _invalid(
                    f"Invalid value {value} for configuration {name}: by_duration must be "
                    "followed by a non-negative ISO 8601 duration (PnDTnHnMn.nS)"
                )
            out[name] = "by_duration:" + text.split(":", 1)[1].upper()
        else:
            low = text.lower()
            if low not in d.choices:
                raise _invalid(
                    f"Invalid value {value} for configuration {name}: String must be one of: "
                    + ", ".join(d.choices)
                )
            out[name] = low
    for prefix in ("consumer", "share"):
        session = out.get(f"{prefix}.session.timeout.ms")
        heartbeat = out.get(f"{prefix}.heartbeat.interval.ms")
        s = (
            int(session)
            if session is not None
            else GROUP_CONFIG_DEFS[f"{prefix}.session.timeout.ms"].default(bounds)
        )
        h = (
            int(heartbeat)
            if heartbeat is not None
            else GROUP_CONFIG_DEFS[f"{prefix}.heartbeat.interval.ms"].default(bounds)
        )
        if (session is not None or heartbeat is not None) and s <= h:
            raise _invalid(
                f"{prefix}.session.timeout.ms must be greater than {prefix}.heartbeat.interval.ms"
            )
    return out


class GroupConfigs:
    """Every group's overrides, mirrored from ``/config/groups``.

    A change made through one broker writes Kafka's config change notification
    (``/config/changes``); every broker watches it and reloads, so the leaders serving
    a share group on other brokers apply the group's configs too."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.configs: dict[str, dict[str, str]] = {}
        self._watcher = ChangeWatcher(self._reload, "group configs")

    async def load(self) -> None:
        with contextlib.suppress(MetadataStoreError):
            await self.store.ensure_path(zk_paths.CONFIG_CHANGES)
            await self.store.get_children(zk_paths.CONFIG_CHANGES, watch=self._watcher.on_change)
        await self._read_all()

    async def _reload(self) -> None:
        await self.store.get_children(zk_paths.CONFIG_CHANGES, watch=self._watcher.on_change)
        await self._read_all()

    async def _read_all(self) -> None:
        try:
            names = await self.store.get_children(CONFIG_GROUPS)
        except NoNodeError:
            return
        fresh: dict[str, dict[str, str]] = {}
        for name in names:
            with contextlib.suppress(NoNodeError, ValueError):
                raw, _ = await self.store.get(f"{CONFIG_GROUPS}/{name}")
                fresh[name] = dict(zk_data.EntityConfig.decode(raw).config)
        self.configs = fresh

    async def stop(self) -> None:
        await self._watcher.stop()

    def get(self, group_id: str) -> Mapping[str, str]:
        return self.configs.get(group_id, {})

    async def write(self, group_id: str, configs: dict[str, str]) -> None:
        data = zk_data.EntityConfig(configs).encode()
        path = f"{CONFIG_GROUPS}/{group_id}"
        try:
            await self.store.set(path, data)
        except NoNodeError:
            await self.store.create(path, data, makepath=True)
        self.configs[group_id] = dict(configs)
        await self.store.create(
            zk_paths.config_change_path(),
            zk_data.ConfigChangeNotification(f"groups/{group_id}").encode(),
            sequential=True,
            makepath=True,
        )

    def describe(
        self,
        group_id: str,
        bounds: GroupConfig,
        keys: set[str] | None,
        include_synonyms: bool,
        include_docs: bool,
        broker_source: Callable[[str], int] = lambda _key: SRC_DEFAULT,
    ) -> list[dict[str, Any]]:
        """Every group config; an unset one takes its broker synonym's value and source
        (``broker_source``: static/dynamic broker config or Kafka's default)."""
        overrides = self.get(group_id)
        out = []
        for d in GROUP_CONFIG_DEFS.values():
            if keys is not None and d.name not in keys:
                continue
            default = str(d.default(bounds))
            synonyms = []
            if d.name in overrides:
                synonyms.append({"name": d.name, "value": overrides[d.name], "source": SRC_GROUP})
            broker_key = BROKER_SYNONYMS.get(d.name)
            if broker_key is not None:
                synonyms.append(
                    {"name": broker_key, "value": default, "source": broker_source(broker_key)}
                )
            value = overrides.get(d.name, default)
            source = synonyms[0]["source"] if synonyms else SRC_DEFAULT
            out.append(
                {
                    "name": d.name,
                    "value": value,
                    "read_only": False,
                    "config_source": source,
                    "is_sensitive": False,
                    "synonyms": synonyms if include_synonyms else [],
                    "config_type": d.type,
                    "documentation": d.doc if include_docs else None,
                }
            )
        return out
