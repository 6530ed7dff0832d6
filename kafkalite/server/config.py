"""Broker configuration: Kafka's dotted property names, Kafka's defaults.

Accepts YAML (nested maps are flattened with dots, so ``log: {dirs: x}`` equals
``log.dirs: x``) or a Kafka ``server.properties`` file. Every key is checked:
an unknown key or a bad value fails start-up with a :class:`ConfigError` that
names the key. Kafka keys that only matter to the JVM broker (thread pools,
socket buffers ...) are accepted and ignored, and listed as such in docs.
"""

from __future__ import annotations

import copy
import difflib
import logging
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kafkalite.common.errors import ConfigError
from kafkalite.network.connection_quotas import parse_overrides as parse_connection_overrides
from kafkalite.security.authorizer.authorizer import AUTHORIZER_CLASS_NAMES as _AUTHORIZERS
from kafkalite.security.ssl_principal import SslPrincipalMapper
from kafkalite.server import kafka_dynamic_configs as kdc

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: str  # int | long | bool | string | list | double | password
    default: Any
    doc: str = ""
    validator: Callable[[Any], str | None] | None = None
    dynamic: bool = False  # may be changed with AlterConfigs on a running broker


def _check_ssl_rules(v: Any) -> str | None:
    try:
        SslPrincipalMapper.from_rules(str(v or "DEFAULT"))
    except ValueError as e:
        return str(e)
    return None


def at_least(n: int | float) -> Callable[[Any], str | None]:
    return lambda v: None if v is None or v >= n else f"must be >= {n}"


def between(lo: int, hi: int) -> Callable[[Any], str | None]:
    return lambda v: None if v is None or lo <= v <= hi else f"must be in [{lo}, {hi}]"


def one_of(*opts: str) -> Callable[[Any], str | None]:
    return lambda v: None if v is None or v in opts else f"must be one of {', '.join(opts)}"


_DEFS: list[ConfigDef] = [
    # identity and listeners
    ConfigDef(
        "broker.id", "int", -1, "Broker id; -1 means take it from meta.properties or generate one."
    ),
    ConfigDef("node.id", "int", None, "Kafka 4 name for broker.id; accepted as an alias."),
    ConfigDef("broker.rack", "string", None, "Rack of this broker, returned in Metadata."),
    ConfigDef("broker.id.generation.enable", "bool", True),
    ConfigDef("reserved.broker.max.id", "int", 1000, validator=at_least(0)),
    ConfigDef(
        "cluster.id", "string", None, "Cluster id to use when the metadata store has none yet."
    ),
    ConfigDef("listeners", "list", ["PLAINTEXT://127.0.0.1:9092"]),
    ConfigDef("advertised.listeners", "list", None),
    ConfigDef(
        "listener.security.protocol.map",
        "string",
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
    ),
    ConfigDef(
        "inter.broker.listener.name",
        "string",
        None,
        "Listener brokers use to reach each other (default: the PLAINTEXT listener, else the "
        "first advertised one).",
    ),
    ConfigDef(
        "control.plane.listener.name",
        "string",
        None,
        "KIP-291: a separate listener for the controller's requests to brokers (default: the "
        "inter-broker listener).",
    ),
    # TLS (PEM keystores only; see docs/configuration.md)
    ConfigDef(
        "ssl.keystore.type",
        "string",
        "PEM",
        "Only PEM is supported (Kafka's default is JKS).",
        validator=one_of("PEM"),
    ),
    ConfigDef(
        "ssl.keystore.location",
        "string",
        None,
        "PEM file with the private key and certificate chain.",
    ),
    ConfigDef("ssl.keystore.certificate.chain", "password", None, "Inline PEM certificate chain."),
    ConfigDef("ssl.keystore.key", "password", None, "Inline PEM private key."),
    ConfigDef("ssl.key.password", "password", None, "Password of an encrypted private key."),
    ConfigDef("ssl.truststore.type", "string", "PEM", validator=one_of("PEM")),
    ConfigDef(
        "ssl.truststore.location", "string", None, "PEM CA certificates to verify clients with."
    ),
    ConfigDef(
        "ssl.client.auth", "string", "none", validator=one_of("none", "requested", "required")
    ),
    ConfigDef("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"]),
    ConfigDef(
        "ssl.endpoint.identification.algorithm",
        "string",
        "https",
        "Verify the host name of a broker this broker connects to ('https'; empty turns it off).",
        validator=lambda v: (
            None if v is None or v.lower() in ("", "https") else "must be https or empty"
        ),
    ),
    # authorization (docs/security.md)
    ConfigDef(
        "authorizer.class.name",
        "string",
        "",
        "kafka.security.authorizer.AclAuthorizer, "
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer or "
        "kafkalite.security.authorizer.AclAuthorizer (the same ACL authorizer); "
        "empty: no authorization.",
        validator=lambda v: (
            None
            if not v or v in _AUTHORIZERS
            else "unknown authorizer (supported: " + ", ".join(sorted(_AUTHORIZERS)) + ")"
        ),
    ),
    ConfigDef("super.users", "string", "", "Principals allowed everything, ';'-separated."),
    ConfigDef("allow.everyone.if.no.acl.found", "boolean", False),
    ConfigDef(
        "ssl.principal.mapping.rules",
        "string",
        "DEFAULT",
        "Kafka's SslPrincipalMapper rules (RULE:pattern/replacement/[LU], DEFAULT): the "
        "principal of a client certificate's distinguished name.",
        validator=lambda v: _check_ssl_rules(v),
    ),
    # network
    ConfigDef("socket.request.max.bytes", "int", 104857600, validator=at_least(1)),
    ConfigDef("connections.max.idle.ms", "long", 600000, validator=at_least(-1)),
    # bounds on what clients can make the broker hold (docs/configuration.md)
    ConfigDef(
        "queued.max.requests",
        "int",
        500,
        "Requests in progress broker-wide before connections stop being read.",
        validator=at_least(1),
    ),
    ConfigDef(
        "queued.max.request.bytes",
        "long",
        -1,
        "Bytes of requests in progress or being received broker-wide before connections"
        " stop being read; -1: no bound.",
    ),
    ConfigDef("max.connections", "int", INT_MAX, validator=at_least(0)),
    ConfigDef("max.connections.per.ip", "int", INT_MAX, validator=at_least(0)),
    ConfigDef("max.connections.per.ip.overrides", "string", ""),
    ConfigDef(
        "max.connection.creation.rate",
        "int",
        INT_MAX,
        "KIP-612: new connections accepted per second broker-wide (per listener:"
        " listener.name.<name>.max.connection.creation.rate); over it, accepting waits.",
        validator=at_least(0),
    ),
    # client quotas (docs/quotas.md)
    ConfigDef("quota.window.num", "int", 11, "Samples kept for client quota rates.", at_least(1)),
    ConfigDef(
        "quota.window.size.seconds",
        "int",
        1,
        "Time span of one client quota sample.",
        at_least(1),
    ),
    ConfigDef(
        "controller.quota.window.num",
        "int",
        11,
        "Samples of the controller mutation quota (its burst is num * size seconds).",
        at_least(1),
    ),
    ConfigDef(
        "controller.quota.window.size.seconds",
        "int",
        1,
        "Time span of one controller mutation quota sample.",
        at_least(1),
    ),
    ConfigDef(
        "kafkalite.connection.max.inflight.requests",
        "int",
        100,
        "Requests of one connection whose responses are not written yet before it stops"
        " being read.",
        validator=at_least(1),
    ),
    ConfigDef(
        "kafkalite.connection.max.queued.response.bytes",
        "int",
        1048576,
        "Bytes of one connection's encoded, unwritten responses before it stops being read.",
        validator=at_least(1),
    ),
    ConfigDef("request.timeout.ms", "int", 30000, validator=at_least(0)),
    # metadata store
    ConfigDef("zookeeper.connect", "string", None),
    ConfigDef("zookeeper.session.timeout.ms", "int", 18000, validator=at_least(1)),
    ConfigDef("zookeeper.connection.timeout.ms", "int", None),
    ConfigDef(
        "metadata.dir",
        "string",
        None,
        "Where the embedded metadata store keeps its journal (default: first log dir).",
    ),
    # topics
    ConfigDef("auto.create.topics.enable", "bool", True, dynamic=True),
    ConfigDef(
        "telemetry.max.bytes",
        "int",
        1048576,
        "Most bytes of metrics one PushTelemetry may carry (KIP-714).",
        validator=at_least(1),
    ),
    ConfigDef(
        "max.request.partition.size.limit",
        "int",
        2000,
        "Most partitions one DescribeTopicPartitions response holds (KIP-966).",
        validator=at_least(1),
    ),
    ConfigDef("delete.topic.enable", "bool", True),
    ConfigDef("num.partitions", "int", 1, validator=at_least(1), dynamic=True),
    ConfigDef("default.replication.factor", "int", 1, validator=at_least(1)),
    ConfigDef("offsets.topic.num.partitions", "int", 50, validator=at_least(1)),
    ConfigDef("offsets.topic.replication.factor", "short", 3, validator=at_least(1)),
    ConfigDef("transaction.state.log.num.partitions", "int", 50, validator=at_least(1)),
    ConfigDef("transaction.state.log.replication.factor", "short", 3, validator=at_least(1)),
    ConfigDef("transaction.state.log.min.isr", "int", 2, validator=at_least(1)),
    ConfigDef("transaction.state.log.segment.bytes", "int", 104857600, validator=at_least(1)),
    ConfigDef("transaction.state.log.load.buffer.size", "int", 5242880, validator=at_least(1)),
    ConfigDef("transaction.max.timeout.ms", "int", 900000, validator=at_least(1)),
    ConfigDef("transaction.partition.verification.enable", "bool", True),
    ConfigDef("producer.id.expiration.ms", "int", 86400000, validator=at_least(1)),
    ConfigDef("producer.id.expiration.check.interval.ms", "int", 600000, validator=at_least(1)),
    ConfigDef("transactional.id.expiration.ms", "int", 604800000, validator=at_least(1)),
    ConfigDef(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "int",
        10000,
        validator=at_least(1),
    ),
    ConfigDef(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "int",
        3600000,
        validator=at_least(1),
    ),
    ConfigDef("group.initial.rebalance.delay.ms", "int", 3000, validator=at_least(0)),
    ConfigDef("group.min.session.timeout.ms", "int", 6000, validator=at_least(0)),
    ConfigDef("group.max.session.timeout.ms", "int", 1800000, validator=at_least(0)),
    ConfigDef("group.max.size", "int", INT_MAX, validator=at_least(1)),
    # the consumer group protocol (KIP-848); bounds are checked by GroupConfig
    ConfigDef("group.consumer.session.timeout.ms", "int", 45000, validator=at_least(1)),
    ConfigDef("group.consumer.min.session.timeout.ms", "int", 45000, validator=at_least(1)),
    ConfigDef("group.consumer.max.session.timeout.ms", "int", 60000, validator=at_least(1)),
    ConfigDef("group.consumer.heartbeat.interval.ms", "int", 5000, validator=at_least(1)),
    ConfigDef("group.consumer.min.heartbeat.interval.ms", "int", 5000, validator=at_least(1)),
    ConfigDef("group.consumer.max.heartbeat.interval.ms", "int", 15000, validator=at_least(1)),
    ConfigDef("group.consumer.max.size", "int", INT_MAX, validator=at_least(1)),
    ConfigDef(
        "group.consumer.assignors",
        "list",
        ["uniform", "range"],
        "Server-side assignors (names, or Kafka's class names); the first is the default.",
    ),
    ConfigDef(
        "group.consumer.migration.policy",
        "string",
        "bidirectional",
        "Online migration between the classic and consumer protocols (only empty groups "
        "convert in kafkalite).",
        validator=one_of("disabled", "upgrade", "downgrade", "bidirectional"),
    ),
    # share groups (KIP-932); group-level overrides are bounded by the min/max keys
    ConfigDef("group.share.session.timeout.ms", "int", 45000, validator=at_least(1)),
    ConfigDef("group.share.min.session.timeout.ms", "int", 45000, validator=at_least(1)),
    ConfigDef("group.share.max.session.timeout.ms", "int", 60000, validator=at_least(1)),
    ConfigDef("group.share.heartbeat.interval.ms", "int", 5000, validator=at_least(1)),
    ConfigDef("group.share.min.heartbeat.interval.ms", "int", 5000, validator=at_least(1)),
    ConfigDef("group.share.max.heartbeat.interval.ms", "int", 15000, validator=at_least(1)),
    ConfigDef("group.share.max.size", "int", 200, validator=at_least(1)),
    ConfigDef("group.share.assignors", "list", ["simple"], "Share group assignors (simple only)."),
    ConfigDef(
        "group.share.record.lock.duration.ms", "int", 30000, validator=between(1000, 3600000)
    ),
    ConfigDef(
        "group.share.min.record.lock.duration.ms", "int", 15000, validator=between(1000, 30000)
    ),
    ConfigDef(
        "group.share.max.record.lock.duration.ms", "int", 60000, validator=between(30000, 3600000)
    ),
    ConfigDef("group.share.delivery.count.limit", "int", 5, validator=between(2, 10)),
    ConfigDef("group.share.min.delivery.count.limit", "int", 2, validator=between(2, 5)),
    ConfigDef("group.share.max.delivery.count.limit", "int", 10, validator=between(5, 25)),
    ConfigDef("group.share.partition.max.record.locks", "int", 2000, validator=between(100, 10000)),
    ConfigDef("group.share.max.share.sessions", "int", 2000, validator=at_least(1)),
    ConfigDef("share.fetch.purgatory.purge.interval.requests", "int", 1000),
    ConfigDef("offsets.retention.minutes", "int", 10080, validator=at_least(1)),
    ConfigDef("offsets.retention.check.interval.ms", "long", 600000, validator=at_least(1)),
    ConfigDef("offsets.commit.timeout.ms", "int", 5000, validator=at_least(1)),
    ConfigDef("offsets.load.buffer.size", "int", 5242880, validator=at_least(1)),
    ConfigDef("offsets.topic.segment.bytes", "int", 104857600, validator=at_least(1)),
    ConfigDef("offset.metadata.max.bytes", "int", 4096, validator=at_least(0)),
    ConfigDef(
        "kafkalite.max.partitions.per.request",
        "int",
        10000,
        "Most partitions one CreateTopics or CreatePartitions request may create (Kafka 4's "
        "fixed MAX_PARTITIONS_PER_BATCH); more: POLICY_VIOLATION.",
        validator=at_least(1),
    ),
    # log defaults (topic-level defaults come from these)
    ConfigDef("log.dirs", "list", None),
    ConfigDef("log.dir", "string", "/tmp/kafka-logs"),
    ConfigDef("log.segment.bytes", "int", 1073741824, validator=at_least(14), dynamic=True),
    ConfigDef("log.roll.ms", "long", None, dynamic=True),
    ConfigDef("log.roll.hours", "int", 168, validator=at_least(1)),
    ConfigDef("log.roll.jitter.ms", "long", None, dynamic=True),
    ConfigDef("log.roll.jitter.hours", "int", 0, validator=at_least(0)),
    ConfigDef("log.retention.ms", "long", None, dynamic=True),
    ConfigDef("log.retention.minutes", "int", None),
    ConfigDef("log.retention.hours", "int", 168),
    ConfigDef("log.retention.bytes", "long", -1, dynamic=True),
    ConfigDef("log.retention.check.interval.ms", "long", 300000, validator=at_least(1)),
    ConfigDef("log.cleanup.policy", "list", ["delete"], dynamic=True),
    ConfigDef("log.index.interval.bytes", "int", 4096, validator=at_least(0), dynamic=True),
    ConfigDef("log.index.size.max.bytes", "int", 10485760, validator=at_least(4), dynamic=True),
    ConfigDef("log.flush.interval.messages", "long", LONG_MAX, validator=at_least(1), dynamic=True),
    ConfigDef("log.flush.interval.ms", "long", None, dynamic=True),
    ConfigDef("log.flush.scheduler.interval.ms", "long", LONG_MAX),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", "int", 60000, validator=at_least(0)),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, validator=at_least(0)),
    ConfigDef("log.segment.delete.delay.ms", "long", 60000, validator=at_least(0), dynamic=True),
    ConfigDef(
        "log.message.timestamp.type",
        "string",
        "CreateTime",
        validator=one_of("CreateTime", "LogAppendTime"),
        dynamic=True,
    ),
    ConfigDef(
        "log.message.timestamp.before.max.ms", "long", LONG_MAX, validator=at_least(0), dynamic=True
    ),
    ConfigDef(
        "log.message.timestamp.after.max.ms", "long", 3600000, validator=at_least(0), dynamic=True
    ),
    ConfigDef("log.preallocate", "bool", False, dynamic=True),
    ConfigDef(
        "num.recovery.threads.per.data.dir",
        "int",
        2,
        "Threads re-validating logs after an unclean shutdown (a clean load is sequential).",
        validator=at_least(1),
    ),
    ConfigDef("log.cleaner.enable", "bool", True),
    ConfigDef("log.cleaner.threads", "int", 1, validator=at_least(0)),
    ConfigDef("log.cleaner.backoff.ms", "long", 15000, validator=at_least(0)),
    ConfigDef("log.cleaner.dedupe.buffer.size", "long", 134217728),
    ConfigDef("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308),
    ConfigDef("log.cleaner.min.cleanable.ratio", "double", 0.5, dynamic=True),
    ConfigDef("log.cleaner.min.compaction.lag.ms", "long", 0, validator=at_least(0), dynamic=True),
    ConfigDef(
        "log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, validator=at_least(1), dynamic=True
    ),
    ConfigDef(
        "log.cleaner.delete.retention.ms", "long", 86400000, validator=at_least(0), dynamic=True
    ),
    ConfigDef("message.max.bytes", "int", 1048588, validator=at_least(0), dynamic=True),
    ConfigDef(
        "compression.type",
        "string",
        "producer",
        validator=one_of("producer", "uncompressed", "none", "gzip", "snappy", "lz4", "zstd"),
        dynamic=True,
    ),
    ConfigDef("min.insync.replicas", "int", 1, validator=at_least(1), dynamic=True),
    ConfigDef("unclean.leader.election.enable", "bool", False, dynamic=True),
    # fetch sessions, replication, shutdown
    ConfigDef("max.incremental.fetch.session.cache.slots", "int", 1000, validator=at_least(0)),
    ConfigDef("min.incremental.fetch.session.eviction.ms", "int", 120000, validator=at_least(0)),
    ConfigDef("replica.lag.time.max.ms", "long", 30000),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", "long", 5000, validator=at_least(1)),
    ConfigDef("replica.fetch.wait.max.ms", "int", 500),
    ConfigDef("replica.fetch.backoff.ms", "int", 1000, validator=at_least(0)),
    ConfigDef(
        "leader.replication.throttled.rate",
        "long",
        2**63 - 1,
        "Bytes/s a leader sends to out-of-sync replicas listed in a topic's "
        "leader.replication.throttled.replicas (KIP-73).",
        validator=at_least(0),
        dynamic=True,
    ),
    ConfigDef(
        "follower.replication.throttled.rate",
        "long",
        2**63 - 1,
        "Bytes/s an out-of-sync follower fetches for replicas listed in a topic's "
        "follower.replication.throttled.replicas (KIP-73).",
        validator=at_least(0),
        dynamic=True,
    ),
    ConfigDef(
        "replica.alter.log.dirs.io.max.bytes.per.second",
        "long",
        2**63 - 1,
        "Bytes/s a replica moving between log dirs (AlterReplicaLogDirs) is copied at.",
        validator=at_least(1),
        dynamic=True,
    ),
    ConfigDef("replication.quota.window.num", "int", 11, validator=at_least(1)),
    ConfigDef("replication.quota.window.size.seconds", "int", 1, validator=at_least(1)),
    ConfigDef(
        "replica.selector.class",
        "string",
        None,
        "KIP-392: org.apache.kafka.common.replica.RackAwareReplicaSelector lets consumers "
        "(Fetch v11+ with client.rack) fetch from a replica in their rack; unset: leaders only.",
        validator=one_of(
            "org.apache.kafka.common.replica.RackAwareReplicaSelector",
            "org.apache.kafka.common.replica.LeaderSelector",
        ),
    ),
    ConfigDef("replica.fetch.min.bytes", "int", 1),
    ConfigDef("replica.fetch.max.bytes", "int", 1048576),
    ConfigDef(
        "replica.fetch.response.max.bytes",
        "int",
        10485760,
        "The max_bytes of this broker's own follower fetches (Kafka's replica fetcher asks "
        "for this much; the leader still caps it with fetch.max.bytes).",
        validator=at_least(0),
    ),
    ConfigDef(
        "fetch.max.bytes",
        "int",
        57671680,
        "Most bytes one Fetch response returns: a request's max_bytes (and min_bytes) above it "
        "is lowered to it, for consumers and followers alike, as Kafka's KafkaApis does.",
        validator=at_least(1024),
    ),
    ConfigDef("fetch.purgatory.purge.interval.requests", "int", 1000),
    ConfigDef("producer.purgatory.purge.interval.requests", "int", 1000),
    ConfigDef("delete.records.purgatory.purge.interval.requests", "int", 1),
    ConfigDef("controlled.shutdown.enable", "bool", True),
    ConfigDef("controlled.shutdown.max.retries", "int", 3),
    ConfigDef("controlled.shutdown.retry.backoff.ms", "long", 5000),
    ConfigDef("auto.leader.rebalance.enable", "bool", True),
    ConfigDef("leader.imbalance.check.interval.seconds", "long", 300),
    ConfigDef("leader.imbalance.per.broker.percentage", "int", 10),
    # kafkalite's own
    ConfigDef("pid.file", "string", None, "Write the process id here at start-up (kafkalite)."),
    ConfigDef(
        "kafkalite.log.fsync",
        "bool",
        True,
        "fsync checkpoints and metadata journal (tests turn it off).",
    ),
    ConfigDef(
        "kafkalite.metrics.port",
        "int",
        None,
        "Serve Prometheus metrics on http://HOST:PORT/metrics (off when unset; 0 picks a "
        "free port).",
        lambda v: None if v is None or 0 <= v <= 65535 else "must be a port (0-65535)",
    ),
    ConfigDef(
        "kafkalite.metrics.host",
        "string",
        "127.0.0.1",
        "Address the metrics endpoint binds (0.0.0.0 for every interface).",
    ),
    ConfigDef(
        "kafkalite.request.metrics.enabled",
        "bool",
        True,
        "Record the per-request metrics (RequestMetrics, BrokerTopicMetrics, FetchConsumer/"
        "FetchFollower); false only to measure what they cost (bench/metrics_cost_bench.py).",
    ),
    ConfigDef(
        "kafkalite.console.port",
        "int",
        None,
        "Serve the web console on http://HOST:PORT/ (off when unset; 0 picks a free port).",
        lambda v: None if v is None or 0 <= v <= 65535 else "must be a port (0-65535)",
    ),
    ConfigDef(
        "kafkalite.console.host",
        "string",
        "127.0.0.1",
        "Address the web console binds (0.0.0.0 for every interface).",
    ),
    ConfigDef(
        "kafkalite.console.read.only",
        "bool",
        True,
        "The console only shows; false lets it create and delete topics and reset group "
        "offsets (each behind a confirmation).",
    ),
]

#: Kafka broker keys that tune the JVM implementation, or drive KRaft (Kafka 4's
#: own controller quorum, which kafkalite replaces with its metadata store), or
#: features kafkalite does not have (share groups): accepted and ignored, so a
#: stock Kafka ``server.properties`` loads. Each is logged once at start-up.
IGNORED_KAFKA_KEYS = frozenset(
    {
        "num.network.threads",
        "num.io.threads",
        "num.replica.fetchers",
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
        "background.threads",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "zookeeper.set.acl",
        "log.message.format.version",
        "inter.broker.protocol.version",
        # KRaft
        "process.roles",
        "controller.listener.names",
        "metadata.log.dir",
        "metadata.log.segment.bytes",
        "metadata.log.segment.ms",
        "metadata.max.retention.bytes",
        "metadata.max.retention.ms",
        "metadata.max.idle.interval.ms",
        "broker.heartbeat.interval.ms",
        "broker.session.timeout.ms",
        "initial.broker.registration.timeout.ms",
        "unstable.api.versions.enable",
        "unstable.feature.versions.enable",
        "eligible.leader.replicas.enable",
        "group.coordinator.rebalance.protocols",
        "group.coordinator.threads",
        "group.share.enable",
    }
)
#: whole families of KRaft and share-group keys, ignored the same way
IGNORED_KAFKA_PREFIXES = ("controller.quorum.", "share.coordinator.", "group.share.persister.")


#: the per-listener connection limits Kafka takes with a ``listener.name.<name>.`` prefix
_LISTENER_LIMIT = re.compile(
    r"^listener\.name\.([^.]+)\.(max\.connections|max\.connection\.creation\.rate)$"
)


#: per-listener SASL keys: ``listener.name.<l>.sasl.enabled.mechanisms``,
#: ``...connections.max.reauth.ms``, ``...<mechanism>.sasl.jaas.config``,
#: ``...<mechanism>.sasl.server.callback.handler.class``, ``...oauthbearer.sasl.oauthbearer.*``
_LISTENER_SASL = re.compile(
    r"^listener\.name\.([^.]+)\.(sasl\.enabled\.mechanisms|connections\.max\.reauth\.ms"
    r"|[a-z0-9-]+\.sasl\.(?:jaas\.config|server\.callback\.handler\.class|login\.callback\.handler\.class)"
    r"|oauthbearer\.sasl\.oauthbearer\.[a-z.]+)$"
)
#: PLAIN users in a YAML-friendly form: ``kafkalite.sasl.plain.users: {alice: secret}``
#: (flattened ``kafkalite.sasl.plain.users.alice``), per listener with the
#: ``listener.name.<l>.`` prefix
_PLAIN_USER = re.compile(r"^(?:listener\.name\.([^.]+)\.)?kafkalite\.sasl\.plain\.users\.(.+)$")


def is_ignored_kafka_key(key: str) -> bool:
    return key in IGNORED_KAFKA_KEYS or key.startswith(IGNORED_KAFKA_PREFIXES)


#: Kafka's broker-config synonyms (DynamicBrokerConfig.brokerConfigSynonyms): the keys
#: that set the same thing, highest precedence first.
BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {}
for _group in (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
):
    for _name in _group:
        BROKER_SYNONYMS[_name] = _group
# log.flush.scheduler.interval.ms is the default of log.flush.interval.ms, not its equal
BROKER_SYNONYMS["log.flush.interval.ms"] = (
    "log.flush.interval.ms",
    "log.flush.scheduler.interval.ms",
)


def broker_synonyms(name: str) -> tuple[str, ...]:
    return BROKER_SYNONYMS.get(name, (name,))


#: SASL (docs/security.md, "Authentication"); the per-listener forms
#: (``listener.name.<l>.sasl.enabled.mechanisms``, ``listener.name.<l>.<mech>.sasl.jaas.config``
#: ...) are read by :data:`_LISTENER_SASL` into ``BrokerConfig.listener_sasl``
_SASL_DEFS: list[ConfigDef] = [
    ConfigDef(
        "sasl.enabled.mechanisms",
        "list",
        ["GSSAPI"],
        "SASL mechanisms of the SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
        "OAUTHBEARER (Kafka's default, GSSAPI, is not supported).",
    ),
    ConfigDef(
        "sasl.mechanism.inter.broker.protocol",
        "string",
        "GSSAPI",
        "Mechanism this broker authenticates with on a SASL inter-broker listener.",
    ),
    ConfigDef(
        "security.inter.broker.protocol",
        "string",
        "PLAINTEXT",
        "Security protocol of the inter-broker listener when inter.broker.listener.name is "
        "unset (the listener of that protocol is used).",
        validator=one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
    ),
    ConfigDef(
        "connections.max.reauth.ms",
        "long",
        0,
        "KIP-368: a SASL session expires after this long; the client re-authenticates on "
        "its connection or the connection is closed (0: sessions never expire).",
        validator=at_least(0),
    ),
    ConfigDef(
        "connection.failed.authentication.delay.ms",
        "int",
        100,
        "A failed authentication is answered after this delay, then the connection closes.",
        validator=at_least(0),
    ),
    ConfigDef(
        "sasl.server.max.receive.size",
        "int",
        524288,
        "The largest request frame a SASL listener reads before the client authenticated.",
        validator=at_least(1),
    ),
    ConfigDef(
        "sasl.oauthbearer.jwks.endpoint.url",
        "string",
        None,
        "KIP-768: validate OAUTHBEARER JWTs against this JWKS (file: or http(s) URL); "
        "unset: Kafka's unsecured validator.",
    ),
    ConfigDef("sasl.oauthbearer.jwks.endpoint.refresh.ms", "long", 3600000, validator=at_least(1)),
    ConfigDef("sasl.oauthbearer.expected.audience", "list", None),
    ConfigDef("sasl.oauthbearer.expected.issuer", "string", None),
    ConfigDef("sasl.oauthbearer.sub.claim.name", "string", "sub"),
    ConfigDef("sasl.oauthbearer.scope.claim.name", "string", "scope"),
    ConfigDef("sasl.oauthbearer.clock.skew.seconds", "int", 30, validator=at_least(0)),
    ConfigDef(
        "kafkalite.sasl.client.username",
        "string",
        None,
        "The broker's own user on a SASL inter-broker listener (else the username of the "
        "listener's JAAS config for sasl.mechanism.inter.broker.protocol).",
    ),
    ConfigDef("kafkalite.sasl.client.password", "password", None, "Its password."),
]
_DEFS += _SASL_DEFS

CONFIG_DEFS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}

#: the keys Kafka updates dynamically that kafkalite does not apply at runtime
#: (:mod:`kafkalite.server.kafka_dynamic_configs`): kafkalite's own definition when it
#: reads the key at start-up, else Kafka's type and default
INERT_DYNAMIC_DEFS: dict[str, ConfigDef] = {
    name: CONFIG_DEFS.get(name)
    or ConfigDef(name, t, default, "Accepted as Kafka does; inert in kafkalite.")
    for name, t, default in kdc.KAFKA_DYNAMIC_KEYS
    if not (name in CONFIG_DEFS and CONFIG_DEFS[name].dynamic)
}


def dynamic_def(key: str) -> ConfigDef | None:
    """The definition an AlterConfigs on a broker validates ``key`` with; None when Kafka
    would not update it dynamically either."""
    d = CONFIG_DEFS.get(key)
    if d is not None and d.dynamic:
        return d
    inert = INERT_DYNAMIC_DEFS.get(key)
    if inert is not None:
        return inert
    base = kdc.listener_base(key)
    if base is None:
        return None
    based = CONFIG_DEFS.get(base) or INERT_DYNAMIC_DEFS.get(base)
    t = (
        based.type
        if based is not None
        else "password"
        if base.endswith("jaas.config")
        else "string"
    )
    return ConfigDef(key, t, None, f"Listener override of {base}; inert in kafkalite.")


def is_inert_dynamic(key: str) -> bool:
    """Accepted and stored by AlterConfigs but not applied by kafkalite."""
    d = CONFIG_DEFS.get(key)
    return not (d is not None and d.dynamic) and dynamic_def(key) is not None


_BOOL = {"true": True, "false": False}
_LISTENER_RE = re.compile(
    r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d+)$"
)


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener: str
    host: str
    port: int
    security_protocol: str

    def __str__(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


def did_you_mean(key: str) -> str:
    """``"; did you mean `num.partitions`?"`` for the known key closest to ``key``, or ""."""
    close = difflib.get_close_matches(key, CONFIG_DEFS, n=1, cutoff=0.75)
    return f"; did you mean `{close[0]}`?" if close else ""


def _listener_name(text: str) -> str:
    return text.strip().split("://", 1)[0].upper()


def canonical_hostname() -> str:
    """What Kafka advertises for an empty listener host (getCanonicalHostName)."""
    return socket.getfqdn()


def parse_endpoint(key: str, text: str, protocol_map: Mapping[str, str]) -> Endpoint:
    m = _LISTENER_RE.match(text.strip())
    if not m:
        raise ConfigError(key, f"{text!r} is not of the form NAME://host:port")
    name = m["name"].upper()
    if name not in protocol_map:
        raise ConfigError(
            key, f"listener {name} has no security protocol in listener.security.protocol.map"
        )
    port = int(m["port"])
    if port > 65535:
        raise ConfigError(key, f"port {port} out of range")
    return Endpoint(name, m["host"].strip("[]"), port, protocol_map[name])


def _coerce(d: ConfigDef, value: Any) -> Any:
    if value is None:
        return None
    t = d.type
    try:
        if t in ("int", "long", "short"):
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, str):
                value = value.strip()
            v = int(value)
            limit = LONG_MAX if t == "long" else (INT_MAX if t == "int" else 32767)
            if not -limit - 1 <= v <= limit:
                raise ConfigError(d.name, f"{v} does not fit a {t}")
            return v
        if t == "double":
            return float(value)
        if t == "bool":
            if isinstance(value, bool):
                return value
            s = str(value).strip().lower()
            if s not in _BOOL:
                raise ValueError
            return _BOOL[s]
        if t == "list":
            if isinstance(value, list | tuple):
                return [str(x).strip() for x in value]
            return [x.strip() for x in str(value).split(",") if x.strip()]
        return str(value)
    except ConfigError:
        raise
    except (TypeError, ValueError):
        raise ConfigError(d.name, f"{value!r} is not a valid {t}") from None


def _flatten(prefix: str, data: Any, out: dict[str, Any]) -> None:
    if isinstance(data, Mapping):
        for k, v in data.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = data


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties subset: key=value or key: value, # and ! comments, \\ continuations."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while line.endswith("\\") and i < len(lines):
            line = line[:-1] + lines[i].strip()
            i += 1
        m = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if not m:
            out[line] = ""
        else:
            out[m[1]] = m[2]
    return out


class BrokerConfig:
    """Validated broker configuration. ``cfg["log.dirs"]`` or the typed properties.

    Values come in layers, highest first, as in Kafka: dynamic per-broker configs
    (AlterConfigs on this broker's id), dynamic cluster defaults (AlterConfigs on
    the broker resource ""), the static file, then Kafka's default.
    """

    def __init__(
        self, values: Mapping[str, Any] | None = None, *, base_dir: Path | None = None
    ) -> None:
        raw = dict(values or {})
        self._values: dict[str, Any] = {d.name: d.default for d in _DEFS}
        #: what the file (or the caller) set, coerced
        self._static: dict[str, Any] = {}
        self._dynamic_broker: dict[str, Any] = {}
        self._dynamic_default: dict[str, Any] = {}
        self.ignored: dict[str, Any] = {}
        #: ``listener.name.<name>.max.connections`` and ``...max.connection.creation.rate``:
        #: {LISTENER: {"max.connections": n, ...}} (Kafka's per-listener overrides)
        self.listener_connection_limits: dict[str, dict[str, int]] = {}
        #: per-listener SASL keys, {LISTENER: {"sasl.enabled.mechanisms": ..., "plain.sasl.jaas.config":
        #: ...}} (JAAS strings hold passwords: never described, never logged)
        self.listener_sasl: dict[str, dict[str, str]] = {}
        #: PLAIN users from ``kafkalite.sasl.plain.users`` ("" key: every listener)
        self.sasl_plain_users: dict[str, dict[str, str]] = {}
        for key, value in raw.items():
            m = _PLAIN_USER.match(key)
            if m is not None:
                self.sasl_plain_users.setdefault((m[1] or "").upper(), {})[m[2]] = str(value)
                continue
            m = _LISTENER_SASL.match(key)
            if m is not None:
                self.listener_sasl.setdefault(m[1].upper(), {})[m[2]] = str(value)
                continue
            if is_ignored_kafka_key(key):
                self.ignored[key] = value
                continue
            m = _LISTENER_LIMIT.match(key)
            if m is not None:
                try:
                    n = int(str(value).strip())
                except ValueError:
                    raise ConfigError(key, "must be an integer") from None
                if n < 0:
                    raise ConfigError(key, "must be >= 0")
                self.listener_connection_limits.setdefault(m[1].upper(), {})[m[2]] = n
                continue
            d = CONFIG_DEFS.get(key)
            if d is None:
                raise ConfigError(key, "unknown configuration key" + did_you_mean(key))
            v = _coerce(d, value)
            if d.validator and (msg := d.validator(v)):
                raise ConfigError(key, msg)
            self._values[key] = v
            self._static[key] = v
        for key in sorted(self.ignored):
            log.info("ignoring Kafka broker key %s (no effect in kafkalite)", key)
        if self._values["node.id"] is not None:
            if "broker.id" in self._static and self._values["broker.id"] != self._values["node.id"]:
                raise ConfigError("node.id", "conflicts with broker.id")
            self._values["broker.id"] = self._static["broker.id"] = self._values["node.id"]
        if self._values["broker.id"] < -1:
            raise ConfigError("broker.id", "must be >= 0 (or -1 to generate)")
        self._check_connection_bounds()
        base = base_dir or Path.cwd()
        dirs = self._values["log.dirs"] or [self._values["log.dir"]]
        if not dirs:
            raise ConfigError("log.dirs", "at least one directory is required")
        self.log_dirs = [
            (base / d).resolve() if not Path(d).is_absolute() else Path(d) for d in dirs
        ]
        pm = {}
        for entry in str(self._values["listener.security.protocol.map"]).split(","):
            if ":" not in entry:
                raise ConfigError("listener.security.protocol.map", f"bad entry {entry!r}")
            k, v = entry.split(":", 1)
            pm[k.strip().upper()] = v.strip().upper()
        self.protocol_map = pm
        # Kafka 4's KRaft controller listeners (controller.listener.names) serve the
        # controller quorum, not clients: kafkalite has no such quorum, so they are
        # neither bound nor advertised.
        controller_names = {
            n.strip().upper()
            for n in str(self.ignored.get("controller.listener.names") or "").split(",")
            if n.strip()
        }
        self.controller_listeners = [
            x for x in self._values["listeners"] if _listener_name(x) in controller_names
        ]
        self.listeners = [
            parse_endpoint("listeners", x, pm)
            for x in self._values["listeners"]
            if _listener_name(x) not in controller_names
        ]
        if not self.listeners:
            raise ConfigError("listeners", "at least one listener is required")
        for ep in self.listeners:
            if ep.security_protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
                raise ConfigError(
                    "listeners", f"security protocol {ep.security_protocol} is not supported"
                )
        if any(ep.security_protocol in ("SSL", "SASL_SSL") for ep in self.listeners):
            v = self._values
            if not v["ssl.keystore.location"] and not (
                v["ssl.keystore.certificate.chain"] and v["ssl.keystore.key"]
            ):
                raise ConfigError("ssl.keystore.location", "an SSL listener needs a PEM keystore")
            for proto in v["ssl.enabled.protocols"]:
                if proto not in ("TLSv1.2", "TLSv1.3"):
                    raise ConfigError(
                        "ssl.enabled.protocols", f"{proto} is not supported (TLSv1.2, TLSv1.3)"
                    )
        names = [ep.listener for ep in self.listeners]
        if len(set(names)) != len(names):
            raise ConfigError("listeners", "listener names must be unique")
        adv = self._values["advertised.listeners"]
        self.advertised = (
            [
                parse_endpoint("advertised.listeners", x, pm)
                for x in adv
                if _listener_name(x) not in controller_names
            ]
            if adv
            else list(self.listeners)
        )
        for ep in self.advertised:
            if ep.listener not in names:
                raise ConfigError(
                    "advertised.listeners", f"listener {ep.listener} is not in listeners"
                )
        for ep in self.advertised:
            if ep.host in ("0.0.0.0", "::"):
                raise ConfigError(
                    "advertised.listeners",
                    f"cannot advertise the non-routable meta-address {ep.host} ({ep})",
                )
        # an empty host (PLAINTEXT://:9092) binds every interface and, as in Kafka, is
        # advertised as this machine's canonical host name
        self.advertised = [
            Endpoint(e.listener, canonical_hostname(), e.port, e.security_protocol)
            if e.host == ""
            else e
            for e in self.advertised
        ]
        self._check_broker_listener_names()
        pid = self._values["pid.file"]
        self.pid_file = (
            None if pid is None else (base / pid if not Path(pid).is_absolute() else Path(pid))
        )

    def _check_broker_listener_names(self) -> None:
        """Kafka's rules: both names must be advertised listeners, and differ."""
        advertised = [ep.listener for ep in self.advertised]
        names: dict[str, str] = {}
        for key in ("inter.broker.listener.name", "control.plane.listener.name"):
            name = self._values[key]
            if name is None:
                continue
            name = self._values[key] = str(name).strip().upper()
            if name not in advertised:
                raise ConfigError(
                    key,
                    f"{name} must be a listener name defined in advertised.listeners "
                    f"({', '.join(advertised)})",
                )
            names[key] = name
        if names.get("control.plane.listener.name") == self.inter_broker_listener:
            raise ConfigError(
                "control.plane.listener.name",
                f"must differ from the inter-broker listener name ({self.inter_broker_listener})",
            )

    @property
    def inter_broker_listener(self) -> str:
        """The listener brokers reach each other on: ``inter.broker.listener.name``, else
        the PLAINTEXT listener (Kafka's ``security.inter.broker.protocol`` default), else
        the first advertised one."""
        name = self._values["inter.broker.listener.name"]
        if name:
            return str(name)
        protocol = self._values["security.inter.broker.protocol"]
        return next(
            (e.listener for e in self.advertised if e.security_protocol == protocol),
            self.advertised[0].listener,
        )

    @property
    def control_plane_listener(self) -> str:
        """The listener the controller sends LeaderAndIsr / StopReplica / UpdateMetadata to."""
        return str(self._values["control.plane.listener.name"] or self.inter_broker_listener)

    def _check_connection_bounds(self) -> None:
        """Kafka's cross-key rules for the request queue and connection quotas."""
        v = self._values
        if 0 < v["queued.max.request.bytes"] < v["socket.request.max.bytes"]:
            raise ConfigError(
                "queued.max.request.bytes",
                "must be larger or equal to socket.request.max.bytes (or <= 0 for no bound)",
            )
        try:
            overrides = parse_connection_overrides(str(v["max.connections.per.ip.overrides"]))
        except ValueError as e:
            raise ConfigError("max.connections.per.ip.overrides", str(e)) from None
        if v["max.connections.per.ip"] == 0 and not overrides:
            raise ConfigError(
                "max.connections.per.ip",
                "can be set to zero only if max.connections.per.ip.overrides is set",
            )

    # ---- access -------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def is_explicit(self, key: str) -> bool:
        """Set by the file or dynamically (not Kafka's default)."""
        return key in self._static or key in self._dynamic_broker or key in self._dynamic_default

    def is_static(self, key: str) -> bool:
        return key in self._static

    def static_value(self, key: str) -> Any:
        return self._static.get(key)

    def dynamic_value(self, key: str, *, per_broker: bool) -> Any:
        return (self._dynamic_broker if per_broker else self._dynamic_default).get(key)

    def has_dynamic(self, key: str, *, per_broker: bool) -> bool:
        return key in (self._dynamic_broker if per_broker else self._dynamic_default)

    def reported_value(self, key: str) -> Any:
        """What DescribeConfigs reports: the applied value, or for a key kafkalite does not
        apply at runtime the highest layer that sets it (Kafka's effective value)."""
        d = CONFIG_DEFS.get(key)
        if d is not None and d.dynamic:
            return self._values[key]
        for layer in (self._dynamic_broker, self._dynamic_default):
            if key in layer:
                return layer[key]
        if key in self._values:
            return self._values[key]
        inert = INERT_DYNAMIC_DEFS.get(key)
        return inert.default if inert is not None else None

    def dynamic_keys(self) -> set[str]:
        """Every key either dynamic layer sets."""
        return set(self._dynamic_broker) | set(self._dynamic_default)

    def items(self) -> list[tuple[str, Any]]:
        return sorted(self._values.items())

    # ---- dynamic configs ----------------------------------------------------
    @staticmethod
    def coerce_dynamic(configs: Mapping[str, Any], *, per_broker: bool = True) -> dict[str, Any]:
        """Check every key is one Kafka updates dynamically and every value valid; coerce them.

        Keys kafkalite does not apply (:func:`is_inert_dynamic`) are validated as Kafka
        does and kept. Raises ConfigError naming the first bad key; nothing is applied.
        """
        unknown = sorted(k for k in configs if k not in CONFIG_DEFS and dynamic_def(k) is None)
        if unknown:
            raise ConfigError(
                unknown[0],
                f"unknown broker configs: {', '.join(unknown)}" + did_you_mean(unknown[0]),
            )
        static_only = sorted(k for k in configs if dynamic_def(k) is None)
        if static_only:
            raise ConfigError(
                static_only[0],
                f"Cannot update these configs dynamically: {', '.join(static_only)}",
            )
        unprefixed = sorted(k for k in configs if k in kdc.SSL_RECONFIGURABLE)
        if unprefixed:
            raise ConfigError(
                unprefixed[0],
                "These security configs can be dynamically updated only per-listener using "
                f"the listener prefix: {', '.join(unprefixed)}",
            )
        if not per_broker:
            only = sorted(
                k
                for k in configs
                if k in kdc.PER_BROKER_ONLY
                or (
                    (base := kdc.listener_base(k)) is not None
                    and base not in kdc.CLUSTER_LEVEL_LISTENER_KEYS
                )
            )
            if only:
                raise ConfigError(
                    only[0],
                    "Cannot update these configs at default cluster level, broker id must be "
                    f"specified: {', '.join(only)}",
                )
        out: dict[str, Any] = {}
        for k, value in configs.items():
            d = dynamic_def(k)
            assert d is not None
            if value is None:
                raise ConfigError(k, "a null value is not allowed")
            v = _coerce(d, value)
            if d.validator and (msg := d.validator(v)):
                raise ConfigError(k, f"Invalid value {value} for configuration {k}: {msg}")
            out[k] = v
        return out

    def apply_dynamic(
        self, per_broker: Mapping[str, Any], cluster_default: Mapping[str, Any]
    ) -> None:
        """Replace both dynamic layers at once (validated first: all or nothing).

        A key dropped from both layers goes back to its static value, then Kafka's default.
        """
        b = self.coerce_dynamic(per_broker)
        d = self.coerce_dynamic(cluster_default, per_broker=False)
        self._dynamic_broker, self._dynamic_default = b, d
        for k, cd in CONFIG_DEFS.items():
            if cd.dynamic:
                self._values[k] = b.get(k, d.get(k, self._static.get(k, cd.default)))

    def with_dynamic(
        self, per_broker: Mapping[str, Any], cluster_default: Mapping[str, Any]
    ) -> BrokerConfig:
        """A copy with these dynamic layers: validates a change before it is made."""
        c = copy.copy(self)
        c._values = dict(self._values)
        c.apply_dynamic(per_broker, cluster_default)
        return c

    def set_dynamic(self, key: str, value: Any) -> None:
        """Set (or with None remove) one per-broker dynamic config."""
        layer = dict(self._dynamic_broker)
        if value is None:
            layer.pop(key, None)
            if dynamic_def(key) is None:
                self.coerce_dynamic({key: ""})  # raises the same error a set would
        else:
            layer[key] = value
        self.apply_dynamic(layer, self._dynamic_default)

    @property
    def broker_id(self) -> int:
        return int(self._values["broker.id"])

    # derived log defaults, following Kafka's precedence (ms > minutes > hours)
    @property
    def log_retention_ms(self) -> int:
        v = self._values
        if v["log.retention.ms"] is not None:
            return int(v["log.retention.ms"])
        if v["log.retention.minutes"] is not None:
            return int(v["log.retention.minutes"]) * 60_000
        return int(v["log.retention.hours"]) * 3_600_000

    @property
    def log_roll_ms(self) -> int:
        v = self._values["log.roll.ms"]
        return int(v) if v is not None else int(self._values["log.roll.hours"]) * 3_600_000

    @property
    def log_roll_jitter_ms(self) -> int:
        v = self._values["log.roll.jitter.ms"]
        return int(v) if v is not None else int(self._values["log.roll.jitter.hours"]) * 3_600_000

    @property
    def log_flush_interval_ms(self) -> int:
        v = self._values["log.flush.interval.ms"]
        return int(v) if v is not None else int(self._values["log.flush.scheduler.interval.ms"])

    # ---- loading ------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path, overrides: Mapping[str, Any] | None = None) -> BrokerConfig:
        p = Path(path)
        text = p.read_text()
        if p.suffix in (".properties", ".props") or (
            p.suffix not in (".yaml", ".yml", ".json")
            and "=" in text
            and ":" not in text.split("=", 1)[0]
        ):
            values: dict[str, Any] = dict(parse_properties(text))
        else:
            try:
                data = yaml.safe_load(text) or {}
            except yaml.YAMLError as e:
                raise ConfigError(str(p), f"not valid YAML: {e}") from None
            if not isinstance(data, Mapping):
                raise ConfigError(str(p), "the YAML document must be a mapping")
            values = {}
            _flatten("", data, values)
        values.update(overrides or {})
        return cls(values)
