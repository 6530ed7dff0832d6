"""Administrative limits: one CreateTopics or CreatePartitions cannot make the broker
create more than ``kafkalite.max.partitions.per.request`` partitions (Kafka 4's 10,000);
it gets POLICY_VIOLATION before any work starts (KAFKA-17870), through stock admin clients."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.admin import NewTopic as KpNewTopic
from kafka.errors import InvalidReplicationAssignmentError, PolicyViolationError

MESSAGE = "Excessively large number of partitions per request."


def _partition_dirs(b) -> set[str]:
    log_dir = Path(b.kafka.config.log_dirs[0])
    return {p.name for p in log_dir.iterdir() if p.is_dir()}


def _kafka_python(b) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, request_timeout_ms=30000)


@pytest.mark.parametrize("partitions", [1_000_000, 2**31 - 1])
def test_create_topics_with_a_huge_partition_count_is_a_policy_violation(
    kafka_broker_factory, partitions
):
    b = kafka_broker_factory()
    before = _partition_dirs(b)
    admin = _kafka_python(b)
    try:
        with pytest.raises(PolicyViolationError) as e:
            admin.create_topics([KpNewTopic("huge", partitions, 1)])
        assert MESSAGE in str(e.value)
        assert _partition_dirs(b) == before
        assert b.kafka.metadata_cache.get_topic("huge") is None
        admin.create_topics([KpNewTopic("normal", 3, 1)])  # and the broker carries on
    finally:
        admin.close()
    assert len(b.kafka.metadata_cache.get_topic("normal").partitions) == 3


def test_the_limit_counts_every_topic_of_the_request(kafka_broker_factory):
    b = kafka_broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(f"part-{i}", num_partitions=4000) for i in range(3)], request_timeout=30
    )
    for name, f in futures.items():
        with pytest.raises(KafkaException) as e:
            f.result(30)
        err = e.value.args[0]
        assert (err.code(), err.str()) == (KafkaError.POLICY_VIOLATION, MESSAGE), name
    assert not any(t.startswith("part-") for t in b.kafka.metadata_cache.topics)


def test_create_partitions_to_a_huge_count_is_a_policy_violation(kafka_broker_factory):
    b = kafka_broker_factory()
    b.create_topic("grow", partitions=1)
    before = _partition_dirs(b)
    admin = _kafka_python(b)
    try:
        with pytest.raises(PolicyViolationError):
            admin.create_partitions({"grow": KpNewPartitions(2**31 - 1)})
    finally:
        admin.close()
    assert _partition_dirs(b) == before
    assert len(b.kafka.metadata_cache.get_topic("grow").partitions) == 1


def test_the_limit_is_configurable(kafka_broker_factory):
    b = kafka_broker_factory(**{"kafkalite.max.partitions.per.request": 5})
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    admin.create_topics([NewTopic("five", num_partitions=5)])["five"].result(30)
    with pytest.raises(KafkaException) as e:
        admin.create_topics([NewTopic("six", num_partitions=6)])["six"].result(30)
    assert e.value.args[0].code() == KafkaError.POLICY_VIOLATION
    with pytest.raises(KafkaException) as e:
        admin.create_partitions([NewPartitions("five", 11)])["five"].result(30)
    assert e.value.args[0].code() == KafkaError.POLICY_VIOLATION
    admin.create_partitions([NewPartitions("five", 10)])["five"].result(30)
    assert len(b.kafka.metadata_cache.get_topic("five").partitions) == 10


def test_a_replica_assignment_longer_than_the_cluster_is_refused(kafka_broker_factory):
    b = kafka_broker_factory()
    admin = _kafka_python(b)
    try:
        with pytest.raises(InvalidReplicationAssignmentError):
            admin.create_topics(
                [KpNewTopic("wide", -1, -1, replica_assignments={0: list(range(100_000))})]
            )
    finally:
        admin.close()
    assert b.kafka.metadata_cache.get_topic("wide") is None
