"""The in-process cluster: election, placement, failures and leader moves, seen by stock clients."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kafkalite.protocol import messages
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.testing.in_process_cluster import AsyncCluster, cluster


def _client_view(bootstrap: str) -> tuple[int, set[int]]:
    """(controller id, broker ids) as librdkafka's Metadata shows them."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return int(md.controller_id), set(md.brokers)


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int | None = None) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 1})
    for v in values:
        if partition is None:
            p.produce(topic, v, key=v)
        else:
            p.produce(topic, v, partition=partition)
    assert p.flush(20) == 0


def _consume(bootstrap: str, topic: str, partitions: list[int], n: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "cl", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        got: list[bytes] = []
        while len(got) < n:
            m = c.poll(10)
            assert m is not None, f"got {len(got)} of {n}"
            assert m.error() is None, m.error()
            got.append(m.value())
        return got
    finally:
        c.close()


def _leader_becomes(c, topic: str, partition: int, expected: int, timeout_s: float = 15.0) -> int:
    """The partition's leader once it is ``expected``, or what it still is at the deadline.

    A broker's start (or death) reaches the others in two steps, as in Kafka: the
    controller first announces the live brokers, then elects leaders for the
    partitions it brought online; ``wait_until_ready`` only waits for the first.
    """
    deadline = time.monotonic() + timeout_s
    while (leader := c.leader_of(topic, partition)) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return leader


def test_three_brokers_elect_one_controller_that_metadata_reports(kafka_cluster):
    ctrl = kafka_cluster.controller_id
    assert ctrl in (0, 1, 2)
    actives = [i for i in range(3) if kafka_cluster.kafka(i).controller.is_active]
    assert actives == [ctrl]
    assert _client_view(kafka_cluster.bootstrap_servers) == (ctrl, {0, 1, 2})


def test_rf1_partitions_spread_over_brokers_and_clients_use_them_through_bootstrap(
    kafka_cluster,
):
    kafka_cluster.create_topic("spread", partitions=6)
    leaders = [kafka_cluster.leader_of("spread", p) for p in range(6)]
    assert sorted(leaders) == [0, 0, 1, 1, 2, 2]
    values = [f"v{i}".encode() for i in range(60)]
    _produce(kafka_cluster.bootstrap_servers, "spread", values)
    for b in range(3):  # every broker holds the partitions it leads, and only those
        held = {
            tp[1] for tp in kafka_cluster.kafka(b).replica_manager.partitions if tp[0] == "spread"
        }
        assert held == {p for p, leader in enumerate(leaders) if leader == b}
    got = _consume(kafka_cluster.bootstrap_servers, "spread", list(range(6)), len(values))
    assert sorted(got) == sorted(values)


def test_crashing_the_controller_elects_another_that_clients_see(kafka_cluster):
    old = kafka_cluster.controller_id
    kafka_cluster.crash(old)
    new = kafka_cluster.wait_for_controller(not_=old)
    assert new != old and new in kafka_cluster.live_ids
    survivors = ",".join(kafka_cluster.bootstrap_of(i) for i in kafka_cluster.live_ids)
    assert _client_view(survivors) == (new, set(kafka_cluster.live_ids))


def test_a_crashed_broker_restarts_with_its_records_and_takes_its_partitions_back():
    with cluster(3) as c:
        c.create_topic("durable", assignments={0: [1], 1: [2]})
        values = [f"d{i}".encode() for i in range(50)]
        _produce(c.bootstrap_servers, "durable", values, partition=0)
        c.crash(1)
        c.wait_for_controller()
        assert _leader_becomes(c, "durable", 0, -1) == -1  # RF=1: offline until 1 is back
        assert c.leader_of("durable", 1) == 2
        c.restart(1)
        assert _leader_becomes(c, "durable", 0, 1) == 1
        assert [r.value for r in c.records("durable", 0)] == values  # recovered, not lost
        _produce(c.bootstrap_servers, "durable", [b"after"], partition=0)
        assert _consume(c.bootstrap_servers, "durable", [0], 51) == [*values, b"after"]


def test_leader_of_matches_what_clients_see_after_the_controller_crashes(kafka_cluster):
    kafka_cluster.create_topic("ctrl-led", partitions=6)
    ctrl = kafka_cluster.controller_id
    p = next(p for p in range(6) if kafka_cluster.leader_of("ctrl-led", p) == ctrl)
    kafka_cluster.crash(ctrl)
    kafka_cluster.wait_for_controller(not_=ctrl)
    assert kafka_cluster.leader_of("ctrl-led", p) == -1
    survivors = ",".join(kafka_cluster.bootstrap_of(i) for i in kafka_cluster.live_ids)
    md = AdminClient({"bootstrap.servers": survivors}).list_topics("ctrl-led", timeout=10)
    assert md.topics["ctrl-led"].partitions[p].leader == -1


def test_a_broker_a_partition_moved_away_from_answers_not_leader_and_the_new_leader_like_kafka(
    kafka_cluster,
):
    """Kafka's ReplicaManager.getPartitionOrError: a partition the metadata has but this
    broker no longer hosts is NOT_LEADER_OR_FOLLOWER (clients refresh metadata and
    follow it); kafkalite answered UNKNOWN_TOPIC_OR_PARTITION, which clients such as
    @platformatic/kafka's stream retry at the same broker. Unknown partitions stay
    UNKNOWN_TOPIC_OR_PARTITION. From Fetch v16 the answer also names the new leader and
    its endpoint (KIP-951), as KafkaApis does."""
    from kafkalite.protocol.errors import ErrorCode
    from tests.server.raw_client import RawClient

    kafka_cluster.create_topic("moved-away", assignments={0: [0]})
    kafka_cluster.move_leader("moved-away", 0, 2)
    old = RawClient.to(kafka_cluster.bootstrap_of(0))
    try:

        def list_offsets(partition: int) -> int:
            part = {"partition_index": partition, "timestamp": -1, "current_leader_epoch": -1}
            req = messages.build(
                messages.request_type(ApiKey.LIST_OFFSETS, 7),
                {"replica_id": -1, "topics": [{"name": "moved-away", "partitions": [part]}]},
            )
            return int(old.call(ApiKey.LIST_OFFSETS, 7, req).topics[0].partitions[0].error_code)

        assert list_offsets(0) == ErrorCode.not_leader_or_follower
        assert list_offsets(5) == ErrorCode.unknown_topic_or_partition

        # KIP-951: from Fetch v16 the answer names the new leader and its endpoint
        leader = kafka_cluster.kafka(2).metadata_cache.get_topic("moved-away").partitions[0]
        topic_id = kafka_cluster.kafka(0).metadata_cache.get_topic("moved-away").topic_id
        part = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
        part |= {"current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}
        fetch = {"max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "session_epoch": -1}
        fetch["topics"] = [{"topic_id": topic_id, "partitions": [part]}]
        fetch["replica_state"] = {"replica_id": -1, "replica_epoch": -1}
        for v, hinted in ((15, False), (16, True)):
            r = old.call(
                ApiKey.FETCH, v, messages.build(messages.request_type(ApiKey.FETCH, v), fetch)
            )
            [p] = r.responses[0].partitions
            assert p.error_code == ErrorCode.not_leader_or_follower
            cur = (p.current_leader.leader_id, p.current_leader.leader_epoch)
            assert cur == ((2, leader.leader_epoch) if hinted else (-1, -1))
        host, port = kafka_cluster.bootstrap_of(2).rsplit(":", 1)
        assert [(n.node_id, n.host, n.port) for n in r.node_endpoints] == [(2, host, int(port))]

        # KIP-951 for Produce: from v10 the same hint and endpoint (v13 by topic id)
        from kafkalite.protocol.records import build_batch

        batch = build_batch([(None, b"to-the-old-leader")])
        for v, hinted in ((9, False), (10, True), (12, True), (13, True)):
            td: dict[str, object] = {"partition_data": [{"index": 0, "records": batch}]}
            td |= {"topic_id": topic_id} if v >= 13 else {"name": "moved-away"}
            produce = {"transactional_id": None, "acks": 1, "timeout": 5000, "topic_data": [td]}
            r = old.call(
                ApiKey.PRODUCE, v, messages.build(messages.request_type(ApiKey.PRODUCE, v), produce)
            )
            [p] = r.responses[0].partition_responses
            assert p.error_code == ErrorCode.not_leader_or_follower
            if not hinted:
                continue
            cur = (p.current_leader.leader_id, p.current_leader.leader_epoch)
            assert cur == (2, leader.leader_epoch), v
            assert [(n.node_id, n.host, n.port) for n in r.node_endpoints] == [(2, host, int(port))]
    finally:
        old.close()


def test_move_leader_takes_an_rf1_partition_and_its_records_to_another_broker(kafka_cluster):
    kafka_cluster.create_topic("moving", assignments={0: [0]})
    bootstrap = kafka_cluster.bootstrap_servers
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 1})
    before = [f"m{i}".encode() for i in range(50)]
    for v in before:
        p.produce("moving", v, partition=0)
    assert p.flush(10) == 0
    epoch = kafka_cluster.move_leader("moving", 0, 2)
    assert kafka_cluster.leader_of("moving", 0) == 2
    assert kafka_cluster.kafka(2).metadata_cache.get_topic("moving").partitions[0].replicas == [2]
    assert kafka_cluster.kafka(0).log_manager.get_log("moving", 0) is None
    assert epoch >= 1
    after = [f"n{i}".encode() for i in range(50)]
    for v in after:  # the same producer: NOT_LEADER / unknown partition, metadata refresh, retry
        p.produce("moving", v, partition=0)
    assert p.flush(20) == 0
    assert [r.value for r in kafka_cluster.records("moving", 0)] == before + after
    assert _consume(bootstrap, "moving", [0], 100) == before + after


# ---- pause and resume (on the test's loop) -------------------------------------------


async def _metadata_over_tcp(port: int, timeout: float) -> bool:
    """True if broker answers a Metadata request within ``timeout`` seconds."""
    body = messages.encode(
        messages.build(messages.request_type(ApiKey.METADATA, 1), {"topics": []})
    )
    header = b"\x00\x03\x00\x01\x00\x00\x00\x07\x00\x02pz"
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        payload = header + body
        writer.write(len(payload).to_bytes(4, "big") + payload)
        await writer.drain()
        try:
            await asyncio.wait_for(reader.readexactly(8), timeout)
            return True
        except TimeoutError:
            return False
    finally:
        writer.close()


async def test_a_paused_broker_answers_nothing_until_resumed():
    async with AsyncCluster(3) as c:
        port = c.node(2).port
        await c.pause(2)
        assert not await _metadata_over_tcp(port, 0.3)
        task = asyncio.ensure_future(_metadata_over_tcp(port, 5))
        await asyncio.sleep(0.1)
        assert not task.done()
        await c.resume(2)
        assert await task
        await c.wait_until_ready()


async def test_a_controller_paused_past_its_session_is_replaced_and_rejoins_on_resume():
    async with AsyncCluster(3, **{"zookeeper.session.timeout.ms": 300}) as c:
        old = c.controller_id
        await c.pause(old)
        new = await c.wait_for_controller(not_=old)
        assert new != old
        others = [i for i in c.live_ids if i != old]
        assert all(set(c.kafka(i).metadata_cache.brokers) == set(others) for i in others)
        await c.resume(old)  # a new session: it registers again and follows the new controller
        await c.wait_until_ready()
        assert c.controller_id == new
        assert not c.kafka(old).controller.is_active
        assert all(set(c.kafka(i).metadata_cache.brokers) == {0, 1, 2} for i in c.live_ids)


async def test_pause_and_crash_refuse_brokers_that_are_not_running():
    async with AsyncCluster(2) as c:
        await c.crash(1)
        with pytest.raises(ValueError):
            await c.pause(1)
        with pytest.raises(ValueError):
            await c.crash(1)
        with pytest.raises(ValueError):
            await c.resume(0)


async def test_a_moved_partition_keeps_its_topic_config_on_both_brokers():
    async with AsyncCluster(3) as c:
        await c.create_topic("cfg", config={"retention.ms": "12345"}, assignments={0: [0], 1: [0]})
        await c.move_leader("cfg", 0, 1)
        assert c.kafka(1).log_manager.get_log("cfg", 0).config.retention_ms == 12345
        assert c.kafka(0).log_manager.get_log("cfg", 0) is None
        assert c.kafka(0).admin.log_config("cfg").retention_ms == 12345  # partition 1 stays
        with pytest.raises(ValueError):
            await c.move_leader("cfg", 0, 7)


async def test_move_leader_within_the_replicas_is_a_reorder_and_a_preferred_election():
    async with AsyncCluster(3) as c:
        await c.create_topic("pref", assignments={0: [0, 1]})
        ctrl = c.kafka(c.controller_id).controller
        before = ctrl.ctx.partition_leadership_info[("pref", 0)].leader_and_isr.leader_epoch
        epoch = await c.move_leader("pref", 0, 1)
        assert c.leader_of("pref", 0) == 1 and epoch > before
        # the reassignment made broker 1 the preferred replica, the election made it lead
        assert ctrl.ctx.partition_replica_assignment(("pref", 0)) == [1, 0]
        for i in c.live_ids:
            assert c.kafka(i).metadata_cache.get_topic("pref").partitions[0].replicas == [1, 0]
        assert ctrl.preferred_replica_imbalance_count() == 0
        with pytest.raises(ValueError):  # not a replica and not alive
            await c.move_leader("pref", 0, 7)


async def test_moving_an_rf2_partition_to_a_new_broker_reassigns_it_without_the_old_leader():
    async with AsyncCluster(3) as c:
        await c.create_topic("rf2", assignments={0: [0, 1]})
        await c.move_leader("rf2", 0, 2)
        assert c.leader_of("rf2", 0) == 2
        ctrl = c.kafka(c.controller_id).controller
        assert ctrl.ctx.partition_replica_assignment(("rf2", 0)) == [2, 1]
        assert not ctrl.ctx.partitions_being_reassigned
        assert c.kafka(0).log_manager.get_log("rf2", 0) is None  # phase B deleted it


def test_an_idempotent_producer_writing_through_a_leader_move_loses_and_repeats_nothing(
    kafka_cluster,
):
    kafka_cluster.create_topic("busy", assignments={0: [0]})
    errors: list[str] = []
    p = Producer(
        {
            "bootstrap.servers": kafka_cluster.bootstrap_servers,
            "enable.idempotence": True,
            "linger.ms": 1,
            "retry.backoff.ms": 10,
        }
    )
    stop = threading.Event()
    sent: list[bytes] = []

    def produce() -> None:
        while not stop.is_set():
            v = f"b{len(sent):06d}".encode()
            p.produce("busy", v, partition=0, on_delivery=lambda e, _m: e and errors.append(str(e)))
            sent.append(v)
            p.poll(0)
            time.sleep(0.0005)
        assert p.flush(30) == 0

    t = threading.Thread(target=produce)
    t.start()
    try:
        deadline = time.monotonic() + 20
        while len(kafka_cluster.records("busy", 0)) < 200:  # the producer is in full flow
            assert time.monotonic() < deadline
            time.sleep(0.01)
        kafka_cluster.move_leader("busy", 0, 1)
        moved = len(sent)
        while len(sent) < moved + 200:  # and goes on producing to the new leader
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        stop.set()
        t.join(60)
    assert not t.is_alive() and errors == []
    assert kafka_cluster.leader_of("busy", 0) == 1
    assert [r.value for r in kafka_cluster.records("busy", 0)] == sent
