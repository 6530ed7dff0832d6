"""The pytest plugin's fixtures, used the way a downstream suite would, once per client."""

from __future__ import annotations

import asyncio
import shutil
import subprocess

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition


def test_confluent_kafka_round_trip_through_kafka_bootstrap(kafka_bootstrap, kafka_topic):
    p = Producer({"bootstrap.servers": kafka_bootstrap})
    p.produce(kafka_topic, b"hello", partition=1)
    assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "fixtures-ck"})
    try:
        c.assign([TopicPartition(kafka_topic, 1, 0)])
        msg = c.poll(10)
        assert msg is not None and msg.error() is None
        assert msg.value() == b"hello"
    finally:
        c.close()


def test_kafka_python_send_is_readable_through_kafka_broker_records(kafka_broker, kafka_topic):
    p = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:
        p.send(kafka_topic, b"x", partition=0).get(10)
    finally:
        p.close()
    assert [r.value for r in kafka_broker.records(kafka_topic)] == [b"x"]
    c = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers, consumer_timeout_ms=5000)
    try:
        c.assign([KTopicPartition(kafka_topic, 0)])
        c.seek_to_beginning()
        assert next(iter(c)).value == b"x"
    finally:
        c.close()


async def test_aiokafka_round_trip_through_the_fixtures(kafka_bootstrap, kafka_topic):
    p = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await p.start()
    try:
        await p.send_and_wait(kafka_topic, b"async", partition=2)
    finally:
        await p.stop()
    c = AIOKafkaConsumer(
        kafka_topic, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
    )
    await c.start()
    try:
        msg = await asyncio.wait_for(c.getone(), 10)
        assert msg.value == b"async"
    finally:
        await c.stop()


def test_kcat_produces_and_consumes_through_the_fixtures(kafka_broker, kafka_topic):
    kcat = shutil.which("kcat")
    assert kcat, "kcat is missing: make system-deps installs it"
    base = [kcat, "-b", kafka_broker.bootstrap_servers, "-t", kafka_topic]
    subprocess.run(
        [*base, "-P", "-p", "1", "-K", ":"], input=b"k1:one\nk2:two\n", check=True, timeout=30
    )
    recs = kafka_broker.records(kafka_topic, 1)
    assert [(r.key, r.value) for r in recs] == [(b"k1", b"one"), (b"k2", b"two")]
    out = subprocess.run(
        [*base, "-C", "-p", "1", "-o", "beginning", "-e", "-f", "%k=%s@%o\n"],
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout
    assert out.split() == [b"k1=one@0", b"k2=two@1"]


def test_kafka_topic_is_fresh_per_test_and_has_three_partitions(kafka_broker, kafka_topic):
    assert kafka_broker.records(kafka_topic) == []
    md = kafka_broker.kafka.metadata_cache.get_topic(kafka_topic)
    assert md is not None and len(md.partitions) == 3


def test_kafka_cluster_fixture_serves_a_client_through_every_broker(kafka_cluster):
    assert len(kafka_cluster.live_ids) == 3
    kafka_cluster.create_topic("fx", partitions=3)
    p = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    for i in range(3):
        p.produce("fx", str(i).encode(), partition=i)
    assert p.flush(10) == 0
    assert sorted(r.value for r in kafka_cluster.records("fx")) == [b"0", b"1", b"2"]


def test_kafka_faults_fixture_rules_are_cleared_after_the_test(kafka_faults, kafka_broker):
    kafka_faults.error("Produce", "NOT_LEADER_OR_FOLLOWER", times=None)
    assert kafka_faults.rules
    # teardown clears it; the next test (and the session broker) sees no rule


def test_kafka_faults_fixture_left_no_rule_behind(kafka_broker):
    assert kafka_broker.faults.rules == ()
