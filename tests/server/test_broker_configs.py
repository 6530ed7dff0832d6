"""Broker and topic configs over the wire: DescribeConfigs sources, synonyms and
sensitive values; AlterConfigs / IncrementalAlterConfigs validation (all or
nothing, validate_only, INVALID_CONFIG); dynamic layers over the static file."""

from __future__ import annotations

import datetime

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)
from kio.schema.alter_configs.v2 import request as alter
from kio.schema.create_topics.v7.request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.incremental_alter_configs.v1 import request as inc

from kafkalite.protocol.errors import ErrorCode
from tests.server.raw_client import RawClient

TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5


def describe(c: RawClient, rtype: int, name: str, *keys: str, synonyms: bool = True):
    resp = c.call(
        32,
        4,
        DescribeConfigsRequest(
            resources=(
                DescribeConfigsResource(
                    resource_type=rtype, resource_name=name, configuration_keys=keys or None
                ),
            ),
            include_synonyms=synonyms,
        ),
    )
    [r] = resp.results
    return r, {e.name: e for e in r.configs}


def incremental(c: RawClient, name: str, ops, *, rtype: int = BROKER, validate_only=False):
    resp = c.call(
        44,
        1,
        inc.IncrementalAlterConfigsRequest(
            resources=(
                inc.AlterConfigsResource(
                    resource_type=rtype,
                    resource_name=name,
                    configs=tuple(
                        inc.AlterableConfig(name=k, config_operation=op, value=v)
                        for k, op, v in ops
                    ),
                ),
            ),
            validate_only=validate_only,
        ),
    )
    [r] = resp.responses
    return r


def alter_all(c: RawClient, name: str, configs: dict, *, rtype=BROKER, validate_only=False):
    resp = c.call(
        33,
        2,
        alter.AlterConfigsRequest(
            resources=(
                alter.AlterConfigsResource(
                    resource_type=rtype,
                    resource_name=name,
                    configs=tuple(
                        alter.AlterableConfig(name=k, value=v) for k, v in configs.items()
                    ),
                ),
            ),
            validate_only=validate_only,
        ),
    )
    [r] = resp.responses
    return r


def syn(entry):
    return [(s.name, s.value, s.source) for s in entry.synonyms]


@pytest.fixture
def broker(kafka_broker_factory, tmp_path):
    return kafka_broker_factory(
        tmp_path / "b",
        **{
            "message.max.bytes": 2000000,
            "ssl.key.password": "hunter2",
            "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----secret",
            "log.retention.hours": 100,
        },
    )


@pytest.fixture
def client(broker):
    c = RawClient.to(broker.bootstrap_servers)
    yield c
    c.close()


def test_describe_broker_reports_static_and_default_sources_and_hides_passwords(client):
    r, cfg = describe(client, BROKER, "0")
    assert r.error_code == ErrorCode.none
    mmb = cfg["message.max.bytes"]
    assert (mmb.value, mmb.config_source, mmb.read_only) == ("2000000", STATIC, False)
    assert syn(mmb) == [
        ("message.max.bytes", "2000000", STATIC),
        ("message.max.bytes", "1048588", DEFAULT),
    ]
    for secret in ("ssl.key.password", "ssl.keystore.key"):
        e = cfg[secret]
        assert e.is_sensitive and e.value is None, secret
        assert e.config_source == STATIC
        assert all(s.value is None for s in e.synonyms)
    hours = cfg["log.retention.hours"]
    assert (hours.value, hours.config_source) == ("100", STATIC)
    # log.retention.ms is unset; its synonyms start with other names, which Kafka drops
    ms = cfg["log.retention.ms"]
    assert (ms.value, ms.config_source, syn(ms)) == (None, DEFAULT, [])
    ace = cfg["auto.create.topics.enable"]
    assert (ace.value, ace.config_source, ace.read_only) == ("true", DEFAULT, False)
    assert cfg["broker.rack"].read_only is True
    # no password appears anywhere in the response
    for e in cfg.values():
        assert "hunter2" not in str(e.value) and "secret" not in str(e.value)


def test_dynamic_broker_configs_layer_over_the_static_file(broker, client):
    broker.create_topic("layered")
    r = incremental(
        client,
        "0",
        [("message.max.bytes", SET, "3000000"), ("log.retention.ms", SET, "1234")],
    )
    assert r.error_code == ErrorCode.none, r.error_message
    _, cfg = describe(client, BROKER, "0")
    mmb = cfg["message.max.bytes"]
    assert (mmb.value, mmb.config_source) == ("3000000", DYNAMIC_BROKER)
    assert syn(mmb) == [
        ("message.max.bytes", "3000000", DYNAMIC_BROKER),
        ("message.max.bytes", "2000000", STATIC),
        ("message.max.bytes", "1048588", DEFAULT),
    ]
    # topics without overrides follow, with the dynamic source
    _, tcfg = describe(client, TOPIC, "layered", "max.message.bytes", "retention.ms")
    assert (tcfg["max.message.bytes"].value, tcfg["max.message.bytes"].config_source) == (
        "3000000",
        DYNAMIC_BROKER,
    )
    assert (tcfg["retention.ms"].value, tcfg["retention.ms"].config_source) == (
        "1234",
        DYNAMIC_BROKER,
    )

    # deleting the dynamic value goes back to the static file's value, not Kafka's default
    r = incremental(client, "0", [("message.max.bytes", DELETE, None)])
    assert r.error_code == ErrorCode.none
    _, cfg = describe(client, BROKER, "0", "message.max.bytes")
    assert (cfg["message.max.bytes"].value, cfg["message.max.bytes"].config_source) == (
        "2000000",
        STATIC,
    )
    _, tcfg = describe(client, TOPIC, "layered", "max.message.bytes")
    assert (tcfg["max.message.bytes"].value, tcfg["max.message.bytes"].config_source) == (
        "2000000",
        STATIC,
    )
    assert broker.kafka.log_manager is not None
    assert broker.kafka.dynamic_config.default_log_config.max_message_bytes == 2000000

    # the cluster-wide default ("") sits under the per-broker layer
    r = incremental(client, "", [("log.retention.ms", SET, "5555")])
    assert r.error_code == ErrorCode.none, r.error_message
    r_default, dcfg = describe(client, BROKER, "")
    assert r_default.error_code == ErrorCode.none
    assert set(dcfg) == {"log.retention.ms"}  # "" lists only the dynamic defaults
    assert (dcfg["log.retention.ms"].value, dcfg["log.retention.ms"].config_source) == (
        "5555",
        DYNAMIC_DEFAULT,
    )
    _, cfg = describe(client, BROKER, "0", "log.retention.ms")
    assert (cfg["log.retention.ms"].value, cfg["log.retention.ms"].config_source) == (
        "1234",
        DYNAMIC_BROKER,
    )
    assert syn(cfg["log.retention.ms"])[:2] == [
        ("log.retention.ms", "1234", DYNAMIC_BROKER),
        ("log.retention.ms", "5555", DYNAMIC_DEFAULT),
    ]
    incremental(client, "0", [("log.retention.ms", DELETE, None)])
    _, cfg = describe(client, BROKER, "0", "log.retention.ms")
    assert (cfg["log.retention.ms"].value, cfg["log.retention.ms"].config_source) == (
        "5555",
        DYNAMIC_DEFAULT,
    )
    _, tcfg = describe(client, TOPIC, "layered", "retention.ms")
    assert tcfg["retention.ms"].value == "5555"

    # both layers survive a restart
    incremental(client, "0", [("message.max.bytes", SET, "2500000")])
    client.close()
    broker.restart()
    c = RawClient.to(broker.bootstrap_servers)
    try:
        _, cfg = describe(c, BROKER, "0", "message.max.bytes", "log.retention.ms")
        assert (cfg["message.max.bytes"].value, cfg["message.max.bytes"].config_source) == (
            "2500000",
            DYNAMIC_BROKER,
        )
        assert (cfg["log.retention.ms"].value, cfg["log.retention.ms"].config_source) == (
            "5555",
            DYNAMIC_DEFAULT,
        )
    finally:
        c.close()


@pytest.mark.parametrize(
    ("ops", "words"),
    [
        (
            [("log.retention.ms", SET, "777"), ("message.max.bytes", SET, "abc")],
            "message.max.bytes",
        ),
        ([("log.retention.ms", SET, "777"), ("broker.rack", SET, "r9")], "dynamically"),
        ([("log.retention.ms", SET, "777"), ("no.such.config", SET, "1")], "no.such.config"),
        ([("log.retention.ms", SET, "777"), ("min.insync.replicas", SET, "0")], "min.insync"),
        (
            [
                ("log.cleaner.min.compaction.lag.ms", SET, "10"),
                ("log.cleaner.max.compaction.lag.ms", SET, "5"),
            ],
            "compaction.lag",
        ),
    ],
)
def test_bad_broker_config_change_is_invalid_config_and_applies_nothing(client, ops, words):
    r = incremental(client, "0", ops)
    assert r.error_code == ErrorCode.invalid_config
    assert words in r.error_message
    # nothing applied, the connection still serves requests
    _, cfg = describe(client, BROKER, "0", "log.retention.ms", "log.cleaner.min.compaction.lag.ms")
    assert cfg["log.retention.ms"].value is None
    assert cfg["log.cleaner.min.compaction.lag.ms"].value == "0"
    # the legacy AlterConfigs does the same
    r = alter_all(client, "0", {k: v for k, _, v in ops})
    assert r.error_code == ErrorCode.invalid_config and words in r.error_message
    _, cfg = describe(client, BROKER, "0", "log.retention.ms")
    assert cfg["log.retention.ms"].value is None


def test_validate_only_validates_and_changes_nothing(client):
    r = incremental(client, "0", [("log.retention.ms", SET, "42")], validate_only=True)
    assert r.error_code == ErrorCode.none
    r = incremental(client, "0", [("log.retention.ms", SET, "forty-two")], validate_only=True)
    assert r.error_code == ErrorCode.invalid_config
    r = alter_all(client, "0", {"log.retention.ms": "42"}, validate_only=True)
    assert r.error_code == ErrorCode.none
    _, cfg = describe(client, BROKER, "0", "log.retention.ms")
    assert cfg["log.retention.ms"].value is None


def test_broker_resource_names_follow_kafka(client):
    r, _ = describe(client, BROKER, "7")
    assert r.error_code == ErrorCode.invalid_request
    assert "Unexpected broker id" in r.error_message
    r, _ = describe(client, BROKER, "zero")
    assert r.error_code == ErrorCode.invalid_request
    assert incremental(client, "7", [("log.retention.ms", SET, "1")]).error_code == (
        ErrorCode.invalid_request
    )


def test_create_topics_response_reports_config_sources(client):
    resp = client.call(
        19,
        7,
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name="sources",
                    num_partitions=1,
                    replication_factor=1,
                    assignments=(),
                    configs=(CreatableTopicConfig(name="retention.ms", value="1000"),),
                ),
            ),
            timeout=datetime.timedelta(seconds=10),
            validate_only=False,
        ),
    )
    [t] = resp.topics
    assert t.error_code == ErrorCode.none
    got = {c.name: (c.value, c.config_source, c.read_only, c.is_sensitive) for c in t.configs}
    assert got["retention.ms"] == ("1000", DYNAMIC_TOPIC, False, False)
    assert got["max.message.bytes"] == ("2000000", STATIC, False, False)  # message.max.bytes
    assert got["segment.bytes"][1] == STATIC  # log.segment.bytes set by the test defaults
    assert got["cleanup.policy"] == ("delete", DEFAULT, False, False)
    # the same sources through DescribeConfigs
    _, cfg = describe(client, TOPIC, "sources")
    for name in ("retention.ms", "max.message.bytes", "cleanup.policy"):
        assert cfg[name].config_source == got[name][1]
    assert syn(cfg["retention.ms"])[0] == ("retention.ms", "1000", DYNAMIC_TOPIC)


def test_confluent_admin_round_trip_of_broker_configs(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    res = ConfigResource(ConfigResource.Type.BROKER, "0")
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["message.max.bytes"].value == "2000000"
    assert cfg["ssl.key.password"].is_sensitive and cfg["ssl.key.password"].value is None

    admin.incremental_alter_configs(
        [
            ConfigResource(
                ConfigResource.Type.BROKER,
                "0",
                incremental_configs=[
                    ConfigEntry(
                        "log.retention.bytes", "99999", incremental_operation=AlterConfigOpType.SET
                    )
                ],
            )
        ]
    )[res].result(10)
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["log.retention.bytes"].value == "99999"
    assert cfg["log.retention.bytes"].source == DYNAMIC_BROKER

    bad = ConfigResource(
        ConfigResource.Type.BROKER,
        "0",
        incremental_configs=[
            ConfigEntry("log.retention.bytes", "lots", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException) as e:
        admin.incremental_alter_configs([bad])[res].result(10)
    assert e.value.args[0].code() == ErrorCode.invalid_config
    # legacy alter_configs replaces the whole dynamic set
    admin.alter_configs(
        [ConfigResource(ConfigResource.Type.BROKER, "0", set_config={"log.retention.ms": "7"})]
    )[res].result(10)
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["log.retention.ms"].value == "7"
    assert cfg["log.retention.bytes"].value == "-1"  # back to the default
    assert cfg["log.retention.bytes"].source == DEFAULT


def test_kafka_dynamic_keys_kafkalite_does_not_use_are_stored_and_reported(broker, client):
    """Kafka accepts every key it defines as dynamic (DynamicBrokerConfig.AllDynamicConfigs);
    kafkalite stores the ones it does not apply (inert) and describes them."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    res = ConfigResource(ConfigResource.Type.BROKER, "0")
    before = admin.describe_configs([res])[res].result(10)
    relogin = before["sasl.kerberos.min.time.before.relogin"]
    assert (relogin.value, relogin.source, relogin.is_read_only) == ("60000", DEFAULT, False)

    def set_(*pairs: tuple[str, str], name: str = "0") -> None:
        r = ConfigResource(
            ConfigResource.Type.BROKER,
            name,
            incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in pairs
            ],
        )
        admin.incremental_alter_configs([r])[r].result(10)

    jaas = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
    set_(
        ("sasl.kerberos.min.time.before.relogin", "120000"),
        ("listener.name.sasl_plaintext.sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256"),
        (jaas, "org.apache.kafka.common.security.plain.PlainLoginModule required;"),
        ("num.io.threads", "16"),
    )
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["sasl.kerberos.min.time.before.relogin"].value == "120000"
    assert cfg["sasl.kerberos.min.time.before.relogin"].source == DYNAMIC_BROKER
    assert cfg["listener.name.sasl_plaintext.sasl.enabled.mechanisms"].value == (
        "PLAIN,SCRAM-SHA-256"
    )
    assert cfg[jaas].is_sensitive and cfg[jaas].value is None
    assert cfg["num.io.threads"].value == "16"

    def refused(*pairs: tuple[str, str], name: str = "0") -> str:
        with pytest.raises(KafkaException) as e:
            set_(*pairs, name=name)
        assert e.value.args[0].code() == ErrorCode.invalid_config
        return str(e.value.args[0].str())

    # Kafka's own refusals: a wrong type, SSL stores without a listener prefix, listener
    # settings at the cluster-default level, and keys Kafka never updates dynamically
    assert "not a valid long" in refused(("sasl.kerberos.min.time.before.relogin", "soon"))
    assert "per-listener" in refused(("ssl.keystore.location", "/k.pem"))
    r = incremental(client, "", [("sasl.enabled.mechanisms", SET, "PLAIN")])
    assert r.error_code == ErrorCode.invalid_config
    assert "broker id must be specified" in r.error_message
    assert "dynamically" in refused(("broker.rack", "r1"))
    assert "unknown" in refused(("listener.name.x.no.such.key", "1"))
