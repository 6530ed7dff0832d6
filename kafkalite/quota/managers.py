"""The quota managers: one per quota type, as Kafka's ``QuotaFactory`` builds them.

Each keeps one sensor per set of metric tags (see :mod:`entities`): a
:class:`WindowedRate` for byte rates and request time, a :class:`TokenBucket` for
controller mutations. Nothing is measured for a client that no quota applies to,
and every manager is idle (one attribute check per request) while no quota of its
type is configured anywhere. A sensor not recorded for an hour is dropped, as
Kafka's (``INACTIVE_SENSOR_EXPIRATION_TIME_SECONDS``, checked every 30 s like its
``ExpireSensorTask``), so many short-lived client ids keep memory bounded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkalite.quota.entities import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaConfigs,
    Tags,
)
from kafkalite.quota.rate import TokenBucket, WindowedRate

#: Kafka's ClientQuotaManager drops a sensor after an hour without a record
SENSOR_EXPIRATION_MS = 3_600_000
#: and looks for expired sensors every 30 s (Metrics' ExpireSensorTask)
SENSOR_SWEEP_MS = 30_000


@dataclass(frozen=True, slots=True)
class QuotaConfig:
    """``quota.window.num`` / ``quota.window.size.seconds`` (and the controller's pair)."""

    window_num: int = 11
    window_size_s: int = 1
    controller_window_num: int = 11
    controller_window_size_s: int = 1


@dataclass(slots=True)
class SensorStats:
    """What one entity's sensor exports: Kafka's byte-rate / request-time and throttle-time."""

    rate: WindowedRate
    #: throttle times given (ms) and how many, over the window: their average is
    #: Kafka's ``throttle-time``
    throttle: WindowedRate
    throttles: WindowedRate
    throttle_count: int = 0
    throttle_total_ms: int = 0
    #: when a value or a throttle was last recorded: an hour later the sensor expires
    last_ms: int = 0

    def throttle_time_avg(self, now_ms: int) -> float:
        n = self.throttles.total(now_ms)
        return self.throttle.total(now_ms) / n if n > 0 else 0.0

    def record_throttle(self, ms: int, now_ms: int) -> None:
        self.throttle.record(ms, now_ms)
        self.throttles.record(1, now_ms)
        self.throttle_count += 1
        self.throttle_total_ms += ms
        self.last_ms = now_ms


class _Sweeper:
    """Drops a manager's sensors idle for :data:`SENSOR_EXPIRATION_MS`, looking at most
    every :data:`SENSOR_SWEEP_MS` (from the record path: no timer to run; a broker
    with no quota'd traffic at all keeps its last sensors, which do not grow)."""

    expiration_ms = SENSOR_EXPIRATION_MS

    def __init__(self, now_ms: int) -> None:
        self.next_sweep_ms = now_ms + SENSOR_SWEEP_MS

    def sweep(self, sensors: dict[Tags, Any], now_ms: int) -> None:
        if now_ms < self.next_sweep_ms:
            return
        self.next_sweep_ms = now_ms + SENSOR_SWEEP_MS
        expired = [t for t, s in sensors.items() if now_ms - s.last_ms > self.expiration_ms]
        for t in expired:
            del sensors[t]


class ClientQuotaManager:
    """Kafka's ``ClientQuotaManager`` for one quota key (produce, fetch or request)."""

    def __init__(
        self,
        key: str,
        configs: ClientQuotaConfigs,
        config: QuotaConfig,
        clock_ms: Callable[[], int],
    ) -> None:
        self.key = key
        self.configs = configs
        self.samples = config.window_num
        self.window_ms = config.window_size_s * 1000
        self.clock_ms = clock_ms
        self.sensors: dict[Tags, SensorStats] = {}
        #: the longest throttle time: none for byte rates (Kafka's ClientQuotaManager
        #: returns ``QuotaUtils.throttleTime`` as is), one window for the request
        #: quota (ClientRequestQuotaManager's ``boundedThrottleTime``)
        self.max_throttle_ms: int | None = self.window_ms if key == REQUEST_PERCENTAGE else None
        self.sweeper = _Sweeper(clock_ms())
        #: some entity has this quota: False keeps every request on the fast path
        self.enabled = False
        configs.listeners.append(self._configs_changed)
        self._configs_changed()

    def _configs_changed(self) -> None:
        self.enabled = self.key in self.configs.keys_in_use()
        if not self.enabled:
            self.sensors.clear()  # measured afresh when a quota of this type comes back
        # otherwise sensors keep their history: a changed bound applies to the same rate

    def _sensor(self, tags: Tags, now_ms: int) -> SensorStats:
        self.sweeper.sweep(self.sensors, now_ms)
        s = self.sensors.get(tags)
        if s is None:
            s = SensorStats(
                WindowedRate(self.samples, self.window_ms, now_ms),
                WindowedRate(self.samples, self.window_ms, now_ms),
                WindowedRate(self.samples, self.window_ms, now_ms),
            )
            self.sensors[tags] = s
        s.last_ms = now_ms
        return s

    def quota(self, user: str, client_id: str) -> float | None:
        return self.configs.resolve(user, client_id, self.key)[0]

    def record_and_get_throttle_ms(
        self, user: str, client_id: str, value: float, now_ms: int | None = None
    ) -> int:
        """Record ``value`` against the entity's quota; the throttle time it now owes."""
        if not self.enabled:
            return 0
        bound, tags = self.configs.resolve(user, client_id, self.key)
        if bound is None:
            return 0
        now = self.clock_ms() if now_ms is None else now_ms
        s = self._sensor(tags, now)
        s.rate.record(value, now)
        return self._throttle(s, bound, now)

    def throttle_ms(self, user: str, client_id: str, now_ms: int | None = None) -> int:
        """The throttle time owed now, recording nothing."""
        if not self.enabled:
            return 0
        bound, tags = self.configs.resolve(user, client_id, self.key)
        if bound is None:
            return 0
        s = self.sensors.get(tags)
        if s is None:
            return 0
        now = self.clock_ms() if now_ms is None else now_ms
        return self._throttle(s, bound, now)

    def _throttle(self, s: SensorStats, bound: float, now: int) -> int:
        ms = s.rate.throttle_ms(bound, now)
        if self.max_throttle_ms is not None:
            ms = min(ms, self.max_throttle_ms)
        if ms > 0:
            s.record_throttle(ms, now)
        return ms

    def record(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> None:
        """Record without asking for a throttle time (request time, measured afterwards)."""
        if not self.enabled:
            return
        bound, tags = self.configs.resolve(user, client_id, self.key)
        if bound is None:
            return
        now = self.clock_ms() if now_ms is None else now_ms
        self._sensor(tags, now).rate.record(value, now)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> None:
        """Take back a recorded value (a throttled Fetch sends no records: Kafka's
        ``unrecordQuotaSensor``)."""
        self.record(user, client_id, -value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """What the quota allows over the window (Kafka's ``getMaxValueInQuotaWindow``):
        a Fetch response is never larger, so one response cannot overshoot by more."""
        if not self.enabled:
            return None
        bound = self.quota(user, client_id)
        if bound is None:
            return None
        return bound * (self.samples - 1) * self.window_ms / 1000


@dataclass(slots=True)
class MutationSensor:
    """One entity's controller-mutation sensor: Kafka's ``tokens`` (the bucket),
    ``mutation-rate`` and ``throttle-time`` (``kafka.server:type=ControllerMutation``)."""

    bucket: TokenBucket
    rate: WindowedRate
    throttle: WindowedRate
    throttles: WindowedRate
    throttle_count: int = 0
    last_ms: int = 0

    def throttle_time_avg(self, now_ms: int) -> float:
        n = self.throttles.total(now_ms)
        return self.throttle.total(now_ms) / n if n > 0 else 0.0


class ControllerMutationQuotaManager:
    """KIP-599: partitions created or deleted per second, as a token bucket per entity."""

    def __init__(
        self, configs: ClientQuotaConfigs, config: QuotaConfig, clock_ms: Callable[[], int]
    ) -> None:
        self.configs = configs
        self.burst_s = float(config.controller_window_num * config.controller_window_size_s)
        self.samples = config.controller_window_num
        self.window_ms = config.controller_window_size_s * 1000
        self.clock_ms = clock_ms
        self.sensors: dict[Tags, MutationSensor] = {}
        self.enabled = False
        self.throttle_count = 0
        self.sweeper = _Sweeper(clock_ms())
        configs.listeners.append(self._configs_changed)
        self._configs_changed()

    def _configs_changed(self) -> None:
        self.enabled = CONTROLLER_MUTATION_RATE in self.configs.keys_in_use()
        now = self.clock_ms()
        for tags, sensor in list(self.sensors.items()):
            bound = self.configs.resolve(tags[0], tags[1], CONTROLLER_MUTATION_RATE)[0]
            if bound is None:
                del self.sensors[tags]
            elif bound != sensor.bucket.quota:
                sensor.bucket.set_quota(bound, self.burst_s, now)

    def _sensor(self, user: str, client_id: str, now: int) -> MutationSensor | None:
        if not self.enabled:
            return None
        bound, tags = self.configs.resolve(user, client_id, CONTROLLER_MUTATION_RATE)
        if bound is None:
            return None
        self.sweeper.sweep(self.sensors, now)
        s = self.sensors.get(tags)
        if s is None:
            s = self.sensors[tags] = MutationSensor(
                TokenBucket(bound, self.burst_s, now),
                WindowedRate(self.samples, self.window_ms, now),
                WindowedRate(self.samples, self.window_ms, now),
                WindowedRate(self.samples, self.window_ms, now),
            )
        s.last_ms = now
        return s

    def exceeded(self, user: str, client_id: str) -> bool:
        """Strict mode (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+): refuse
        a topic's mutation while the bucket is below zero."""
        now = self.clock_ms()
        s = self._sensor(user, client_id, now)
        return s is not None and s.bucket.exceeded(now)

    def record(self, user: str, client_id: str, partitions: int) -> None:
        now = self.clock_ms()
        s = self._sensor(user, client_id, now)
        if s is not None:
            s.bucket.record(partitions, now)
            s.rate.record(partitions, now)

    def throttle_ms(self, user: str, client_id: str) -> int:
        now = self.clock_ms()
        s = self._sensor(user, client_id, now)
        ms = 0 if s is None else s.bucket.throttle_ms(now)
        if ms and s is not None:
            self.throttle_count += 1
            s.throttle_count += 1
            s.throttle.record(ms, now)
            s.throttles.record(1, now)
        return ms


@dataclass(slots=True)
class QuotaManagers:
    """Kafka's ``QuotaFactory.QuotaManagers``: one config table, one manager per type."""

    configs: ClientQuotaConfigs
    produce: ClientQuotaManager
    fetch: ClientQuotaManager
    request: ClientQuotaManager
    controller_mutation: ControllerMutationQuotaManager
    config: QuotaConfig = field(default_factory=QuotaConfig)

    @classmethod
    def create(
        cls,
        config: QuotaConfig,
        clock_ms: Callable[[], int],
        configs: ClientQuotaConfigs | None = None,
    ) -> QuotaManagers:
        cfgs = configs if configs is not None else ClientQuotaConfigs()
        return cls(
            cfgs,
            ClientQuotaManager(PRODUCER_BYTE_RATE, cfgs, config, clock_ms),
            ClientQuotaManager(CONSUMER_BYTE_RATE, cfgs, config, clock_ms),
            ClientQuotaManager(REQUEST_PERCENTAGE, cfgs, config, clock_ms),
            ControllerMutationQuotaManager(cfgs, config, clock_ms),
            config,
        )

    @property
    def enabled(self) -> bool:
        """Any quota configured: the request path measures something."""
        return bool(self.configs)
