"""The exactly-once loop on a 3-broker in-process cluster (replication factor 1: the
partitions of A, B, ``__consumer_offsets`` and ``__transaction_state`` spread over the
brokers), so the coordinator sends most markers over TCP to other brokers; then the
coordinator's broker crashes mid-transaction and restarts (no replicas to fail over
to until replication lands): the open transaction is aborted after its timeout."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from kafkalite.testing.in_process_cluster import ThreadedCluster
from tests.transactions.eos import (
    BROKER_CONFIG,
    RECORDS,
    check_exactly_once,
    create_topics,
    fill_source,
    read_all,
    unique,
)
from tests.transactions.test_eos_confluent import copy_with_confluent

N = min(RECORDS, 700)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ThreadedCluster(
        3,
        tmp_path_factory.mktemp("eos-cluster"),
        **{
            **BROKER_CONFIG,
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
        },
    )
    c.start()
    try:
        yield c
    finally:
        c.stop()


def test_exactly_once_across_three_brokers(cluster):
    bs = cluster.bootstrap_servers
    source, sink, group = unique("A"), unique("B"), unique("copy")
    create_topics(bs, source, sink)
    assert len({cluster.leader_of(sink, p) for p in range(3)}) > 1
    fill_source(bs, source, N)
    assert copy_with_confluent(bs, source, sink, group, N) >= 1
    check_exactly_once(bs, source, sink, group, N)
    sent = sum(
        cluster.call(lambda i=i: cluster.kafka(i).txn_marker_sender.requests_sent)
        for i in cluster.live_ids
    )
    assert sent > 0


def test_coordinator_crash_mid_transaction(cluster):
    bs = cluster.bootstrap_servers
    topic, tid = unique("crash"), unique("tid")
    create_topics(bs, topic)
    p = Producer({"bootstrap.servers": bs, "transactional.id": tid, "transaction.timeout.ms": 3000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"open-{i}".encode(), partition=i)
    assert p.flush(10) == 0
    coordinator = cluster.call(
        lambda: cluster.kafka(0).transaction_coordinator.coordinator_for(tid)
    )
    cluster.crash(coordinator)
    cluster.restart(coordinator)
    plain = Producer({"bootstrap.servers": bs})
    for i in range(3):
        plain.produce(topic, value=f"after-{i}".encode(), partition=i)
    assert plain.flush(30) == 0
    deadline = time.monotonic() + 30
    seen: list[bytes] = []
    while time.monotonic() < deadline:
        seen = read_all(bs, topic, "read_committed", 3, timeout_s=5)
        if len(seen) == 3:
            break
    assert sorted(seen) == [b"after-0", b"after-1", b"after-2"]
