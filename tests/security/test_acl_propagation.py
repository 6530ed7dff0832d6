"""An ACL change made through one broker reaches every broker's authorizer cache within
a second (the /kafka-acl-changes notifications), over the in-process cluster; the
brokers' own controller requests pass the ClusterAction check (super.users)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kafkalite.common.principal import KafkaPrincipal
from kafkalite.security.authorizer.acl import AclOperation, ResourceType
from kafkalite.security.authorizer.acl_store import ACL_CHANGES, ACL_EXTENDED_CHANGES
from kafkalite.testing import AsyncCluster
from tests.coordinator.wire import Wire

ALICE = KafkaPrincipal("User", "alice")
_ANY = {
    "resource_type_filter": 1,
    "resource_name_filter": None,
    "pattern_type_filter": 1,
    "principal_filter": None,
    "host_filter": None,
    "operation": 1,
    "permission_type": 1,
}


async def _within(seconds: float, pred: Callable[[], bool]) -> float:
    start = time.monotonic()
    while not pred():
        assert time.monotonic() - start < seconds, "not propagated in time"
        await asyncio.sleep(0.005)
    return time.monotonic() - start


async def test_acl_changes_reach_every_broker_within_a_second(tmp_path) -> None:
    await check_propagation(tmp_path)


async def check_propagation(tmp_path, **store: str) -> None:
    """Also run over a real ZooKeeper (tests/controller/test_acls_on_zookeeper.py)."""
    config = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        # the brokers' inter-broker traffic (PLAINTEXT: ANONYMOUS), as Kafka needs
        "super.users": "User:ANONYMOUS",
        **store,
    }
    async with AsyncCluster(3, tmp_path, **config) as c:
        await c.create_topic("orders", partitions=1, replication_factor=3)
        auths = [c.kafka(i).authorizer for i in range(3)]
        assert all(a is not None for a in auths)

        def everywhere(op: AclOperation, name: str, expected: bool) -> Callable[[], bool]:
            return lambda: all(
                a.authorize(ALICE, "10.0.0.1", op, ResourceType.TOPIC, name) is expected
                for a in auths
                if a is not None
            )

        assert everywhere(AclOperation.READ, "orders", False)()
        w0 = await Wire.connect(c.bootstrap_of(0))
        w2 = await Wire.connect(c.bootstrap_of(2))
        try:
            r = await w0.call(
                30,
                3,
                {
                    "creations": [
                        {
                            "resource_type": 2,
                            "resource_name": "orders",
                            "resource_pattern_type": 3,
                            "principal": "User:alice",
                            "host": "*",
                            "operation": 3,
                            "permission_type": 3,
                        },
                        {
                            "resource_type": 2,
                            "resource_name": "ord",
                            "resource_pattern_type": 4,
                            "principal": "User:alice",
                            "host": "10.0.0.1",
                            "operation": 4,
                            "permission_type": 3,
                        },
                    ]
                },
            )
            assert [x.error_code for x in r.results] == [0, 0]
            await _within(1.0, everywhere(AclOperation.READ, "orders", True))
            await _within(1.0, everywhere(AclOperation.WRITE, "orders", True))
            # DescribeAcls answers from each broker's cache
            d = await w2.call(29, 3, _ANY)
            assert sorted((x.resource_name, x.pattern_type) for x in d.resources) == [
                ("ord", 4),
                ("orders", 3),
            ]
            # a delete through another broker
            r = await w2.call(31, 3, {"filters": [{**_ANY, "pattern_type_filter": 4}]})
            assert len(r.filter_results[0].matching_acls) == 1
            await _within(1.0, everywhere(AclOperation.WRITE, "orders", False))
            assert everywhere(AclOperation.READ, "orders", True)()
            # the notifications are in Kafka's layout
            store = c.kafka(0).store
            assert await store.get_children(ACL_CHANGES)
            assert await store.get_children(ACL_EXTENDED_CHANGES)
            data, _ = await store.get("/kafka-acl/Topic/orders")
            assert b'"operation":"Read"' in data and b'"permissionType":"Allow"' in data
        finally:
            await w0.close()
            await w2.close()
