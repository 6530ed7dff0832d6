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


def test_rack_aware_assignment_matches_kafkas_example():
    """Kafka's AdminRackAwareTest: the rack-alternated broker list and the assignment."""
    from kafkalite.server.admin_manager import _rack_alternated

    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert _rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    assert _rack_alternated({b: r for b, r in racks.items() if b != 5}) == [0, 3, 1, 4, 2]
    got = assign_replicas_to_brokers(list(racks), 7, 3, fixed_start_index=0, racks=racks)
    assert got == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }
    # random start: every partition still spans three racks, leaders evenly spread
    many = assign_replicas_to_brokers(list(racks), 60, 3, racks=racks)
    assert all(len({racks[b] for b in rs}) == 3 for rs in many.values())
    assert set(Counter(rs[0] for rs in many.values()).values()) == {10}
    # some brokers with a rack, some without: refused, as Kafka does
    with pytest.raises(KafkaError):
        assign_replicas_to_brokers([0, 1, 2], 1, 2, racks={0: "a", 1: "b", 2: None})


async def test_created_topics_spread_replicas_over_racks():
    """Topics created on brokers with broker.rack get the rack-aware placement."""
    from kafkalite.testing.in_process_cluster import AsyncCluster

    racks = {0: "a", 1: "a", 2: "b", 3: "b"}
    async with AsyncCluster(
        4, broker_configs={i: {"broker.rack": r} for i, r in racks.items()}
    ) as c:
        await c.create_topic("spread", 8, 2)
        t = c.kafka(0).metadata_cache.get_topic("spread")
        assert t is not None
        for p in t.partitions.values():
            assert {racks[b] for b in p.replicas} == {"a", "b"}
