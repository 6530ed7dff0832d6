"""Brokers authenticate each other: a 3-broker cluster whose only listener is SASL_SSL
(the controller channel, replica fetchers, controlled shutdown all log in with the
broker's credentials, and keep the inter-broker HMAC too) replicates and fails over,
in process and as real processes over ZooKeeper."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.metadata import zk_data
from kafkalite.protocol import scram
from kafkalite.security.credentials import ScramCredential
from kafkalite.testing import cluster
from kafkalite.testing.process_cluster import ProcessCluster
from tests.controller.conftest import zookeeper  # noqa: F401 (the fixture)
from tests.controller.test_inter_broker_tls import pki  # noqa: F401 (the fixture)

BROKER_PW, ALICE_PW = "broker-secret-8Uj", "alice-secret-5Nm"


def _client(certs: dict[str, Path], bootstrap: str, mech: str = "PLAIN") -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(certs["ca"]),
        "sasl.mechanism": mech,
        "sasl.username": "alice",
        "sasl.password": ALICE_PW,
    }


def _produce(conf: dict[str, Any], topic: str, values: list[bytes]) -> None:
    p = Producer({**conf, "acks": "all", "enable.idempotence": True})
    errors: list[Any] = []
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda e, _m: errors.append(e) if e else None)
    assert p.flush(60) == 0 and errors == []


def _consume(conf: dict[str, Any], topic: str, n: int) -> list[bytes]:
    c = Consumer({**conf, "group.id": f"g-{time.monotonic_ns()}", "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    return got


def test_in_process_cluster_with_sasl_ssl_between_brokers(pki: dict[str, Path]) -> None:  # noqa: F811
    config = {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN",
        "ssl.keystore.location": str(pki["keystore"]),
        "ssl.truststore.location": str(pki["ca"]),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="broker" password="{BROKER_PW}" '
            f'user_broker="{BROKER_PW}" user_alice="{ALICE_PW}";'
        ),
        "min.insync.replicas": 2,
    }
    with cluster(3, **config) as c:
        c.create_topic("replicated", 1, 3)
        conf = _client(pki, c.bootstrap_servers)
        _produce(conf, "replicated", [f"a{i}".encode() for i in range(100)])
        # followers fetched over SASL_SSL: every replica has the records
        leader = c.leader_of("replicated", 0)
        c.crash(leader)
        c.wait_for_controller(not_=leader if c.controller_id == leader else None)
        deadline = time.monotonic() + 30
        while c.leader_of("replicated", 0) in (leader, -1) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert c.leader_of("replicated", 0) not in (leader, -1)
        live = ",".join(c.bootstrap_of(i) for i in c.live_ids)
        conf = _client(pki, live)
        _produce(conf, "replicated", [f"b{i}".encode() for i in range(100)])
        got = _consume(conf, "replicated", 200)
        assert got == [f"a{i}".encode() for i in range(100)] + [
            f"b{i}".encode() for i in range(100)
        ]


def _seed_scram(zk_connect: str, user: str, password: str) -> None:
    """Kafka's ZooKeeper-mode way: the credential is in ZooKeeper before the brokers start."""
    from kazoo.client import KazooClient

    mech = scram.MECHANISMS["SCRAM-SHA-512"]
    cred = ScramCredential.from_password(mech, password, 4096)
    zk = KazooClient(hosts=zk_connect)
    zk.start()
    try:
        data = zk_data.EntityConfig({"SCRAM-SHA-512": cred.to_config()}).encode()
        zk.create(f"/config/users/{user}", data, makepath=True)
    finally:
        zk.stop()
        zk.close()


def test_process_cluster_over_zookeeper_with_scram_between_brokers(
    zookeeper: Any,  # noqa: F811
    tmp_path: Path,
    pki: dict[str, Path],  # noqa: F811
) -> None:
    root_zk = zookeeper.connect_string
    chroot = f"/sasl-{os.getpid()}-{time.monotonic_ns()}"
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=root_zk)
    zk.start()
    zk.ensure_path(chroot)
    zk.stop()
    zk.close()
    connect = root_zk + chroot
    _seed_scram(connect, "broker", BROKER_PW)
    _seed_scram(connect, "alice", ALICE_PW)
    overrides = {
        "listeners": "SASL_SSL://127.0.0.1:{port}",
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.location": str(pki["keystore"]),
        "ssl.truststore.location": str(pki["ca"]),
        "kafkalite.sasl.client.username": "broker",
        "kafkalite.sasl.client.password": BROKER_PW,
        "replica.lag.time.max.ms": 3000,
    }
    c = ProcessCluster(3, tmp_path, connect, overrides)
    with c:
        conf = _client(pki, c.bootstrap_servers, "SCRAM-SHA-512")
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(conf)
        admin.create_topics([NewTopic("zk-replicated", 1, 3)])["zk-replicated"].result(60)
        _produce(conf, "zk-replicated", [f"a{i}".encode() for i in range(100)])

        def state() -> dict[str, Any]:
            from kazoo.exceptions import NoNodeError

            try:
                return c.partition_state("zk-replicated", 0)
            except NoNodeError:  # the controller has not written it yet
                return {"leader": -1, "isr": []}

        c.wait(lambda: len(state()["isr"]) == 3, 60, "a full ISR")
        leader = state()["leader"]
        c.servers[leader].kill9()
        new = c.wait(
            lambda: (now := state()["leader"]) not in (leader, -1) and now, 60, "a new leader"
        )
        assert new != leader
        live = ",".join(s.bootstrap for i, s in c.servers.items() if i != leader)
        conf = _client(pki, live, "SCRAM-SHA-512")
        _produce(conf, "zk-replicated", [f"b{i}".encode() for i in range(50)])
        got = _consume(conf, "zk-replicated", 150)
        assert got == [f"a{i}".encode() for i in range(100)] + [f"b{i}".encode() for i in range(50)]
