"""Znode layout and JSON codecs, checked against JSON exactly as Apache Kafka writes it.

The "Kafka wrote" strings are what ``zookeeper-shell get`` prints on real clusters
(Kafka 0.10 .. 3.9 in ZooKeeper mode), including Kafka's odd key orders.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.common.types import Endpoint
from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.zk_data import (
    BrokerRegistration,
    ClusterId,
    ConfigChangeNotification,
    ControllerInfo,
    EntityConfig,
    IsrChangeNotification,
    MetadataFormatError,
    PartitionReassignment,
    PartitionState,
    PreferredReplicaElection,
    ProducerIdBlock,
    TopicAssignment,
    TopicPartition,
)


def test_paths() -> None:
    assert zk_paths.broker_path(3) == "/brokers/ids/3"
    assert zk_paths.topic_path("t") == "/brokers/topics/t"
    assert zk_paths.topic_partitions_path("t") == "/brokers/topics/t/partitions"
    assert zk_paths.partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert zk_paths.delete_topic_path("t") == "/admin/delete_topics/t"
    assert zk_paths.topic_config_path("t") == "/config/topics/t"
    assert zk_paths.config_entity_path("users", "alice") == "/config/users/alice"
    assert zk_paths.isr_change_notification_path() == "/isr_change_notification/isr_change_"
    assert zk_paths.config_change_path() == "/config/changes/config_change_"
    assert (
        zk_paths.sequence_number("/isr_change_notification/isr_change_0000000042", "isr_change_")
        == 42
    )
    assert zk_paths.broker_id_from_seqid_version(1) == 1001
    assert zk_paths.CLUSTER_ID == "/cluster/id" and zk_paths.BROKER_SEQID == "/brokers/seqid"
    assert zk_paths.REASSIGN_PARTITIONS == "/admin/reassign_partitions"
    assert zk_paths.PREFERRED_REPLICA_ELECTION == "/admin/preferred_replica_election"
    assert {zk_paths.BROKER_IDS, zk_paths.BROKER_TOPICS, zk_paths.DELETE_TOPICS} <= set(
        zk_paths.PERSISTENT_PATHS
    )
    with pytest.raises(ValueError):
        zk_paths.sequence_number("other_1", "isr_change_")


# --------------------------------------------------------------------------- controller


def test_controller_encode_exact() -> None:
    info = ControllerInfo(broker_id=0, timestamp=1529210278988)
    assert info.encode() == b'{"version":1,"brokerid":0,"timestamp":"1529210278988"}'
    v2 = ControllerInfo(2, 1676813353461, kraft_controller_epoch=-1)
    assert v2.encode() == (
        b'{"version":2,"brokerid":2,"timestamp":"1676813353461","kraftControllerEpoch":-1}'
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            b'{"version":1,"brokerid":0,"timestamp":"1643692590537"}',
            ControllerInfo(0, 1643692590537),
        ),
        (
            b'{"version":2,"brokerid":1,"timestamp":"1704032949256","kraftControllerEpoch":-1}',
            ControllerInfo(1, 1704032949256, -1),
        ),
        (b"7", ControllerInfo(7, -1)),  # pre-0.9 plain integer
    ],
)
def test_controller_decode_what_kafka_wrote(raw: bytes, expected: ControllerInfo) -> None:
    assert ControllerInfo.decode(raw) == expected


def test_controller_epoch() -> None:
    assert zk_data.encode_controller_epoch(12) == b"12"
    assert zk_data.decode_controller_epoch(b"1") == 1
    with pytest.raises(MetadataFormatError):
        zk_data.decode_controller_epoch(b"x")


# --------------------------------------------------------------------------- brokers


def test_broker_registration_encode_exact_v5() -> None:
    reg = BrokerRegistration(
        endpoints=(Endpoint("PLAINTEXT", "192.168.1.21", 9092, "PLAINTEXT"),),
        timestamp=1779856878276,
    )
    # Byte-for-byte what a Kafka 3.x broker registers.
    assert reg.encode() == (
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://192.168.1.21:9092"],"jmx_port":-1,"features":{},'
        b'"host":"192.168.1.21","timestamp":"1779856878276","port":9092,"version":5}'
    )
    assert BrokerRegistration.decode(reg.encode()) == reg


def test_broker_registration_encode_v4_without_plaintext() -> None:
    reg = BrokerRegistration(
        endpoints=(Endpoint("SECURE", "::1", 9093, "SSL"),),
        timestamp=5,
        rack="r1",
        version=4,
    )
    assert reg.encode() == (
        b'{"listener_security_protocol_map":{"SECURE":"SSL"},"endpoints":["SECURE://[::1]:9093"],'
        b'"rack":"r1","jmx_port":-1,"host":null,"timestamp":"5","port":-1,"version":4}'
    )
    assert BrokerRegistration.decode(reg.encode()) == reg


def test_broker_registration_decode_multi_listener() -> None:
    raw = (
        b'{"listener_security_protocol_map":{"INSECURE":"PLAINTEXT","ENCRYPTED":"SSL",'
        b'"REPLICATION":"SASL_PLAINTEXT","AUTHENTICATED":"SASL_PLAINTEXT"},'
        b'"endpoints":["INSECURE://localhost:9092","ENCRYPTED://localhost:19092",'
        b'"REPLICATION://localhost:29092","AUTHENTICATED://localhost:39092"],'
        b'"jmx_port":-1,"features":{},"host":"localhost","timestamp":"1666342423700",'
        b'"port":9092,"version":5}'
    )
    reg = BrokerRegistration.decode(raw)
    assert reg.version == 5 and reg.timestamp == 1666342423700 and reg.rack is None
    assert reg.endpoint("ENCRYPTED") == Endpoint("ENCRYPTED", "localhost", 19092, "SSL")
    assert [e.security_protocol for e in reg.endpoints] == [
        "PLAINTEXT",
        "SSL",
        "SASL_PLAINTEXT",
        "SASL_PLAINTEXT",
    ]
    assert (reg.host, reg.port) == ("localhost", 9092)


def test_broker_registration_decode_confluent_key_order_and_features() -> None:
    raw = (
        b'{"features":{"metadata.version":{"min_version":1,"max_version":7}},'
        b'"listener_security_protocol_map":{"BROKER":"PLAINTEXT","PLAINTEXT_HOST":"PLAINTEXT"},'
        b'"endpoints":["BROKER://broker1:9091","PLAINTEXT_HOST://localhost:29091"],'
        b'"jmx_port":-1,"port":9091,"host":"broker1","version":5,"tags":{},'
        b'"timestamp":"1673382717473"}'
    )
    reg = BrokerRegistration.decode(raw)
    assert reg.features == {"metadata.version": {"min_version": 1, "max_version": 7}}
    assert (reg.host, reg.port) == ("broker1", 9091)


@pytest.mark.parametrize(
    "raw",
    [
        # v1: host/port only
        b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}',
        # v2: endpoints, listener name doubles as protocol
        b'{"version":2,"host":"localhost","port":9092,"jmx_port":9999,'
        b'"timestamp":"2233345666","endpoints":["PLAINTEXT://localhost:9092"]}',
        # v4 as Kafka 2.x wrote it
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"host":"localhost",'
        b'"timestamp":"1546423234834","port":9092,"version":4}',
    ],
)
def test_broker_registration_decode_old_versions(raw: bytes) -> None:
    reg = BrokerRegistration.decode(raw)
    assert reg.endpoints[0] == Endpoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT")
    assert (reg.host, reg.port) == ("localhost", 9092)


def test_broker_registration_rejects_garbage() -> None:
    for raw in [b"", b"[]", b'{"version":0}', b'{"version":4,"endpoints":["nope"]}']:
        with pytest.raises(MetadataFormatError):
            BrokerRegistration.decode(raw)


# --------------------------------------------------------------------------- topics


def test_topic_assignment_encode_exact() -> None:
    assert TopicAssignment({0: [1, 2]}).encode() == (
        b'{"removing_replicas":{},"partitions":{"0":[1,2]},"adding_replicas":{},"version":2}'
    )
    with_id = TopicAssignment({0: [0]}, topic_id="gib5GbiRTyuLqmqld5r9dg")
    assert with_id.encode() == (
        b'{"removing_replicas":{},"partitions":{"0":[0]},"topic_id":"gib5GbiRTyuLqmqld5r9dg",'
        b'"adding_replicas":{},"version":3}'
    )


def test_topic_assignment_decode_what_kafka_wrote() -> None:
    raw = (
        b'{"removing_replicas":{},"partitions":{"2":[2,1],"1":[1,3],"0":[3,2]},'
        b'"topic_id":"RSZ--odYRlSOPGRgukKnAQ","adding_replicas":{},"version":3}'
    )
    t = TopicAssignment.decode(raw)
    assert t.partitions == {0: [3, 2], 1: [1, 3], 2: [2, 1]}
    assert t.topic_id == "RSZ--odYRlSOPGRgukKnAQ"
    assert zk_data.topic_id_to_str(zk_data.topic_id_from_str(t.topic_id)) == t.topic_id
    old = TopicAssignment.decode(b'{"version":1,"partitions":{"0":[1,2,3],"1":[2,3,1]}}')
    assert old.partitions == {0: [1, 2, 3], 1: [2, 3, 1]} and old.topic_id is None
    moving = TopicAssignment.decode(
        b'{"version":2,"partitions":{"0":[1,2,4]},"adding_replicas":{"0":[4]},'
        b'"removing_replicas":{"0":[2]}}'
    )
    assert (moving.adding_replicas, moving.removing_replicas) == ({0: [4]}, {0: [2]})


def test_partition_state_encode_exact() -> None:
    state = PartitionState(leader=1, leader_epoch=0, isr=[1, 2], controller_epoch=1)
    assert state.encode() == (
        b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}'
    )
    assert PartitionState.decode(
        b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2,3,1]}'
    ) == PartitionState(2, 0, [2, 3, 1], 1)
    recovering = PartitionState(1, 3, [1], 5, leader_recovery_state=1)
    assert PartitionState.decode(recovering.encode()) == recovering


# --------------------------------------------------------------------------- admin, notifications


def test_partition_lists_exact() -> None:
    parts = (TopicPartition("t", 0), TopicPartition("u", 3))
    expected = (
        b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"u","partition":3}]}'
    )
    assert IsrChangeNotification(parts).encode() == expected
    assert PreferredReplicaElection(parts).encode() == expected
    assert IsrChangeNotification.decode(expected).partitions == parts
    assert PreferredReplicaElection.decode(expected).partitions == parts


def test_reassignment() -> None:
    r = PartitionReassignment({TopicPartition("t", 0): [4, 5, 6]})
    assert r.encode() == (
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[4,5,6]}]}'
    )
    # kafka-reassign-partitions.sh output, with log_dirs and spaces.
    tool = (
        b'{"version": 1, "partitions": [{"topic": "foo", "partition": 1, '
        b'"replicas": [2, 3], "log_dirs": ["any", "any"]}]}'
    )
    assert PartitionReassignment.decode(tool).partitions == {TopicPartition("foo", 1): [2, 3]}


def test_config_nodes() -> None:
    cfg = EntityConfig({"cleanup.policy": "compact", "retention.ms": "1000"})
    assert cfg.encode() == (
        b'{"version":1,"config":{"cleanup.policy":"compact","retention.ms":"1000"}}'
    )
    assert EntityConfig.decode(cfg.encode()) == cfg
    assert EntityConfig.decode(b"") == EntityConfig({})
    scram = (
        b'{"version":1,"config":{"SCRAM-SHA-256":"salt=c2FsdA==,stored_key=a2V5,'
        b'server_key=c2s=,iterations=4096"}}'
    )
    assert EntityConfig.decode(scram).config["SCRAM-SHA-256"].endswith("iterations=4096")
    note = ConfigChangeNotification("topics/test100")
    assert note.encode() == b'{"version":2,"entity_path":"topics/test100"}'
    assert ConfigChangeNotification.decode(note.encode()) == note
    v1 = ConfigChangeNotification.decode(b'{"version":1,"entity_type":"topics","entity_name":"t"}')
    assert (v1.entity_path, v1.entity_type, v1.entity_name) == ("topics/t", "topics", "t")
    nested = ConfigChangeNotification("users/alice/clients/app")
    assert (nested.entity_type, nested.entity_name) == ("users", "alice/clients/app")


def test_cluster_id_and_producer_id_block() -> None:
    assert ClusterId("eQzK4lYlQ9y8P21IScOl_g").encode() == (
        b'{"version":"1","id":"eQzK4lYlQ9y8P21IScOl_g"}'
    )
    assert ClusterId.decode(b'{"version":"1","id":"zIe91t8eRW-4e_je0Yarbw"}').id == (
        "zIe91t8eRW-4e_je0Yarbw"
    )
    generated = zk_data.generate_cluster_id()
    assert len(generated) == 22 and "=" not in generated
    block = ProducerIdBlock(broker_id=35, block_start=4000, block_end=4999)
    assert block.encode() == b'{"version":1,"broker":35,"block_start":"4000","block_end":"4999"}'
    assert ProducerIdBlock.decode(block.encode()) == block


@given(st.uuids())
def test_topic_id_round_trip(u: uuid.UUID) -> None:
    text = zk_data.topic_id_to_str(u)
    assert len(text) == 22
    assert zk_data.topic_id_from_str(text) == u


@given(
    st.dictionaries(
        st.integers(0, 10_000), st.lists(st.integers(0, 2**31 - 1), max_size=5), max_size=20
    ),
    st.text(min_size=1, max_size=30),
)
def test_topic_assignment_round_trip(partitions: dict[int, list[int]], topic_id: str) -> None:
    t = TopicAssignment(partitions, topic_id=topic_id)
    assert TopicAssignment.decode(t.encode()) == t
