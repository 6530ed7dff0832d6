"""Throughput and latency for the console's live charts: once a second, into a ring buffer.

A :class:`CounterSource` reads cumulative counters; the :class:`Sampler` turns the
difference between two readings into per-second rates. Two sources exist:

- :class:`BrokerStateSource` reads what the broker keeps anyway: the log end offsets
  and sizes of the partitions it leads (messages and bytes in) and the request counts
  of the request channel. It has no bytes-out or request-time figure.
- :class:`RegistrySource` reads Kafka-named metrics from the broker's Prometheus
  registry (``kafka_server_brokertopicmetrics_messagesinpersec``, ``..._bytesinpersec``,
  ``..._bytesoutpersec``, ``kafka_network_requestmetrics_totaltimems``) and answers
  None for any family the registry does not have.

:class:`FallbackSource` takes each counter from the registry when it has it and from
the broker's state otherwise, so the charts switch to Kafka's metrics as they appear.
Besides the counters, the sampler measures the event loop's lag itself (how late its
own once-a-second wake-up runs): the delay every request waits before it is read,
charted next to the mean request time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace
from typing import Any, Protocol

__all__ = [
    "BrokerStateSource",
    "CounterSource",
    "Counters",
    "FallbackSource",
    "RegistrySource",
    "Sample",
    "Sampler",
]


@dataclass(frozen=True, slots=True)
class Counters:
    """Cumulative counts at one instant (None: the source cannot tell)."""

    messages_in: float | None = None
    bytes_in: float | None = None
    bytes_out: float | None = None
    requests: float | None = None
    #: total request time (ms) over ``timed_requests`` requests: their mean is the latency
    request_time_ms: float | None = None
    timed_requests: float | None = None


class CounterSource(Protocol):
    #: what the counters come from, shown under the charts
    description: str

    async def read(self) -> Counters: ...


@dataclass(frozen=True, slots=True)
class Sample:
    """Rates over the second before ``time`` (unix seconds)."""

    time: float
    messages_in: float | None
    bytes_in: float | None
    bytes_out: float | None
    requests: float | None
    latency_ms: float | None
    #: how late the sampler's wake-up ran (ms)
    loop_lag_ms: float | None = None
    #: the interval the rates cover (s): rate × seconds is the count
    seconds: float = 1.0


class BrokerStateSource:
    """Counters from broker state that exists without any metrics code."""

    description = "log end offsets and sizes of led partitions; request channel counts"
    #: logs read per loop iteration: a broker with many partitions is read in steps
    SLICE = 1000

    def __init__(
        self,
        logs: Callable[[], Iterable[Any]],
        requests_total: Callable[[], dict[int, int]],
    ) -> None:
        self._logs = logs
        self._requests_total = requests_total
        # a log's counts leave the sum when it goes (deletion, leadership): keep its last
        self._gone_messages = 0
        self._gone_bytes = 0
        self._last: dict[int, tuple[int, int]] = {}

    async def read(self) -> Counters:
        messages = bytes_ = 0
        seen: dict[int, tuple[int, int]] = {}
        logs = list(self._logs())
        for start in range(0, len(logs), self.SLICE):
            if start:
                await asyncio.sleep(0)
            for log in logs[start : start + self.SLICE]:
                leo, size = log.log_end_offset, log.size_in_bytes
                seen[id(log)] = (leo, size)
                messages += leo
                bytes_ += size
        for key, (leo, size) in self._last.items():
            if key not in seen:
                self._gone_messages += leo
                self._gone_bytes += size
        self._last = seen
        return Counters(
            messages_in=messages + self._gone_messages,
            bytes_in=bytes_ + self._gone_bytes,
            requests=sum(self._requests_total().values()),
        )


MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesinpersec"
BYTES_IN = "kafka_server_brokertopicmetrics_bytesinpersec"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesoutpersec"
REQUESTS = "kafka_network_requestmetrics_requestspersec"
TOTAL_TIME = "kafka_network_requestmetrics_totaltimems"


class RegistrySource:
    """Kafka-named metric families from a Prometheus registry (see the module doc).

    A meter may be exported as a counter (``_total``), as its count (``_count``) or
    bare; per-topic samples are summed unless an all-topics sample (no ``topic``
    label) exists. TotalTimeMs is read as a histogram or summary: ``_sum``/``_count``.
    Requests are counted per API: Kafka's FetchConsumer/FetchFollower split of Fetch
    is left out, as it would count those Fetch requests twice.

    Only the collectors that yield these families are collected each second, not the
    per-partition ones: found through the registry's names (collectors that describe
    themselves) or, for collectors that only collect (a registry without
    auto-describe), by one full collection that notes which collector yields what,
    repeated at most once a minute while none is found.
    """

    description = "Kafka's metrics (BrokerTopicMetrics, RequestMetrics TotalTimeMs)"
    NAMES = (MESSAGES_IN, BYTES_IN, BYTES_OUT, REQUESTS, TOTAL_TIME)
    REDISCOVER_S = 60.0

    def __init__(self, registry: Any) -> None:
        self._registry = registry
        suffixed = [n + s for n in self.NAMES for s in ("", "_total", "_count", "_sum")]
        self._restricted = registry.restricted_registry(suffixed)
        self._collectors: list[Any] = []
        self._next_discovery = 0.0

    def _discover(self) -> None:
        found = []
        for collector in list(getattr(self._registry, "_collector_to_names", ())):
            try:
                families = list(collector.collect())
            except Exception:
                continue
            if any(f.name.startswith(self.NAMES) for f in families):
                found.append(collector)
        self._collectors = found

    def _families(self) -> list[Any]:
        families = list(self._restricted.collect())
        if families:
            return families
        now = time.monotonic()
        if not self._collectors and now >= self._next_discovery:
            self._next_discovery = now + self.REDISCOVER_S
            self._discover()
        out = []
        for collector in self._collectors:
            out += [f for f in collector.collect() if f.name.startswith(self.NAMES)]
        return out

    async def read(self) -> Counters:
        meters: dict[str, tuple[float, float, bool]] = {}  # name -> (total, per-topic, seen)
        time_sum = time_count = 0.0
        timed = False
        for family in self._families():
            for s in family.samples:
                name = s.name
                if s.labels.get("request") in ("FetchConsumer", "FetchFollower"):
                    continue
                if name.startswith(TOTAL_TIME):
                    if name.endswith("_sum"):
                        time_sum += s.value
                        timed = True
                    elif name.endswith("_count"):
                        time_count += s.value
                    continue
                if name.endswith("_created") or name.endswith("_sum"):
                    continue
                base = name.removesuffix("_total").removesuffix("_count")
                total, per_topic, _ = meters.get(base, (0.0, 0.0, False))
                if "topic" in s.labels:
                    per_topic += s.value
                else:
                    total += s.value
                meters[base] = (total, per_topic, True)

        def meter(base: str) -> float | None:
            m = meters.get(base)
            if m is None:
                return None
            total, per_topic, _ = m
            return total if total else per_topic

        return Counters(
            messages_in=meter(MESSAGES_IN),
            bytes_in=meter(BYTES_IN),
            bytes_out=meter(BYTES_OUT),
            requests=meter(REQUESTS),
            request_time_ms=time_sum if timed else None,
            timed_requests=time_count if timed else None,
        )


class FallbackSource:
    """Each counter from ``primary`` when it has it, else from ``fallback``."""

    def __init__(self, primary: CounterSource, fallback: CounterSource) -> None:
        self.primary = primary
        self.fallback = fallback
        self.description = fallback.description

    async def read(self) -> Counters:
        p = await self.primary.read()
        merged = await self.fallback.read()
        used_primary = False
        for f in fields(Counters):
            v = getattr(p, f.name)
            if v is not None:
                merged = replace(merged, **{f.name: v})
                used_primary = True
        if used_primary:
            self.description = self.primary.description
        else:
            self.description = self.fallback.description
        return merged


def _rate(now: float | None, before: float | None, seconds: float) -> float | None:
    if now is None or before is None or seconds <= 0:
        return None
    return max(0.0, now - before) / seconds


class Sampler:
    """Reads ``source`` every ``interval_s`` into a ring of the last ``size`` samples."""

    def __init__(self, source: CounterSource, *, size: int = 300, interval_s: float = 1.0) -> None:
        self.source = source
        self.samples: deque[Sample] = deque(maxlen=size)
        self.interval_s = interval_s
        self._prev: tuple[float, Counters] | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        due: float | None = None
        while True:
            woke = loop.time()
            await self.tick(loop_lag_ms=None if due is None else max(0.0, woke - due) * 1000.0)
            due = loop.time() + self.interval_s
            await asyncio.sleep(self.interval_s)

    async def tick(
        self, now: float | None = None, loop_lag_ms: float | None = None
    ) -> Sample | None:
        """Take one reading; returns the sample it completes (None on the first)."""
        c = await self.source.read()
        now = time.time() if now is None else now
        prev, self._prev = self._prev, (now, c)
        if prev is None:
            return None
        t0, b = prev
        dt = now - t0
        requests = _rate(c.timed_requests, b.timed_requests, 1.0)
        time_ms = _rate(c.request_time_ms, b.request_time_ms, 1.0)
        latency = time_ms / requests if requests and time_ms is not None else None
        sample = Sample(
            now,
            _rate(c.messages_in, b.messages_in, dt),
            _rate(c.bytes_in, b.bytes_in, dt),
            _rate(c.bytes_out, b.bytes_out, dt),
            _rate(c.requests, b.requests, dt),
            latency,
            loop_lag_ms,
            dt,
        )
        self.samples.append(sample)
        return sample

    def series(self) -> dict[str, Any]:
        """Column arrays as the charts take them (uPlot's data layout)."""
        s = list(self.samples)
        return {
            "source": self.source.description,
            "time": [round(x.time, 3) for x in s],
            "seconds": [x.seconds for x in s],
            "messages_in": [x.messages_in for x in s],
            "bytes_in": [x.bytes_in for x in s],
            "bytes_out": [x.bytes_out for x in s],
            "requests": [x.requests for x in s],
            "latency_ms": [x.latency_ms for x in s],
            "loop_lag_ms": [x.loop_lag_ms for x in s],
        }
