"""After a clean restart every acknowledged record, topic, config and topic id is still there."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic


def test_restart_keeps_records_topics_configs_and_topic_ids(kafka_broker_factory, tmp_path):
    b = kafka_broker_factory(tmp_path / "broker")
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    admin.create_topics(
        [
            NewTopic(
                "durable",
                3,
                1,
                config={"retention.ms": "123456789", "cleanup.policy": "compact,delete"},
            )
        ]
    )["durable"].result(10)
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "acks": "all", "linger.ms": 2})
    acked = []
    for i in range(3000):
        p.produce(
            "durable",
            f"v{i}".encode(),
            f"k{i}".encode(),
            on_delivery=lambda err, m: (
                acked.append((m.partition(), m.offset(), m.value())) if not err else None
            ),
        )
    assert p.flush(20) == 0
    assert len(acked) == 3000
    before = admin.list_topics("durable", timeout=10).topics["durable"]
    topic_id = b.kafka.metadata_cache.get_topic("durable").topic_id
    cluster_id = b.kafka.cluster_id

    b.restart()

    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    after = admin.list_topics("durable", timeout=10).topics["durable"]
    assert sorted(after.partitions) == sorted(before.partitions)
    assert b.kafka.metadata_cache.get_topic("durable").topic_id == topic_id
    assert b.kafka.cluster_id == cluster_id
    res = ConfigResource(ConfigResource.Type.TOPIC, "durable")
    cfg = admin.describe_configs([res])[res].result(10)
    assert cfg["retention.ms"].value == "123456789"
    assert cfg["cleanup.policy"].value == "compact,delete"

    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap_servers,
            "group.id": "x",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition("durable", p, 0) for p in range(3)])
    got, eof = set(), set()
    while len(eof) < 3:
        m = c.poll(5)
        assert m is not None, "timed out reading back"
        if m.error():
            eof.add(m.partition())
            continue
        got.add((m.partition(), m.offset(), m.value()))
    c.close()
    assert got == set(acked)
