"""The executors' direct range reads (``kafkalite/spark/direct_fetch.py``) against a real
broker: the same rows as the confluent-kafka read of the same range, and a hand-over to
confluent-kafka wherever the direct path stops (an error, a lost connection, settings it
does not know).

These call ``read_range`` as an executor does, without a SparkSession; the Spark tests of
this directory go through the same path (``directFetch`` is on by default)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from pyspark.sql.pandas.types import to_arrow_schema

from kafkalite.spark import client as kc
from kafkalite.spark.datasource import kafka_schema
from kafkalite.spark.direct_fetch import DirectReader, understood
from kafkalite.testing import ThreadedBroker
from kafkalite.testing.faults import Delay

from .conftest import produce

DIRECT_CLIENT_ID = "direct-fetch-test"


def _schema(headers: bool) -> Any:
    return to_arrow_schema(kafka_schema(headers), timezone="UTC")


def _read(
    bootstrap: str,
    topic: str,
    start: int,
    end: int,
    *,
    direct: bool,
    headers: bool = True,
    client: dict[str, str] | None = None,
    fail_on_data_loss: bool = True,
    partition: int = 0,
) -> pa.Table:
    conf = {"bootstrap.servers": bootstrap, "client.id": DIRECT_CLIENT_ID, **(client or {})}
    batches = list(
        kc.read_range(
            kc.OffsetRange(topic, partition, start, end),
            conf,
            include_headers=headers,
            fail_on_data_loss=fail_on_data_loss,
            poll_timeout_ms=20_000,
            arrow_schema=_schema(headers),
            direct=direct,
        )
    )
    return pa.Table.from_batches(batches, schema=_schema(headers))


def _fetches_by(faults: Any, client_id: str) -> list[int]:
    """The versions of the Fetch requests ``client_id`` sends from now on (a rule that only
    looks; the direct path sends v11, librdkafka a later version)."""
    seen: list[int] = []

    def look(ctx: Any, _req: Any) -> bool:
        if ctx.client_id == client_id:
            seen.append(ctx.api_version)
        return False

    faults.add("Fetch", Delay(0), when=look, times=None)
    return seen


def _nth_direct_fetch(n: int) -> Callable[[Any, Any], bool]:
    """A fault rule's predicate: the ``n``-th direct Fetch (v11) from now on."""
    seen = [0]

    def nth(ctx: Any, _req: Any) -> bool:
        if ctx.client_id != DIRECT_CLIENT_ID or ctx.api_version != 11:
            return False
        seen[0] += 1
        return seen[0] == n

    return nth


@pytest.fixture(autouse=True, scope="module")
def _close_clients() -> Any:
    """The module's cached executor clients (this process plays the executor) are closed
    with it, before the broker stops."""
    yield
    for consumer in kc._CONSUMERS.values():
        consumer.close()
    kc._CONSUMERS.clear()
    for reader in kc._DIRECT.values():
        reader.close()
    kc._DIRECT.clear()


@pytest.fixture
def handovers(caplog: pytest.LogCaptureFixture) -> Callable[[], list[str]]:
    """The direct path's hand-overs to confluent-kafka so far (their log lines)."""
    caplog.set_level(logging.INFO, logger="kafkalite.spark.client")

    def got() -> list[str]:
        return [r.getMessage() for r in caplog.records if "direct read of" in r.getMessage()]

    return got


@pytest.fixture
def topic(spark_broker: ThreadedBroker) -> Callable[..., str]:
    def make(partitions: int = 1, **config: str) -> str:
        name = f"direct-{uuid.uuid4().hex[:8]}"
        spark_broker.create_topic(name, partitions, config=config or None)
        return name

    return make


def test_direct_read_gives_the_rows_the_consumer_read_gives(
    spark_broker: ThreadedBroker, topic: Callable[..., str], handovers: Callable[[], list[str]]
) -> None:
    bootstrap = spark_broker.bootstrap_servers
    name = topic()
    produce(bootstrap, name, 300, headers=True)
    produce(bootstrap, name, 40, start=300, value_size=9000)  # three-byte lengths
    seen = _fetches_by(spark_broker.faults, DIRECT_CLIENT_ID)
    for start, end in ((0, 340), (17, 311), (299, 301), (5, 6)):
        for headers in (True, False):
            direct = _read(bootstrap, name, start, end, direct=True, headers=headers)
            assert direct.num_rows == end - start
            assert direct.column("offset").to_pylist() == list(range(start, end))
            assert direct.equals(_read(bootstrap, name, start, end, direct=False, headers=headers))
    assert 11 in seen, "the direct path sent no Fetch request"
    assert handovers() == []


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_direct_read_of_compressed_batches(
    spark_broker: ThreadedBroker,
    topic: Callable[..., str],
    codec: str,
    handovers: Callable[[], list[str]],
) -> None:
    bootstrap = spark_broker.bootstrap_servers
    name = topic()
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20})
    for i in range(500):
        p.produce(
            name,
            key=f"k{i}".encode(),
            value=f"value {i} ".encode() * 20,
            headers=[("i", str(i).encode())],
        )
    assert p.flush(30) == 0
    direct = _read(bootstrap, name, 3, 497, direct=True)
    assert direct.column("value").to_pylist() == [
        f"value {i} ".encode() * 20 for i in range(3, 497)
    ]
    assert handovers() == []
    assert direct.equals(_read(bootstrap, name, 3, 497, direct=False))


def test_direct_read_of_a_log_append_time_topic(
    spark_broker: ThreadedBroker, topic: Callable[..., str], handovers: Callable[[], list[str]]
) -> None:
    bootstrap = spark_broker.bootstrap_servers
    name = topic(**{"message.timestamp.type": "LogAppendTime"})
    produce(bootstrap, name, 50)
    direct = _read(bootstrap, name, 0, 50, direct=True)
    assert set(direct.column("timestampType").to_pylist()) == {1}
    assert handovers() == []
    assert direct.equals(_read(bootstrap, name, 0, 50, direct=False))


def test_direct_read_committed_hides_aborted_records(
    spark_broker: ThreadedBroker, topic: Callable[..., str], handovers: Callable[[], list[str]]
) -> None:
    bootstrap = spark_broker.bootstrap_servers
    name = topic()
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{name}"})
    p.init_transactions(30)
    for txn, commit in (("a", True), ("b", False), ("c", True), ("d", False)):
        p.begin_transaction()
        for i in range(20):
            p.produce(name, value=f"{txn}{i}".encode())
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(name, value=b"last")
    assert plain.flush(30) == 0
    end = 4 * 21 + 1  # four transactions of 20 records and a marker each, one plain record
    committed = {"isolation.level": "read_committed"}
    direct = _read(bootstrap, name, 0, end, direct=True, client=committed)
    values = direct.column("value").to_pylist()
    assert values == [f"a{i}".encode() for i in range(20)] + [
        f"c{i}".encode() for i in range(20)
    ] + [b"last"]
    assert handovers() == []
    assert direct.equals(_read(bootstrap, name, 0, end, direct=False, client=committed))
    # read_uncommitted sees every record, markers skipped
    everything = _read(bootstrap, name, 0, end, direct=True)
    assert everything.num_rows == 81
    assert everything.equals(_read(bootstrap, name, 0, end, direct=False))


def test_a_fetch_error_hands_the_rest_of_the_range_to_the_consumer(
    spark_broker: ThreadedBroker, topic: Callable[..., str], handovers: Callable[[], list[str]]
) -> None:
    bootstrap = spark_broker.bootstrap_servers
    name = topic()
    for i in range(10):  # ten flushes, ten batches at least
        produce(bootstrap, name, 20, start=20 * i, value_size=2000)
    small = {"max.partition.fetch.bytes": "65536"}  # many fetches per range
    expected = _read(bootstrap, name, 0, 200, direct=False, client=small)
    # the third direct Fetch is answered NOT_LEADER_OR_FOLLOWER
    rule = spark_broker.faults.error(
        "Fetch", "NOT_LEADER_OR_FOLLOWER", when=_nth_direct_fetch(3), times=1
    )
    got = _read(bootstrap, name, 0, 200, direct=True, client=small)
    assert rule.hits == 1
    [handover] = handovers()
    assert "fetch error 6" in handover
    assert got.equals(expected)
    # the next range reads directly again, through a new connection
    assert _read(bootstrap, name, 10, 190, direct=True, client=small).equals(expected[10:190])


def test_a_severed_connection_hands_the_rest_of_the_range_to_the_consumer(
    spark_broker: ThreadedBroker, topic: Callable[..., str], handovers: Callable[[], list[str]]
) -> None:
    bootstrap = spark_broker.bootstrap_servers
    name = topic()
    for i in range(5):
        produce(bootstrap, name, 20, start=20 * i, value_size=4000)
    small = {"max.partition.fetch.bytes": "40000"}
    expected = _read(bootstrap, name, 0, 100, direct=False, client=small)
    rule = spark_broker.faults.sever("Fetch", when=_nth_direct_fetch(2), times=1)
    assert _read(bootstrap, name, 0, 100, direct=True, client=small).equals(expected)
    assert rule.hits == 1
    [handover] = handovers()
    assert "stopped at" in handover and " 0 (" not in handover  # after the first batches


def test_deleted_offsets_go_through_fail_on_data_loss(
    spark_broker: ThreadedBroker, topic: Callable[..., str]
) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    bootstrap = spark_broker.bootstrap_servers
    name = topic()
    produce(bootstrap, name, 100)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_records([TopicPartition(name, 0, 60)]).values():
        fut.result(30)
    with pytest.raises(kc.DataLossError):
        _read(bootstrap, name, 10, 100, direct=True)
    kept = _read(bootstrap, name, 10, 100, direct=True, fail_on_data_loss=False)
    assert kept.column("offset").to_pylist() == list(range(60, 100))
    assert kept.equals(_read(bootstrap, name, 10, 100, direct=False, fail_on_data_loss=False))


def test_a_consumer_that_stops_early_leaves_a_reusable_reader(
    spark_broker: ThreadedBroker, topic: Callable[..., str]
) -> None:
    bootstrap = spark_broker.bootstrap_servers
    name = topic()
    for i in range(10):
        produce(bootstrap, name, 30, start=30 * i, value_size=1000)
    conf = {
        "bootstrap.servers": bootstrap,
        "client.id": DIRECT_CLIENT_ID,
        "max.partition.fetch.bytes": "30000",
    }
    it = kc.read_range(
        kc.OffsetRange(name, 0, 0, 300),
        conf,
        include_headers=False,
        fail_on_data_loss=True,
        poll_timeout_ms=20_000,
        arrow_schema=_schema(False),
    )
    first = next(it)
    assert first.num_rows > 0
    it.close()  # a request for the next batch is in flight: that connection is dropped
    again = _read(bootstrap, name, 0, 300, direct=True, headers=False, client=conf)
    assert again.column("offset").to_pylist() == list(range(300))


def test_settings_the_direct_path_does_not_know_are_read_with_confluent_kafka() -> None:
    assert understood({"bootstrap.servers": "h:1"})
    assert understood({"bootstrap.servers": "h:1", "security.protocol": "PLAINTEXT"})
    assert not understood({"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL"})
    assert not understood({"bootstrap.servers": "h:1", "sasl.mechanism": "PLAIN"})
    assert not understood({"bootstrap.servers": "h:1", "ssl.ca.location": "/ca.pem"})


def test_unknown_settings_read_everything_with_confluent_kafka(
    spark_broker: ThreadedBroker, topic: Callable[..., str]
) -> None:
    bootstrap = spark_broker.bootstrap_servers
    name = topic()
    produce(bootstrap, name, 30)
    seen = _fetches_by(spark_broker.faults, DIRECT_CLIENT_ID)
    # a setting only librdkafka knows: the whole range goes through confluent-kafka, whose
    # fetches carry the same client id but never the direct path's Fetch v11
    got = _read(bootstrap, name, 0, 30, direct=True, client={"socket.keepalive.enable": "true"})
    assert got.column("offset").to_pylist() == list(range(30))
    assert seen and 11 not in seen
    assert DirectReader({"bootstrap.servers": bootstrap}).client_id == b"kafkalite-spark"


def test_a_kept_connection_the_broker_closed_is_replaced_not_handed_over(
    spark_broker: ThreadedBroker, topic: Callable[..., str], handovers: Callable[[], list[str]]
) -> None:
    bootstrap = spark_broker.bootstrap_servers
    name = topic()
    produce(bootstrap, name, 50)
    first = _read(bootstrap, name, 0, 50, direct=True)
    # as the broker's idle sweep (connections.max.idle.ms) does while a worker waits
    assert spark_broker.faults.sever_connections(client_id=DIRECT_CLIENT_ID) >= 1
    again = _read(bootstrap, name, 0, 50, direct=True)
    assert again.equals(first)
    assert handovers() == []


@pytest.fixture(scope="module")
def three_brokers(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from kafkalite.testing.in_process_cluster import ThreadedCluster

    c = ThreadedCluster(3, tmp_path_factory.mktemp("direct-cluster"))
    c.start()
    try:
        yield c
    finally:
        c.stop()


def test_direct_reads_find_each_partitions_leader_and_follow_a_move(
    three_brokers: Any, handovers: Callable[[], list[str]]
) -> None:
    c = three_brokers
    bootstrap = c.bootstrap_servers
    name = f"direct-{uuid.uuid4().hex[:8]}"
    c.create_topic(name, 3, 2)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(300):
        p.produce(name, key=f"k{i}".encode(), value=f"v{i}".encode() * 50, partition=i % 3)
    assert p.flush(30) == 0
    leaders = {part: c.leader_of(name, part) for part in range(3)}
    assert len(set(leaders.values())) > 1, leaders  # the reads go to more than one broker
    expected = {
        part: _read(bootstrap, name, 0, 100, direct=False, partition=part) for part in range(3)
    }
    by_broker = {b: _fetches_by(c.faults(b), DIRECT_CLIENT_ID) for b in range(3)}
    for part in range(3):
        assert _read(bootstrap, name, 0, 100, direct=True, partition=part).equals(expected[part])
    assert handovers() == []
    # each partition was fetched from its leader, and from no other broker
    assert {b for b, seen in by_broker.items() if 11 in seen} == set(leaders.values())
    # partition 0's leadership moves. The reader's cached leader is now a follower, which
    # serves Fetch v11 up to its own high watermark (KIP-392), or answers
    # NOT_LEADER_OR_FOLLOWER and the range goes on with confluent-kafka: the rows are the same
    to = next(b for b in range(3) if b != leaders[0])
    c.move_leader(name, 0, to)
    assert _read(bootstrap, name, 0, 100, direct=True, partition=0).equals(expected[0])
    assert len(handovers()) <= 1
    # a reader that looks the leader up again reads from the new one, directly
    seen = _fetches_by(c.faults(to), DIRECT_CLIENT_ID)
    for reader in kc._DIRECT.values():
        reader._leaders.clear()
    before = len(handovers())
    assert _read(bootstrap, name, 0, 100, direct=True, partition=0).equals(expected[0])
    assert len(handovers()) == before
    assert 11 in seen
