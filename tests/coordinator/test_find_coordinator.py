"""FindCoordinator: creates __consumer_offsets on first use, answers the partition leader."""

from __future__ import annotations

from kafkalite.coordinator.group import OFFSETS_TOPIC
from kafkalite.coordinator.group.offset_codec import partition_for
from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing.embedded_broker import AsyncBroker
from tests.coordinator.group_helpers import FIND
from tests.coordinator.wire import Wire


async def test_first_find_coordinator_creates_internal_compacted_offsets_topic(broker) -> None:
    kb = broker.broker
    assert kb.metadata_cache.get_topic(OFFSETS_TOPIC) is None
    w = await Wire.connect(broker.bootstrap_servers)
    r = await w.call(FIND, 0, {"key": "g"})
    assert r.error_code == ErrorCode.none
    assert (r.node_id, r.host, r.port) == (0, "127.0.0.1", broker.port)
    t = kb.metadata_cache.get_topic(OFFSETS_TOPIC)
    assert (
        t is not None and t.is_internal and len(t.partitions) == 4
    )  # offsets.topic.num.partitions
    cfg = kb.admin.log_config(OFFSETS_TOPIC)
    assert "compact" in cfg.cleanup_policy
    md = await w.call(
        3, 1, {"topics": [{"name": OFFSETS_TOPIC}], "allow_auto_topic_creation": False}
    )
    assert md.topics[0].is_internal
    await w.close()


async def test_every_version_names_the_same_coordinator(broker) -> None:
    w = await Wire.connect(broker.bootstrap_servers)
    v0 = await w.call(FIND, 0, {"key": "testgroup"})
    v1 = await w.call(FIND, 1, {"key": "testgroup", "key_type": 0})
    v3 = await w.call(FIND, 3, {"key": "testgroup", "key_type": 0})
    v4 = await w.call(FIND, 4, {"key_type": 0, "coordinator_keys": ["testgroup", "other", ""]})
    assert v0.node_id == v1.node_id == v3.node_id == 0
    assert [c.key for c in v4.coordinators] == ["testgroup", "other", ""]
    assert all(c.error_code == ErrorCode.none and c.node_id == 0 for c in v4.coordinators)
    await w.close()


async def test_transaction_keys_find_the_transaction_coordinator(broker) -> None:
    w = await Wire.connect(broker.bootstrap_servers)
    r = await w.call(FIND, 1, {"key": "txn", "key_type": 1})
    assert r.error_code == ErrorCode.none
    assert (r.node_id, r.port) == (0, broker.port)
    r6 = await w.call(FIND, 6, {"key_type": 2, "coordinator_keys": ["share"]})
    assert r6.coordinators[0].error_code == ErrorCode.invalid_request
    await w.close()


async def test_existing_offsets_topic_partition_count_wins_over_config(tmp_path) -> None:
    async with AsyncBroker(tmp_path / "a", **{"offsets.topic.num.partitions": 50}) as b:
        await b.create_topic(OFFSETS_TOPIC, partitions=3)
        manager = b.broker.group_coordinator.manager
        assert manager.num_partitions == 3
        assert manager.partition_for("testgroup") == partition_for("testgroup", 3)
