"""Authorized operations without an authorizer (issue 19): Kafka answers every operation
the resource supports when a client asks (``include_*_authorized_operations``), and
INT32_MIN ("not requested") only when it does not."""

from __future__ import annotations

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient

from tests.coordinator.wire import Wire

TOPIC_OPS = {
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DESCRIBE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
CLUSTER_OPS = {
    AclOperation.CREATE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
}


def test_confluent_kafka_sees_every_supported_operation_without_an_authorizer(kafka_broker):
    kafka_broker.create_topic("ops-topic")
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    [f] = admin.describe_topics(
        TopicCollection(["ops-topic"]), include_authorized_operations=True
    ).values()
    assert set(f.result().authorized_operations) == TOPIC_OPS
    cluster = admin.describe_cluster(include_authorized_operations=True).result()
    assert set(cluster.authorized_operations) == CLUSTER_OPS
    # not asked: not reported
    [f] = admin.describe_topics(TopicCollection(["ops-topic"])).values()
    assert f.result().authorized_operations is None
    assert admin.describe_cluster().result().authorized_operations is None


async def test_metadata_v8_to_v10_cluster_operations_and_topic_bit_sets(kafka_broker):
    kafka_broker.create_topic("ops-bits")
    w = await Wire.connect(kafka_broker.bootstrap_servers)
    try:
        for v in (8, 9, 10):
            r = await w.call(
                3,
                v,
                {
                    "topics": [{"name": "ops-bits"}],
                    "allow_auto_topic_creation": False,
                    "include_cluster_authorized_operations": True,
                    "include_topic_authorized_operations": True,
                },
            )
            assert r.cluster_authorized_operations == sum(1 << int(op.value) for op in CLUSTER_OPS)
            assert r.topics[0].topic_authorized_operations == sum(
                1 << int(op.value) for op in TOPIC_OPS
            )
        r = await w.call(3, 12, {"topics": [{"name": "ops-bits"}]})
        assert r.topics[0].topic_authorized_operations == -(2**31)
    finally:
        await w.close()


async def test_acl_apis_without_an_authorizer_are_security_disabled(kafka_broker):
    """Kafka's AclApis without an authorizer: SECURITY_DISABLED (54) everywhere."""
    w = await Wire.connect(kafka_broker.bootstrap_servers)
    every = {
        "resource_type_filter": 1,
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    try:
        r = await w.call(29, 3, every)
        assert r.error_code == 54
        r = await w.call(
            30,
            3,
            {
                "creations": [
                    {
                        "resource_type": 2,
                        "resource_name": "t",
                        "resource_pattern_type": 3,
                        "principal": "User:a",
                        "host": "*",
                        "operation": 3,
                        "permission_type": 3,
                    }
                ]
            },
        )
        assert [x.error_code for x in r.results] == [54]
        r = await w.call(31, 3, {"filters": [every]})
        assert [x.error_code for x in r.filter_results] == [54]
    finally:
        await w.close()
