"""Client telemetry (KIP-714): CLIENT_METRICS subscriptions, GetTelemetrySubscriptions,
PushTelemetry, and the pushed metrics on the broker's ``/metrics``.

Kafka's ``ClientMetricsManager``, observably: a subscription is a CLIENT_METRICS config
resource (``metrics``: name prefixes or ``*``; ``interval.ms``: 100..3600000; ``match``:
``key=regex`` on the client's instance id, client id, software name and version, source
address and port), set with (Incremental)AlterConfigs and stored in
``/config/client-metrics/<name>``. A client instance gets the union of the subscriptions
it matches, the shortest interval, and a subscription id (CRC32C of the set and the
interval, XORed with the instance id's hash); it is throttled when it asks or pushes
sooner than its interval, and told UNKNOWN_SUBSCRIPTION_ID once the subscriptions
changed.

Kafka hands pushed metrics to a receiver plugin and keeps none itself; kafkalite decodes
them (OpenTelemetry ``MetricsData`` protobuf, through ``opentelemetry-proto``) and keeps
each instance's latest values, which :class:`ClientTelemetryCollector` exports as
``<metric name, dots as underscores>{client_id, client_instance_id, <attributes>}``.
Sums pushed as deltas (``delta_temporality`` is requested, as Kafka does) are added up
into counters. An instance not heard from for ``max(60 s, 3 × interval)`` is dropped
with its series. Subscriptions are read from the store at start-up and updated on the
broker that serves the AlterConfigs and, through Kafka's config change notification
(``/config/changes``), on every other broker.
"""

from __future__ import annotations

import logging
import re
import uuid
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import crc32c
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    UnknownMetricFamily,
)
from prometheus_client.registry import Collector

from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.change_watcher import ChangeWatcher
from kafkalite.metadata.store import MetadataStore, NoNodeError
from kafkalite.protocol.decompression import CorruptCompressedData, open_stream, read_all
from kafkalite.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkalite.network.api_spec import RequestContext

log = logging.getLogger(__name__)

ENTITY_TYPE = "client-metrics"
METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
MATCH_PARAMS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)
#: ZSTD, LZ4, GZIP, SNAPPY: Kafka's preference order
ACCEPTED_COMPRESSION = [4, 3, 1, 2]
CACHE_EXPIRY_MS = 60_000
MAX_INSTANCES = 16384
#: a decompressed push may not exceed this (the compressed size is telemetry.max.bytes)
MAX_DECOMPRESSED = 16 << 20
_ZERO = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]


def parse_subscription(name: str, configs: Mapping[str, str]) -> Subscription:
    """Kafka's ClientMetricsConfigs.validate: INVALID_REQUEST for an unknown key or an
    interval out of range, INVALID_CONFIG for a bad match pattern."""
    if not name:
        raise KafkaError(ErrorCode.invalid_request, "Subscription name can't be empty")
    for k in configs:
        if k not in (METRICS, INTERVAL_MS, MATCH):
            raise KafkaError(
                ErrorCode.invalid_request, f"Unknown client metrics configuration: {k}"
            )
    metrics = tuple(x.strip() for x in configs.get(METRICS, "").split(",") if x.strip())
    try:
        interval = int(configs.get(INTERVAL_MS, DEFAULT_INTERVAL_MS))
    except ValueError:
        raise KafkaError(
            ErrorCode.invalid_config,
            f"Invalid value {configs[INTERVAL_MS]} for configuration {INTERVAL_MS}: "
            "Not a number of type INT",
        ) from None
    if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Invalid value {interval} for {INTERVAL_MS}, interval must be between 100 and "
            "3600000 (1 hour)",
        )
    patterns = []
    for p in (x.strip() for x in configs.get(MATCH, "").split(",") if x.strip()):
        parts = p.split("=")
        if len(parts) != 2 or parts[0].strip() not in MATCH_PARAMS:
            raise KafkaError(ErrorCode.invalid_config, f"Illegal client matching pattern: {p}")
        try:
            patterns.append((parts[0].strip(), re.compile(parts[1].strip())))
        except re.error:
            raise KafkaError(
                ErrorCode.invalid_config, f"Illegal client matching pattern: {p}"
            ) from None
    return Subscription(name, metrics, interval, tuple(patterns))


@dataclass(slots=True)
class ClientInstance:
    instance_id: uuid.UUID
    attributes: dict[str, str]
    subscription_id: int
    version: int
    metrics: list[str]
    push_interval_ms: int
    last_get_ms: int = -(2**62)
    last_push_ms: int = -(2**62)
    last_seen_ms: int = 0
    terminating: bool = False
    last_error: int = 0
    #: (metric name, kind, sorted attribute items) -> value
    series: dict[tuple[str, str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)


class ClientMetricsManager:
    def __init__(self, clock_ms: Callable[[], int], telemetry_max_bytes: int = 1 << 20) -> None:
        self._clock_ms = clock_ms
        self.telemetry_max_bytes = telemetry_max_bytes
        self.subscriptions: dict[str, Subscription] = {}
        #: the stored configs of each subscription (DescribeConfigs, AlterConfigs)
        self.configs: dict[str, dict[str, str]] = {}
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        self._version = 0
        self._store: MetadataStore | None = None
        self._watcher = ChangeWatcher(self._load_and_watch, "client metrics subscriptions", 1.0)

    # ---- subscriptions (CLIENT_METRICS config resources) ----------------------------
    async def load(self, store: MetadataStore) -> None:
        """Read every subscription and watch ``/config/changes``: a change made through
        another broker reaches this one as Kafka's config change notification."""
        self._store = store
        await store.ensure_path(zk_paths.CONFIG_CHANGES)
        await self._load_and_watch()

    async def stop(self) -> None:
        await self._watcher.stop()

    async def _load_and_watch(self) -> None:
        assert self._store is not None
        store = self._store
        await store.get_children(zk_paths.CONFIG_CHANGES, watch=self._watcher.on_change)
        root = f"{zk_paths.CONFIG}/{ENTITY_TYPE}"
        try:
            names = await store.get_children(root)
        except NoNodeError:
            names = []
        stored: dict[str, dict[str, str]] = {}
        for name in names:
            try:
                raw, _ = await store.get(f"{root}/{name}")
                configs = dict(zk_data.EntityConfig.decode(raw).config)
                parse_subscription(name, configs)
            except (NoNodeError, zk_data.MetadataFormatError, KafkaError) as e:
                log.warning("ignoring stored client metrics subscription %s: %s", name, e)
                continue
            if configs:
                stored[name] = configs
        for name in set(self.configs) - set(stored):
            self._apply(name, {})
        for name, configs in stored.items():
            if self.configs.get(name) != configs:
                self._apply(name, configs)

    async def set(self, name: str, configs: dict[str, str]) -> None:
        """Validate, store, notify the other brokers, apply (an empty set removes it)."""
        parse_subscription(name, configs)
        if self._store is not None:
            path = zk_paths.config_entity_path(ENTITY_TYPE, name)
            data = zk_data.EntityConfig(configs).encode()
            try:
                await self._store.set(path, data)
            except NoNodeError:
                await self._store.create(path, data, makepath=True)
            await self._store.create(
                zk_paths.config_change_path(),
                zk_data.ConfigChangeNotification(f"{ENTITY_TYPE}/{name}").encode(),
                sequential=True,
                makepath=True,
            )
        self._apply(name, configs)

    def _apply(self, name: str, configs: dict[str, str]) -> None:
        if configs:
            self.subscriptions[name] = parse_subscription(name, configs)
            self.configs[name] = dict(configs)
        elif name in self.subscriptions:
            del self.subscriptions[name], self.configs[name]
        else:
            return
        self._version += 1

    # ---- GetTelemetrySubscriptions ------------------------------------------------
    def get_subscriptions(self, ctx: RequestContext, instance_id: uuid.UUID | None) -> Any:
        now = self._clock_ms()
        if instance_id is None or instance_id == _ZERO:
            instance_id = uuid.uuid4()
        inst = self._instance(instance_id, ctx, now)
        elapsed = now - max(inst.last_get_ms, inst.last_push_ms)
        if elapsed < inst.push_interval_ms and inst.last_error not in (
            ErrorCode.unknown_subscription_id,
            ErrorCode.unsupported_compression_type,
        ):
            return {"error_code": ErrorCode.throttling_quota_exceeded, "instance": inst}
        inst.last_get_ms = now
        inst.last_error = ErrorCode.none
        return {"error_code": ErrorCode.none, "instance": inst}

    # ---- PushTelemetry ---------------------------------------------------------------
    def push(self, ctx: RequestContext, req: Any) -> int:
        """The error code of a push; decoded metrics are kept for ``/metrics``."""
        instance_id = req.client_instance_id
        if instance_id is None or instance_id == _ZERO:
            return ErrorCode.invalid_request
        now = self._clock_ms()
        inst = self._instance(instance_id, ctx, now)
        try:
            code = self._validate_push(inst, req, now)
        finally:
            inst.terminating = bool(req.terminating)
        if code != ErrorCode.none:
            inst.last_error = code
            return code
        if req.metrics:
            try:
                self._decode_into(inst, req.compression_type, req.metrics)
            except Exception as e:  # any undecodable payload (Kafka: the plugin's failure)
                log.debug("undecodable telemetry from %s: %s", instance_id, e)
                inst.last_error = ErrorCode.invalid_record
                return ErrorCode.invalid_record
        inst.last_error = ErrorCode.none
        return ErrorCode.none

    def _validate_push(self, inst: ClientInstance, req: Any, now: int) -> int:
        if inst.terminating:
            return ErrorCode.invalid_request
        accept = inst.last_get_ms > inst.last_push_ms or (
            now - inst.last_push_ms >= inst.push_interval_ms
        )
        if accept:
            inst.last_push_ms = now
        elif not req.terminating:
            return ErrorCode.throttling_quota_exceeded
        if req.subscription_id != inst.subscription_id:
            return ErrorCode.unknown_subscription_id
        if req.compression_type not in (0, 1, 2, 3, 4):
            return ErrorCode.unsupported_compression_type
        if req.metrics is not None and len(req.metrics) > self.telemetry_max_bytes:
            return ErrorCode.telemetry_too_large
        return ErrorCode.none

    # ---- client instances ------------------------------------------------------------
    def _instance(self, instance_id: uuid.UUID, ctx: RequestContext, now: int) -> ClientInstance:
        self._expire(now)
        inst = self.instances.get(instance_id)
        if inst is None or inst.version < self._version:
            attrs = _attributes(instance_id, ctx)
            fresh = self._evaluate(instance_id, attrs if inst is None else inst.attributes)
            if inst is not None:
                # re-evaluated after a subscription change: a fresh instance (so no
                # throttling: the client gets the new subscription at once, as in
                # Kafka), keeping the values it pushed
                fresh.series = inst.series
            inst = fresh
            self.instances[instance_id] = inst
        self.instances.move_to_end(instance_id)
        inst.last_seen_ms = now
        while len(self.instances) > MAX_INSTANCES:
            self.instances.popitem(last=False)
        return inst

    def _evaluate(self, instance_id: uuid.UUID, attrs: dict[str, str]) -> ClientInstance:
        interval = DEFAULT_INTERVAL_MS
        metrics: set[str] = set()
        for s in self.subscriptions.values():
            if all(
                (v := attrs.get(k)) is not None and p.fullmatch(v) is not None for k, p in s.match
            ):
                metrics.update(s.metrics)
                interval = min(interval, s.interval_ms)
        chosen = [ALL_METRICS] if ALL_METRICS in metrics else sorted(metrics)
        # Kafka: CRC32C of the set's text and the interval, XORed with the id's hash
        text = ("[" + ", ".join(chosen) + "]" + str(interval)).encode()
        sub_id = _i32(crc32c.crc32c(text) ^ _uuid_hash(instance_id))
        return ClientInstance(instance_id, attrs, sub_id, self._version, chosen, interval)

    def _expire(self, now: int) -> None:
        while self.instances:
            inst = next(iter(self.instances.values()))
            if now - inst.last_seen_ms <= max(CACHE_EXPIRY_MS, 3 * inst.push_interval_ms):
                break
            self.instances.popitem(last=False)

    # ---- OTLP decoding ---------------------------------------------------------------
    def _decode_into(self, inst: ClientInstance, codec: int, payload: bytes) -> None:
        from opentelemetry.proto.metrics.v1 import metrics_pb2

        data = bytes(payload)
        if codec:
            try:
                data = read_all(open_stream(codec, data), MAX_DECOMPRESSED)
            except (CorruptCompressedData, zlib.error) as e:
                raise ValueError(f"corrupt compressed telemetry: {e}") from None
        md = metrics_pb2.MetricsData()
        md.ParseFromString(data)
        for rm in md.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    _record(inst.series, m)


def _record(series: dict[Any, float], m: Any) -> None:
    kind = m.WhichOneof("data")
    if kind == "gauge":
        for p in m.gauge.data_points:
            series[(m.name, "gauge", _labels(p))] = _number(p)
    elif kind == "sum":
        delta = m.sum.aggregation_temporality == 1  # AGGREGATION_TEMPORALITY_DELTA
        typ = "counter" if m.sum.is_monotonic else "gauge"
        for p in m.sum.data_points:
            key = (m.name, typ, _labels(p))
            series[key] = (series.get(key, 0.0) if delta else 0.0) + _number(p)
    elif kind == "histogram":
        delta = m.histogram.aggregation_temporality == 1
        for p in m.histogram.data_points:
            labels = _labels(p)
            for suffix, value in (("_count", float(p.count)), ("_sum", p.sum)):
                key = (m.name + suffix, "untyped", labels)  # <name>_count, <name>_sum
                series[key] = (series.get(key, 0.0) if delta else 0.0) + value


def _number(p: Any) -> float:
    return float(p.as_int) if p.WhichOneof("value") == "as_int" else float(p.as_double)


def _labels(p: Any) -> tuple[tuple[str, str], ...]:
    out = []
    for a in p.attributes:
        v = a.value
        which = v.WhichOneof("value")
        out.append((_sanitize(a.key), str(getattr(v, which)) if which else ""))
    return tuple(sorted(out))


_INVALID = re.compile(r"[^a-zA-Z0-9_]")


def _sanitize(name: str) -> str:
    s = _INVALID.sub("_", name)
    return "_" + s if s[:1].isdigit() else s


def _attributes(instance_id: uuid.UUID, ctx: RequestContext) -> dict[str, str]:
    conn = ctx.connection
    peer = getattr(conn, "peer", None) or ("", 0)
    return {
        "client_instance_id": str(instance_id),
        "client_id": ctx.client_id or "",
        "client_software_name": getattr(conn, "client_software_name", None) or "",
        "client_software_version": getattr(conn, "client_software_version", None) or "",
        "client_source_address": str(peer[0]),
        "client_source_port": str(peer[1]),
    }


def _uuid_hash(u: uuid.UUID) -> int:
    """Java's ``Uuid.hashCode``: the xor of the two longs, folded to 32 bits."""
    msb, lsb = u.int >> 64, u.int & ((1 << 64) - 1)
    h = msb ^ lsb
    return ((h >> 32) ^ h) & 0xFFFFFFFF


def _i32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


class ClientTelemetryCollector(Collector):
    """The pushed client metrics, apart from the broker's own (its own collector)."""

    def __init__(self, manager: Callable[[], ClientMetricsManager | None]) -> None:
        self._manager = manager

    def collect(self) -> Iterator[Metric]:
        mgr = self._manager()
        if mgr is None:
            return
        families: dict[str, tuple[str, list[tuple[dict[str, str], float]]]] = {}
        for inst in list(mgr.instances.values()):
            base = {
                "client_id": inst.attributes.get("client_id", ""),
                "client_instance_id": str(inst.instance_id),
            }
            for (name, kind, items), value in inst.series.items():
                entry = families.setdefault(_sanitize(name), (kind, []))
                entry[1].append((base | dict(items), value))
        for name, (kind, samples) in sorted(families.items()):
            keys = sorted({k for labels, _ in samples for k in labels})
            doc = "client telemetry (KIP-714) pushed by clients"
            out: GaugeMetricFamily | CounterMetricFamily | UnknownMetricFamily
            if kind == "counter":
                out = CounterMetricFamily(name, doc, labels=keys)
            elif kind == "untyped":
                out = UnknownMetricFamily(name, doc, labels=keys)
            else:
                out = GaugeMetricFamily(name, doc, labels=keys)
            for labels, value in samples:
                out.add_metric([labels.get(k, "") for k in keys], value)
            yield out
