"""Client quotas on a real ZooKeeper (issue 21): AlterClientQuotas on one broker writes
Kafka's znodes and a change notification, and every broker applies it within a second.
(The embedded store's variant is in tests/quota/test_client_quotas_api.py.)"""

from __future__ import annotations

import asyncio
import json

from kafkalite.quota import ANONYMOUS
from tests.controller.cluster import Cluster
from tests.coordinator.wire import Wire
from tests.quota.quota_wire import alter


async def test_quota_set_on_one_broker_applies_on_the_other_through_zookeeper(
    tmp_path, zookeeper_connect
):
    async with Cluster(tmp_path, 2, zookeeper_connect=zookeeper_connect) as cluster:
        ep = cluster.broker(0).advertised[0]
        w = await Wire.connect(f"{ep.host}:{ep.port}", "admin")
        try:
            r = await alter(w, {"user": None, "client-id": "zk"}, {"consumer_byte_rate": 5000})
            assert r.error_code == 0
        finally:
            await w.close()
        raw, _ = await cluster.admin.get("/config/users/<default>/clients/zk")
        assert json.loads(raw) == {"version": 1, "config": {"consumer_byte_rate": "5000"}}
        changes = await cluster.admin.get_children("/config/changes")
        assert any(c.startswith("config_change_") for c in changes)
        configs = cluster.broker(1).quotas.configs
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 1.0
        while configs.resolve(ANONYMOUS, "zk", "consumer_byte_rate")[0] != 5000:
            assert loop.time() < deadline, "not applied within 1 s"
            await asyncio.sleep(0.02)
