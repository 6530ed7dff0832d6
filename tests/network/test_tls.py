"""SSL listeners: stock clients over TLS; the copy path returns the same bytes as sendfile."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.server.config import BrokerConfig, ConfigError

pytestmark = pytest.mark.skipif(
    shutil.which("openssl") is None, reason="openssl CLI needed to make a test cert"
)


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    key, crt = d / "key.pem", d / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(crt),
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    keystore = d / "keystore.pem"
    keystore.write_text(key.read_text() + crt.read_text())
    return keystore, crt


def _consume(bs, topic, extra):
    c = Consumer(
        {"bootstrap.servers": bs, "group.id": "tls", "enable.partition.eof": True, **extra}
    )
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    while True:
        m = c.poll(10)
        assert m is not None
        if m.error():
            break
        out.append((m.offset(), m.key(), m.value(), m.headers(), m.timestamp()))
    c.close()
    return out


def test_ssl_listener_serves_the_same_bytes_as_plaintext(kafka_broker_factory, cert):
    keystore, ca = cert
    b = kafka_broker_factory(
        **{
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.location": str(keystore),
        }
    )
    plain = f"127.0.0.1:{b.kafka.bound_port('PLAINTEXT')}"
    tls = f"127.0.0.1:{b.kafka.bound_port('SSL')}"
    ssl_conf = {"security.protocol": "SSL", "ssl.ca.location": str(ca)}
    b.create_topic("tls-topic")
    p = Producer({"bootstrap.servers": tls, "compression.type": "gzip", **ssl_conf})
    for i in range(2000):
        p.produce(
            "tls-topic", f"v{i}".encode() * 50, f"k{i}".encode(), partition=0, headers=[("h", b"x")]
        )
    assert p.flush(20) == 0
    via_tls = _consume(tls, "tls-topic", ssl_conf)
    via_plain = _consume(plain, "tls-topic", {})
    assert len(via_tls) == 2000
    assert via_tls == via_plain


def test_ssl_listener_without_keystore_fails_naming_the_key():
    with pytest.raises(ConfigError) as e:
        BrokerConfig({"listeners": "SSL://127.0.0.1:0"})
    assert e.value.key == "ssl.keystore.location"


def test_unreadable_keystore_fails_at_start_up_naming_the_key(tmp_path):
    from kafkalite.network.tls import build_ssl_context

    bad = tmp_path / "bad.pem"
    bad.write_text("not a pem")
    with pytest.raises(ConfigError) as e:
        build_ssl_context(
            BrokerConfig({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(bad)})
        )
    assert e.value.key == "ssl.keystore.location"


def test_a_tls_client_is_throttled_and_muted_like_a_plaintext_one(kafka_broker_factory, cert):
    """KIP-219 over TLS (the connection reads from a task there): throttle reported by
    librdkafka, nothing failed (issue 21)."""
    from tests.quota.test_client_throttling import produce_all, set_quota, throttled_responses

    keystore, ca = cert
    b = kafka_broker_factory(
        **{
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "ssl.keystore.location": str(keystore),
            "quota.window.num": 2,
            "quota.window.size.seconds": 1,
        }
    )
    b.create_topic("t")
    set_quota(b, "tls-greedy", {"producer_byte_rate": 200_000})
    tls = f"127.0.0.1:{b.kafka.bound_port('SSL')}"
    throttles: list[float] = []
    delivered, failed, _ = produce_all(
        tls,
        "tls-greedy",
        "t",
        600,
        throttles,
        extra={"security.protocol": "SSL", "ssl.ca.location": str(ca)},
    )
    assert (delivered, failed) == (600, 0)
    assert any(t > 0 for t in throttles)
    assert throttled_responses(b, "produce", "tls-greedy") > 0
