"""Kafka's sampled ``Rate`` and ``TokenBucket`` (org.apache.kafka.common.metrics.stats).

A :class:`WindowedRate` is Kafka 4.x's ``Rate`` over a ``SampledStat`` (as fixed by
apache/kafka#15889, 3.8+): ``quota.window.num + 1`` samples of
``quota.window.size.seconds`` each, a sample kept while its *last* value is younger
than ``num`` windows (so one overlapping the window still counts, with its start),
and the rate is their total over the time since the oldest sample's start, never
less than ``num - 1`` whole windows (a burst right after a quiet period is averaged
over the full window, not over the milliseconds since the first sample). The
throttle time is how long the client must stay quiet for the rate to fall back to
the bound: ``(rate - bound) / bound * window`` (``QuotaUtils.throttleTime``).
"""

from __future__ import annotations


class WindowedRate:
    """Value per second over the last ``samples`` windows of ``window_ms`` (Kafka's Rate)."""

    __slots__ = ("samples", "window_ms", "_starts", "_lasts", "_values", "_current")

    def __init__(self, samples: int, window_ms: int, now_ms: int) -> None:
        self.samples = max(samples, 2)
        self.window_ms = max(window_ms, 1)
        self._starts = [now_ms]
        #: when each sample last recorded a value: what expires it
        self._lasts = [now_ms]
        self._values = [0.0]
        self._current = 0

    def _purge(self, now_ms: int) -> None:
        """Samples whose last value is ``samples`` windows old count for nothing (reset)."""
        expire = self.samples * self.window_ms
        starts, lasts, values = self._starts, self._lasts, self._values
        for i in range(len(starts)):
            if now_ms - lasts[i] >= expire:
                starts[i] = lasts[i] = now_ms
                values[i] = 0.0

    def record(self, value: float, now_ms: int) -> None:
        i = self._current
        if now_ms - self._starts[i] >= self.window_ms:
            # the current sample is complete: advance, reusing the oldest of the
            # samples + 1 slots (Kafka keeps one extra for the overlapping sample)
            i = (i + 1) % (self.samples + 1)
            if i >= len(self._starts):
                self._starts.append(now_ms)
                self._lasts.append(now_ms)
                self._values.append(0.0)
            else:
                self._starts[i] = now_ms
                self._values[i] = 0.0
            self._current = i
        self._values[i] += value
        self._lasts[i] = now_ms

    def window_size_ms(self, now_ms: int) -> int:
        """The span the rate divides by: since the oldest sample's start, at least
        ``samples - 1`` whole windows (Kafka's ``Rate.windowSize``)."""
        self._purge(now_ms)
        elapsed = now_ms - min(self._starts)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def total(self, now_ms: int) -> float:
        """The sum of the samples still in the window."""
        self._purge(now_ms)
        return sum(self._values)

    def measure(self, now_ms: int) -> float:
        """The rate per second."""
        size = self.window_size_ms(now_ms)
        return sum(self._values) * 1000.0 / size

    def throttle_ms(self, bound: float, now_ms: int) -> int:
        """Kafka's ``QuotaUtils.throttleTime``: 0 while the rate is within ``bound``."""
        if bound <= 0:
            return 0
        size = self.window_size_ms(now_ms)
        rate = sum(self._values) * 1000.0 / size
        if rate <= bound:
            return 0
        return int((rate - bound) / bound * size + 0.5)  # Java's Math.round


class TokenBucket:
    """KIP-599's bucket for controller mutations: ``quota`` tokens a second, a burst of
    ``quota * samples * window`` tokens; a request may take it below zero (it is let
    through), after which the next ones are refused until it refills."""

    __slots__ = ("quota", "burst", "tokens", "last_ms")

    def __init__(self, quota: float, burst_s: float, now_ms: int) -> None:
        self.quota = quota
        self.burst = quota * burst_s
        self.tokens = self.burst
        self.last_ms = now_ms

    def _refill(self, now_ms: int) -> None:
        elapsed = max(now_ms - self.last_ms, 0)
        self.tokens = min(self.burst, self.tokens + self.quota * elapsed / 1000.0)
        self.last_ms = now_ms

    def set_quota(self, quota: float, burst_s: float, now_ms: int) -> None:
        self._refill(now_ms)
        self.quota = quota
        self.burst = quota * burst_s
        self.tokens = min(self.tokens, self.burst)

    def exceeded(self, now_ms: int) -> bool:
        self._refill(now_ms)
        return self.tokens < 0

    def record(self, value: float, now_ms: int) -> None:
        self._refill(now_ms)
        self.tokens -= value

    def throttle_ms(self, now_ms: int) -> int:
        """Time until the bucket is back at zero."""
        self._refill(now_ms)
        if self.tokens >= 0 or self.quota <= 0:
            return 0
        return round(-self.tokens / self.quota * 1000)
