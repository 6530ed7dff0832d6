"""Produce over TCP with records Kafka's LogValidator would not store: each
malformed-record class (smallest form, valid CRC) gets INVALID_RECORD and
nothing reaches the log, compressed or not; stock clients then produce and
consume on the same partition as if nothing happened."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import build_batch
from tests.protocol.forged_records import MALFORMED, batch, record
from tests.server.raw_client import RawClient
from tests.server.test_list_offsets_produce import LATEST, MAX_TIMESTAMP, list_offsets
from tests.server.test_protocol_edges import produce

GZIP, ZSTD = 1, 4


@pytest.fixture
def broker(kafka_broker_factory):
    b = kafka_broker_factory()
    b.create_topic("v")
    return b


@pytest.fixture
def client(broker):
    c = RawClient.to(broker.bootstrap_servers)
    yield c
    c.close()


def send(client, records: bytes, topic: str = "v"):
    return client.call(0, 9, produce(topic, records)).responses[0].partition_responses[0]


def log_end(client, topic: str = "v") -> int:
    return list_offsets(client, topic, LATEST).offset


@pytest.mark.parametrize("codec", [0, ZSTD], ids=["none", "zstd"])
@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_record_is_invalid_record_and_never_stored(broker, client, case, codec):
    r = send(client, batch(MALFORMED[case], codec=codec))
    assert r.error_code == ErrorCode.invalid_record, r.error_message
    assert r.base_offset == -1
    assert log_end(client) == 0
    assert send(client, build_batch([(b"k", b"good")])).base_offset == 0


def test_stock_clients_produce_and_consume_after_malformed_records(broker, client):
    for records in MALFORMED.values():
        assert send(client, batch(records, codec=GZIP)).error_code == ErrorCode.invalid_record
    bootstrap = broker.bootstrap_servers
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 5})
    for i in range(100):
        p.produce("v", key=b"ck%d" % i, value=b"confluent-%d" % i)
    assert p.flush(30) == 0
    kp = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", linger_ms=5)
    for i in range(100):
        kp.send("v", key=b"kk%d" % i, value=b"kafka-python-%d" % i)
    kp.flush(30)
    kp.close()

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False})
    c.assign([CTopicPartition("v", 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 200 and time.monotonic() < deadline:
        for m in c.consume(200, timeout=1):
            assert m.error() is None, m.error()
            got.append((m.offset(), m.value()))
    c.close()
    assert [o for o, _ in got] == list(range(200))
    assert got[0][1] == b"confluent-0" and got[100][1] == b"kafka-python-0"

    kc = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000
    )
    kc.assign([TopicPartition("v", 0)])
    kc.seek_to_beginning()
    offsets = [m.offset for m in kc]
    kc.close()
    assert offsets == list(range(200))


def test_compacted_topic_answers_record_errors_for_records_without_a_key(broker, client):
    broker.create_topic("compacted", config={"cleanup.policy": "compact"})
    r = send(client, batch([record(0, key=b"a"), record(1), record(2)], codec=GZIP), "compacted")
    message = "Compacted topic cannot accept message without key in topic partition compacted-0."
    assert r.error_code == ErrorCode.invalid_record
    assert [(e.batch_index, e.batch_index_error_message) for e in r.record_errors] == [
        (1, message),
        (2, message),
    ]
    assert r.error_message.startswith(
        "One or more records have been rejected due to 2 record errors in total"
    )
    assert log_end(client, "compacted") == 0


def test_a_lying_max_timestamp_is_replaced_by_the_records_largest(broker, client):
    now = int(time.time() * 1000)
    lying = build_batch(
        [(b"a", b"0", [], now - 50), (b"b", b"1", [], now)], max_timestamp=now - 1000
    )
    assert send(client, lying).error_code == ErrorCode.none
    p = list_offsets(client, "v", MAX_TIMESTAMP)
    assert (p.offset, int(p.timestamp)) == (1, now)


def test_clients_cannot_append_to_internal_topics_as_in_kafka(broker, client):
    """Only the coordinators write __consumer_offsets (Kafka: INVALID_TOPIC_EXCEPTION
    unless the client id is its admin tools' "__admin_client")."""
    from kio.schema.find_coordinator.v0.request import FindCoordinatorRequest

    assert client.call(10, 0, FindCoordinatorRequest(key="g")).error_code == ErrorCode.none
    garbage = build_batch([(b"\x00\x09not-a-key", b"\xff" * 8)])
    r = send(client, garbage, "__consumer_offsets")
    assert r.error_code == ErrorCode.invalid_topic_exception
    assert log_end(client, "__consumer_offsets") == 0
    cid = client.send(0, 9, produce("__consumer_offsets", garbage), client_id="__admin_client")
    got, resp = client.read_response(0, 9)
    assert got == cid and resp.responses[0].partition_responses[0].error_code == ErrorCode.none


def test_librdkafka_fails_only_the_keyless_records_of_a_compacted_batch(broker):
    """A stock producer reads ``record_errors``: the keyless records fail with INVALID_RECORD,
    the keyed ones of the same batch with librdkafka's "an invalid record in the same batch"
    (Kafka rejects the batch whole), so they can be sent again on their own."""
    broker.create_topic("compacted-mixed", config={"cleanup.policy": "compact"})
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "linger.ms": 200,  # one batch for all six
            "enable.idempotence": False,
            "retries": 0,
        }
    )
    failed: dict[bytes, int] = {}

    def report(err, msg) -> None:
        if err is not None:
            failed[msg.value()] = err.code()

    for i in range(6):
        key = None if i % 3 == 1 else f"k{i}".encode()
        p.produce("compacted-mixed", f"v{i}".encode(), key, partition=0, on_delivery=report)
    p.flush(10)
    invalid_record, caused_by_another = (
        ErrorCode.invalid_record,
        -138,
    )  # ERR__INVALID_DIFFERENT_RECORD
    assert failed == {
        b"v1": invalid_record,
        b"v4": invalid_record,
        **{f"v{i}".encode(): caused_by_another for i in (0, 2, 3, 5)},
    }
    # the keyed records go through when sent again without the keyless ones
    for i in (0, 2, 3, 5):
        p.produce("compacted-mixed", f"v{i}".encode(), f"k{i}".encode(), partition=0)
    assert p.flush(10) == 0
    assert [r.value for r in broker.records("compacted-mixed")] == [b"v0", b"v2", b"v3", b"v5"]
