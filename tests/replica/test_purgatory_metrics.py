"""Purgatory metrics (Kafka's DelayedOperationPurgatory beans) and purge-interval configs."""

from __future__ import annotations

import time

import pytest

from kafkalite.server.metrics import NUM_DELAYED_OPERATIONS, PURGATORY_SIZE
from tests.replica.wire import FETCH_V, PRODUCE_V, InFlight, batch, fetch, produce, wait_until
from tests.server.raw_client import RawClient


def gauge(b, name: str, op: str) -> float | None:
    return b.call(lambda: b.kafka.metrics.value(name, delayedOperation=op))


def park(b, parts) -> InFlight:
    c = RawClient.to(b.bootstrap_servers)
    op = InFlight(lambda: c.call(1, FETCH_V, fetch(parts, wait_ms=10_000)))
    return op


def test_parked_fetches_show_in_the_purgatory_gauges_and_leave_them_on_completion(
    kafka_broker_factory,
):
    b = kafka_broker_factory()
    b.create_topic("gauges", 1)
    assert gauge(b, NUM_DELAYED_OPERATIONS, "Fetch") == 0
    ops = [park(b, [("gauges", 0, 0)]) for _ in range(3)]
    wait_until(lambda: gauge(b, NUM_DELAYED_OPERATIONS, "Fetch") == 3, what="3 parked fetches")
    assert gauge(b, PURGATORY_SIZE, "Fetch") == 3
    for other in ("Produce", "DeleteRecords", "Heartbeat", "Rebalance"):
        assert gauge(b, NUM_DELAYED_OPERATIONS, other) == 0
    text = b.call(b.kafka.metrics.render).decode()
    assert f'{NUM_DELAYED_OPERATIONS}{{delayedOperation="Fetch"}} 3.0' in text
    assert "kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize" in text

    c = RawClient.to(b.bootstrap_servers)
    c.call(0, PRODUCE_V, produce([("gauges", 0, batch(1))]))
    for op in ops:
        op.wait()
    wait_until(lambda: gauge(b, PURGATORY_SIZE, "Fetch") == 0, what="the watchers to empty")
    assert gauge(b, NUM_DELAYED_OPERATIONS, "Fetch") == 0
    c.close()


@pytest.mark.parametrize(("interval", "size_after"), [(0, 1), (None, 2)])
def test_fetch_purge_interval_decides_when_completed_fetches_leave_other_watcher_lists(
    kafka_broker_factory, interval, size_after
):
    """A fetch on two partitions completed through one stays listed under the other
    until a purge; fetch.purgatory.purge.interval.requests (Kafka default 1000) sets
    how many such operations may pile up first."""
    config = {} if interval is None else {"fetch.purgatory.purge.interval.requests": interval}
    b = kafka_broker_factory(**config)
    b.create_topic("purge", 2)
    first = park(b, [("purge", 0, 0), ("purge", 1, 0)])
    wait_until(lambda: gauge(b, NUM_DELAYED_OPERATIONS, "Fetch") == 1, what="the parked fetch")
    c = RawClient.to(b.bootstrap_servers)
    c.call(0, PRODUCE_V, produce([("purge", 0, batch(1))]))
    first.wait()
    wait_until(lambda: gauge(b, NUM_DELAYED_OPERATIONS, "Fetch") == 0, what="completion")
    assert gauge(b, PURGATORY_SIZE, "Fetch") == 1  # still listed under partition 1
    second = park(b, [("purge", 0, 1)])  # watching a new operation may trigger the purge
    wait_until(lambda: gauge(b, NUM_DELAYED_OPERATIONS, "Fetch") == 1, what="the second fetch")
    time.sleep(0.1)
    assert gauge(b, PURGATORY_SIZE, "Fetch") == size_after
    c.call(0, PRODUCE_V, produce([("purge", 0, batch(1))]))
    second.wait()
    c.close()


def test_purge_interval_configs_reach_every_purgatory(kafka_broker_factory):
    b = kafka_broker_factory(
        **{
            "fetch.purgatory.purge.interval.requests": 7,
            "producer.purgatory.purge.interval.requests": 8,
            "delete.records.purgatory.purge.interval.requests": 9,
        }
    )
    rm = b.kafka.replica_manager
    assert rm.fetch_purgatory.purge_interval == 7
    assert rm.produce_purgatory.purge_interval == 8
    assert rm.delete_records_purgatory.purge_interval == 9
    d = kafka_broker_factory().kafka.replica_manager  # Kafka's defaults
    assert (
        d.fetch_purgatory.purge_interval,
        d.produce_purgatory.purge_interval,
        d.delete_records_purgatory.purge_interval,
    ) == (1000, 1000, 1)
