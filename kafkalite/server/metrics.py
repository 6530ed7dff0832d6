"""Broker metrics for Prometheus, under Kafka's metric names.

Kafka's JMX bean ``kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize,
delayedOperation=Fetch`` is exported as
``kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="Fetch"}``:
domain, type and name joined with ``_`` and lower-cased, the remaining key
properties as labels (the usual JMX-exporter rule for Kafka).

Each broker has its own registry (tests run several brokers in one process).
Values are read from their owners when the registry is collected, so no hot
path updates a gauge. :meth:`BrokerMetrics.render` returns the text exposition
format, which :class:`MetricsHttpServer` serves on ``GET /metrics`` when
``kafkalite.metrics.port`` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector

from kafkalite.quota.managers import QuotaManagers
from kafkalite.timer.purgatory import DelayedOperationPurgatory

if TYPE_CHECKING:
    from kafkalite.controller.kafka_controller import KafkaController
    from kafkalite.coordinator.transaction.txn_coordinator import TransactionCoordinator
    from kafkalite.replica.replica_manager import ReplicaManager
    from kafkalite.server.config import BrokerConfig

__all__ = [
    "BrokerMetrics",
    "ControllerCollector",
    "MetricsHttpServer",
    "PurgatoryCollector",
    "ReplicaManagerCollector",
    "TransactionCollector",
]

log = logging.getLogger(__name__)

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


_KC = "kafka_controller_kafkacontroller_"
_CEM = "kafka_controller_controllereventmanager_"
ACTIVE_CONTROLLER_COUNT = _KC + "activecontrollercount"
OFFLINE_PARTITIONS_COUNT = _KC + "offlinepartitionscount"
PREFERRED_REPLICA_IMBALANCE_COUNT = _KC + "preferredreplicaimbalancecount"
GLOBAL_TOPIC_COUNT = _KC + "globaltopiccount"
GLOBAL_PARTITION_COUNT = _KC + "globalpartitioncount"
CONTROLLER_STATE = _KC + "controllerstate"
EVENT_QUEUE_SIZE = _CEM + "eventqueuesize"
EVENT_QUEUE_TIME_MS = _CEM + "eventqueuetimems"
UNCLEAN_LEADER_ELECTIONS = "kafka_controller_controllerstats_uncleanleaderelectionspersec"


class ControllerCollector(Collector):
    """The controller's gauges (``kafka.controller:type=KafkaController,...``).

    As in Kafka, every broker reports them and only the active controller has
    non-zero counts: a cluster-wide sum of ActiveControllerCount is 1 when healthy.
    EventQueueTimeMs (a histogram in Kafka) is a summary: count and sum.
    """

    def __init__(self, controller: Callable[[], KafkaController | None]) -> None:
        self._controller = controller

    def collect(self) -> Iterator[Metric]:
        c = self._controller()
        if c is None:  # not started yet
            return
        em = c.event_manager

        def gauge(name: str, bean: str, doc: str, value: float) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, f"kafka.controller:{bean}: {doc}", value=value)

        kc = "type=KafkaController,name="
        yield gauge(
            ACTIVE_CONTROLLER_COUNT,
            kc + "ActiveControllerCount",
            "1 on the active controller",
            1 if c.is_active else 0,
        )
        yield gauge(
            OFFLINE_PARTITIONS_COUNT,
            kc + "OfflinePartitionsCount",
            "partitions without an online leader",
            c.offline_partitions_count(),
        )
        yield gauge(
            PREFERRED_REPLICA_IMBALANCE_COUNT,
            kc + "PreferredReplicaImbalanceCount",
            "partitions led by another replica than the preferred one",
            c.preferred_replica_imbalance_count(),
        )
        yield gauge(GLOBAL_TOPIC_COUNT, kc + "GlobalTopicCount", "topics", c.global_topic_count())
        yield gauge(
            GLOBAL_PARTITION_COUNT,
            kc + "GlobalPartitionCount",
            "partitions",
            c.global_partition_count(),
        )
        yield gauge(
            CONTROLLER_STATE,
            kc + "ControllerState",
            "what the event being processed does (Kafka's ControllerState values; 0 idle)",
            int(em.state),
        )
        yield gauge(
            EVENT_QUEUE_SIZE,
            "type=ControllerEventManager,name=EventQueueSize",
            "events waiting",
            em.queue_size,
        )
        yield SummaryMetricFamily(
            EVENT_QUEUE_TIME_MS,
            "kafka.controller:type=ControllerEventManager,name=EventQueueTimeMs: "
            "time events waited in the queue",
            count_value=em.queue_time_count,
            sum_value=em.queue_time_s * 1000.0,
        )
        yield gauge(
            UNCLEAN_LEADER_ELECTIONS + "_count",
            "type=ControllerStats,name=UncleanLeaderElectionsPerSec",
            "unclean leader elections by this controller",
            c.unclean_leader_elections,
        )


_RM = "kafka_server_replicamanager_"
UNDER_REPLICATED_PARTITIONS = _RM + "underreplicatedpartitions"
UNDER_MIN_ISR_PARTITION_COUNT = _RM + "underminisrpartitioncount"
LEADER_COUNT = _RM + "leadercount"
PARTITION_COUNT = _RM + "partitioncount"
ISR_SHRINKS = _RM + "isrshrinkspersec"
ISR_EXPANDS = _RM + "isrexpandspersec"
REPLICA_FETCHER_MAX_LAG = "kafka_server_replicafetchermanager_maxlag"


class ReplicaManagerCollector(Collector):
    """Kafka's ReplicaManager gauges and meters, and the fetcher manager's MaxLag.

    The per-second meters are exported as their counts (``..._count``), as the JMX
    exporter does for a Meter's Count attribute.
    """

    def __init__(self, replica_manager: Callable[[], ReplicaManager | None]) -> None:
        self._rm = replica_manager

    def collect(self) -> Iterator[Metric]:
        rm = self._rm()
        if rm is None:
            return
        leaders = under = under_min = 0
        for p in list(rm.partitions.values()):
            if not p.is_leader:
                continue
            leaders += 1
            if len(p.isr) < len(p.replicas):
                under += 1
            if len(p.isr) < p.min_insync_replicas:
                under_min += 1

        def gauge(name: str, bean: str, doc: str, value: float) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, f"kafka.server:{bean}: {doc}", value=value)

        b = "type=ReplicaManager,name="
        yield gauge(
            UNDER_REPLICATED_PARTITIONS,
            b + "UnderReplicatedPartitions",
            "partitions led here whose ISR is smaller than their replica set",
            under,
        )
        yield gauge(
            UNDER_MIN_ISR_PARTITION_COUNT,
            b + "UnderMinIsrPartitionCount",
            "partitions led here whose ISR is below min.insync.replicas",
            under_min,
        )
        yield gauge(LEADER_COUNT, b + "LeaderCount", "partitions led here", leaders)
        yield gauge(
            PARTITION_COUNT, b + "PartitionCount", "replicas hosted here", len(rm.partitions)
        )
        yield gauge(ISR_SHRINKS + "_count", b + "IsrShrinksPerSec", "ISR shrinks", rm.isr_shrinks)
        yield gauge(
            ISR_EXPANDS + "_count", b + "IsrExpandsPerSec", "ISR expansions", rm.isr_expands
        )
        yield gauge(
            REPLICA_FETCHER_MAX_LAG,
            "type=ReplicaFetcherManager,name=MaxLag,clientId=Replica",
            "largest lag in messages of a partition this broker follows",
            rm.fetcher_manager.max_lag(),
        )


TXN_COUNT = "kafkalite_transaction_coordinator_transactions"
TXN_EVENTS = "kafkalite_transaction_coordinator_events_total"
TXN_PARTITIONS = "kafkalite_transaction_coordinator_partitions"
LSO_LAG = "kafkalite_partition_last_stable_offset_lag"


class TransactionCollector(Collector):
    """The transaction coordinator's state and each led partition's LSO lag.

    Kafka has no single bean for these; the names follow kafkalite's own prefix.
    ``..._transactions{state}`` counts transactional ids this broker coordinates by
    state, ``..._events_total{event}`` counts commits, aborts, timed-out aborts,
    fencings, markers and marker retries, ``..._partitions{status}`` the
    ``__transaction_state`` partitions owned and loading, and
    ``kafkalite_partition_last_stable_offset_lag{topic,partition}`` is the high
    watermark minus the LSO (records held back from read_committed consumers by
    open transactions), for the partitions where it is not zero.
    """

    def __init__(
        self,
        coordinator: Callable[[], TransactionCoordinator | None],
        replicas: Callable[[], ReplicaManager | None],
    ) -> None:
        self._coordinator = coordinator
        self._replicas = replicas

    def collect(self) -> Iterator[Metric]:
        tc = self._coordinator()
        if tc is not None:
            states = GaugeMetricFamily(
                TXN_COUNT, "transactional ids coordinated here, by state", labels=["state"]
            )
            counts: dict[str, int] = {}
            for m in tc.all_transactions():
                counts[m.state.kafka_name] = counts.get(m.state.kafka_name, 0) + 1
            for state, n in sorted(counts.items()):
                states.add_metric([state], n)
            yield states
            events = GaugeMetricFamily(
                TXN_EVENTS, "transaction coordinator events", labels=["event"]
            )
            mt = tc.metrics
            for name in (
                "commits",
                "aborts",
                "timed_out_aborts",
                "fenced",
                "markers_sent",
                "marker_retries",
                "expired_ids",
            ):
                events.add_metric([name], getattr(mt, name))
            yield events
            parts = GaugeMetricFamily(
                TXN_PARTITIONS, "__transaction_state partitions", labels=["status"]
            )
            parts.add_metric(["owned"], len(tc.owned))
            parts.add_metric(["loading"], len(tc.loading))
            yield parts
        rm = self._replicas()
        if rm is not None:
            lag = GaugeMetricFamily(
                LSO_LAG, "high watermark minus last stable offset", labels=["topic", "partition"]
            )
            for (topic, partition), p in list(rm.partitions.items()):
                plog = p.log
                if plog is None or not p.is_leader or not plog.txn_state_loaded:
                    continue
                n = plog.high_watermark - plog.last_stable_offset
                if n > 0:
                    lag.add_metric([topic, str(partition)], n)
            yield lag


class QuotaCollector(Collector):
    """Kafka's client quota metrics, per sensor (``user``, ``client-id`` tags; "" where
    the quota is not per that entity type): ``kafka.server:type=Produce`` and
    ``type=Fetch`` ``byte-rate`` and ``throttle-time`` (the average throttle in ms over
    the quota window), ``type=Request`` ``request-time`` (percent of the event loop)
    and ``throttle-time``; plus, as counters, the throttled responses and their total
    time per type."""

    def __init__(self, quotas: QuotaManagers) -> None:
        self._quotas = quotas

    def collect(self) -> Iterator[Metric]:
        q = self._quotas
        for kind, manager, rate_name in (
            ("produce", q.produce, "byte_rate"),
            ("fetch", q.fetch, "byte_rate"),
            ("request", q.request, "request_time"),
        ):
            bean = f"kafka.server:type={kind.title()}"
            labels = ["user", "client_id"]
            rate = GaugeMetricFamily(
                f"kafka_server_{kind}_{rate_name}",
                f"{bean},user=,client-id= {rate_name.replace('_', '-')} over the quota window",
                labels=labels,
            )
            throttle = GaugeMetricFamily(
                f"kafka_server_{kind}_throttle_time",
                f"{bean},user=,client-id= throttle-time: average throttle (ms) over the window",
                labels=labels,
            )
            count = GaugeMetricFamily(
                f"kafkalite_quota_{kind}_throttled_responses",
                f"responses throttled by the {kind} quota since start-up",
                labels=labels,
            )
            now = manager.clock_ms()
            for (user, client), s in list(manager.sensors.items()):
                rate.add_metric([user, client], s.rate.measure(now))
                throttle.add_metric([user, client], s.throttle_time_avg(now))
                count.add_metric([user, client], s.throttle_count)
            yield rate
            yield throttle
            yield count


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

    def register_controller(self, controller: Callable[[], KafkaController | None]) -> None:
        self.register(ControllerCollector(controller))

    def register_replica_manager(self, rm: Callable[[], ReplicaManager | None]) -> None:
        self.register(ReplicaManagerCollector(rm))

    def register_transactions(
        self,
        coordinator: Callable[[], TransactionCoordinator | None],
        replicas: Callable[[], ReplicaManager | None],
    ) -> None:
        self.register(TransactionCollector(coordinator, replicas))

    def register_quotas(self, quotas: QuotaManagers) -> None:
        self.register(QuotaCollector(quotas))

    def value(self, name: str, **labels: str) -> float | None:
        """One sample's current value (None if absent), e.g. for tests and the CLI."""
        return self.registry.get_sample_value(name, labels)

    def render(self) -> bytes:
        """The Prometheus text exposition format."""
        return generate_latest(self.registry)


class MetricsHttpServer:
    """``GET /metrics`` in the Prometheus text format, on the broker's event loop.

    Served by asyncio rather than prometheus_client's threaded server: collection
    reads the controller's and purgatories' state, which only the loop may touch.
    """

    @classmethod
    def from_config(cls, metrics: BrokerMetrics, config: BrokerConfig) -> MetricsHttpServer | None:
        """The endpoint ``kafkalite.metrics.port`` asks for; None when it is unset."""
        port = config["kafkalite.metrics.port"]
        if port is None:
            return None
        return cls(metrics, str(config["kafkalite.metrics.host"]), int(port))

    def __init__(self, metrics: BrokerMetrics, host: str, port: int) -> None:
        self._metrics = metrics
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        """The bound port (useful when configured as 0)."""
        if self._server is None or not self._server.sockets:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, self._port)
        log.info("metrics on http://%s:%d/metrics", self._host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), 10)
            while (line := await asyncio.wait_for(reader.readline(), 10)) not in (
                b"\r\n",
                b"\n",
                b"",
            ):
                del line  # headers are not needed
            parts = request.decode("latin-1").split()
            if len(parts) < 2 or parts[0] not in ("GET", "HEAD"):
                status, ctype, body = "405 Method Not Allowed", "text/plain", b"GET only\n"
            elif parts[1].split("?", 1)[0] not in ("/metrics", "/"):
                status, ctype, body = "404 Not Found", "text/plain", b"try /metrics\n"
            else:
                status, ctype, body = "200 OK", CONTENT_TYPE_LATEST, self._metrics.render()
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            ).encode("latin-1")
            writer.write(head if parts and parts[0] == "HEAD" else head + body)
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
