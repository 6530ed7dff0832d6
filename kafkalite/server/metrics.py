"""Broker metrics for Prometheus, under Kafka's metric names.

Kafka's JMX bean ``kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize,
delayedOperation=Fetch`` is exported as
``kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="Fetch"}``:
domain, type and name joined with ``_`` and lower-cased, the remaining key
properties as labels (the usual JMX-exporter rule for Kafka).

Each broker has its own registry (tests run several brokers in one process).
Values are read from their owners when the registry is collected, so no hot
path updates a gauge. There is no HTTP endpoint yet: :meth:`BrokerMetrics.render`
returns the text exposition format.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kafkalite.timer.purgatory import DelayedOperationPurgatory

__all__ = ["BrokerMetrics", "PurgatoryCollector"]

PURGATORY_SIZE = "kafka_server_delayedoperationpurgatory_purgatorysize"
NUM_DELAYED_OPERATIONS = "kafka_server_delayedoperationpurgatory_numdelayedoperations"


class PurgatoryCollector(Collector):
    """PurgatorySize and NumDelayedOperations of every purgatory, by ``delayedOperation``."""

    def __init__(self, purgatories: Callable[[], Iterable[DelayedOperationPurgatory]]) -> None:
        self._purgatories = purgatories

    def collect(self) -> Iterator[Metric]:
        size = GaugeMetricFamily(
            PURGATORY_SIZE,
            "kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize: "
            "operations in the watcher lists, completed ones not yet purged included",
            labels=["delayedOperation"],
        )
        delayed = GaugeMetricFamily(
            NUM_DELAYED_OPERATIONS,
            "kafka.server:type=DelayedOperationPurgatory,name=NumDelayedOperations: "
            "operations waiting for completion or their timeout",
            labels=["delayedOperation"],
        )
        for p in self._purgatories():
            size.add_metric([p.name], p.watched)
            delayed.add_metric([p.name], p.num_delayed)
        yield size
        yield delayed


class BrokerMetrics:
    """One broker's Prometheus registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)

    def register(self, collector: Collector) -> None:
        self.registry.register(collector)

    def register_purgatories(
        self, purgatories: Callable[[], Iterable[DelayedOperationPurgatory]]
    ) -> None:
        self.register(PurgatoryCollector(purgatories))

    def value(self, name: str, **labels: str) -> float | None:
        """One sample's current value (None if absent), e.g. for tests and the CLI."""
        return self.registry.get_sample_value(name, labels)

    def render(self) -> bytes:
        """The Prometheus text exposition format."""
        return generate_latest(self.registry)
