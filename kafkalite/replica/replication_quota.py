"""Replication throttling (Kafka's ReplicationQuotaManager, KIP-73).

A leader withholds records from followers outside the ISR whose replicas are
listed in the topic's ``leader.replication.throttled.replicas`` while the bytes
it sent to throttled replicas exceed ``leader.replication.throttled.rate``; a
follower outside the ISR leaves such partitions out of its fetches while what it
fetched for them exceeds ``follower.replication.throttled.rate``. In-sync
replicas are never throttled, so acks=all and the HW are not slowed down.

The rate is Kafka's sampled Rate: bytes over ``replication.quota.window.num``
windows of ``replication.quota.window.size.seconds``, divided by the time they
cover (at least all windows but the current one).
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["ReplicationQuota", "is_throttled_replica"]

UNBOUNDED = 2**63 - 1


def is_throttled_replica(replicas: str, partition: int, broker_id: int) -> bool:
    """``*``, or ``partitionId:brokerId`` entries (a topic's throttled-replicas config)."""
    if not replicas:
        return False
    if replicas.strip() == "*":
        return True
    wanted = f"{partition}:{broker_id}"
    return any(item.strip() == wanted for item in replicas.split(","))


class ReplicationQuota:
    """One direction's byte rate (leader or follower), bounded by a live config value."""

    def __init__(
        self,
        bound: Callable[[], int],
        *,
        windows: int = 11,
        window_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bound = bound
        self.windows = max(2, windows)
        self.window_s = window_s
        self._clock = clock
        #: (window start, bytes) oldest first
        self._samples: list[list[float]] = []
        #: times a throttled partition was held back (a metric, and for tests)
        self.throttled = 0

    def _purge(self, now: float) -> None:
        horizon = now - self.windows * self.window_s
        while self._samples and self._samples[0][0] <= horizon:
            self._samples.pop(0)

    def record(self, n: int) -> None:
        if n <= 0:
            return
        now = self._clock()
        self._purge(now)
        if self._samples and now - self._samples[-1][0] < self.window_s:
            self._samples[-1][1] += n
        else:
            self._samples.append([now, float(n)])

    def rate(self) -> float:
        """Bytes per second over the windows (Kafka's Rate with its minimum span)."""
        now = self._clock()
        self._purge(now)
        if not self._samples:
            return 0.0
        span = max(now - self._samples[0][0], (self.windows - 1) * self.window_s)
        return sum(b for _t, b in self._samples) / span

    def is_exceeded(self) -> bool:
        bound = self.bound()
        return bound < UNBOUNDED and self.rate() > bound
