"""Issue 20's acceptance test: scrape ``/metrics`` after a known workload of stock
clients and check the counters (messages and bytes in and out, requests and errors by
API, times, log, connection and group gauges) against what the workload did.

kafka-python sends each record in its own Produce request when every ``send`` is
awaited before the next, so the request counts are exact.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import MessageSizeTooLargeError, TopicAlreadyExistsError
from prometheus_client.parser import text_string_to_metric_families

from kafkalite.testing import broker

TOPIC = "metered"
N = 12  # records produced, 1 per request (6 to each partition)
VALUE = b"v" * 100


def _scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.status == 200
        text = r.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def _eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def metered():
    """One broker with ``/metrics`` on, and the workload already run on it."""
    # flush.ms makes the log flusher fsync the logs: LogFlushRateAndTimeMs counts them
    cfg = {
        "kafkalite.metrics.port": 0,
        "log.flush.interval.ms": 100,
        "log.flush.scheduler.interval.ms": 100,
    }
    with broker(**cfg) as b:
        boot = b.bootstrap_servers
        admin = KafkaAdminClient(bootstrap_servers=boot, client_id="metrics-admin")
        admin.create_topics(
            [
                NewTopic(
                    TOPIC,
                    num_partitions=2,
                    replication_factor=1,
                    topic_configs={"max.message.bytes": "1000"},
                )
            ]
        )
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)])
        admin.close()
        p = KafkaProducer(bootstrap_servers=boot, linger_ms=0, acks=1, retries=0)
        for i in range(N):
            p.send(TOPIC, value=VALUE, key=b"k%d" % i, partition=i % 2).get(timeout=10)
        with pytest.raises(MessageSizeTooLargeError):
            p.send(TOPIC, value=b"x" * 5000, partition=0).get(timeout=10)
        p.close()
        c = KafkaConsumer(
            bootstrap_servers=boot,
            group_id="metrics-group",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        tps = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
        c.assign(tps)
        got = 0
        deadline = time.monotonic() + 20
        while got < N and time.monotonic() < deadline:
            got += sum(len(v) for v in c.poll(timeout_ms=500).values())
        assert got == N
        c.commit()
        c.close()
        yield b, b.kafka.metrics_server.port


def _get(samples: dict, name: str, **labels: str) -> float:
    key = (name, frozenset(labels.items()))
    assert key in samples, f"{name}{labels} not exported"
    return samples[key]


BTM = "kafka_server_brokertopicmetrics_"
RQ = "kafka_network_requestmetrics_"


def test_topic_counters_match_the_workload(metered):
    b, port = metered
    s = _scrape(port)
    size = sum(_get(s, "kafka_log_log_size", topic=TOPIC, partition=str(p)) for p in (0, 1))
    assert size > N * len(VALUE)
    # each accepted batch is stored as it came: bytes in are the log's bytes
    assert _get(s, BTM + "messagesinpersec", topic=TOPIC) == N
    assert _get(s, BTM + "bytesinpersec", topic=TOPIC) == size
    # the consumer read every batch exactly once
    assert _get(s, BTM + "bytesoutpersec", topic=TOPIC) == size
    # the 5000-byte record: one partition rejected, its bytes counted
    assert _get(s, BTM + "totalproducerequestspersec", topic=TOPIC) == N + 1
    assert _get(s, BTM + "failedproducerequestspersec", topic=TOPIC) == 1
    assert _get(s, BTM + "bytesrejectedpersec", topic=TOPIC) > 5000
    assert _get(s, BTM + "failedfetchrequestspersec", topic=TOPIC) == 0
    assert _get(s, BTM + "totalfetchrequestspersec", topic=TOPIC) >= 2
    # all topics: the samples without a topic label (the consumer group's offset commit
    # went to __consumer_offsets through the coordinator, not Produce)
    assert _get(s, BTM + "messagesinpersec") == N
    assert _get(s, BTM + "bytesinpersec") == size
    for p, n in ((0, N // 2), (1, N // 2)):
        assert _get(s, "kafka_log_log_logendoffset", topic=TOPIC, partition=str(p)) == n
        assert _get(s, "kafka_log_log_logstartoffset", topic=TOPIC, partition=str(p)) == 0
        assert _get(s, "kafka_log_log_numlogsegments", topic=TOPIC, partition=str(p)) == 1


def test_request_counts_errors_and_times(metered):
    b, port = metered
    s = _scrape(port)
    assert _get(s, RQ + "requestspersec", request="Produce") == N + 1
    assert _get(s, RQ + "errorspersec", request="Produce", error="NONE") == N
    assert _get(s, RQ + "errorspersec", request="Produce", error="MESSAGE_TOO_LARGE") == 1
    assert _get(s, RQ + "requestspersec", request="CreateTopics") == 2
    assert _get(s, RQ + "errorspersec", request="CreateTopics", error="NONE") == 1
    assert _get(s, RQ + "errorspersec", request="CreateTopics", error="TOPIC_ALREADY_EXISTS") == 1
    assert _get(s, RQ + "requestspersec", request="OffsetCommit") == 1
    assert _get(s, RQ + "errorspersec", request="OffsetCommit", error="NONE") == 2
    assert _get(s, RQ + "errorspersec", request="Metadata", error="NONE") >= 1
    fetches = _get(s, RQ + "requestspersec", request="Fetch")
    assert fetches >= 1
    for hist in ("totaltimems", "requestqueuetimems", "localtimems", "remotetimems"):
        assert _get(s, RQ + hist + "_count", request="Produce") == N + 1
        assert _get(s, RQ + hist + "_bucket", request="Produce", le="+Inf") == N + 1
    assert _get(s, RQ + "totaltimems_sum", request="Produce") > 0
    # a fetch still parked when its consumer left is counted, never answered
    assert _get(s, RQ + "totaltimems_count", request="Fetch") <= fetches
    # Kafka's second name for a consumer's Fetch (no follower on one broker)
    assert _get(s, RQ + "requestspersec", request="FetchConsumer") == fetches
    assert (RQ + "requestspersec", frozenset({("request", "FetchFollower")})) not in s
    assert _get(s, RQ + "totaltimems_count", request="FetchConsumer") == _get(
        s, RQ + "totaltimems_count", request="Fetch"
    )
    assert _get(s, RQ + "totaltimems_bucket", request="Produce", le="33554.432") == N + 1


def test_network_loop_and_group_gauges(metered):
    b, port = metered
    s = _scrape(port)
    sm = "kafka_server_socket_server_metrics_"
    assert _get(s, sm + "connection_creation_total", listener="PLAINTEXT") >= 4
    created = _get(s, sm + "connection_creation_total", listener="PLAINTEXT")
    closed = _get(s, sm + "connection_close_total", listener="PLAINTEXT")
    assert _get(s, sm + "connection_count", listener="PLAINTEXT") == created - closed
    idle = _get(s, "kafka_network_socketserver_networkprocessoravgidlepercent")
    assert 0.0 <= idle <= 1.0
    assert _get(s, "kafkalite_event_loop_lag_ms") >= 0.0
    assert _get(s, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 1
    assert _get(s, "kafka_coordinator_group_groupmetadatamanager_numgroupsempty") == 1
    assert _get(s, "kafka_server_group_coordinator_metrics_group_count", protocol="classic") == 1
    labels = {"consumergroup": "metrics-group", "topic": TOPIC}
    for p in ("0", "1"):
        assert _get(s, "kafka_consumergroup_current_offset", partition=p, **labels) == N // 2
        assert _get(s, "kafka_consumergroup_lag", partition=p, **labels) == 0
    # three more records to partition 1: the group's lag there grows by three
    p = KafkaProducer(bootstrap_servers=b.bootstrap_servers, linger_ms=0)
    for _ in range(3):
        p.send(TOPIC, value=VALUE, partition=1).get(timeout=10)
    p.close()
    _eventually(
        lambda: (
            _scrape(port).get(
                ("kafka_consumergroup_lag", frozenset({**labels, "partition": "1"}.items()))
            )
            == 3
        )
    )
    s = _scrape(port)
    assert _get(s, BTM + "messagesinpersec", topic=TOPIC) == N + 3
    flushes = "kafka_log_logflushstats_logflushrateandtimems_count"
    _eventually(lambda: (_scrape(port).get((flushes, frozenset())) or 0) > 0)
    assert _get(s, "kafka_log_logcleaner_deadthreadcount") == 0


def _fetch_frame(topic: str, max_bytes: int) -> bytes:
    import struct

    from kafkalite.common import structs
    from kafkalite.protocol import messages

    req_cls = messages.request_type(1, 12)
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": max_bytes,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    payload = (
        struct.pack(">hhi", 1, 12, 7)
        + b"\x00\x04slow"
        + b"\x00"
        + messages.encode(messages.build(req_cls, body))
    )
    return structs.I32.pack(len(payload)) + payload


def test_response_send_time_is_the_time_until_the_client_took_the_response(metered):
    """ResponseSendTimeMs per API: every answered Produce has one, and a Fetch whose
    client does not read its (large) response for a while has a send time at least
    that long, as Kafka's: the time from the response ready to its last byte written."""
    import socket

    b, port = metered
    s = _scrape(port)
    produced = _get(s, RQ + "requestspersec", request="Produce")  # every one answered
    assert _get(s, RQ + "responsesendtimems_count", request="Produce") == produced
    assert _get(s, RQ + "responsesendtimems_bucket", request="Produce", le="+Inf") == produced
    assert _get(s, RQ + "responsesendtimems_sum", request="Produce") >= 0
    sent_before = _get(s, RQ + "responsesendtimems_sum", request="Fetch")
    count_before = _get(s, RQ + "responsesendtimems_count", request="Fetch")

    topic, size = "send-time", 0
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, client_id="send-time")
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    admin.close()
    p = KafkaProducer(bootstrap_servers=b.bootstrap_servers, acks=1, max_request_size=2 << 20)
    for _ in range(48):  # 24 MiB: far more than the loopback socket buffers hold
        p.send(topic, value=b"x" * (512 << 10), partition=0)
        size += 512 << 10
    p.flush(timeout=30)
    p.close()
    host, bport = b.bootstrap_servers.split(":")
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, int(bport)))
        sock.sendall(_fetch_frame(topic, 64 << 20))
        time.sleep(0.6)  # the client is slow to take its response
        sock.settimeout(20)
        head = b""
        while len(head) < 4:
            head += sock.recv(4 - len(head))
        frame_size = int.from_bytes(head, "big")
        # most of the 24 MiB was left in the broker's hands until now
        assert frame_size > size // 2
        got = 0
        while got < frame_size:
            chunk = sock.recv(min(1 << 20, frame_size - got))
            assert chunk
            got += len(chunk)

    def sent() -> bool:
        return _get(_scrape(port), RQ + "responsesendtimems_count", request="Fetch") > count_before

    _eventually(sent)
    s = _scrape(port)
    assert _get(s, RQ + "responsesendtimems_count", request="Fetch") == count_before + 1
    assert _get(s, RQ + "responsesendtimems_sum", request="Fetch") - sent_before >= 500
    assert _get(s, RQ + "responsesendtimems_count", request="FetchConsumer") == count_before + 1


def test_transaction_metrics_under_kafkas_names(metered):
    """A confluent-kafka transactional producer: the coordinator loads its partitions
    (partition-load-time), its producer id is in the partitions' producer state
    (ProducerIdCount), and each partition's first batch was verified (KIP-890's
    AddPartitionsToTxnManager metrics); kafkalite's own commit count agrees."""
    from confluent_kafka import Producer

    b, port = metered
    topic = "txn-metered"
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, client_id="txn-metrics")
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    admin.close()
    s = _scrape(port)
    verified_before = _get(s, "kafka_server_addpartitionstotxnmanager_verificationtimems_count")
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "transactional.id": "metered-txn"})
    p.init_transactions(30)
    for _ in range(2):
        p.begin_transaction()
        for part in (0, 1):
            p.produce(topic, b"v", partition=part)
        p.commit_transaction(30)
    p.flush(10)

    s = _scrape(port)
    load_max = _get(s, "kafka_server_transaction_coordinator_metrics_partition_load_time_max")
    load_avg = _get(s, "kafka_server_transaction_coordinator_metrics_partition_load_time_avg")
    assert 0 <= load_avg <= load_max  # loaded just now: not NaN
    assert (
        _get(
            s,
            "kafka_coordinator_transaction_transactionmarkerchannelmanager_unknowndestinationqueuesize",
        )
        == 0
    )
    # the two partitions know the producer id (and __transaction_state holds none)
    assert _get(s, "kafka_server_replicamanager_produceridcount") >= 1
    # one verification per partition and transaction (the first batch there)
    assert (
        _get(s, "kafka_server_addpartitionstotxnmanager_verificationtimems_count") - verified_before
        == 4
    )
    assert _get(s, "kafka_server_addpartitionstotxnmanager_verificationfailurerate") == 0

    def completed() -> bool:  # the markers and CompleteCommit follow EndTxn's answer
        s = _scrape(port)
        return (
            _get(s, "kafkalite_transaction_coordinator_events_total", event="commits") == 2
            and _get(s, "kafkalite_transaction_coordinator_transactions", state="CompleteCommit")
            == 1
        )

    _eventually(completed)

    # KIP-664: a transaction whose producer last wrote (the batch's timestamp) longer
    # ago than transaction.max.timeout.ms + 5 min is late until it ends
    late = "kafka_server_replicamanager_partitionswithlatetransactionscount"
    assert _get(s, late) == 0
    old = Producer({"bootstrap.servers": b.bootstrap_servers, "transactional.id": "late-txn"})
    old.init_transactions(30)
    old.begin_transaction()
    old.produce(topic, b"old", partition=0, timestamp=int(time.time() * 1000) - 3_600_000)
    old.flush(10)
    assert _get(_scrape(port), late) == 1
    old.abort_transaction(30)
    _eventually(lambda: _get(_scrape(port), late) == 0)


def test_request_metrics_off_records_no_request_or_topic_metric():
    """``kafkalite.request.metrics.enabled=false`` (only for pricing the metrics, as
    bench/metrics_cost_bench.py does) leaves every per-request metric out while the
    broker serves as usual; RequestsPerSec is still counted."""
    with broker(**{"kafkalite.metrics.port": 0, "kafkalite.request.metrics.enabled": False}) as b:
        boot = b.bootstrap_servers
        p = KafkaProducer(bootstrap_servers=boot, linger_ms=0, acks=1)
        for i in range(3):
            p.send("unmetered", value=VALUE, key=b"k%d" % i, partition=0).get(timeout=10)
        p.close()
        c = KafkaConsumer(bootstrap_servers=boot, auto_offset_reset="earliest")
        c.assign([TopicPartition("unmetered", 0)])
        got = 0
        deadline = time.monotonic() + 20
        while got < 3 and time.monotonic() < deadline:
            got += sum(len(v) for v in c.poll(timeout_ms=500).values())
        c.close()
        assert got == 3
        s = _scrape(b.kafka.metrics_server.port)
        assert _get(s, RQ + "requestspersec", request="Produce") == 3
        assert not [k for k in s if k[0].startswith(RQ) and "time" in k[0]]
        assert not [k for k in s if k[0].startswith(RQ + "errorspersec")]
        assert not [k for k in s if k[0].startswith(BTM) and ("topic", "unmetered") in k[1]]
