"""Config loading: Kafka names and defaults; bad input fails naming the key."""

from __future__ import annotations

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
    ],
)
def test_bad_config_names_the_key(values, key):
    with pytest.raises(ConfigError) as e:
        BrokerConfig(values)
    assert e.value.key == key
    assert key in str(e.value)


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
    r = subprocess.run(
        [sys.executable, "-m", "kafkalite.cli.server", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert r.returncode == 2
    assert "num.partitons" in r.stderr
