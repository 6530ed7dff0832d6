"""The options of the ``kafkalite`` data source, parsed as Spark's Kafka connector parses them.

Option *names* are case-insensitive (Spark hands Python data sources a case-insensitive
map); values are kept exactly as given, since topic names, patterns and client settings are
case-sensitive. Everything here is plain Python so that the driver and the unit tests can use
it without a SparkSession.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkalite.common.errors import ConfigError

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "SinkOptions",
    "SourceOptions",
    "parse_sink_options",
    "parse_source_options",
]

#: Spark's Kafka JSON sentinels: -2 is earliest, -1 is latest
EARLIEST = -2
LATEST = -1

#: client settings the connector owns (Spark's KafkaSourceProvider rejects the same ones)
_SOURCE_REJECTED = {
    "auto.offset.reset": "use startingOffsets instead",
    "enable.auto.commit": "the source never commits offsets to Kafka",
    "key.deserializer": "keys are always read as bytes",
    "value.deserializer": "values are always read as bytes",
    "interceptor.classes": "not supported",
}
_SINK_REJECTED = {
    "key.serializer": "keys are always written as bytes",
    "value.serializer": "values are always written as bytes",
}


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end: earliest, latest, per-partition offsets, or by timestamp.

    ``kind`` is ``earliest``, ``latest``, ``offsets`` (``offsets`` maps topic -> partition ->
    offset, with -2/-1 for earliest/latest), ``timestamp`` (``timestamp`` for every partition)
    or ``timestamps`` (``offsets`` holds a timestamp per partition).
    """

    kind: str
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    timestamp: int | None = None


@dataclass(frozen=True)
class SourceOptions:
    """A reader's parsed options."""

    client: dict[str, str]
    subscribe: list[str] | None
    subscribe_pattern: str | None
    assign: dict[str, list[int]] | None
    starting: OffsetSpec
    ending: OffsetSpec
    by_timestamp_strategy: str
    fail_on_data_loss: bool
    include_headers: bool
    min_partitions: int | None
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    poll_timeout_ms: int
    #: with ``minOffsetsPerTrigger``: the longest a trigger waits for the minimum (Spark: 15m)
    max_trigger_delay_ms: int = 15 * 60 * 1000
    max_records_per_partition: int | None = None
    #: the clients' generated ``group.id`` starts with it (never joined: assign only)
    group_id_prefix: str = "spark-kafka-source"
    #: executors read ranges with Fetch requests decoded into columns (``directFetch``)
    direct_fetch: bool = True

    @property
    def read_committed(self) -> bool:
        return self.client.get("isolation.level", "read_uncommitted") == "read_committed"


@dataclass(frozen=True)
class SinkOptions:
    """A writer's parsed options."""

    client: dict[str, str]
    topic: str | None
    exactly_once: bool
    transactional_id_prefix: str
    marker_topic: str


class CaseInsensitive:
    """Look-ups by lower-cased key; values untouched."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self._items = {str(k).lower(): (str(k), str(v)) for k, v in options.items()}

    def get(self, key: str, default: str | None = None) -> str | None:
        hit = self._items.get(key.lower())
        return default if hit is None else hit[1]

    def kafka_params(self) -> dict[str, str]:
        """``kafka.*`` options with the prefix removed and the client's own key case kept."""
        return {
            name[len("kafka.") :]: value
            for name, value in self._items.values()
            if name.lower().startswith("kafka.")
        }


def _int(opts: CaseInsensitive, key: str, minimum: int = 1) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(key, f"{raw!r} is not an integer") from None
    if value < minimum:
        raise ConfigError(key, f"must be at least {minimum}, got {value}")
    return value


def _bool(opts: CaseInsensitive, key: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ConfigError(key, f"{raw!r} is not true or false")


_DURATION = re.compile(r"(-?[0-9]+)\s*([a-z]+)?")
_DURATION_MS = {
    "us": 0.001,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def _duration_ms(key: str, raw: str) -> int:
    """A Spark time string (``Utils.timeStringAsMs``): ``500ms``, ``10s``, ``15m``, ``1h``,
    ``2d``; a bare number is milliseconds."""
    m = _DURATION.fullmatch(raw.strip().lower())
    if m is None or (m.group(2) is not None and m.group(2) not in _DURATION_MS):
        raise ConfigError(key, f"{raw!r} is not a duration like 500ms, 10s, 15m, 1h")
    value = int(int(m.group(1)) * _DURATION_MS[m.group(2) or "ms"])
    if value < 0:
        raise ConfigError(key, f"must not be negative, got {raw!r}")
    return value


def _per_partition_json(key: str, raw: str) -> dict[str, dict[int, int]]:
    try:
        data = json.loads(raw)
        return {
            str(topic): {int(p): int(v) for p, v in parts.items()} for topic, parts in data.items()
        }
    except (ValueError, AttributeError, TypeError):
        raise ConfigError(
            key, f'expected JSON like {{"topicA":{{"0":23,"1":-1}}}}, got {raw!r}'
        ) from None


def _offset_spec(opts: CaseInsensitive, which: str, default: str, streaming: bool) -> OffsetSpec:
    """Spark's precedence: ``<which>Timestamp`` over ``<which>OffsetsByTimestamp`` over
    ``<which>Offsets``."""
    ts_key, by_ts_key, off_key = (
        f"{which}Timestamp",
        f"{which}OffsetsByTimestamp",
        f"{which}Offsets",
    )
    ts = opts.get(ts_key)
    if ts is not None:
        try:
            return OffsetSpec("timestamp", timestamp=int(ts))
        except ValueError:
            raise ConfigError(ts_key, f"{ts!r} is not a timestamp in milliseconds") from None
    by_ts = opts.get(by_ts_key)
    if by_ts is not None:
        return OffsetSpec("timestamps", offsets=_per_partition_json(by_ts_key, by_ts))
    raw = (opts.get(off_key) or default).strip()
    if raw.lower() in ("earliest", "latest"):
        kind = raw.lower()
        if not streaming and which == "starting" and kind == "latest":
            raise ConfigError(off_key, "starting offset can't be latest for batch queries")
        if which == "ending" and kind == "earliest":
            raise ConfigError(off_key, "ending offset can't be earliest for batch queries")
        return OffsetSpec(kind)
    offsets = _per_partition_json(off_key, raw)
    for parts in offsets.values():
        if not streaming and which == "starting" and LATEST in parts.values():
            raise ConfigError(off_key, "starting offset for a partition can't be latest (-1)")
        if which == "ending" and EARLIEST in parts.values():
            raise ConfigError(off_key, "ending offset for a partition can't be earliest (-2)")
    return OffsetSpec("offsets", offsets=offsets)


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate a reader's options (Spark's ``KafkaSourceProvider`` rules)."""
    opts = CaseInsensitive(options)
    client = opts.kafka_params()
    if "bootstrap.servers" not in client:
        raise ConfigError("kafka.bootstrap.servers", "option must be specified")
    for key, why in _SOURCE_REJECTED.items():
        if key in client:
            raise ConfigError(f"kafka.{key}", why)
    level = client.get("isolation.level", "read_uncommitted")
    if level not in ("read_uncommitted", "read_committed"):
        raise ConfigError(
            "kafka.isolation.level", f"{level!r} is not read_uncommitted or read_committed"
        )

    subscribe_raw, pattern, assign_raw = (
        opts.get("subscribe"),
        opts.get("subscribePattern"),
        opts.get("assign"),
    )
    given = [
        name
        for name, v in (
            ("subscribe", subscribe_raw),
            ("subscribePattern", pattern),
            ("assign", assign_raw),
        )
        if v is not None
    ]
    if len(given) != 1:
        raise ConfigError(
            "subscribe",
            "exactly one of 'subscribe', 'subscribePattern' or 'assign' must be given"
            + (f", got {given}" if given else ""),
        )
    subscribe = None
    if subscribe_raw is not None:
        subscribe = [t.strip() for t in subscribe_raw.split(",") if t.strip()]
        if not subscribe:
            raise ConfigError("subscribe", "no topic to subscribe to")
    if pattern is not None:
        if not pattern.strip():
            raise ConfigError("subscribePattern", "pattern to subscribe is empty")
        try:
            re.compile(pattern)
        except re.error as e:
            raise ConfigError("subscribePattern", f"bad pattern: {e}") from None
    assign = None
    if assign_raw is not None:
        try:
            assign = {str(t): [int(p) for p in ps] for t, ps in json.loads(assign_raw).items()}
        except (ValueError, AttributeError, TypeError):
            raise ConfigError(
                "assign",
                f'expected JSON like {{"topicA":[0,1],"topicB":[2,4]}}, got {assign_raw!r}',
            ) from None

    ending = OffsetSpec("latest")
    if streaming:
        for key in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if opts.get(key) is not None:
                raise ConfigError(key, "ending offset not valid in streaming queries")
    else:
        ending = _offset_spec(opts, "ending", "latest", streaming)
        for key in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger"):
            if opts.get(key) is not None:
                raise ConfigError(key, "only valid in streaming queries")
    min_per_trigger = _int(opts, "minOffsetsPerTrigger")
    max_per_trigger = _int(opts, "maxOffsetsPerTrigger")
    if min_per_trigger is not None and max_per_trigger is not None:
        if min_per_trigger > max_per_trigger:
            raise ConfigError(
                "minOffsetsPerTrigger",
                f"the value of minOffsetsPerTrigger ({min_per_trigger}) is higher than the"
                f" maxOffsetsPerTrigger ({max_per_trigger})",
            )
    strategy = (opts.get("startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ConfigError(
            "startingOffsetsByTimestampStrategy", f"{strategy!r} is not error or latest"
        )
    return SourceOptions(
        client=client,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=_offset_spec(opts, "starting", "latest" if streaming else "earliest", streaming),
        ending=ending,
        by_timestamp_strategy=strategy,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        min_partitions=_int(opts, "minPartitions"),
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        poll_timeout_ms=_int(opts, "kafkaConsumer.pollTimeoutMs") or 120_000,
        max_trigger_delay_ms=_duration_ms("maxTriggerDelay", opts.get("maxTriggerDelay") or "15m"),
        max_records_per_partition=_int(opts, "maxRecordsPerPartition"),
        group_id_prefix=opts.get("groupIdPrefix") or "spark-kafka-source",
        direct_fetch=_bool(opts, "directFetch", True),
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate a writer's options."""
    opts = CaseInsensitive(options)
    client = opts.kafka_params()
    if "bootstrap.servers" not in client:
        raise ConfigError("kafka.bootstrap.servers", "option must be specified")
    for key, why in _SINK_REJECTED.items():
        if key in client:
            raise ConfigError(f"kafka.{key}", why)
    exactly_once = _bool(opts, "exactlyOnce", False)
    if "transactional.id" in client:
        raise ConfigError(
            "kafka.transactional.id", "use exactlyOnce=true and transactionalIdPrefix"
        )
    return SinkOptions(
        client=client,
        topic=opts.get("topic"),
        exactly_once=exactly_once,
        transactional_id_prefix=opts.get("transactionalIdPrefix") or "kafkalite-spark-sink",
        marker_topic=opts.get("exactlyOnce.markerTopic") or "_kafkalite_spark_sink_commits",
    )
