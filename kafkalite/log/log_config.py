"""Topic-level log configuration with Kafka's names, defaults and validation.

``TOPIC_CONFIG_DEFS`` is the single table DescribeConfigs, CreateTopics and
AlterConfigs work from: each topic config's type, default, validator and the
broker-level properties (synonyms) that set its default, in Kafka's order of
precedence (e.g. retention.ms <- log.retention.ms, log.retention.minutes,
log.retention.hours).
"""

from __future__ import annotations

import dataclasses
import enum
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalite.log.errors import ConfigError

__all__ = [
    "LONG_MAX",
    "TOPIC_CONFIG_DEFS",
    "ConfigDef",
    "ConfigError",
    "ConfigType",
    "LogConfig",
    "Synonym",
]

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MIN = -(2**63)


class ConfigType(enum.IntEnum):
    """DescribeConfigs ``config_type`` values (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


@dataclass(slots=True, frozen=True)
class Synonym:
    """A broker property that sets a topic config's default; value * ``scale_ms``."""

    name: str
    scale: int = 1


Validator = Callable[[Any], str | None]  # returns an error message or None


@dataclass(slots=True, frozen=True)
class ConfigDef:
    name: str
    field: str  # LogConfig attribute
    type: ConfigType
    default: Any
    validator: Validator | None
    synonyms: tuple[Synonym, ...]  # broker-level properties, highest precedence first
    doc: str

    def parse(self, raw: object) -> Any:
        """Parse and validate a value (string or already typed); raise ConfigError."""
        value = _parse(self.name, self.type, raw)
        if self.validator is not None:
            msg = self.validator(value)
            if msg is not None:
                raise ConfigError(self.name, f"{_render(self.type, value)}: {msg}")
        return value

    def render(self, value: Any) -> str:
        """The string DescribeConfigs reports."""
        return _render(self.type, value)


def _parse(key: str, typ: ConfigType, raw: object) -> Any:
    if typ in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
        lo, hi = {
            ConfigType.INT: (INT_MIN, INT_MAX),
            ConfigType.LONG: (LONG_MIN, LONG_MAX),
            ConfigType.SHORT: (-(2**15), 2**15 - 1),
        }[typ]
        if isinstance(raw, bool):
            raise ConfigError(key, f"{raw!r}: expected an integer")
        if isinstance(raw, int):
            value = raw
        else:
            try:
                value = int(str(raw).strip())
            except ValueError:
                raise ConfigError(key, f"{raw!r}: expected an integer") from None
        if not lo <= value <= hi:
            raise ConfigError(key, f"{value} is out of range for {typ.name.lower()}")
        return value
    if typ is ConfigType.DOUBLE:
        try:
            return float(str(raw).strip()) if not isinstance(raw, float | int) else float(raw)
        except ValueError:
            raise ConfigError(key, f"{raw!r}: expected a number") from None
    if typ is ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        s = str(raw).strip().lower()
        if s in ("true", "false"):
            return s == "true"
        raise ConfigError(key, f"{raw!r}: expected true or false")
    if typ is ConfigType.LIST:
        if isinstance(raw, list | tuple):
            items = [str(x).strip() for x in raw]
        else:
            s = str(raw).strip()
            items = [x.strip() for x in s.split(",")] if s else []
        return ",".join(items)
    return str(raw).strip()


def _render(typ: ConfigType, value: Any) -> str:
    if typ is ConfigType.BOOLEAN:
        return "true" if value else "false"
    return str(value)


def _at_least(n: float) -> Validator:
    return lambda v: None if v >= n else f"must be at least {n}"


def _between(lo: float, hi: float) -> Validator:
    return lambda v: None if lo <= v <= hi else f"must be between {lo} and {hi}"


def _one_of(*choices: str) -> Validator:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}"


def _list_of(*choices: str) -> Validator:
    def check(v: str) -> str | None:
        items = [x for x in v.split(",") if x]
        if not items:
            return "must not be empty"
        bad = [x for x in items if x not in choices]
        return f"must be a list of {', '.join(choices)}" if bad else None

    return check


def _throttled_replicas(v: str) -> str | None:
    if v in ("", "*"):
        return None
    for item in v.split(","):
        parts = item.split(":")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            return "must be '*' or a list of partitionId:brokerId"
    return None


def _no_remote(v: bool) -> str | None:
    return "tiered storage is not supported" if v else None


def _zstd_level(v: int) -> str | None:
    return None if -131072 <= v <= 22 else "must be between -131072 and 22"


def _gzip_level(v: int) -> str | None:
    return None if v == -1 or 1 <= v <= 9 else "must be -1 or between 1 and 9"


_S = Synonym
_DAY_MS = 86_400_000

_DEFS: list[ConfigDef] = [
    ConfigDef("cleanup.policy", "cleanup_policy", ConfigType.LIST, "delete", _list_of("compact", "delete"), (_S("log.cleanup.policy"),), "delete and/or compact old segments"),
    ConfigDef("compression.gzip.level", "compression_gzip_level", ConfigType.INT, -1, _gzip_level, (_S("compression.gzip.level"),), "gzip level when compression.type=gzip"),
    ConfigDef("compression.lz4.level", "compression_lz4_level", ConfigType.INT, 9, _between(1, 17), (_S("compression.lz4.level"),), "lz4 level when compression.type=lz4"),
    ConfigDef("compression.type", "compression_type", ConfigType.STRING, "producer", _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), (_S("compression.type"),), "final codec; producer keeps the producer's"),
    ConfigDef("compression.zstd.level", "compression_zstd_level", ConfigType.INT, 3, _zstd_level, (_S("compression.zstd.level"),), "zstd level when compression.type=zstd"),
    ConfigDef("delete.retention.ms", "delete_retention_ms", ConfigType.LONG, _DAY_MS, _at_least(0), (_S("log.cleaner.delete.retention.ms"),), "how long tombstones are kept on compacted topics"),
    ConfigDef("file.delete.delay.ms", "file_delete_delay_ms", ConfigType.LONG, 60_000, _at_least(0), (_S("log.segment.delete.delay.ms"),), "delay before a deleted segment's files are removed"),
    ConfigDef("flush.messages", "flush_messages", ConfigType.LONG, LONG_MAX, _at_least(1), (_S("log.flush.interval.messages"),), "fsync after this many messages"),
    ConfigDef("flush.ms", "flush_ms", ConfigType.LONG, LONG_MAX, _at_least(0), (_S("log.flush.interval.ms"),), "fsync at least this often"),
    ConfigDef("follower.replication.throttled.replicas", "follower_replication_throttled_replicas", ConfigType.LIST, "", _throttled_replicas, (), "replicas throttled on the follower side"),
    ConfigDef("index.interval.bytes", "index_interval_bytes", ConfigType.INT, 4096, _at_least(0), (_S("log.index.interval.bytes"),), "bytes between offset index entries"),
    ConfigDef("leader.replication.throttled.replicas", "leader_replication_throttled_replicas", ConfigType.LIST, "", _throttled_replicas, (), "replicas throttled on the leader side"),
    ConfigDef("local.retention.bytes", "local_retention_bytes", ConfigType.LONG, -2, _at_least(-2), (_S("log.local.retention.bytes"),), "tiered storage local retention (unused)"),
    ConfigDef("local.retention.ms", "local_retention_ms", ConfigType.LONG, -2, _at_least(-2), (_S("log.local.retention.ms"),), "tiered storage local retention (unused)"),
    ConfigDef("max.compaction.lag.ms", "max_compaction_lag_ms", ConfigType.LONG, LONG_MAX, _at_least(1), (_S("log.cleaner.max.compaction.lag.ms"),), "records older than this become eligible for compaction"),
    ConfigDef("max.message.bytes", "max_message_bytes", ConfigType.INT, 1_048_588, _at_least(0), (_S("message.max.bytes"),), "largest record batch size allowed"),
    ConfigDef("message.timestamp.after.max.ms", "message_timestamp_after_max_ms", ConfigType.LONG, 3_600_000, _at_least(0), (_S("log.message.timestamp.after.max.ms"),), "how far in the future a CreateTime may be"),
    ConfigDef("message.timestamp.before.max.ms", "message_timestamp_before_max_ms", ConfigType.LONG, LONG_MAX, _at_least(0), (_S("log.message.timestamp.before.max.ms"),), "how far in the past a CreateTime may be"),
    ConfigDef("message.timestamp.type", "message_timestamp_type", ConfigType.STRING, "CreateTime", _one_of("CreateTime", "LogAppendTime"), (_S("log.message.timestamp.type"),), "CreateTime or LogAppendTime"),
    ConfigDef("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", ConfigType.DOUBLE, 0.5, _between(0, 1), (_S("log.cleaner.min.cleanable.ratio"),), "dirty ratio above which the cleaner compacts"),
    ConfigDef("min.compaction.lag.ms", "min_compaction_lag_ms", ConfigType.LONG, 0, _at_least(0), (_S("log.cleaner.min.compaction.lag.ms"),), "records younger than this are not compacted"),
    ConfigDef("min.insync.replicas", "min_insync_replicas", ConfigType.INT, 1, _at_least(1), (_S("min.insync.replicas"),), "ISR size needed for acks=all"),
    ConfigDef("preallocate", "preallocate", ConfigType.BOOLEAN, False, None, (_S("log.preallocate"),), "preallocate segment files"),
    ConfigDef("remote.storage.enable", "remote_storage_enable", ConfigType.BOOLEAN, False, _no_remote, (), "tiered storage (not supported)"),
    ConfigDef("retention.bytes", "retention_bytes", ConfigType.LONG, -1, None, (_S("log.retention.bytes"),), "partition size above which old segments are deleted; -1 unlimited"),
    ConfigDef("retention.ms", "retention_ms", ConfigType.LONG, 7 * _DAY_MS, _at_least(-1), (_S("log.retention.ms"), _S("log.retention.minutes", 60_000), _S("log.retention.hours", 3_600_000)), "age after which old segments are deleted; -1 unlimited"),
    ConfigDef("segment.bytes", "segment_bytes", ConfigType.INT, 1_073_741_824, _at_least(14), (_S("log.segment.bytes"),), "segment file size before a roll"),
    ConfigDef("segment.index.bytes", "segment_index_bytes", ConfigType.INT, 10_485_760, _at_least(4), (_S("log.index.size.max.bytes"),), "preallocated size of an offset/time index"),
    ConfigDef("segment.jitter.ms", "segment_jitter_ms", ConfigType.LONG, 0, _at_least(0), (_S("log.roll.jitter.ms"), _S("log.roll.jitter.hours", 3_600_000)), "random jitter subtracted from segment.ms"),
    ConfigDef("segment.ms", "segment_ms", ConfigType.LONG, 7 * _DAY_MS, _at_least(1), (_S("log.roll.ms"), _S("log.roll.hours", 3_600_000)), "roll a segment at least this often"),
    ConfigDef("unclean.leader.election.enable", "unclean_leader_election_enable", ConfigType.BOOLEAN, False, None, (_S("unclean.leader.election.enable"),), "allow out-of-sync replicas to lead"),
]  # fmt: skip

TOPIC_CONFIG_DEFS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}
_BY_FIELD: dict[str, ConfigDef] = {d.field: d for d in _DEFS}


@dataclass(slots=True)
class LogConfig:
    """Effective topic config of one log (defaults = Kafka 4 topic defaults)."""

    segment_bytes: int = 1_073_741_824
    segment_ms: int = 7 * _DAY_MS
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10_485_760
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * _DAY_MS
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1_048_588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = _DAY_MS
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    preallocate: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_storage_enable: bool = False
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    #: names set explicitly (topic overrides), for DescribeConfigs' config source
    overrides: frozenset[str] = field(default=frozenset(), compare=False)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def random_segment_jitter(self) -> int:
        """Per-segment roll jitter, as Kafka: uniform in [0, min(jitter, segment.ms))."""
        if self.segment_jitter_ms <= 0:
            return 0
        return random.randrange(min(self.segment_jitter_ms, self.segment_ms))

    @classmethod
    def from_properties(
        cls, props: Mapping[str, object], base: LogConfig | None = None
    ) -> LogConfig:
        """Apply topic-level ``props`` (Kafka names) on top of ``base`` (or the defaults)."""
        changes: dict[str, Any] = {}
        for key, raw in props.items():
            d = TOPIC_CONFIG_DEFS.get(key)
            if d is None:
                raise ConfigError(key, "unknown topic config name")
            changes[d.field] = d.parse(raw)
        base = base if base is not None else cls()
        merged = dataclasses.replace(base, **changes, overrides=base.overrides | set(props))
        merged.validate()
        return merged

    @classmethod
    def from_broker_properties(cls, props: Mapping[str, object]) -> LogConfig:
        """Topic defaults from broker properties (log.retention.hours etc.), Kafka precedence.

        Keys that are not log-default synonyms are ignored: the broker config
        validates those itself.
        """
        changes: dict[str, Any] = {}
        for d in _DEFS:
            for syn in d.synonyms:
                if syn.name in props and props[syn.name] is not None:
                    raw = props[syn.name]
                    if syn.scale != 1:
                        value = _parse(syn.name, ConfigType.LONG, raw)
                        scaled = value * syn.scale if value >= 0 else value
                        changes[d.field] = d.parse(min(scaled, LONG_MAX))
                    else:
                        try:
                            changes[d.field] = d.parse(raw)
                        except ConfigError as e:
                            raise ConfigError(syn.name, e.message) from None
                    break
        cfg = cls(**changes)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Cross-field checks Kafka's LogConfig.validate performs."""
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ConfigError(
                "min.compaction.lag.ms",
                f"conflict: min.compaction.lag.ms {self.min_compaction_lag_ms} must not be"
                f" larger than max.compaction.lag.ms {self.max_compaction_lag_ms}",
            )

    def to_properties(self) -> dict[str, str]:
        """Every topic config rendered as DescribeConfigs reports it."""
        return {d.name: d.render(getattr(self, d.field)) for d in _DEFS}

    def get(self, name: str) -> Any:
        """Value by Kafka name."""
        return getattr(self, TOPIC_CONFIG_DEFS[name].field)


def config_def_for_field(field_name: str) -> ConfigDef:
    return _BY_FIELD[field_name]
