"""confluent-kafka (librdkafka 2.x) end to end against a real kafkalite broker."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
)

from tests.clients.workload import CODEC_IDS, CODECS, Got, check_consumed, make_records

N = 10_000


@pytest.fixture
def admin(kafka_bootstrap):
    return AdminClient({"bootstrap.servers": kafka_bootstrap})


def _consume_all(bootstrap, topic, partitions, expected_count):
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, eof = [], set()
    try:
        while len(eof) < partitions or len(got) < expected_count:
            msgs = c.consume(1000, timeout=5)
            if not msgs:
                break
            for m in msgs:
                if m.error():
                    if m.error().code() == -191:  # _PARTITION_EOF
                        eof.add(m.partition())
                        continue
                    raise KafkaException(m.error())
                got.append(
                    Got(
                        m.partition(),
                        m.offset(),
                        m.key(),
                        m.value(),
                        list(m.headers() or []),
                        m.timestamp()[1],
                    )
                )
    finally:
        c.close()
    return got


def test_confluent_kafka_full_lifecycle(kafka_broker, kafka_bootstrap, admin):
    topic = "ck-lifecycle"
    fs = admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    fs[topic].result(15)
    md = admin.list_topics(topic, timeout=10)
    assert len(md.topics[topic].partitions) == 3

    expected = []
    for codec in CODECS:
        recs = make_records(codec, N)
        expected += recs
        p = Producer(
            {
                "bootstrap.servers": kafka_bootstrap,
                "compression.type": codec,
                "linger.ms": 5,
                "acks": "all",
            }
        )
        errors: list = []

        def on_delivery(err, _msg, errors=errors):
            if err:
                errors.append(err)

        for r in recs:
            p.produce(
                topic,
                r.value,
                r.key,
                headers=list(r.headers),
                timestamp=r.timestamp,
                on_delivery=on_delivery,
            )
            p.poll(0)
        assert p.flush(30) == 0
        assert not errors

    # stored compressed with the producer's codec (checked in the broker's own log)
    codecs_seen = set()
    for part in range(3):
        plog = kafka_broker.kafka.replica_manager.get_partition((topic, part)).log
        from kafkalite.protocol.record_batch import iter_headers

        data = plog.read(0, 1 << 30, max_offset=None).records
        raw = data if isinstance(data, bytes) else data.read_bytes()
        codecs_seen |= {h.compression for _, h in iter_headers(raw)}
    assert codecs_seen == set(CODEC_IDS.values())

    got = _consume_all(kafka_bootstrap, topic, 3, len(expected))
    check_consumed(expected, got, 3)

    # list offsets: earliest, latest, by timestamp
    tps = {TopicPartition(topic, p): OffsetSpec.earliest() for p in range(3)}
    earliest = admin.list_offsets(tps)
    latest = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps})
    counts = {p: 0 for p in range(3)}
    for g in got:
        counts[g.partition] += 1
    for tp in tps:
        assert earliest[tp].result(10).offset == 0
        assert latest[tp].result(10).offset == counts[tp.partition]
    # the first zstd record's timestamp → its offset in its partition
    first_zstd = min(
        (g for g in got if dict(g.headers)["codec"] == b"zstd"), key=lambda g: g.timestamp
    )
    ts_res = admin.list_offsets(
        {
            TopicPartition(topic, first_zstd.partition): OffsetSpec.for_timestamp(
                first_zstd.timestamp
            )
        }
    )
    [(tp, f)] = ts_res.items()
    assert f.result(10).offset == first_zstd.offset

    # describe and alter a topic config
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["retention.ms"].value == "604800000"
    assert cfg["cleanup.policy"].value == "delete"
    admin.incremental_alter_configs(
        [
            ConfigResource(
                ConfigResource.Type.TOPIC,
                topic,
                incremental_configs=[
                    ConfigEntry(
                        "retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET
                    )
                ],
            )
        ]
    )[res].result(10)
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["retention.ms"].value == "3600000"
    assert cfg["retention.ms"].source == 1  # TOPIC_CONFIG (DYNAMIC_TOPIC_CONFIG)

    # delete the topic
    admin.delete_topics([topic])[topic].result(15)
    md = admin.list_topics(timeout=10)
    assert topic not in md.topics
