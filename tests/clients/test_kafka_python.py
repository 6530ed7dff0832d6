"""kafka-python end to end against a real kafkalite broker."""

from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

from tests.clients.workload import CODECS, Got, check_consumed, make_records

N = 10_000


def test_kafka_python_full_lifecycle(kafka_bootstrap):
    topic = "kp-lifecycle"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap, client_id="kp-admin")
    try:
        admin.create_topics(
            [NewTopic(topic, num_partitions=3, replication_factor=1)], timeout_ms=15000
        )

        expected = []
        for codec in CODECS:
            recs = make_records(codec, N)
            expected += recs
            p = KafkaProducer(
                bootstrap_servers=kafka_bootstrap,
                compression_type=None if codec == "none" else codec,
                linger_ms=5,
                acks="all",
                batch_size=64 * 1024,
            )
            futures = [
                p.send(
                    topic,
                    value=r.value,
                    key=r.key,
                    headers=list(r.headers),
                    timestamp_ms=r.timestamp,
                )
                for r in recs
            ]
            p.flush(60)
            for f in futures:
                assert f.get(10).offset >= 0
            p.close()

        c = KafkaConsumer(
            bootstrap_servers=kafka_bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            consumer_timeout_ms=5000,
            max_poll_records=5000,
        )
        tps = [TopicPartition(topic, p) for p in range(3)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        got = []
        while len(got) < len(expected):
            batch = c.poll(timeout_ms=5000)
            if not batch:
                break
            for tp, msgs in batch.items():
                for m in msgs:
                    got.append(
                        Got(tp.partition, m.offset, m.key, m.value, list(m.headers), m.timestamp)
                    )
        check_consumed(expected, got, 3)

        # list offsets
        counts = {p: sum(1 for g in got if g.partition == p) for p in range(3)}
        assert c.beginning_offsets(tps) == {tp: 0 for tp in tps}
        assert c.end_offsets(tps) == {tp: counts[tp.partition] for tp in tps}
        first_gzip = min(
            (g for g in got if dict(g.headers)["codec"] == b"gzip"), key=lambda g: g.timestamp
        )
        tp = TopicPartition(topic, first_gzip.partition)
        found = c.offsets_for_times({tp: first_gzip.timestamp})[tp]
        assert found.offset == first_gzip.offset and found.timestamp == first_gzip.timestamp
        c.close()

        # describe and alter a topic config
        res = ConfigResource(ConfigResourceType.TOPIC, topic)

        def described():
            # kafka-python 3: {resource_type: {name: {key: {config data}}}}
            entries = admin.describe_configs([res], config_filter="all")["topic"][topic]
            return {k: (v["value"] if isinstance(v, dict) else v) for k, v in entries.items()}

        assert described()["retention.ms"] == "604800000"
        modified = admin.describe_configs([res])["topic"][
            topic
        ]  # default filter: only non-defaults
        assert "retention.ms" not in modified
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "7200000"})]
        )
        assert described()["retention.ms"] == "7200000"
        assert "retention.ms" in admin.describe_configs([res])["topic"][topic]

        admin.delete_topics([topic], timeout_ms=15000)
        assert topic not in admin.list_topics()
    finally:
        admin.close()
