"""Kafka's BrokerTopicMetrics as plain counters, per topic (the all-topics sums are
computed when scraped).

Produce and Fetch are the hot paths, so each partition they touch costs a dict
lookup and a few integer additions here; :mod:`kafkalite.server.metrics` turns the
counts into Prometheus samples at scrape time.
"""

from __future__ import annotations

__all__ = [
    "BYTES_IN",
    "BYTES_OUT",
    "BYTES_REJECTED",
    "BrokerTopicStats",
    "FAILED_FETCH",
    "FAILED_PRODUCE",
    "MESSAGES_IN",
    "METER_NAMES",
    "TOTAL_FETCH",
    "TOTAL_PRODUCE",
]

# indexes into a topic's counter list
MESSAGES_IN = 0
BYTES_IN = 1
BYTES_OUT = 2
BYTES_REJECTED = 3
FAILED_PRODUCE = 4
FAILED_FETCH = 5
TOTAL_PRODUCE = 6
TOTAL_FETCH = 7
#: Kafka's meter names, by index
METER_NAMES = (
    "MessagesInPerSec",
    "BytesInPerSec",
    "BytesOutPerSec",
    "BytesRejectedPerSec",
    "FailedProduceRequestsPerSec",
    "FailedFetchRequestsPerSec",
    "TotalProduceRequestsPerSec",
    "TotalFetchRequestsPerSec",
)


class BrokerTopicStats:
    """Counters since start-up. A deleted topic's counts move to ``removed`` so the
    all-topics totals never go down."""

    __slots__ = ("topics", "removed", "replication_bytes_in", "replication_bytes_out")

    def __init__(self) -> None:
        self.topics: dict[str, list[int]] = {}
        self.removed = [0] * len(METER_NAMES)
        #: bytes appended by this broker's replica fetchers / sent to followers
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0

    def of(self, topic: str) -> list[int]:
        """The topic's counters (created on first use), indexed by the constants above."""
        s = self.topics.get(topic)
        if s is None:
            s = self.topics[topic] = [0] * len(METER_NAMES)
        return s

    def remove(self, topic: str) -> None:
        s = self.topics.pop(topic, None)
        if s is not None:
            self.removed = [a + b for a, b in zip(self.removed, s, strict=True)]

    def totals(self) -> list[int]:
        out = list(self.removed)
        for s in self.topics.values():
            for i, v in enumerate(s):
                out[i] += v
        return out
