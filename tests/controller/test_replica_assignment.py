"""Kafka's rack-unaware replica assignment (AdminUtils.assignReplicasToBrokers) and the
placement of partitions added by CreatePartitions."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from kafkalite.metadata import zk_data, zk_paths
from kafkalite.protocol.errors import KafkaError
from kafkalite.server.admin_manager import assign_replicas_to_brokers
from tests.controller.cluster import Cluster


def test_round_robin_leaders_with_shifted_followers():
    # Kafka's own example: 5 brokers, 10 partitions, RF 3, fixed start index 0
    assert assign_replicas_to_brokers([0, 1, 2, 3, 4], 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_assignment_spreads_leaders_and_replicas_evenly():
    a = assign_replicas_to_brokers([3, 1, 2], 6, 2)
    assert sorted(a) == list(range(6))
    assert Counter(r[0] for r in a.values()) == {1: 2, 2: 2, 3: 2}
    assert all(len(set(r)) == 2 for r in a.values())
    assert Counter(b for r in a.values() for b in r) == {1: 4, 2: 4, 3: 4}


def test_a_start_partition_continues_the_pattern():
    whole = assign_replicas_to_brokers([0, 1, 2], 6, 2, fixed_start_index=1)
    tail = assign_replicas_to_brokers([0, 1, 2], 3, 2, start_partition=3, fixed_start_index=1)
    assert tail == {p: whole[p] for p in (3, 4, 5)}


def test_replication_factor_above_the_broker_count_is_refused():
    with pytest.raises(KafkaError):
        assign_replicas_to_brokers([0, 1], 1, 3)


async def test_create_partitions_continues_from_partition_0s_first_replica(tmp_path):
    async with Cluster(tmp_path, 3) as cluster:
        bootstrap = cluster.bootstrap()

        def create_and_grow():
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for f in admin.create_topics([NewTopic("t", 2, 2)]).values():
                f.result(20)
            for f in admin.create_partitions([NewPartitions("t", 6)]).values():
                f.result(20)

        await asyncio.to_thread(create_and_grow)
        a = zk_data.TopicAssignment.decode(await cluster.znode(zk_paths.topic_path("t"))).partitions
        first = a[0][0]
        expected = assign_replicas_to_brokers(
            [0, 1, 2], 4, 2, start_partition=2, fixed_start_index=[0, 1, 2].index(first)
        )
        assert {p: a[p] for p in range(2, 6)} == expected
        for p in range(6):
            await cluster.wait_state("t", p, lambda s: s.leader >= 0)
