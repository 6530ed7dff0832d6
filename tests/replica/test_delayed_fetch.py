"""DelayedFetch completion rules on the wire (seed 000 §3, behaviours 17-20).

Every test parks a real Fetch (max wait 10 s) and then changes the partition
under it; "at once" means well under that max wait. Followers are played with
raw Fetch requests carrying a replica_id (see ``wire.py``).
"""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka.admin import AdminClient

from kafkalite.protocol.errors import ErrorCode
from tests.replica.wire import (
    FETCH_V,
    FOLLOWER,
    PRODUCE_V,
    InFlight,
    batch,
    fail_log_dir,
    fetch,
    log_dir_of,
    produce,
    set_replicas,
    wait_until,
)
from tests.server.raw_client import RawClient

MAX_WAIT_MS = 10_000
AT_ONCE_S = 5.0  # "at once": well under the 10 s max wait


def parked(bootstrap: str, req, broker=None) -> InFlight:
    """``req`` sent and parked; ``broker`` (a fixture): sent on a connection signed in as
    a broker (a follower fetch)."""
    c = RawClient.to(bootstrap)
    if broker is not None:
        c.sign_in_as_broker(broker.kafka, FOLLOWER)
    op = InFlight(lambda: c.call(1, FETCH_V, req))
    time.sleep(0.4)
    assert op.pending, "the fetch was answered instead of parking"
    return op


def num_parked(b) -> int:
    return b.call(lambda: b.kafka.replica_manager.fetch_purgatory.num_delayed)


def only_partition(resp):
    [t] = resp.responses
    [p] = t.partitions
    return p


@pytest.fixture
def broker(kafka_broker_factory):
    return kafka_broker_factory()


def test_lost_leadership_completes_a_parked_consumer_fetch_at_once(broker):
    """A v11+ consumer may read from followers (KIP-392), so losing leadership alone does
    not end its fetch; the leader epoch it fetched with does: FENCED_LEADER_EPOCH at once."""
    broker.create_topic("lead", 1)
    set_replicas(broker, "lead", isr=[0, FOLLOWER], replicas=[0, FOLLOWER])
    op = parked(
        broker.bootstrap_servers,
        fetch([("lead", 0, 0)], wait_ms=MAX_WAIT_MS, current_leader_epoch=1),
    )
    set_replicas(
        broker, "lead", leader=FOLLOWER, isr=[0, FOLLOWER], replicas=[0, FOLLOWER], epoch=2
    )
    p = only_partition(op.wait())
    assert p.error_code == ErrorCode.fenced_leader_epoch
    assert op.took < AT_ONCE_S


def test_lost_leadership_completes_a_parked_follower_fetch_at_once(broker):
    """Kafka fetches from the leader only, followers included: a follower parked on a
    broker that stops leading must go to the new leader instead of waiting."""
    broker.create_topic("flead", 1)
    set_replicas(broker, "flead", isr=[0, FOLLOWER, 98], replicas=[0, FOLLOWER, 98])
    # the follower fetches at its LEO (0): nothing to send, it parks
    op = parked(
        broker.bootstrap_servers,
        fetch([("flead", 0, 0)], replica_id=FOLLOWER, wait_ms=MAX_WAIT_MS),
        broker,
    )
    set_replicas(
        broker, "flead", leader=98, isr=[0, FOLLOWER, 98], replicas=[0, FOLLOWER, 98], epoch=2
    )
    p = only_partition(op.wait())
    assert p.error_code == ErrorCode.not_leader_or_follower
    assert op.took < AT_ONCE_S
    # and a follower fetch to a broker that is not the leader is refused, not served
    c = RawClient.to(broker.bootstrap_servers).sign_in_as_broker(broker.kafka, FOLLOWER)
    r = c.call(1, FETCH_V, fetch([("flead", 0, 0)], replica_id=FOLLOWER, wait_ms=0))
    assert only_partition(r).error_code == ErrorCode.not_leader_or_follower
    c.close()


def test_deleting_the_topic_completes_a_parked_fetch_at_once_with_unknown_partition(broker):
    broker.create_topic("doomed", 1)
    op = parked(broker.bootstrap_servers, fetch([("doomed", 0, 0)], wait_ms=MAX_WAIT_MS))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.delete_topics(["doomed"])["doomed"].result(10)
    p = only_partition(op.wait())
    assert p.error_code == ErrorCode.unknown_topic_or_partition
    assert op.took < AT_ONCE_S


def test_truncation_below_a_parked_fetch_completes_it_at_once_out_of_range(broker):
    broker.create_topic("trunc", 1)
    c = RawClient.to(broker.bootstrap_servers)
    assert c.call(0, PRODUCE_V, produce([("trunc", 0, batch(5))])).responses[0]
    op = parked(broker.bootstrap_servers, fetch([("trunc", 0, 5)], wait_ms=MAX_WAIT_MS))
    rm = broker.kafka.replica_manager
    # the follower's truncation step (what OffsetForLeaderEpoch leads to)
    assert broker.call(rm.truncate_to, ("trunc", 0), 2)
    p = only_partition(op.wait())
    assert p.error_code == ErrorCode.offset_out_of_range
    assert op.took < AT_ONCE_S
    c.close()


def test_log_dir_failure_completes_a_parked_fetch_at_once_with_storage_error(
    kafka_broker_factory, tmp_path
):
    b = kafka_broker_factory(
        tmp_path,
        **{
            "log.dirs": f"{tmp_path}/d0,{tmp_path}/d1",
            "log.flush.offset.checkpoint.interval.ms": 100,
        },
    )
    b.create_topic("disk", 2)
    failing = log_dir_of(b, "disk", 1)
    assert log_dir_of(b, "disk", 0) != failing
    op = parked(b.bootstrap_servers, fetch([("disk", 1, 0)], wait_ms=MAX_WAIT_MS))
    fail_log_dir(failing)  # found by the log manager's next checkpoint of that dir
    p = only_partition(op.wait())
    assert p.error_code == ErrorCode.kafka_storage_error
    assert op.took < AT_ONCE_S
    # the other dir's partition is untouched
    c = RawClient.to(b.bootstrap_servers)
    r = c.call(0, PRODUCE_V, produce([("disk", 0, batch(2))]))
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.none
    r = c.call(1, FETCH_V, fetch([("disk", 0, 0)], wait_ms=0))
    assert only_partition(r).error_code == ErrorCode.none and only_partition(r).records
    c.close()


def test_follower_fetch_is_woken_by_the_leader_append_before_the_hw_moves(broker):
    broker.create_topic("fwake", 1)
    set_replicas(broker, "fwake", isr=[0, FOLLOWER], replicas=[0, FOLLOWER])
    op = parked(
        broker.bootstrap_servers,
        fetch([("fwake", 0, 0)], replica_id=FOLLOWER, wait_ms=MAX_WAIT_MS),
        broker,
    )
    c = RawClient.to(broker.bootstrap_servers)
    r = c.call(0, PRODUCE_V, produce([("fwake", 0, batch(3))], acks=1))
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.none
    p = only_partition(op.wait())
    assert op.took < AT_ONCE_S
    assert p.error_code == ErrorCode.none and p.records
    assert p.high_watermark == 0  # the follower has not fetched past offset 0 yet
    c.close()


def test_consumer_fetch_waits_for_the_hw_not_the_append(broker):
    broker.create_topic("cwake", 1)
    set_replicas(broker, "cwake", isr=[0, FOLLOWER], replicas=[0, FOLLOWER])
    op = parked(broker.bootstrap_servers, fetch([("cwake", 0, 0)], wait_ms=MAX_WAIT_MS))
    c = RawClient.to(broker.bootstrap_servers)
    follower = RawClient.to(broker.bootstrap_servers).sign_in_as_broker(broker.kafka, FOLLOWER)
    c.call(0, PRODUCE_V, produce([("cwake", 0, batch(3))], acks=1))
    time.sleep(0.5)
    assert op.pending, "a consumer fetch woke although the high watermark did not move"
    assert num_parked(broker) == 1
    # the follower now has offsets 0-2: HW -> 3, which wakes the consumer
    follower.call(1, FETCH_V, fetch([("cwake", 0, 3)], replica_id=FOLLOWER, wait_ms=0))
    p = only_partition(op.wait())
    assert op.took < AT_ONCE_S + 0.5
    assert p.error_code == ErrorCode.none and p.high_watermark == 3 and p.records
    c.close()
    follower.close()


def test_min_bytes_accumulate_across_partitions(broker):
    broker.create_topic("acc", 2)
    one = batch(1, value_size=600)  # ~650 bytes per partition, min_bytes 1000
    op = parked(
        broker.bootstrap_servers,
        fetch([("acc", 0, 0), ("acc", 1, 0)], wait_ms=MAX_WAIT_MS, min_bytes=1000),
    )
    c = RawClient.to(broker.bootstrap_servers)
    c.call(0, PRODUCE_V, produce([("acc", 0, one)]))
    time.sleep(0.5)
    assert op.pending, "answered with fewer than min_bytes available"
    c.call(0, PRODUCE_V, produce([("acc", 1, one)]))
    r = op.wait()
    assert op.took < AT_ONCE_S + 0.5
    sizes = {p.partition_index: len(p.records) for t in r.responses for p in t.partitions}
    assert sizes[0] > 0 and sizes[1] > 0 and sizes[0] + sizes[1] >= 1000
    assert max(sizes.values()) < 1000  # neither partition alone would have been enough
    c.close()


def test_a_parked_fetch_expires_empty_and_leaves_the_purgatory(broker):
    broker.create_topic("idle", 1)
    c = RawClient.to(broker.bootstrap_servers)
    t = time.monotonic()
    r = c.call(1, FETCH_V, fetch([("idle", 0, 0)], wait_ms=300))
    assert time.monotonic() - t >= 0.25
    p = only_partition(r)
    assert p.error_code == ErrorCode.none and not p.records
    wait_until(lambda: num_parked(broker) == 0, what="the expired fetch to leave the timer")
    c.close()


def test_fetches_woken_by_an_append_complete_after_the_append_returns(broker):
    """The produce handler's response goes out before the parked fetches it wakes are
    completed (their completion runs two loop iterations later), so the producer
    never waits for thousands of fetch responses."""
    from kafkalite.replica.replica_manager import FetchParams, PartitionFetchInfo

    broker.create_topic("defer", 1)
    rm = broker.kafka.replica_manager

    async def scenario() -> tuple[bool, bool, bool, int]:
        params = FetchParams(-1, 10_000, 1, 1 << 20, 0)
        fut = rm.fetch_messages(params, [(("defer", 0), PartitionFetchInfo(0, 1 << 20))])
        results = rm.append_records(1000, 1, {("defer", 0): bytearray(batch(2))})
        done_at_return = fut.done()
        await asyncio.sleep(0)
        done_after_one = fut.done()
        await asyncio.sleep(0)
        [(_, r)] = fut.result()
        return done_at_return, done_after_one, results[("defer", 0)].error == 0, r.size

    done_at_return, done_after_one, appended, size = broker.call(scenario)
    assert appended and not done_at_return and not done_after_one
    assert size > 0  # completed with the appended records
