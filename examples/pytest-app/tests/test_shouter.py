"""shouter against a real broker, using only the kafkalite pytest plugin's fixtures.

``pytest --kafka-bootstrap host:9092`` runs the same tests against Apache Kafka
(the fault-injection test is skipped there).
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, Producer
from shouter import Shouter, transform
from shouter.service import InvalidEvent


def test_transform_upper_cases_text_and_keeps_other_fields():
    out = json.loads(transform(b'{"text": "hello", "id": 7}'))
    assert out == {"text": "HELLO", "id": 7, "shouted": True}
    with pytest.raises(InvalidEvent):
        transform(b"not json")


@pytest.fixture
def topics(kafka_broker, kafka_topic):
    """(input, output): the plugin's fresh topic, plus an output and dead-letter topic."""
    out = f"{kafka_topic}.out"
    kafka_broker.create_topic(out, partitions=1)
    kafka_broker.create_topic(f"{out}.dlq", partitions=1)
    return kafka_topic, out


def _send(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i, v in enumerate(values):
        p.produce(topic, v, key=str(i).encode())
    assert p.flush(10) == 0


def _read(bootstrap: str, topic: str, n: int) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while len(got) < n and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        c.close()
    return got


def _run_until(service: Shouter, n: int) -> int:
    done, deadline = 0, time.monotonic() + 20
    while done < n and time.monotonic() < deadline:
        done += service.run_once(timeout=0.5)
    return done


def test_events_come_out_upper_cased(kafka_bootstrap, topics):
    src, dst = topics
    _send(kafka_bootstrap, src, [json.dumps({"text": w}).encode() for w in ("a", "bb", "ccc")])
    service = Shouter(kafka_bootstrap, src, dst, group_id=f"svc-{src}")
    try:
        assert _run_until(service, 3) == 3
    finally:
        service.close()
    texts = sorted(json.loads(v)["text"] for v in _read(kafka_bootstrap, dst, 3))
    assert texts == ["A", "BB", "CCC"]


def test_bad_events_go_to_the_dead_letter_topic(kafka_bootstrap, topics):
    src, dst = topics
    _send(kafka_bootstrap, src, [b"oops", b'{"text": "ok"}'])
    service = Shouter(kafka_bootstrap, src, dst, group_id=f"svc-{src}")
    try:
        assert _run_until(service, 2) == 2
    finally:
        service.close()
    assert _read(kafka_bootstrap, f"{dst}.dlq", 1) == [b"oops"]
    assert [json.loads(v)["text"] for v in _read(kafka_bootstrap, dst, 1)] == ["OK"]


def test_a_restarted_service_resumes_after_its_committed_offsets(kafka_bootstrap, topics):
    src, dst = topics
    group = f"svc-{src}"
    _send(kafka_bootstrap, src, [b'{"text": "one"}'])
    first = Shouter(kafka_bootstrap, src, dst, group_id=group)
    try:
        assert _run_until(first, 1) == 1
    finally:
        first.close()
    _send(kafka_bootstrap, src, [b'{"text": "two"}'])
    second = Shouter(kafka_bootstrap, src, dst, group_id=group)
    try:
        assert _run_until(second, 1) == 1
        assert second.run_once(timeout=0.5) == 0  # "one" is not processed again
    finally:
        second.close()
    assert [json.loads(v)["text"] for v in _read(kafka_bootstrap, dst, 2)] == ["ONE", "TWO"]


def test_output_survives_a_broker_answering_not_leader(kafka_bootstrap, kafka_faults, topics):
    src, dst = topics
    # the broker refuses the service's first two produce requests, as during a leader move
    kafka_faults.error("Produce", "NOT_LEADER_OR_FOLLOWER", client_id="shouter-svc", times=2)
    _send(kafka_bootstrap, src, [json.dumps({"text": f"m{i}"}).encode() for i in range(10)])
    service = Shouter(
        kafka_bootstrap,
        src,
        dst,
        group_id=f"svc-{src}",
        extra_config={"client.id": "shouter-svc", "retry.backoff.ms": 10},
    )
    try:
        assert _run_until(service, 10) == 10
    finally:
        service.close()
    texts = sorted(json.loads(v)["text"] for v in _read(kafka_bootstrap, dst, 10))
    assert texts == sorted(f"M{i}" for i in range(10))
