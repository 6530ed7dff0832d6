"""acks=all, DelayedProduce and DelayedDeleteRecords on the wire (seed 000 behaviours 8–13).

The partition gets a second replica, broker 99, through a LeaderAndIsr from the
controller path; the test then plays that follower with a raw socket sending
real Fetch requests with replica_id 99. No part of the broker is mocked.
"""

from __future__ import annotations

import datetime
import threading
import time

import pytest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

from kafkalite.protocol.errors import ErrorCode
from tests.replica.wire import InFlight, set_replicas
from tests.replica.wire import produce as wire_produce
from tests.server.raw_client import RawClient
from tests.server.test_protocol_edges import batch, produce

FOLLOWER = 99


def follower_fetch(
    topic: str, offset: int, wait_ms: int = 0, log_start_offset: int = 0
) -> FetchRequest:
    return FetchRequest(
        replica_id=FOLLOWER,
        max_wait=datetime.timedelta(milliseconds=wait_ms),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(
                    FetchPartition(
                        partition=0,
                        fetch_offset=offset,
                        log_start_offset=log_start_offset,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def add_follower(b, topic: str, isr: list[int], epoch: int = 1, leader: int = 0) -> None:
    k = b.kafka
    t = k.metadata_cache.get_topic(topic)
    state = {
        "topic": topic,
        "partition": 0,
        "topic_id": t.topic_id,
        "leader": leader,
        "leader_epoch": epoch,
        "isr": isr,
        "replicas": [0, FOLLOWER],
        "controller_epoch": k.metadata_cache.controller_epoch,
        "partition_epoch": epoch,
    }
    b.call(
        k.replica_manager.become_leader_or_follower,
        k.metadata_cache.controller_id,
        k.metadata_cache.controller_epoch,
        [state],
    )


def produce_acks_all(client, topic, n=3, timeout_ms=10_000):
    req = produce(topic, batch(n), acks=-1)
    req = type(req)(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=req.topic_data,
    )
    return client.call(0, 9, req).responses[0].partition_responses[0]


@pytest.fixture
def replicated(kafka_broker_factory):
    b = kafka_broker_factory()
    b.create_topic("rep", 1)
    add_follower(b, "rep", [0, FOLLOWER])
    return b


def test_acks_all_with_isr_leader_only_completes_at_once(kafka_bootstrap, kafka_topic):
    c = RawClient.to(kafka_bootstrap)
    t = time.monotonic()
    r = produce_acks_all(c, kafka_topic)
    assert r.error_code == ErrorCode.none and time.monotonic() - t < 2
    c.close()


def test_acks_all_waits_for_isr_until_the_follower_fetches_past_the_offset(replicated):
    producer = RawClient.to(replicated.bootstrap_servers)
    follower = RawClient.to(replicated.bootstrap_servers).sign_in_as_broker(
        replicated.kafka, FOLLOWER
    )
    out = {}
    th = threading.Thread(target=lambda: out.update(r=produce_acks_all(producer, "rep", 3)))
    th.start()
    time.sleep(0.5)
    assert th.is_alive(), "acks=all answered before the follower had the records"
    follower.call(1, 12, follower_fetch("rep", 0))  # follower reads the 3 records (LEO still 0)
    time.sleep(0.2)
    assert th.is_alive()
    follower.call(1, 12, follower_fetch("rep", 3))  # now it has them: HW -> 3
    th.join(5)
    assert not th.is_alive()
    assert out["r"].error_code == ErrorCode.none and out["r"].base_offset == 0
    producer.close()
    follower.close()


def test_a_parked_acks_all_produce_holds_no_records(replicated):
    """A Produce waiting for its followers keeps what its response needs, not its records.

    At RF=3 acks=all dozens of requests park at once; a record view kept the whole
    request frame alive, so the leader's memory grew instead of being reused.
    """
    from kafkalite.protocol.produce import ProduceRequest

    producer = RawClient.to(replicated.bootstrap_servers)
    follower = RawClient.to(replicated.bootstrap_servers).sign_in_as_broker(
        replicated.kafka, FOLLOWER
    )
    out = {}
    th = threading.Thread(target=lambda: out.update(r=produce_acks_all(producer, "rep", 3)))
    th.start()
    purgatory = replicated.kafka.replica_manager.produce_purgatory
    parked: list = []
    for _ in range(200):
        parked = [
            op
            for w in list(purgatory._watchers.values())
            for op in list(w.ops)
            if not op.is_completed
        ]
        if parked:
            break
        time.sleep(0.05)
    assert len(parked) == 1, "the acks=all Produce did not park"
    cells = [c.cell_contents for c in parked[0].respond.__closure__ or ()]
    reqs = [c for c in cells if isinstance(c, ProduceRequest)]
    assert reqs, "the parked response no longer builds from the request"
    parts = [pd for r in reqs for td in r.topic_data for pd in td.partition_data]
    assert parts and all(pd.records is None for pd in parts)
    assert len(replicated.records("rep")) == 3  # appended before it parked
    follower.call(1, 12, follower_fetch("rep", 3))  # the follower has them: HW -> 3
    th.join(5)
    assert not th.is_alive()
    assert out["r"].error_code == ErrorCode.none and out["r"].base_offset == 0
    producer.close()
    follower.close()


def test_acks_all_times_out_when_the_follower_never_fetches_and_records_stay(replicated):
    c = RawClient.to(replicated.bootstrap_servers)
    t = time.monotonic()
    r = produce_acks_all(c, "rep", 2, timeout_ms=400)
    assert r.error_code == ErrorCode.request_timed_out
    assert time.monotonic() - t >= 0.35
    assert r.base_offset == 0  # the append happened
    assert len(replicated.records("rep")) == 2
    c.close()


def test_acks_1_is_answered_without_waiting_for_followers(replicated):
    c = RawClient.to(replicated.bootstrap_servers)
    r = c.call(0, 9, produce("rep", batch(2), acks=1)).responses[0].partition_responses[0]
    assert r.error_code == ErrorCode.none
    c.close()


def test_leadership_lost_while_waiting_gives_not_leader(replicated):
    c = RawClient.to(replicated.bootstrap_servers)
    out = {}
    th = threading.Thread(target=lambda: out.update(r=produce_acks_all(c, "rep", 1)))
    th.start()
    time.sleep(0.4)
    add_follower(replicated, "rep", [0, FOLLOWER], epoch=2, leader=FOLLOWER)  # broker 99 now leads
    th.join(5)
    assert out["r"].error_code == ErrorCode.not_leader_or_follower
    c.close()


def test_min_insync_replicas_rejects_acks_all_before_append(kafka_broker_factory):
    b = kafka_broker_factory()
    b.create_topic("misr", 1, config={"min.insync.replicas": "2"})
    c = RawClient.to(b.bootstrap_servers)
    assert produce_acks_all(c, "misr").error_code == ErrorCode.not_enough_replicas
    assert b.records("misr") == []
    r = c.call(0, 9, produce("misr", batch(2), acks=1)).responses[0].partition_responses[0]
    assert r.error_code == ErrorCode.none
    c.close()


def test_isr_below_min_insync_after_append_gives_not_enough_replicas_after_append(
    kafka_broker_factory,
):
    b = kafka_broker_factory()
    b.create_topic("misr2", 1, config={"min.insync.replicas": "2"})
    add_follower(b, "misr2", [0, FOLLOWER])
    producer = RawClient.to(b.bootstrap_servers)
    follower = RawClient.to(b.bootstrap_servers).sign_in_as_broker(b.kafka, FOLLOWER)
    out = {}
    th = threading.Thread(target=lambda: out.update(r=produce_acks_all(producer, "misr2", 2)))
    th.start()
    time.sleep(0.3)
    add_follower(b, "misr2", [0], epoch=1)  # ISR shrinks to the leader (same epoch)
    follower.call(1, 12, follower_fetch("misr2", 2))
    th.join(5)
    assert out["r"].error_code in (ErrorCode.none, ErrorCode.not_enough_replicas_after_append)
    # with the ISR at [0] the HW equals the LEO at once: the wait ends with too few replicas
    assert out["r"].error_code == ErrorCode.not_enough_replicas_after_append
    producer.close()
    follower.close()


def test_delete_records_waits_for_the_followers_log_start_offset(replicated):
    from kio.schema.delete_records.v2.request import (
        DeleteRecordsPartition,
        DeleteRecordsRequest,
        DeleteRecordsTopic,
    )

    c = RawClient.to(replicated.bootstrap_servers)
    follower = RawClient.to(replicated.bootstrap_servers).sign_in_as_broker(
        replicated.kafka, FOLLOWER
    )
    c.call(0, 9, produce("rep", batch(5), acks=1))
    follower.call(1, 12, follower_fetch("rep", 5))  # HW -> 5
    out = {}
    req = DeleteRecordsRequest(
        topics=(
            DeleteRecordsTopic(
                name="rep", partitions=(DeleteRecordsPartition(partition_index=0, offset=3),)
            ),
        ),
        timeout=datetime.timedelta(seconds=10),
    )
    th = threading.Thread(target=lambda: out.update(r=c.call(21, 2, req)))
    th.start()
    time.sleep(0.4)
    assert th.is_alive(), "answered before the follower's log start offset moved"
    follower.call(1, 12, follower_fetch("rep", 5, log_start_offset=3))
    th.join(5)
    p = out["r"].topics[0].partitions[0]
    assert p.error_code == ErrorCode.none and p.low_watermark == 3
    c.close()
    follower.close()


def _corrupt(records: bytes) -> bytes:
    """A batch whose CRC no longer matches (the last value byte flipped)."""
    return records[:-1] + bytes([records[-1] ^ 0xFF])


def test_acks_all_partial_failure_keeps_each_local_error_and_waits_for_the_rest(
    kafka_broker_factory,
):
    b = kafka_broker_factory()
    b.create_topic("partial", 2)
    set_replicas(b, "partial", 0, isr=[0, FOLLOWER], replicas=[0, FOLLOWER])
    producer = RawClient.to(b.bootstrap_servers)
    follower = RawClient.to(b.bootstrap_servers).sign_in_as_broker(b.kafka, FOLLOWER)
    req = wire_produce(
        [("partial", 0, batch(3)), ("partial", 1, _corrupt(batch(2))), ("partial", 7, batch(1))],
        acks=-1,
    )
    op = InFlight(lambda: producer.call(0, 9, req))
    time.sleep(0.5)
    assert op.pending, "the failed partitions made the response immediate"
    follower.call(1, 12, follower_fetch("partial", 3))  # HW -> 3 on partition 0
    r = op.wait()
    errors = {p.index: p.error_code for p in r.responses[0].partition_responses}
    assert errors == {
        0: ErrorCode.none,
        1: ErrorCode.corrupt_message,
        7: ErrorCode.unknown_topic_or_partition,
    }
    assert b.records("partial", 1) == []  # nothing of the corrupt batch was appended
    producer.close()
    follower.close()


def test_acks_all_is_answered_at_once_when_every_partition_fails_locally(kafka_broker_factory):
    b = kafka_broker_factory()
    b.create_topic("allfail", 2)
    set_replicas(b, "allfail", 0, isr=[0, FOLLOWER], replicas=[0, FOLLOWER])
    c = RawClient.to(b.bootstrap_servers)
    req = wire_produce(
        [("allfail", 0, _corrupt(batch(3))), ("allfail", 5, batch(1))], acks=-1, timeout_ms=10_000
    )
    t = time.monotonic()
    r = c.call(0, 9, req)
    assert time.monotonic() - t < 3, "waited although nothing was appended"
    errors = {p.index: p.error_code for p in r.responses[0].partition_responses}
    assert errors == {0: ErrorCode.corrupt_message, 5: ErrorCode.unknown_topic_or_partition}
    c.close()


def test_delete_records_waiting_for_followers_gets_not_leader_when_leadership_moves(replicated):
    from kio.schema.delete_records.v2.request import (
        DeleteRecordsPartition,
        DeleteRecordsRequest,
        DeleteRecordsTopic,
    )

    c = RawClient.to(replicated.bootstrap_servers)
    follower = RawClient.to(replicated.bootstrap_servers).sign_in_as_broker(
        replicated.kafka, FOLLOWER
    )
    c.call(0, 9, produce("rep", batch(5), acks=1))
    follower.call(1, 12, follower_fetch("rep", 5))  # HW -> 5, follower's log start 0
    req = DeleteRecordsRequest(
        topics=(
            DeleteRecordsTopic(
                name="rep", partitions=(DeleteRecordsPartition(partition_index=0, offset=3),)
            ),
        ),
        timeout=datetime.timedelta(seconds=10),
    )
    op = InFlight(lambda: c.call(21, 2, req))
    time.sleep(0.4)
    assert op.pending, "answered before the follower's log start offset moved"
    add_follower(replicated, "rep", [0, FOLLOWER], epoch=2, leader=FOLLOWER)
    p = op.wait().topics[0].partitions[0]
    assert p.error_code == ErrorCode.not_leader_or_follower
    assert op.took < 5
    c.close()
    follower.close()
