"""An SSL-only cluster with ``ssl.client.auth=required``: the brokers' own connections
to each other (the controller's channel, controlled shutdown) present the broker's
keystore as a client certificate and verify the peer against the truststore."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.server.config import BrokerConfig
from kafkalite.testing import cluster


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def _signed_cert(d: Path, name: str, ca: tuple[Path, Path], ext: str) -> tuple[Path, Path]:
    key, csr, crt, extfile = (d / f"{name}.{s}" for s in ("key", "csr", "crt", "ext"))
    extfile.write_text(ext + "\n")
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", f"/CN={name}"
    )
    _openssl(
        "x509", "-req", "-in", csr, "-CA", ca[1], "-CAkey", ca[0], "-CAcreateserial",
        "-out", crt, "-days", "2", "-extfile", extfile,
    )  # fmt: skip
    return key, crt


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A test CA, a broker certificate for 127.0.0.1 (server and client use) and a
    client certificate, all signed by the CA."""
    d = tmp_path_factory.mktemp("pki")
    ca = d / "ca.key", d / "ca.crt"
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca[0], "-out", ca[1],
        "-days", "2", "-subj", "/CN=kafkalite-test-ca",
    )  # fmt: skip
    bkey, bcrt = _signed_cert(
        d,
        "broker",
        ca,
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth",
    )
    ckey, ccrt = _signed_cert(d, "client", ca, "extendedKeyUsage=clientAuth")
    keystore = d / "broker-keystore.pem"
    keystore.write_text(bkey.read_text() + bcrt.read_text())
    return {"ca": ca[1], "keystore": keystore, "client_key": ckey, "client_crt": ccrt}


def _ssl_only(pki: dict[str, Path]) -> dict[str, str]:
    return {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.location": str(pki["keystore"]),
        "ssl.truststore.location": str(pki["ca"]),
        "ssl.client.auth": "required",
    }


def _client(pki: dict[str, Path], bootstrap: str) -> dict[str, str]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki["ca"]),
        "ssl.certificate.location": str(pki["client_crt"]),
        "ssl.key.location": str(pki["client_key"]),
    }


@pytest.mark.parametrize("brokers", [1, 3])
def test_ssl_only_cluster_with_required_client_auth_serves_clients(pki, brokers):
    with cluster(brokers, **_ssl_only(pki)) as c:
        # every broker learnt the cluster from the controller over mutual TLS
        assert all(
            c.kafka(i).metadata_cache.controller_id == c.controller_id for i in range(brokers)
        )
        conf = _client(pki, c.bootstrap_servers)
        admin = AdminClient(conf)
        futures = admin.create_topics([NewTopic("tls-only", num_partitions=brokers * 2)])
        futures["tls-only"].result(30)
        p = Producer(conf)
        for i in range(200):
            p.produce("tls-only", f"v{i}".encode(), partition=i % (brokers * 2))
        assert p.flush(30) == 0
        consumer = Consumer({**conf, "group.id": "tls-only", "enable.partition.eof": True})
        consumer.assign([TopicPartition("tls-only", p, 0) for p in range(brokers * 2)])
        got, eof = [], set()
        while len(eof) < brokers * 2:
            m = consumer.poll(10)
            assert m is not None
            if m.error():
                eof.add(m.partition())
            else:
                got.append(m.value())
        consumer.close()
        assert sorted(got) == sorted(f"v{i}".encode() for i in range(200))
        # the partitions really are spread over the brokers
        assert {c.leader_of("tls-only", p) for p in range(brokers * 2)} == set(range(brokers))


def test_the_broker_client_context_presents_the_keystore_and_checks_the_peer(pki):
    from kafkalite.network.tls import build_client_ssl_context

    cfg = BrokerConfig({**_ssl_only(pki), "log.dirs": "/tmp/unused"})
    ctx = build_client_ssl_context(cfg)
    assert ctx.check_hostname  # Kafka's ssl.endpoint.identification.algorithm=https
    assert [c["subject"] for c in ctx.get_ca_certs()] == [((("commonName", "kafkalite-test-ca"),),)]
    relaxed = build_client_ssl_context(
        BrokerConfig(
            {
                **_ssl_only(pki),
                "log.dirs": "/tmp/unused",
                "ssl.endpoint.identification.algorithm": "",
            }
        )
    )
    assert not relaxed.check_hostname
