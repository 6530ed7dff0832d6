"""A topic's ``compression.type`` decides the stored codec (Kafka's LogValidator):
consumers get the topic's codec whatever the producer sent, with every record,
offset and header intact; ``producer`` keeps the producer's codec."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from kafkalite.protocol import messages
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.record_batch import iter_headers
from tests.server.raw_client import RawClient

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4


def _stored_codecs(broker: Any, topic: str) -> list[int]:
    log = broker.kafka.replica_manager.get_partition((topic, 0)).log
    data = log.read(0, 1 << 30, max_offset=None).records
    raw = data if isinstance(data, bytes | bytearray) else data.read_bytes()
    return [h.compression for _, h in iter_headers(raw)]


def _produce(bootstrap: str, topic: str, codec: str, n: int, **extra: Any) -> None:
    p = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20, **extra}
    )
    for i in range(n):
        p.produce(
            topic,
            key=b"k%d" % i,
            value=b"value-%05d " % i * 8,
            partition=0,
            headers=[("h", b"%d" % i)],
        )
    assert p.flush(15) == 0


def _consume_all(bootstrap: str, topic: str, n: int) -> list[tuple[int, bytes, bytes, Any]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        while len(out) < n:
            m = c.poll(10)
            assert m is not None and m.error() is None
            out.append((m.offset(), m.key(), m.value(), m.headers()))
    finally:
        c.close()
    return out


def _expected(n: int) -> list[tuple[int, bytes, bytes, Any]]:
    return [(i, b"k%d" % i, b"value-%05d " % i * 8, [("h", b"%d" % i)]) for i in range(n)]


@pytest.mark.parametrize(
    ("topic_codec", "stored", "producer_codec"),
    [
        ("gzip", GZIP, "lz4"),
        ("zstd", ZSTD, "none"),
        ("uncompressed", 0, "snappy"),
        ("lz4", LZ4, "gzip"),
    ],
)
def test_topic_codec_is_what_is_stored_and_served(
    kafka_broker_factory: Any, topic_codec: str, stored: int, producer_codec: str
) -> None:
    b = kafka_broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    topic = f"tc-{topic_codec}"
    admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": topic_codec})])[
        topic
    ].result(10)
    _produce(b.bootstrap_servers, topic, producer_codec, 500)
    codecs = _stored_codecs(b, topic)
    assert codecs and set(codecs) == {stored}
    assert _consume_all(b.bootstrap_servers, topic, 500) == _expected(500)
    # a second stock client decodes the converted batches too
    kc = KafkaConsumer(
        bootstrap_servers=b.bootstrap_servers,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    kc.assign([KafkaTopicPartition(topic, 0)])
    got = [(m.offset, m.key, m.value) for m in kc]
    kc.close()
    assert got == [(o, k, v) for o, k, v, _ in _expected(500)]


def test_idempotent_producer_through_recompression_and_back_to_producer_codec(
    kafka_broker_factory: Any,
) -> None:
    b = kafka_broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    admin.create_topics([NewTopic("tc-idem", 1, 1, config={"compression.type": "gzip"})])[
        "tc-idem"
    ].result(10)
    _produce(b.bootstrap_servers, "tc-idem", "snappy", 300, **{"enable.idempotence": True})
    assert set(_stored_codecs(b, "tc-idem")) == {GZIP}
    res = ConfigResource(
        ConfigResource.Type.TOPIC, "tc-idem", set_config={"compression.type": "producer"}
    )
    for f in admin.alter_configs([res]).values():
        f.result(10)
    _produce(b.bootstrap_servers, "tc-idem", "snappy", 1, **{"enable.idempotence": True})
    assert _stored_codecs(b, "tc-idem")[-1] == SNAPPY
    got = _consume_all(b.bootstrap_servers, "tc-idem", 301)
    assert [o for o, *_ in got] == list(range(301))
    assert got[:300] == _expected(300)


def _fetch_partition(bootstrap: str, topic: str, version: int) -> Any:
    """One sessionless consumer Fetch at ``version`` from offset 0 (kio encodes it)."""
    body = {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    c = RawClient.to(bootstrap)
    try:
        resp = c.call(1, version, messages.build(messages.request_type(1, version), body))
    finally:
        c.close()
    (t,) = resp.responses
    (p,) = t.partitions
    return p


@pytest.mark.parametrize("version", [4, 9])
def test_fetch_below_v10_of_a_zstd_topic_is_unsupported_compression_type(
    kafka_broker: Any, version: int
) -> None:
    """Kafka refuses a zstd topic to a Fetch older than v10 (KIP-110), with no records."""
    topic = f"tc-zstd-old-v{version}"
    kafka_broker.create_topic(topic, config={"compression.type": "zstd"})
    _produce(kafka_broker.bootstrap_servers, topic, "none", 20)
    p = _fetch_partition(kafka_broker.bootstrap_servers, topic, version)
    assert p.error_code == ErrorCode.unsupported_compression_type
    assert p.high_watermark == -1 and not p.records
    # v10 reads the same partition
    p10 = _fetch_partition(kafka_broker.bootstrap_servers, topic, 10)
    assert p10.error_code == 0 and p10.high_watermark == 20
    assert {h.compression for _, h in iter_headers(p10.records)} == {ZSTD}


def test_fetch_below_v10_of_a_producer_topic_serves_its_zstd_batches(kafka_broker: Any) -> None:
    """Only the topic's compression.type is checked: stored zstd batches of a
    ``producer`` topic are served as they are (Kafka 4 has no down-conversion)."""
    kafka_broker.create_topic("tc-producer-zstd")
    _produce(kafka_broker.bootstrap_servers, "tc-producer-zstd", "zstd", 20)
    p = _fetch_partition(kafka_broker.bootstrap_servers, "tc-producer-zstd", 9)
    assert p.error_code == 0 and p.high_watermark == 20
    assert {h.compression for _, h in iter_headers(p.records)} == {ZSTD}
