"""Broker registration and the Metadata every broker serves (seed 000 §5, #59-60)."""

from __future__ import annotations

import asyncio

from confluent_kafka.admin import AdminClient

from kafkalite.metadata import zk_data, zk_paths
from kafkalite.protocol import messages
from tests.controller.cluster import Cluster, eventually
from tests.server.raw_client import RawClient


async def test_brokers_register_ephemerally_and_vanish_when_they_stop_or_die(tmp_path, backend):
    """#59 (and the persistent parents every broker creates)."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        assert sorted(await cluster.admin.get_children(zk_paths.BROKER_IDS)) == ["0", "1", "2"]
        for i in range(3):
            raw, stat = await cluster.admin.get(zk_paths.broker_path(i))
            reg = zk_data.BrokerRegistration.decode(raw)
            b = cluster.broker(i)
            assert stat.ephemeral and stat.czxid == b.broker_epoch
            assert [e.connection_string() for e in reg.endpoints] == [str(e) for e in b.advertised]
        for path in zk_paths.PERSISTENT_PATHS:
            assert await cluster.admin.exists(path) is not None, path
        await cluster.shutdown(1)  # clean stop
        await cluster.kill(2)  # death

        async def only_0() -> bool:
            return await cluster.admin.get_children(zk_paths.BROKER_IDS) == ["0"]

        await eventually(only_0)


async def test_every_broker_serves_the_same_cluster_metadata(tmp_path, backend):
    """#60: live brokers, cluster id, controller id, leaders, replicas, ISR, offline replicas."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        await cluster.create_topic_znode("t", {0: [0, 1], 1: [2, 1]})
        await cluster.wait_state("t", 1, lambda s: s.leader == 2)
        await cluster.kill(2)
        await cluster.wait_state("t", 1, lambda s: s.leader == 1)
        await eventually(lambda: all(set(b.metadata_cache.brokers) == {0, 1} for b in cluster.live))
        cluster_id = cluster.broker(0).cluster_id

        def ask(bootstrap: str):
            md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
            brokers = {b.id: (b.host, b.port) for b in md.brokers.values()}
            parts = {
                p.id: (p.leader, list(p.replicas), list(p.isrs))
                for p in md.topics["t"].partitions.values()
            }
            return md.cluster_id, md.controller_id, brokers, parts

        expected_brokers = {
            i: (cluster.broker(i).advertised[0].host, cluster.broker(i).advertised[0].port)
            for i in (0, 1)
        }
        for b in cluster.live:
            got = await asyncio.to_thread(ask, cluster.bootstrap([b]))
            assert got == (
                cluster_id,
                0,
                expected_brokers,
                {0: (0, [0, 1], [0, 1]), 1: (1, [2, 1], [1])},
            )

        def offline_replicas(port: int) -> dict[int, list[int]]:
            c = RawClient("127.0.0.1", port)
            try:
                body = messages.build(messages.request_type(3, 9), {"topics": [{"name": "t"}]})
                resp = c.call(3, 9, body)
                [t] = resp.topics
                return {p.partition_index: list(p.offline_replicas) for p in t.partitions}
            finally:
                c.close()

        for b in cluster.live:
            assert await asyncio.to_thread(offline_replicas, b.bound_port()) == {0: [], 1: [2]}
