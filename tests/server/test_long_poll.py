"""Long polling through the purgatory, with stock clients and on the wire."""

from __future__ import annotations

import datetime
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

from tests.server.raw_client import RawClient
from tests.server.test_protocol_edges import batch, produce


def test_parked_consumer_gets_new_record_well_before_max_wait(kafka_bootstrap, kafka_topic):
    c = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": "lp",
            "fetch.wait.max.ms": 5000,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(kafka_topic, 0, 0)])
    c.poll(0.5)  # let the consumer park a fetch at the log end
    time.sleep(0.5)
    p = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 0})
    sent = time.monotonic()
    p.produce(kafka_topic, b"wake", partition=0)
    p.flush(5)
    m = c.poll(10)
    took = time.monotonic() - sent
    c.close()
    assert m is not None and m.value() == b"wake"
    assert took < 2.5, f"parked fetch was not woken by the produce ({took:.3f}s, max wait 5s)"


def _fetch(topic, offset, min_bytes, max_wait_ms):
    return FetchRequest(
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(
                    FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def test_fetch_with_min_bytes_above_available_waits_for_the_bytes(kafka_bootstrap, kafka_topic):
    c = RawClient.to(kafka_bootstrap)
    p = RawClient.to(kafka_bootstrap)
    try:
        p.call(0, 9, produce(kafka_topic, batch(1)))  # a small batch: fewer than min_bytes
        result = {}

        def run():
            t = time.monotonic()
            result["resp"] = c.call(1, 12, _fetch(kafka_topic, 0, 2000, 10_000))
            result["took"] = time.monotonic() - t

        th = threading.Thread(target=run)
        th.start()
        time.sleep(0.5)
        assert th.is_alive(), "the fetch returned although fewer than min_bytes were available"
        from kafkalite.protocol.records import build_batch

        big = produce(kafka_topic, build_batch([(b"k", b"x" * 100) for _ in range(40)]))
        p.call(0, 9, big)
        th.join(10)
        assert not th.is_alive()
        part = result["resp"].responses[0].partitions[0]
        assert len(part.records) >= 2000
        assert result["took"] < 9
    finally:
        c.close()
        p.close()


def test_fetch_at_log_end_returns_empty_after_max_wait(kafka_bootstrap, kafka_topic):
    c = RawClient.to(kafka_bootstrap)
    try:
        t = time.monotonic()
        resp = c.call(1, 12, _fetch(kafka_topic, 0, 1, 300))
        took = time.monotonic() - t
        part = resp.responses[0].partitions[0]
        assert part.error_code == 0 and not part.records
        assert took >= 0.25
    finally:
        c.close()
