"""ACLs over a real ZooKeeper: Kafka's /kafka-acl znodes and change notifications reach
every broker's authorizer within a second (the embedded-store run is
tests/security/test_acl_propagation.py)."""

from __future__ import annotations

from tests.security.test_acl_propagation import check_propagation


async def test_acl_changes_reach_every_broker_over_zookeeper(tmp_path, zookeeper_connect):
    await check_propagation(tmp_path, **{"zookeeper.connect": zookeeper_connect})
