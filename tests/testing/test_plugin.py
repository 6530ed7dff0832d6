"""The pytest plugin as a downstream suite sees it: inner pytest runs through ``pytester``.

Inner runs are subprocesses, so the plugin is loaded by its ``pytest11`` entry point
(no ``-p``), exactly as after ``pip install kafkalite``.
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from kafkalite.testing import broker

FIXTURES = [
    "kafka_broker",
    "kafka_bootstrap",
    "kafka_topic",
    "kafka_broker_factory",
    "kafka_cluster",
    "kafka_faults",
]


def test_the_entry_point_registers_every_fixture_and_the_options(pytester: pytest.Pytester):
    result = pytester.runpytest_subprocess("--fixtures")
    assert result.ret == 0
    out = result.stdout.str()
    for name in FIXTURES:
        assert name in out, name
    help_ = pytester.runpytest_subprocess("--help").stdout.str()
    assert "--kafka-bootstrap" in help_ and "kafka_bootstrap" in help_


EMBEDDED_SUITE = """
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

seen = []

def test_a(kafka_broker, kafka_topic):
    seen.append(kafka_topic)
    assert type(kafka_broker).__name__ == "ThreadedBroker"
    assert kafka_broker.records(kafka_topic) == []

def test_b(kafka_bootstrap, kafka_topic, kafka_broker):
    seen.append(kafka_topic)
    p = Producer({"bootstrap.servers": kafka_bootstrap})
    p.produce(kafka_topic, b"v", partition=2)
    assert p.flush(10) == 0
    assert [(r.value, r.offset) for r in kafka_broker.records(kafka_topic, 2)] == [(b"v", 0)]

def test_topics_were_unique_and_are_deleted(kafka_bootstrap):
    assert len(seen) == 2 and seen[0] != seen[1]
    assert all(s.startswith(("test_a-", "test_b-")) for s in seen)
    topics = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics
    assert not set(seen) & set(topics), topics

def test_factory_and_cluster_run_in_process(kafka_broker_factory, kafka_cluster, kafka_broker):
    b = kafka_broker_factory(**{"num.partitions": 5})
    assert b.bootstrap_servers != kafka_broker.bootstrap_servers
    assert len(kafka_cluster.live_ids) == 3
"""


def test_embedded_fixtures_give_fresh_topics_that_are_deleted_after(pytester: pytest.Pytester):
    pytester.makepyfile(test_inner=EMBEDDED_SUITE)
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=4)


EXTERNAL_SUITE = """
import pytest
from confluent_kafka import Producer

def test_broker_is_external(kafka_broker, kafka_bootstrap):
    assert type(kafka_broker).__name__ == "ExternalBroker"
    assert kafka_bootstrap == kafka_broker.bootstrap_servers == EXPECTED

def test_records_read_back_over_the_protocol(kafka_broker, kafka_topic):
    with open(NAMES, "a") as f:
        f.write(kafka_topic + "\\n")
    p = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for i in range(5):
        p.produce(kafka_topic, b"v%d" % i, key=b"k", partition=i % 3, headers=[("h", b"x")])
    assert p.flush(10) == 0
    recs = kafka_broker.records(kafka_topic)
    assert [r.value for r in recs] == [b"v0", b"v3", b"v1", b"v4", b"v2"]  # by partition
    assert [r.offset for r in recs] == [0, 1, 0, 1, 0]
    assert all(r.key == b"k" and r.headers == [("h", b"x")] for r in recs)
    assert [r.value for r in kafka_broker.records(kafka_topic, 1)] == [b"v1", b"v4"]

def test_factory(kafka_broker_factory):
    pass

def test_cluster(kafka_cluster):
    pass

def test_faults(kafka_faults):
    pass
"""


@pytest.mark.parametrize("how", ["option", "ini", "env"])
def test_external_mode_points_the_fixtures_at_a_separately_started_broker(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str
):
    with broker() as outside:
        names = pytester.path / "topics.txt"
        pytester.makepyfile(
            test_inner=f"EXPECTED = {outside.bootstrap_servers!r}\nNAMES = {str(names)!r}\n"
            + EXTERNAL_SUITE
        )
        args = ["-rs"]
        if how == "option":
            args += ["--kafka-bootstrap", outside.bootstrap_servers]
        elif how == "ini":
            pytester.makeini(f"[pytest]\nkafka_bootstrap = {outside.bootstrap_servers}\n")
        else:
            monkeypatch.setenv("KAFKALITE_TEST_BOOTSTRAP", outside.bootstrap_servers)
        result = pytester.runpytest_subprocess(*args)
        result.assert_outcomes(passed=2, skipped=3)
        out = result.stdout.str()
        for fixture in ("kafka_broker_factory", "kafka_cluster", "kafka_faults"):
            assert f"{fixture} " in out and "not available with --kafka-bootstrap" in out
        [topic] = names.read_text().split()
        # the records went to the outside broker, and the topic was deleted there after the test
        assert outside.kafka.metadata_cache.get_topic(topic) is None
        listed = AdminClient({"bootstrap.servers": outside.bootstrap_servers}).list_topics(
            timeout=10
        )
        assert topic not in listed.topics
