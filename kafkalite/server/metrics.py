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
import math
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
    UnknownMetricFamily,
)
from prometheus_client.registry import Collector

from kafkalite.network.request_stats import BUCKET_BOUNDS_MS, NUM_BUCKETS, ApiStats
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.quota.managers import QuotaManagers
from kafkalite.replica.topic_stats import METER_NAMES
from kafkalite.timer.purgatory import DelayedOperationPurgatory

if TYPE_CHECKING:
    from kafkalite.controller.kafka_controller import KafkaController
    from kafkalite.coordinator.group import GroupCoordinator
    from kafkalite.coordinator.transaction.txn_coordinator import TransactionCoordinator
    from kafkalite.log.log_manager import LogManager
    from kafkalite.network.request_channel import RequestChannel
    from kafkalite.replica.replica_manager import ReplicaManager
    from kafkalite.server.config import BrokerConfig
    from kafkalite.server.txn_verifier import TxnVerifier

__all__ = [
    "BrokerMetrics",
    "BrokerTopicCollector",
    "GroupCollector",
    "LogCollector",
    "LoopMonitor",
    "NetworkCollector",
    "RequestCollector",
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
TXN_UNKNOWN_DESTINATION = (
    "kafka_coordinator_transaction_transactionmarkerchannelmanager_unknowndestinationqueuesize"
)
PRODUCER_ID_COUNT = "kafka_server_replicamanager_produceridcount"
LATE_TRANSACTIONS = "kafka_server_replicamanager_partitionswithlatetransactionscount"
#: Kafka's ProducerStateManager.LATE_TRANSACTION_BUFFER_MS
_LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000
TXN_VERIFICATION_TIME = "kafka_server_addpartitionstotxnmanager_verificationtimems"
TXN_VERIFICATION_FAILURES = "kafka_server_addpartitionstotxnmanager_verificationfailurerate"
#: Kafka's sensors' window for partition-load-time-max / -avg
_TXN_LOAD_WINDOW_S = 30.0


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
        verifier: Callable[[], TxnVerifier | None] | None = None,
    ) -> None:
        self._coordinator = coordinator
        self._replicas = replicas
        self._verifier = verifier

    def collect(self) -> Iterator[Metric]:
        yield from self._kafka_names()
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

    def _kafka_names(self) -> Iterator[Metric]:
        """The transaction metrics Kafka 4 exports, under their JMX-exporter names."""
        tc = self._coordinator()
        if tc is not None:
            now = time.monotonic()
            recent = [ms for t, ms in tc.metrics.load_times if now - t <= _TXN_LOAD_WINDOW_S]
            group = "kafka.server:type=transaction-coordinator-metrics,name="
            for stat, value in (
                ("max", max(recent) if recent else math.nan),
                ("avg", sum(recent) / len(recent) if recent else math.nan),
            ):
                yield GaugeMetricFamily(
                    f"kafka_server_transaction_coordinator_metrics_partition_load_time_{stat}",
                    f"{group}partition-load-time-{stat}: ms to load a __transaction_state "
                    "partition, over the last 30 s (NaN when none loaded)",
                    value=value,
                )
            yield GaugeMetricFamily(
                TXN_UNKNOWN_DESTINATION,
                "kafka.coordinator.transaction:type=TransactionMarkerChannelManager,"
                "name=UnknownDestinationQueueSize: markers waiting for a partition leader",
                value=tc.metrics.unknown_destination_markers,
            )
        rm = self._replicas()
        if rm is not None:
            n = late = 0
            # KIP-664: the oldest open transaction's producer last wrote longer ago than
            # transaction.max.timeout.ms plus Kafka's 5 min LATE_TRANSACTION_BUFFER_MS
            late_before = (
                None
                if tc is None
                else tc.clock_ms() - tc.config.max_timeout_ms - _LATE_TRANSACTION_BUFFER_MS
            )
            for p in list(rm.partitions.values()):
                plog = p.log
                if plog is None or not plog.txn_state_loaded:
                    continue
                st = plog.producer_state
                n += len(st.producers)
                if late_before is not None and p.is_leader and st.ongoing:
                    oldest = min(st.ongoing, key=st.ongoing.__getitem__)
                    entry = st.producers.get(oldest)
                    if entry is not None and 0 < entry.last_timestamp < late_before:
                        late += 1
            yield GaugeMetricFamily(
                PRODUCER_ID_COUNT,
                "kafka.server:type=ReplicaManager,name=ProducerIdCount: producer ids in the "
                "producer state of this broker's partitions",
                value=n,
            )
            yield GaugeMetricFamily(
                LATE_TRANSACTIONS,
                "kafka.server:type=ReplicaManager,name=PartitionsWithLateTransactionsCount: "
                "partitions led here whose oldest open transaction last wrote more than "
                "transaction.max.timeout.ms + 5 min ago",
                value=late,
            )
        tv = self._verifier() if self._verifier is not None else None
        if tv is not None:
            bean = "kafka.server:type=AddPartitionsToTxnManager,name="
            h = HistogramMetricFamily(
                TXN_VERIFICATION_TIME,
                f"{bean}VerificationTimeMs: a partition's transaction verification (KIP-890)",
            )
            counts = [*tv.time_slots[:NUM_BUCKETS], sum(tv.time_slots[NUM_BUCKETS:])]
            acc = 0
            buckets = []
            for le, c in zip(_LE, counts, strict=True):
                acc += c
                buckets.append((le, acc))
            h.add_metric([], buckets, tv.time_s * 1000.0)
            yield h
            failures = _meter(
                TXN_VERIFICATION_FAILURES,
                bean + "VerificationFailureRate",
                "verifications that refused a partition or could not reach the coordinator",
            )
            failures.add_sample(TXN_VERIFICATION_FAILURES, {}, tv.failures)
            yield failures


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
        yield from self._controller_mutation()

    def _controller_mutation(self) -> Iterator[Metric]:
        """``kafka.server:type=ControllerMutation,user=,client-id=`` (KIP-599): ``tokens``
        left in the bucket, ``mutation-rate`` (partitions/s over the window) and
        ``throttle-time``."""
        m = self._quotas.controller_mutation
        bean = "kafka.server:type=ControllerMutation,user=,client-id="
        labels = ["user", "client_id"]
        tokens = GaugeMetricFamily(
            "kafka_server_controllermutation_tokens",
            f"{bean} tokens: what is left in the token bucket",
            labels=labels,
        )
        rate = GaugeMetricFamily(
            "kafka_server_controllermutation_mutation_rate",
            f"{bean} mutation-rate: partitions created or deleted per second over the window",
            labels=labels,
        )
        throttle = GaugeMetricFamily(
            "kafka_server_controllermutation_throttle_time",
            f"{bean} throttle-time: average throttle (ms) over the window",
            labels=labels,
        )
        count = GaugeMetricFamily(
            "kafkalite_quota_controllermutation_throttled_responses",
            "responses throttled by the controller mutation quota since start-up",
            labels=labels,
        )
        now = m.clock_ms()
        for (user, client), s in list(m.sensors.items()):
            s.bucket.exceeded(now)  # refills it to now
            tokens.add_metric([user, client], s.bucket.tokens)
            rate.add_metric([user, client], s.rate.measure(now))
            throttle.add_metric([user, client], s.throttle_time_avg(now))
            count.add_metric([user, client], s.throttle_count)
        yield tokens
        yield rate
        yield throttle
        yield count


# ---- BrokerTopicMetrics ---------------------------------------------------------------
BTM = "kafka_server_brokertopicmetrics_"


def _meter(name: str, bean: str, doc: str) -> UnknownMetricFamily:
    """A Kafka meter: its cumulative count (JMX ``Count``), untyped; ``rate()`` it."""
    return UnknownMetricFamily(name, f"{bean}: {doc} (cumulative count; take its rate)")


class BrokerTopicCollector(Collector):
    """Kafka's BrokerTopicMetrics, per topic (``topic`` label) and for all topics (no
    label), from the replica manager's plain counters. Topics no longer in the
    metadata are folded into the all-topics counts here, at scrape time."""

    def __init__(
        self,
        replicas: Callable[[], ReplicaManager | None],
        topics: Callable[[], Iterable[str]],
    ) -> None:
        self._replicas = replicas
        self._topics = topics

    def collect(self) -> Iterator[Metric]:
        rm = self._replicas()
        if rm is None:
            return
        stats = rm.topic_stats
        live = set(self._topics())
        for topic in [t for t in stats.topics if t not in live]:
            stats.remove(topic)
        totals = stats.totals()
        per_topic = sorted(stats.topics.items())
        for i, name in enumerate(METER_NAMES):
            m = _meter(BTM + name.lower(), f"kafka.server:type=BrokerTopicMetrics,name={name}", "")
            m.add_sample(m.name, {}, totals[i])
            for topic, counts in per_topic:
                m.add_sample(m.name, {"topic": topic}, counts[i])
            yield m
        for name, value in (
            ("ReplicationBytesInPerSec", stats.replication_bytes_in),
            ("ReplicationBytesOutPerSec", stats.replication_bytes_out),
        ):
            m = _meter(BTM + name.lower(), f"kafka.server:type=BrokerTopicMetrics,name={name}", "")
            m.add_sample(m.name, {}, value)
            yield m


# ---- RequestMetrics ---------------------------------------------------------------------
RM_PREFIX = "kafka_network_requestmetrics_"
_LE = [*(repr(b) for b in BUCKET_BOUNDS_MS), "+Inf"]


def _error_label(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)


class RequestCollector(Collector):
    """Kafka's RequestMetrics per API (``request`` label): RequestsPerSec,
    ErrorsPerSec by ``error``, and the TotalTimeMs, RequestQueueTimeMs, LocalTimeMs,
    RemoteTimeMs and ResponseSendTimeMs histograms (ms), from the channel's plain counters."""

    def __init__(self, channel: Callable[[], RequestChannel]) -> None:
        self._channel = channel

    def collect(self) -> Iterator[Metric]:
        ch = self._channel()
        table = ch.api_table

        def api_name(key: int) -> str:
            spec = table.get(key)
            return spec.name if spec is not None else str(key)

        bean = "kafka.network:type=RequestMetrics,name="
        requests = _meter(RM_PREFIX + "requestspersec", bean + "RequestsPerSec", "requests")
        for key, n in sorted(ch.requests_total.items()):
            requests.add_sample(requests.name, {"request": api_name(key)}, n)
        fetch_by_role = [
            (name, st)
            for name, st in (
                ("FetchConsumer", ch.fetch_consumer_stats),
                ("FetchFollower", ch.fetch_follower_stats),
            )
            if st.requests
        ]
        for name, st in fetch_by_role:
            requests.add_sample(requests.name, {"request": name}, st.requests)
        yield requests
        errors = _meter(
            RM_PREFIX + "errorspersec", bean + "ErrorsPerSec", "error codes in responses"
        )
        stats = sorted(ch.api_stats.items())
        for key, st in stats:
            for code, n in sorted(st.errors.items()):
                errors.add_sample(
                    errors.name, {"request": api_name(key), "error": _error_label(code)}, n
                )
        yield errors
        fetch_times = ApiStats()  # a Fetch is timed under its role only (RequestChannel)
        fetch_times.add(ch.fetch_consumer_stats)
        fetch_times.add(ch.fetch_follower_stats)

        def timed(key: int, st: ApiStats) -> ApiStats:
            return fetch_times if key == ApiKey.FETCH else st

        for attr, name, doc in (
            ("total", "TotalTimeMs", "from the frame read to the response encoded"),
            ("queue", "RequestQueueTimeMs", "from the socket read to the handler"),
            ("local", "LocalTimeMs", "in the handler"),
            ("remote", "RemoteTimeMs", "waiting after the handler (purgatory, coordinators)"),
            ("send", "ResponseSendTimeMs", "from the response encoded to its connection drained"),
        ):
            h = HistogramMetricFamily(
                RM_PREFIX + name.lower(), f"{bean}{name}: {doc}", labels=["request"]
            )
            named = [(api_name(key), timed(key, st)) for key, st in stats] + fetch_by_role
            for request, st in named:
                counts = st.buckets(attr)
                acc = 0
                buckets = []
                for le, c in zip(_LE, counts, strict=True):
                    acc += c
                    buckets.append((le, acc))
                if acc:
                    h.add_metric([request], buckets, getattr(st, attr + "_s") * 1000.0)
            yield h


# ---- logs ---------------------------------------------------------------------------------


class LogCollector(Collector):
    """Kafka's ``kafka.log`` metrics: Log Size / NumLogSegments / LogStartOffset /
    LogEndOffset per partition, LogFlushRateAndTimeMs, and the cleaner's gauges."""

    def __init__(self, log_manager: Callable[[], LogManager | None]) -> None:
        self._lm = log_manager

    def collect(self) -> Iterator[Metric]:
        lm = self._lm()
        if lm is None:
            return
        labels = ["topic", "partition"]
        fams = [
            GaugeMetricFamily(
                f"kafka_log_log_{n.lower()}", f"kafka.log:type=Log,name={n}: {doc}", labels=labels
            )
            for n, doc in (
                ("Size", "bytes of the partition's segments"),
                ("NumLogSegments", "segments"),
                ("LogStartOffset", "log start offset"),
                ("LogEndOffset", "log end offset"),
            )
        ]
        for lg in sorted(lm.all_logs(), key=lambda lg: (lg.topic, lg.partition)):
            if lg.is_offline:
                continue
            lv = [lg.topic, str(lg.partition)]
            fams[0].add_metric(lv, lg.size_in_bytes)
            fams[1].add_metric(lv, lg.num_segments)
            fams[2].add_metric(lv, lg.log_start_offset)
            fams[3].add_metric(lv, lg.log_end_offset)
        yield from fams
        yield SummaryMetricFamily(
            "kafka_log_logflushstats_logflushrateandtimems",
            "kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs: log flushes (fsync) and "
            "their time",
            count_value=lm.flush_count,
            sum_value=lm.flush_time_s * 1000.0,
        )
        c = lm.cleaner
        for bean, attr, value in (
            ("LogCleaner", "max-clean-time-secs", c.max_clean_time_secs),
            ("LogCleaner", "max-buffer-utilization-percent", c.max_buffer_utilization_percent),
            ("LogCleaner", "cleaner-recopy-percent", c.cleaner_recopy_percent),
            ("LogCleaner", "max-compaction-delay-secs", c.max_compaction_delay_secs),
            ("LogCleaner", "DeadThreadCount", c.dead_thread_count),
            ("LogCleanerManager", "max-dirty-percent", c.max_dirty_percent),
            ("LogCleanerManager", "uncleanable-partitions-count", c.uncleanable_partitions_count),
            ("LogCleanerManager", "time-since-last-run-ms", c.time_since_last_run_ms),
        ):
            yield GaugeMetricFamily(
                f"kafka_log_{bean.lower()}_{attr.lower().replace('-', '_')}",
                f"kafka.log:type={bean},name={attr}",
                value=value,
            )


# ---- network and the event loop -------------------------------------------------------
#: how often the loop monitor samples, and the window of its rates and max lag
LOOP_SAMPLE_S = 1.0
LOOP_WINDOW = 30


class LoopMonitor:
    """Samples the event loop once a second: how late its timer fired (loop lag), the
    CPU time of the loop's thread over the second (its busy ratio: one loop does the
    work of Kafka's network and request handler threads), and the connection counters
    for 30-second creation and close rates. One timer a second; nothing per request."""

    def __init__(self, channel: Callable[[], RequestChannel]) -> None:
        self._channel = channel
        self.lag_s = 0.0
        self.busy_ratio = 0.0
        self._lags: list[float] = []
        #: (monotonic time, created per listener, closed per listener), oldest first
        self._samples: list[tuple[float, dict[str, int], dict[str, int]]] = []
        self._task: asyncio.Task[None] | None = None

    @property
    def lag_max_s(self) -> float:
        return max(self._lags, default=0.0)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    def rates(self) -> tuple[dict[str, float], dict[str, float]]:
        """Connections created and closed per second per listener over the window."""
        samples = self._samples
        if len(samples) < 2:
            return {}, {}
        (t0, c0, d0), (t1, c1, d1) = samples[0], samples[-1]
        span = max(t1 - t0, 1e-9)
        return (
            {k: (v - c0.get(k, 0)) / span for k, v in c1.items()},
            {k: (v - d0.get(k, 0)) / span for k, v in d1.items()},
        )

    def _sample_connections(self, now: float) -> None:
        ch = self._channel()
        self._samples.append((now, dict(ch.connections_created), dict(ch.connections_closed)))
        if len(self._samples) > LOOP_WINDOW + 1:
            del self._samples[0]

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        cpu = time.thread_time()
        wall = time.monotonic()
        self._sample_connections(wall)
        while True:
            expected = loop.time() + LOOP_SAMPLE_S
            await asyncio.sleep(LOOP_SAMPLE_S)
            self.lag_s = max(loop.time() - expected, 0.0)
            self._lags.append(self.lag_s)
            if len(self._lags) > LOOP_WINDOW:
                del self._lags[0]
            now_cpu, now = time.thread_time(), time.monotonic()
            self.busy_ratio = min(max((now_cpu - cpu) / max(now - wall, 1e-9), 0.0), 1.0)
            cpu, wall = now_cpu, now
            self._sample_connections(now)


class NetworkCollector(Collector):
    """Connections per listener (count, created and closed totals and 30 s rates, as
    Kafka's ``socket-server-metrics``), and the event loop's idle ratio and lag."""

    def __init__(self, channel: Callable[[], RequestChannel], monitor: LoopMonitor) -> None:
        self._channel = channel
        self._monitor = monitor

    def collect(self) -> Iterator[Metric]:
        ch = self._channel()
        sm = "kafka_server_socket_server_metrics_"
        bean = "kafka.server:type=socket-server-metrics,listener=..."
        count = GaugeMetricFamily(
            sm + "connection_count", f"{bean} connection-count", labels=["listener"]
        )
        open_by: dict[str, int] = {}
        for c in list(ch.connections):
            open_by[c.listener] = open_by.get(c.listener, 0) + 1
        listeners = sorted(set(open_by) | set(ch.connections_created))
        for name in listeners:
            count.add_metric([name], open_by.get(name, 0))
        yield count
        created_rate, closed_rate = self._monitor.rates()
        for attr, totals, rates in (
            ("creation", ch.connections_created, created_rate),
            ("close", ch.connections_closed, closed_rate),
        ):
            total = UnknownMetricFamily(
                sm + f"connection_{attr}_total",
                f"{bean} connection-{attr}-total",
                labels=["listener"],
            )
            rate = GaugeMetricFamily(
                sm + f"connection_{attr}_rate",
                f"{bean} connection-{attr}-rate (per second, last {LOOP_WINDOW} s)",
                labels=["listener"],
            )
            for name in listeners:
                total.add_metric([name], totals.get(name, 0))
                rate.add_metric([name], rates.get(name, 0.0))
            yield total
            yield rate
        mon = self._monitor
        idle = 1.0 - mon.busy_ratio
        yield GaugeMetricFamily(
            "kafka_network_socketserver_networkprocessoravgidlepercent",
            "kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent: "
            "1 - the event loop's busy ratio",
            value=idle,
        )
        yield GaugeMetricFamily(
            "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
            "kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent: "
            "1 - the event loop's busy ratio",
            value=idle,
        )
        yield GaugeMetricFamily(
            "kafkalite_event_loop_busy_ratio",
            "CPU time of the event loop's thread / wall time over the last second",
            value=mon.busy_ratio,
        )
        yield GaugeMetricFamily(
            "kafkalite_event_loop_lag_ms",
            "how late the loop's last 1 s timer fired",
            value=mon.lag_s * 1000.0,
        )
        yield GaugeMetricFamily(
            "kafkalite_event_loop_lag_max_ms",
            f"the largest lateness of the loop's 1 s timer over the last {LOOP_WINDOW} s",
            value=mon.lag_max_s * 1000.0,
        )


# ---- consumer groups --------------------------------------------------------------------
_GMM = "kafka_coordinator_group_groupmetadatamanager_"
_CLASSIC_STATES = (
    ("Empty", "numgroupsempty"),
    ("PreparingRebalance", "numgroupspreparingrebalance"),
    ("CompletingRebalance", "numgroupscompletingrebalance"),
    ("Stable", "numgroupsstable"),
    ("Dead", "numgroupsdead"),
)
_CONSUMER_STATES = ("empty", "assigning", "reconciling", "stable", "dead")


class GroupCollector(Collector):
    """Groups coordinated here by type and state (Kafka's GroupMetadataManager gauges
    and Kafka 4's ``group-coordinator-metrics``), and each group's committed offset
    and lag per partition led here (kafka_exporter's ``kafka_consumergroup_*``)."""

    def __init__(
        self,
        coordinator: Callable[[], GroupCoordinator | None],
        replicas: Callable[[], ReplicaManager | None],
    ) -> None:
        self._coordinator = coordinator
        self._replicas = replicas

    def collect(self) -> Iterator[Metric]:
        gc = self._coordinator()
        if gc is None:
            return
        groups = gc.manager.current_groups()
        classic: dict[str, int] = {}
        consumer: dict[str, int] = {}
        by_type = {"classic": 0, "consumer": 0}
        for g in groups:
            by_type[g.group_type] = by_type.get(g.group_type, 0) + 1
            if g.consumer is None:
                classic[g.state.value] = classic.get(g.state.value, 0) + 1
            else:
                state = g.state_name.lower()
                consumer[state] = consumer.get(state, 0) + 1
        gmm = "kafka.coordinator.group:type=GroupMetadataManager,name="
        yield GaugeMetricFamily(
            _GMM + "numgroups", gmm + "NumGroups: groups coordinated here", value=len(groups)
        )
        for state, name in _CLASSIC_STATES:
            yield GaugeMetricFamily(
                _GMM + name,
                f"{gmm}NumGroups{state}: classic groups in this state",
                value=classic.get(state, 0),
            )
        gcm = "kafka_server_group_coordinator_metrics_"
        by_protocol = GaugeMetricFamily(
            gcm + "group_count",
            "kafka.server:type=group-coordinator-metrics,name=group-count: groups by protocol",
            labels=["protocol"],
        )
        for proto, n in sorted(by_type.items()):
            by_protocol.add_metric([proto], n)
        yield by_protocol
        by_state = GaugeMetricFamily(
            gcm + "consumer_group_count",
            "kafka.server:type=group-coordinator-metrics,name=consumer-group-count: "
            "KIP-848 consumer groups by state",
            labels=["state"],
        )
        for state in _CONSUMER_STATES:
            by_state.add_metric([state], consumer.get(state, 0))
        yield by_state
        rm = self._replicas()
        labels = ["consumergroup", "topic", "partition"]
        current = GaugeMetricFamily(
            "kafka_consumergroup_current_offset", "committed offset", labels=labels
        )
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "high watermark - committed offset, for partitions led here",
            labels=labels,
        )
        for g in sorted(groups, key=lambda g: g.group_id):
            for (topic, partition), o in sorted(g.offsets.items()):
                lv = [g.group_id, topic, str(partition)]
                current.add_metric(lv, o.offset)
                p = rm.partitions.get((topic, partition)) if rm is not None else None
                if p is not None and p.is_leader and p.log is not None:
                    lag.add_metric(lv, max(p.log.high_watermark - o.offset, 0))
        yield current
        yield lag


class BrokerMetrics:
    """One broker's Prometheus registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        #: the event-loop sampler (created by :meth:`register_broker`; the broker runs it)
        self.loop_monitor: LoopMonitor | None = None

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
        verifier: Callable[[], TxnVerifier | None] | None = None,
    ) -> None:
        self.register(TransactionCollector(coordinator, replicas, verifier))

    def register_quotas(self, quotas: QuotaManagers) -> None:
        self.register(QuotaCollector(quotas))

    def register_broker(
        self,
        channel: Callable[[], RequestChannel],
        replicas: Callable[[], ReplicaManager | None],
        topics: Callable[[], Iterable[str]],
        log_manager: Callable[[], LogManager | None],
        groups: Callable[[], GroupCoordinator | None],
    ) -> None:
        """Topic, request, log, network and group metrics (issue 20's Kafka names)."""
        self.loop_monitor = LoopMonitor(channel)
        self.register(BrokerTopicCollector(replicas, topics))
        self.register(RequestCollector(channel))
        self.register(LogCollector(log_manager))
        self.register(NetworkCollector(channel, self.loop_monitor))
        self.register(GroupCollector(groups, replicas))

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
