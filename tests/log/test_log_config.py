"""Topic configs: Kafka names, defaults, validation naming the key."""

from __future__ import annotations

import pytest

from kafkalite.log.log_config import LONG_MAX, TOPIC_CONFIG_DEFS, ConfigError, ConfigType, LogConfig


def test_defaults_are_kafkas() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1073741824 and c.segment_ms == 604800000 and c.segment_jitter_ms == 0
    assert c.segment_index_bytes == 10485760 and c.index_interval_bytes == 4096
    assert c.retention_ms == 604800000 and c.retention_bytes == -1 and c.cleanup_policy == "delete"
    assert (
        c.file_delete_delay_ms == 60000 and c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    )
    assert c.max_message_bytes == 1048588 and c.message_timestamp_type == "CreateTime"
    assert c.min_cleanable_dirty_ratio == 0.5 and c.min_compaction_lag_ms == 0
    assert c.max_compaction_lag_ms == LONG_MAX and c.delete_retention_ms == 86400000
    assert c.compression_type == "producer" and c.min_insync_replicas == 1
    assert c.unclean_leader_election_enable is False and c.preallocate is False
    assert (
        c.message_timestamp_before_max_ms == LONG_MAX
        and c.message_timestamp_after_max_ms == 3600000
    )
    props = c.to_properties()
    assert props["retention.ms"] == "604800000" and props["preallocate"] == "false"
    for name, d in TOPIC_CONFIG_DEFS.items():
        assert props[name] == d.render(d.default), name


def test_from_properties_parses_and_tracks_overrides() -> None:
    base = LogConfig(retention_ms=1)
    c = LogConfig.from_properties(
        {
            "retention.ms": "1000",
            "cleanup.policy": "compact, delete",
            "preallocate": "TRUE",
            "min.cleanable.dirty.ratio": "0.1",
        },
        base,
    )
    assert (
        c.retention_ms == 1000 and c.cleanup_policy == "compact,delete" and c.compact and c.delete
    )
    assert c.preallocate is True and c.min_cleanable_dirty_ratio == 0.1
    assert c.overrides == {
        "retention.ms",
        "cleanup.policy",
        "preallocate",
        "min.cleanable.dirty.ratio",
    }
    assert base.retention_ms == 1  # base untouched


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("retention.ms", "abc"),
        ("retention.ms", "-2"),
        ("segment.bytes", "10"),
        ("segment.bytes", str(2**31)),
        ("cleanup.policy", "shred"),
        ("cleanup.policy", ""),
        ("compression.type", "brotli"),
        ("message.timestamp.type", "Now"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("min.insync.replicas", "0"),
        ("preallocate", "yes"),
        ("no.such.config", "1"),
        ("leader.replication.throttled.replicas", "0-1"),
    ],
)
def test_bad_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as e:
        LogConfig.from_properties({key: value})
    assert e.value.key == key and key in str(e.value)
    assert e.value.error_code == 40


def test_cross_field_validation() -> None:
    with pytest.raises(ConfigError, match="min.compaction.lag.ms"):
        LogConfig.from_properties({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_broker_synonyms() -> None:
    assert TOPIC_CONFIG_DEFS["retention.ms"].synonyms[0].name == "log.retention.ms"
    assert TOPIC_CONFIG_DEFS["segment.bytes"].synonyms[0].name == "log.segment.bytes"
    assert TOPIC_CONFIG_DEFS["max.message.bytes"].synonyms[0].name == "message.max.bytes"
    assert TOPIC_CONFIG_DEFS["retention.ms"].type is ConfigType.LONG
    c = LogConfig.from_broker_properties(
        {"log.retention.hours": "24", "log.segment.bytes": "1048576", "other": "x"}
    )
    assert c.retention_ms == 86_400_000 and c.segment_bytes == 1048576
    c = LogConfig.from_broker_properties(
        {"log.retention.hours": "24", "log.retention.minutes": "5"}
    )
    assert c.retention_ms == 300_000
    c = LogConfig.from_broker_properties({"log.retention.hours": "-1"})
    assert c.retention_ms == -1
    c = LogConfig.from_broker_properties(
        {"log.roll.hours": "1", "log.cleaner.delete.retention.ms": "5"}
    )
    assert c.segment_ms == 3_600_000 and c.delete_retention_ms == 5
    with pytest.raises(ConfigError) as e:
        LogConfig.from_broker_properties({"log.segment.bytes": "x"})
    assert e.value.key == "log.segment.bytes"
