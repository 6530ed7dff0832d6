"""Admin APIs on the wire: CreateTopics (validate_only, explicit assignment),
CreatePartitions, DescribeCluster, DescribeLogDirs, auto-creation switched off,
and the Metadata fields clients rely on."""

from __future__ import annotations

import datetime
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from kio.schema.create_topics.v7.request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.schema.describe_log_dirs.v4.request import DescribableLogDirTopic, DescribeLogDirsRequest
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from kafkalite.protocol.errors import ErrorCode
from tests.server.raw_client import RawClient
from tests.server.test_protocol_edges import batch, metadata, produce

TIMEOUT = datetime.timedelta(seconds=10)


def create_topic_req(
    name, *, partitions=-1, rf=-1, assignments=None, configs=None, validate_only=False
):
    return CreateTopicsRequest(
        topics=(
            CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=rf,
                assignments=tuple(
                    CreatableReplicaAssignment(partition_index=p, broker_ids=tuple(b))
                    for p, b in (assignments or {}).items()
                ),
                configs=tuple(
                    CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()
                ),
            ),
        ),
        timeout=TIMEOUT,
        validate_only=validate_only,
    )


@pytest.fixture
def client(kafka_bootstrap):
    c = RawClient.to(kafka_bootstrap)
    yield c
    c.close()


# ---- CreateTopics ------------------------------------------------------------------
def test_create_topics_validate_only_creates_nothing(client, kafka_broker):
    name = f"validate-only-{uuid.uuid4().hex[:6]}"
    resp = client.call(
        19,
        7,
        create_topic_req(
            name, partitions=4, rf=1, configs={"retention.ms": "5000"}, validate_only=True
        ),
    )
    [t] = resp.topics
    assert t.error_code == ErrorCode.none
    assert (t.num_partitions, t.replication_factor) == (4, 1)
    assert {c.name: c.value for c in t.configs}["retention.ms"] == "5000"
    md = client.call(3, 12, metadata(name))
    assert md.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    assert name not in kafka_broker.kafka.metadata_cache.topics
    assert name not in kafka_broker.kafka.admin.topic_configs
    # a bad config fails validate_only too
    resp = client.call(
        19,
        7,
        create_topic_req(
            name, partitions=1, rf=1, configs={"retention.ms": "x"}, validate_only=True
        ),
    )
    assert resp.topics[0].error_code == ErrorCode.invalid_config
    # and the real creation afterwards works
    resp = client.call(19, 7, create_topic_req(name, partitions=4, rf=1))
    assert resp.topics[0].error_code == ErrorCode.none
    assert len(client.call(3, 12, metadata(name)).topics[0].partitions) == 4
    kafka_broker.call(kafka_broker.kafka.admin.delete_topics, [name], 10000)


def test_create_topics_with_explicit_replica_assignment(client, kafka_broker):
    name = f"assigned-{uuid.uuid4().hex[:6]}"
    resp = client.call(19, 7, create_topic_req(name, assignments={0: [0], 1: [0], 2: [0]}))
    [t] = resp.topics
    assert t.error_code == ErrorCode.none, t.error_message
    assert (t.num_partitions, t.replication_factor) == (3, 1)
    md = client.call(3, 12, metadata(name)).topics[0]
    assert sorted(
        (p.partition_index, tuple(p.replica_nodes), p.leader_id) for p in md.partitions
    ) == [
        (0, (0,), 0),
        (1, (0,), 0),
        (2, (0,), 0),
    ]
    # produce to the last assigned partition
    r = client.call(0, 9, produce(name, batch(2), partition=2)).responses[0].partition_responses[0]
    assert r.error_code == ErrorCode.none
    kafka_broker.call(kafka_broker.kafka.admin.delete_topics, [name], 10000)


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"assignments": {0: [7]}}, ErrorCode.invalid_replica_assignment),  # no broker 7
        ({"assignments": {0: [0, 0]}}, ErrorCode.invalid_replica_assignment),  # duplicate
        ({"assignments": {0: [0], 2: [0]}}, ErrorCode.invalid_replica_assignment),  # gap
        ({"assignments": {0: [0]}, "partitions": 1}, ErrorCode.invalid_request),  # both
        ({"partitions": 0, "rf": 1}, ErrorCode.invalid_partitions),
        ({"partitions": 1, "rf": 2}, ErrorCode.invalid_replication_factor),
    ],
)
def test_create_topics_bad_layouts(client, kafka_broker, kwargs, code):
    name = f"bad-layout-{uuid.uuid4().hex[:6]}"
    [t] = client.call(19, 7, create_topic_req(name, **kwargs)).topics
    assert t.error_code == code
    assert t.error_message
    assert name not in kafka_broker.kafka.metadata_cache.topics


# ---- CreatePartitions (stock admin client) ------------------------------------------
def test_create_partitions_then_produce_to_the_new_partition(kafka_broker, kafka_bootstrap):
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    name = f"grow-{uuid.uuid4().hex[:6]}"
    kafka_broker.create_topic(name, partitions=2)
    # validate_only changes nothing
    admin.create_partitions([NewPartitions(name, 5)], validate_only=True)[name].result(10)
    assert len(admin.list_topics(name, timeout=10).topics[name].partitions) == 2
    admin.create_partitions([NewPartitions(name, 5)])[name].result(10)
    assert sorted(admin.list_topics(name, timeout=10).topics[name].partitions) == [0, 1, 2, 3, 4]

    p = Producer({"bootstrap.servers": kafka_bootstrap, "topic.metadata.refresh.interval.ms": 200})
    delivered = []
    p.produce(
        name,
        b"in-new-partition",
        b"k",
        partition=4,
        on_delivery=lambda e, m: delivered.append((e, m)),
    )
    assert p.flush(15) == 0
    [(err, msg)] = delivered
    assert err is None and (msg.partition(), msg.offset()) == (4, 0)
    c = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "g-" + name})
    c.assign([TopicPartition(name, 4, 0)])
    m = c.poll(10)
    c.close()
    assert m is not None and m.error() is None and m.value() == b"in-new-partition"

    # fewer or equal partitions: INVALID_PARTITIONS
    for count in (3, 5):
        with pytest.raises(KafkaException) as e:
            admin.create_partitions([NewPartitions(name, count)])[name].result(10)
        assert e.value.args[0].code() == ErrorCode.invalid_partitions
    with pytest.raises(KafkaException) as e:
        admin.create_partitions([NewPartitions("no-such-topic-grow", 3)])[
            "no-such-topic-grow"
        ].result(10)
    assert e.value.args[0].code() == ErrorCode.unknown_topic_or_partition
    assert len(admin.list_topics(name, timeout=10).topics[name].partitions) == 5


# ---- DescribeCluster / DescribeLogDirs -----------------------------------------------
def test_describe_cluster_lists_this_broker(client, kafka_broker):
    resp = client.call(60, 1, DescribeClusterRequest(include_cluster_authorized_operations=False))
    k = kafka_broker.kafka
    assert resp.error_code == ErrorCode.none
    assert resp.cluster_id == k.cluster_id
    assert resp.controller_id == k.broker_id
    assert [(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers] == [
        (k.broker_id, k.advertised[0].host, k.advertised[0].port, None)
    ]
    ctrl = client.call(
        60, 1, DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2)
    )
    assert ctrl.error_code == ErrorCode.mismatched_endpoint_type
    odd = client.call(
        60, 1, DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=9)
    )
    assert odd.error_code == ErrorCode.unsupported_endpoint_type


def test_describe_log_dirs_reports_partition_sizes(client, kafka_broker, kafka_topic):
    for p, n in ((0, 3), (2, 5)):
        client.call(0, 9, produce(kafka_topic, batch(n), partition=p))
    resp = client.call(35, 4, DescribeLogDirsRequest(topics=None))
    assert resp.error_code == ErrorCode.none
    log_dir = str(kafka_broker.kafka.config.log_dirs[0])
    [d] = [r for r in resp.results if r.log_dir == log_dir]
    assert d.error_code == ErrorCode.none
    assert d.total_bytes > 0 and 0 < d.usable_bytes <= d.total_bytes
    sizes = {
        p.partition_index: p.partition_size
        for t in d.topics
        if t.name == kafka_topic
        for p in t.partitions
    }
    logs = {
        p: kafka_broker.kafka.replica_manager.get_partition((kafka_topic, p)).log.size_in_bytes
        for p in range(3)
    }
    assert sizes == logs
    assert sizes[0] > 0 and sizes[2] > sizes[0] and sizes[1] == 0
    # asking for one partition returns only it
    resp = client.call(
        35,
        4,
        DescribeLogDirsRequest(
            topics=(DescribableLogDirTopic(topic=kafka_topic, partitions=(2,)),)
        ),
    )
    got = [
        (t.name, p.partition_index, p.offset_lag)
        for r in resp.results
        for t in r.topics
        for p in t.partitions
    ]
    assert got == [(kafka_topic, 2, 0)]


# ---- auto.create.topics.enable=false -----------------------------------------------
def test_auto_create_disabled_returns_unknown_topic_and_creates_nothing(kafka_broker_factory):
    b = kafka_broker_factory(**{"auto.create.topics.enable": False})
    c = RawClient.to(b.bootstrap_servers)
    try:
        md = c.call(3, 12, metadata("wanted-but-off", auto=True))
        assert md.topics[0].error_code == ErrorCode.unknown_topic_or_partition
        r = c.call(0, 9, produce("wanted-but-off", batch())).responses[0].partition_responses[0]
        assert r.error_code == ErrorCode.unknown_topic_or_partition
        assert "wanted-but-off" not in b.kafka.metadata_cache.topics
        assert c.call(3, 12, metadata()).topics == ()
    finally:
        c.close()
    # a stock producer gets an error for the missing topic, and nothing is created
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "message.timeout.ms": 2000})
    errors = []
    p.produce("wanted-but-off", b"x", on_delivery=lambda e, m: errors.append(e))
    p.flush(10)
    assert errors and errors[0] is not None
    assert "wanted-but-off" not in b.kafka.metadata_cache.topics


# ---- Metadata fields --------------------------------------------------------------
def test_metadata_fields_advertised_host_rack_epochs_internal_and_topic_id(
    kafka_broker_factory, tmp_path
):
    b = kafka_broker_factory(
        tmp_path / "md",
        **{
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "advertised.listeners": "PLAINTEXT://localhost:0",
            "broker.rack": "rack-a",
        },
    )
    port = b.kafka.bound_port()
    b.create_topic("fields", partitions=2)
    c = RawClient("127.0.0.1", port)
    try:
        md = c.call(3, 12, metadata("fields"))
        # the advertised host, not the bind address; the rack from broker.rack
        assert [(x.node_id, x.host, x.port, x.rack) for x in md.brokers] == [
            (0, "localhost", port, "rack-a")
        ]
        assert md.cluster_id == b.kafka.cluster_id and md.controller_id == 0
        [t] = md.topics
        assert t.error_code == ErrorCode.none and t.is_internal is False
        assert t.topic_id.int != 0
        assert [
            (
                p.partition_index,
                p.leader_id,
                p.leader_epoch,
                p.replica_nodes,
                p.isr_nodes,
                p.offline_replicas,
            )
            for p in sorted(t.partitions, key=lambda p: p.partition_index)
        ] == [(0, 0, 0, (0,), (0,), ()), (1, 0, 0, (0,), (0,), ())]
        # a leader election bumps the epoch clients see
        assert b.faults.bump_leader_epoch("fields", 1) == 1
        epochs = {
            p.partition_index: p.leader_epoch
            for p in c.call(3, 12, metadata("fields")).topics[0].partitions
        }
        assert epochs == {0: 0, 1: 1}
        # __consumer_offsets is internal
        fc = c.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=("g",)))
        assert fc.coordinators[0].error_code in (
            ErrorCode.none,
            ErrorCode.coordinator_not_available,
        )
        for _ in range(50):
            off = c.call(3, 12, metadata("__consumer_offsets")).topics[0]
            if off.error_code == ErrorCode.none:
                break
        assert off.error_code == ErrorCode.none and off.is_internal is True
        topic_id = t.topic_id
    finally:
        c.close()

    b.restart()
    c = RawClient("127.0.0.1", b.kafka.bound_port())
    try:
        md = c.call(3, 12, metadata("fields"))
        assert md.topics[0].topic_id == topic_id
        assert md.brokers[0].host == "localhost"
        # topic ids also resolve by id (Metadata v10+)
        by_id = c.call(
            3,
            12,
            MetadataRequest(
                topics=(MetadataRequestTopic(name=None, topic_id=topic_id),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        )
        assert by_id.topics[0].name == "fields"
    finally:
        c.close()


def test_metadata_reports_offline_replicas_of_a_dead_broker(kafka_cluster):
    kafka_cluster.create_topic("spread", partitions=3)
    victim = kafka_cluster.leader_of("spread", 0)
    survivor = next(i for i in kafka_cluster.live_ids if i != victim)
    kafka_cluster.crash(victim)
    host, port = kafka_cluster.bootstrap_of(survivor).rsplit(":", 1)
    c = RawClient(host, int(port))
    try:
        for _ in range(100):
            md = c.call(3, 12, metadata("spread"))
            parts = {p.partition_index: p for p in md.topics[0].partitions}
            if parts[0].leader_id == -1:
                break
            time.sleep(0.05)
        p0 = parts[0]
        assert p0.leader_id == -1
        assert p0.error_code == ErrorCode.leader_not_available
        assert p0.offline_replicas == (victim,)
        assert victim not in {x.node_id for x in md.brokers}
        for p in parts.values():
            if p.replica_nodes != (victim,):
                assert p.offline_replicas == () and p.leader_id >= 0
    finally:
        c.close()
