"""Config loading: Kafka names and defaults; bad input fails naming the key."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kafkalite.server.config import BrokerConfig, ConfigError


def test_defaults_equal_kafkas():
    c = BrokerConfig({})
    assert c["num.partitions"] == 1
    assert c["message.max.bytes"] == 1048588
    assert c["socket.request.max.bytes"] == 104857600
    assert c["connections.max.idle.ms"] == 600000
    assert c["auto.create.topics.enable"] is True
    assert c.log_retention_ms == 7 * 24 * 3600 * 1000
    assert [str(e) for e in c.listeners] == ["PLAINTEXT://127.0.0.1:9092"]


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"no.such.key": 1}, "no.such.key"),
        ({"num.partitions": "many"}, "num.partitions"),
        ({"num.partitions": 0}, "num.partitions"),
        ({"auto.create.topics.enable": "perhaps"}, "auto.create.topics.enable"),
        ({"listeners": "127.0.0.1:9092"}, "listeners"),
        (
            {
                "listeners": "PLAINTEXT://0.0.0.0:9092",
                "advertised.listeners": "PLAINTEXT://0.0.0.0:9092",
            },
            "advertised.listeners",
        ),
        ({"log.message.timestamp.type": "Sometimes"}, "log.message.timestamp.type"),
        ({"message.max.bytes": 99999999999}, "message.max.bytes"),
        ({"kafkalite.metrics.port": 70000}, "kafkalite.metrics.port"),
        ({"fetch.max.bytes": 1023}, "fetch.max.bytes"),
        ({"replica.fetch.response.max.bytes": -1}, "replica.fetch.response.max.bytes"),
        ({"kafkalite.metrics.port": "http"}, "kafkalite.metrics.port"),
    ],
)
def test_bad_config_names_the_key(values, key):
    with pytest.raises(ConfigError) as e:
        BrokerConfig(values)
    assert e.value.key == key
    assert key in str(e.value)


def test_fetch_size_keys_have_kafkas_defaults():
    cfg = BrokerConfig({})
    assert cfg["fetch.max.bytes"] == 57671680  # 55 MiB
    assert cfg["replica.fetch.response.max.bytes"] == 10485760


def test_retention_precedence_ms_over_minutes_over_hours():
    assert BrokerConfig({"log.retention.hours": 1}).log_retention_ms == 3_600_000
    assert (
        BrokerConfig({"log.retention.hours": 1, "log.retention.minutes": 2}).log_retention_ms
        == 120_000
    )
    assert BrokerConfig({"log.retention.minutes": 2, "log.retention.ms": 5}).log_retention_ms == 5


def test_yaml_nested_and_properties_files(tmp_path):
    y = tmp_path / "server.yaml"
    y.write_text("log:\n  retention:\n    hours: 2\nnum.partitions: 4\n")
    c = BrokerConfig.load(y)
    assert c["num.partitions"] == 4 and c.log_retention_ms == 7_200_000
    p = tmp_path / "server.properties"
    p.write_text(
        "# Kafka style\nbroker.id=3\nnum.partitions = 6\nlog.dirs=/tmp/a,/tmp/b\nnum.io.threads=8\n"
    )
    c = BrokerConfig.load(p)
    assert c.broker_id == 3 and c["num.partitions"] == 6
    assert [str(d) for d in c.log_dirs] == ["/tmp/a", "/tmp/b"]
    assert "num.io.threads" in c.ignored


def test_server_cli_fails_at_startup_naming_the_key(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("listeners: PLAINTEXT://127.0.0.1:0\nlog.dirs: data\nnum.partitons: 3\n")
    from tests.server.test_server_process import REPO

    r = subprocess.run(
        [sys.executable, "-m", "kafkalite.cli.server", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert r.returncode == 2
    assert "num.partitons" in r.stderr


# Kafka 4.0's config/server.properties as shipped (combined broker+controller node),
# comments shortened. It must load unchanged.
KAFKA4_SERVER_PROPERTIES = """\
############################# Server Basics #############################

# The role of this server. Setting this puts us in KRaft mode
process.roles=broker,controller

# The node id associated with this instance's roles
node.id=1

# List of controller endpoints used connect to the controller cluster
controller.quorum.bootstrap.servers=localhost:9093

############################# Socket Server Settings #############################

# Combined nodes (i.e. those with `process.roles=broker,controller`) must list the
# controller listener here at a minimum.
listeners=PLAINTEXT://:9092,CONTROLLER://:9093

# Name of listener used for communication between brokers.
inter.broker.listener.name=PLAINTEXT

# Listener name, hostname and port the broker or the controller will advertise to clients.
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093

# A comma-separated list of the names of the listeners used by the controller.
controller.listener.names=CONTROLLER

# Maps listener names to security protocols, the default is for them to be the same.
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL

num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

############################# Log Basics #############################

log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1

############################# Internal Topic Settings  #############################
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1

############################# Log Flush Policy #############################
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000

############################# Log Retention Policy #############################
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def test_kafka4_stock_server_properties_loads(tmp_path, caplog):
    import logging

    p = tmp_path / "server.properties"
    p.write_text(KAFKA4_SERVER_PROPERTIES)
    with caplog.at_level(logging.INFO, logger="kafkalite.server.config"):
        c = BrokerConfig.load(p)
    assert c.broker_id == 1  # node.id
    # the CONTROLLER listener is KRaft's: neither bound nor advertised
    assert [(e.listener, e.host, e.port) for e in c.listeners] == [("PLAINTEXT", "", 9092)]
    assert c.controller_listeners == ["CONTROLLER://:9093"]
    assert [str(e) for e in c.advertised] == ["PLAINTEXT://localhost:9092"]
    assert [str(d) for d in c.log_dirs] == ["/tmp/kraft-combined-logs"]
    assert c.log_retention_ms == 168 * 3_600_000 and c["log.segment.bytes"] == 1073741824
    assert c["offsets.topic.replication.factor"] == 1
    for key in (
        "process.roles",
        "controller.quorum.bootstrap.servers",
        "controller.listener.names",
        "share.coordinator.state.topic.replication.factor",
        "share.coordinator.state.topic.min.isr",
        "num.network.threads",
    ):
        assert key in c.ignored, key
        assert f"ignoring Kafka broker key {key}" in caplog.text
    # honoured by kafkalite (parallel recovery of unclean logs), so not ignored
    assert c["num.recovery.threads.per.data.dir"] == 1
    assert "num.recovery.threads.per.data.dir" not in c.ignored


def test_kafka4_stock_file_runs_a_broker_process(tmp_path):
    """The stock file as is, with only ports and the data dir overridden."""
    import signal
    import socket as _socket

    from confluent_kafka import Consumer, Producer, TopicPartition

    from tests.server.test_server_process import _free_port, _start

    p = tmp_path / "server.properties"
    p.write_text(KAFKA4_SERVER_PROPERTIES)
    port, ctrl = _free_port(), _free_port()
    proc, lines = _start(
        p,
        tmp_path,
        "--override",
        f"log.dirs={tmp_path / 'data'}",
        "--override",
        f"listeners=PLAINTEXT://:{port},CONTROLLER://:{ctrl}",
        "--override",
        f"advertised.listeners=PLAINTEXT://localhost:{port},CONTROLLER://localhost:{ctrl}",
    )
    try:
        ready = lines[-1]
        assert f"PLAINTEXT://localhost:{port}" in ready and "CONTROLLER" not in ready
        out = "".join(lines)
        assert "ignoring Kafka broker key process.roles" in out
        # nothing listens on the controller port
        with _socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", ctrl)) != 0
        bs = f"localhost:{port}"
        prod = Producer({"bootstrap.servers": bs})
        for i in range(10):
            prod.produce("stock", f"m{i}".encode())
        assert prod.flush(20) == 0
        c = Consumer({"bootstrap.servers": bs, "group.id": "g", "enable.partition.eof": True})
        c.assign([TopicPartition("stock", 0, 0)])
        got = []
        while True:
            m = c.poll(10)
            assert m is not None
            if m.error():
                break
            got.append(m.value())
        c.close()
        assert got == [f"m{i}".encode() for i in range(10)]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_empty_listener_host_binds_all_interfaces_and_advertises_the_canonical_name(
    kafka_broker_factory,
):
    import socket as _socket

    from tests.server.raw_client import RawClient
    from tests.server.test_protocol_edges import metadata

    b = kafka_broker_factory(listeners="PLAINTEXT://:0")
    host, port = b.kafka.socket_server.bound["PLAINTEXT"]
    assert host == "0.0.0.0"
    assert b.kafka.advertised[0].host == _socket.getfqdn() != ""
    c = RawClient("127.0.0.1", port)
    try:
        md = c.call(3, 12, metadata())
        assert [(x.host, x.port) for x in md.brokers] == [(_socket.getfqdn(), port)]
    finally:
        c.close()


def test_advertising_a_wildcard_address_fails_naming_the_key():
    with pytest.raises(ConfigError) as e:
        BrokerConfig({"listeners": "PLAINTEXT://0.0.0.0:9092"})
    assert e.value.key == "advertised.listeners"
