"""The broker configs Apache Kafka 4.x updates dynamically (``DynamicBrokerConfig.AllDynamicConfigs``),
so that AlterConfigs / IncrementalAlterConfigs on a broker accept what Kafka accepts.

kafkalite applies the keys its own config table marks ``dynamic``. Every other key
here is **inert**: accepted with Kafka's validation (per-broker only, listener prefix
required), stored in ``/config/brokers/<id>`` like any dynamic config and reported by
DescribeConfigs, but kafkalite does not act on it (no Kerberos, no JVM thread pools,
no tiered storage; listeners, SSL and connection limits are read once at start-up).
``docs/status.md`` lists them. Plain data: :mod:`kafkalite.server.config` builds
the definitions.
"""

from __future__ import annotations

import re

LONG_MAX = 2**63 - 1

#: (name, type, Kafka's default) of the dynamic keys kafkalite's table may not define
KAFKA_DYNAMIC_KEYS: tuple[tuple[str, str, object], ...] = (
    # DynamicListenerConfig: listeners, SSL, SASL, connection limits (per listener)
    ("listeners", "list", None),
    ("advertised.listeners", "list", None),
    ("listener.security.protocol.map", "string", None),
    ("principal.builder.class", "string", None),
    ("ssl.protocol", "string", "TLSv1.3"),
    ("ssl.provider", "string", None),
    ("ssl.cipher.suites", "list", None),
    ("ssl.enabled.protocols", "list", None),
    ("ssl.keystore.type", "string", "JKS"),
    ("ssl.keystore.location", "string", None),
    ("ssl.keystore.password", "password", None),
    ("ssl.key.password", "password", None),
    ("ssl.truststore.type", "string", "JKS"),
    ("ssl.truststore.location", "string", None),
    ("ssl.truststore.password", "password", None),
    ("ssl.keystore.certificate.chain", "password", None),
    ("ssl.keystore.key", "password", None),
    ("ssl.truststore.certificates", "password", None),
    ("ssl.keymanager.algorithm", "string", "SunX509"),
    ("ssl.trustmanager.algorithm", "string", "PKIX"),
    ("ssl.endpoint.identification.algorithm", "string", "https"),
    ("ssl.secure.random.implementation", "string", None),
    ("ssl.client.auth", "string", "none"),
    ("ssl.engine.factory.class", "string", None),
    ("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI"),
    ("sasl.jaas.config", "password", None),
    ("sasl.enabled.mechanisms", "list", ["GSSAPI"]),
    ("sasl.kerberos.service.name", "string", None),
    ("sasl.kerberos.kinit.cmd", "string", "/usr/bin/kinit"),
    ("sasl.kerberos.ticket.renew.window.factor", "double", 0.8),
    ("sasl.kerberos.ticket.renew.jitter", "double", 0.05),
    ("sasl.kerberos.min.time.before.relogin", "long", 60000),
    ("sasl.kerberos.principal.to.local.rules", "list", ["DEFAULT"]),
    ("sasl.login.refresh.window.factor", "double", 0.8),
    ("sasl.login.refresh.window.jitter", "double", 0.05),
    ("sasl.login.refresh.min.period.seconds", "int", 60),
    ("sasl.login.refresh.buffer.seconds", "int", 300),
    ("max.connections", "int", 2**31 - 1),
    ("max.connection.creation.rate", "int", 2**31 - 1),
    ("num.network.threads", "int", 3),
    # SocketServer
    ("max.connections.per.ip", "int", 2**31 - 1),
    ("max.connections.per.ip.overrides", "string", ""),
    # DynamicThreadPool
    ("num.io.threads", "int", 8),
    ("num.replica.fetchers", "int", 1),
    ("num.recovery.threads.per.data.dir", "int", 2),
    ("background.threads", "int", 10),
    # LogCleaner
    ("log.cleaner.threads", "int", 1),
    ("log.cleaner.dedupe.buffer.size", "long", 134217728),
    ("log.cleaner.io.buffer.load.factor", "double", 0.9),
    ("log.cleaner.io.buffer.size", "int", 524288),
    ("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308),
    ("log.cleaner.backoff.ms", "long", 15000),
    # DynamicMetricsReporters, DynamicProducerStateManagerConfig, DynamicRemoteLogConfig
    ("metric.reporters", "list", []),
    ("producer.id.expiration.ms", "int", 86400000),
    ("transaction.partition.verification.enable", "bool", True),
    ("remote.log.index.file.cache.total.size.bytes", "long", 1073741824),
    ("remote.fetch.max.wait.ms", "int", 500),
    ("remote.log.manager.copy.max.bytes.per.second", "long", LONG_MAX),
    ("remote.log.manager.fetch.max.bytes.per.second", "long", LONG_MAX),
    ("remote.list.offsets.request.timeout.ms", "long", 30000),
)

#: DynamicListenerConfig's keys minus the cluster-level ones: per broker only (Kafka's
#: PerBrokerConfigs), and valid after a ``listener.name.<listener>.`` prefix
_NAMES = [name for name, _t, _d in KAFKA_DYNAMIC_KEYS]
LISTENER_KEYS = frozenset(_NAMES[: _NAMES.index("num.network.threads") + 1])
CLUSTER_LEVEL_LISTENER_KEYS = frozenset(
    {"max.connections", "max.connection.creation.rate", "num.network.threads"}
)
#: SslConfigs.RECONFIGURABLE_CONFIGS: only with a listener prefix
SSL_RECONFIGURABLE = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.certificates",
    }
)
PER_BROKER_ONLY = (LISTENER_KEYS | SSL_RECONFIGURABLE) - CLUSTER_LEVEL_LISTENER_KEYS
#: listener.name.<listener>.<mechanism>.<key> (Kafka's ListenerMechanismConfigs)
LISTENER_MECHANISM_KEYS = frozenset(
    {
        "sasl.jaas.config",
        "sasl.login.callback.handler.class",
        "sasl.login.class",
        "sasl.server.callback.handler.class",
        "connections.max.reauth.ms",
    }
)
LISTENER_PREFIX = re.compile(r"^listener\.name\.([^.]+)\.(.+)$")


def listener_base(key: str) -> str | None:
    """The config a ``listener.name.<l>.[<mechanism>.]<key>`` override sets; None if
    ``key`` is not such an override of a key Kafka reconfigures per listener."""
    m = LISTENER_PREFIX.match(key)
    if m is None:
        return None
    rest = m[2]
    if rest in LISTENER_KEYS:
        return rest
    for base in LISTENER_MECHANISM_KEYS:
        if rest == base or rest.endswith("." + base):
            return base
    return None
