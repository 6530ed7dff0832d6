"""Replication in an in-process cluster: followers fetch, the ISR moves, epochs truncate.

Brokers are real (TCP between them, the embedded metadata ensemble); clients are
stock confluent-kafka, kafka-python and aiokafka. The multi-process form over a
real ZooKeeper with kill -9 is tests/replica/test_replication_processes.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from kafkalite.cli.wire_client import WireClient
from kafkalite.protocol import messages
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.record_batch import iter_headers
from kafkalite.testing.faults import Delay
from kafkalite.testing.in_process_cluster import AsyncCluster

FAST = {
    "replica.lag.time.max.ms": 1500,
    "replica.fetch.backoff.ms": 100,
    "auto.leader.rebalance.enable": False,
}


def replica_bytes(c: AsyncCluster, broker_id: int, tp: tuple[str, int], upto: int) -> bytes:
    """The replica's batches below ``upto``, as stored (whole batches)."""
    plog = c.kafka(broker_id).replica_manager.get_partition(tp).log  # type: ignore[union-attr]
    out = bytearray()
    offset = plog.log_start_offset
    while offset < upto:
        data = plog.read(offset, 1 << 20, max_offset=upto, min_one_message=True).records
        raw = data if isinstance(data, bytes | bytearray) else data.read_bytes()
        if not raw:
            break
        out += raw
        offset = [h for _, h in iter_headers(raw)][-1].next_offset
    return bytes(out)


def state(c: AsyncCluster, broker_id: int, tp: tuple[str, int]) -> Any:
    return c.kafka(broker_id).replica_manager.get_partition(tp)


def leo(c: AsyncCluster, broker_id: int, tp: tuple[str, int]) -> int:
    p = state(c, broker_id, tp)
    return -1 if p is None or p.log is None else int(p.log.log_end_offset)


async def until(pred: Any, timeout: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not pred():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


def produce(bootstrap: str, topic: str, values: list[bytes], **conf: Any) -> list[Any]:
    """Produce and return the delivery reports (error or None per message)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, **conf})
    reports: list[Any] = []
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda e, _m: reports.append(e))
    p.flush(30)
    return reports


async def test_followers_replicate_batches_verbatim_and_the_hw_is_the_isr_minimum():
    async with AsyncCluster(3, **FAST) as c:
        await c.create_topic("r", 1, 3, {"min.insync.replicas": "2"})
        tp = ("r", 0)
        leader = c.leader_of("r", 0)
        values = [f"v{i}".encode() for i in range(500)]
        reports = await asyncio.to_thread(
            produce, c.bootstrap_servers, "r", values, acks="all", **{"enable.idempotence": True}
        )
        assert reports == [None] * 500
        await until(lambda: all(state(c, b, tp).log.high_watermark == 500 for b in range(3)))
        lp = state(c, leader, tp)
        assert sorted(lp.isr) == [0, 1, 2]
        # the leader knows every follower's log end offset; HW = min over the ISR
        assert all(rs.log_end_offset == 500 for rs in lp.remote_replicas.values())
        # followers fetch in incremental sessions (KIP-227) after one full fetch
        followers = [c.kafka(b).replica_manager.fetcher_manager for b in range(3) if b != leader]
        for fm in followers:
            [fetcher] = fm.fetchers.values()
            assert fetcher.session_id != 0 and fetcher.incremental_fetches > 0
        ref = replica_bytes(c, leader, tp, 500)
        for b in range(3):
            assert replica_bytes(c, b, tp, 500) == ref  # offsets, epochs, pids, timestamps
            assert state(c, b, tp).log.leader_epoch_cache.entries() == (
                lp.log.leader_epoch_cache.entries()
            )


async def test_isr_shrinks_after_lag_time_min_isr_refuses_then_followers_rejoin():
    """Followers whose fetches stall (held at the leader, like a SIGSTOPped process) leave
    the ISR after replica.lag.time.max.ms; with the ISR below min.insync.replicas acks=all
    is refused; released, they catch up and the leader adds them back."""
    async with AsyncCluster(3, **FAST) as c:
        await c.create_topic("m", 1, 3, {"min.insync.replicas": "2"})
        tp = ("m", 0)
        leader = c.leader_of("m", 0)
        f1, f2 = [b for b in range(3) if b != leader]
        faults = c.faults(leader)
        hold1 = faults.add("FETCH", Delay(None), client_id=f"replica-fetcher-{f1}", times=None)
        # the leader must have something f1 lacks: a caught-up idle follower stays in sync
        assert await asyncio.to_thread(produce, c.bootstrap_servers, "m", [b"a"], acks=1) == [None]
        await until(lambda: sorted(state(c, leader, tp).isr) == sorted([leader, f2]))
        assert c.kafka(leader).replica_manager.isr_shrinks >= 1
        metric = c.kafka(leader).metrics.value
        assert metric("kafka_server_replicamanager_underreplicatedpartitions") == 1
        assert metric("kafka_server_replicamanager_underminisrpartitioncount") == 0
        assert metric("kafka_server_replicamanager_leadercount") == 1
        assert metric("kafka_server_replicamanager_isrshrinkspersec_count") >= 1
        # 2 of 3 in sync: acks=all still succeeds
        ok = await asyncio.to_thread(produce, c.bootstrap_servers, "m", [b"b", b"c"], acks="all")
        assert ok == [None, None]
        hold2 = faults.add("FETCH", Delay(None), client_id=f"replica-fetcher-{f2}", times=None)
        assert await asyncio.to_thread(produce, c.bootstrap_servers, "m", [b"d"], acks=1) == [None]
        await until(lambda: state(c, leader, tp).isr == [leader])
        assert metric("kafka_server_replicamanager_underminisrpartitioncount") == 1
        refused = await asyncio.to_thread(
            produce,
            c.bootstrap_servers,
            "m",
            [b"e"],
            acks="all",
            retries=0,
            **{"message.timeout.ms": 3000},
        )
        assert refused[0] is not None and refused[0].code() == KafkaError.NOT_ENOUGH_REPLICAS
        faults.remove(hold1)
        faults.remove(hold2)
        await until(lambda: sorted(state(c, leader, tp).isr) == [0, 1, 2])
        assert c.kafka(leader).replica_manager.isr_expands >= 2
        assert metric("kafka_server_replicamanager_underreplicatedpartitions") == 0
        assert metric("kafka_server_replicamanager_isrexpandspersec_count") >= 2
        assert c.kafka(f1).metrics.value("kafka_server_replicamanager_partitioncount") == 1
        assert c.kafka(f1).metrics.value("kafka_server_replicafetchermanager_maxlag") is not None
        assert await asyncio.to_thread(produce, c.bootstrap_servers, "m", [b"f"], acks="all") == [
            None
        ]
        hw = state(c, leader, tp).log.high_watermark
        assert hw == 5
        for f in (f1, f2):
            await until(lambda f=f: state(c, f, tp).log.high_watermark == hw)
            assert replica_bytes(c, f, tp, hw) == replica_bytes(c, leader, tp, hw)


async def test_a_former_leader_truncates_its_unreplicated_suffix_by_leader_epoch():
    """KIP-101: records the old leader alone had (acks=1) are dropped when it follows again,
    although its own high watermark would have kept some of them."""
    async with AsyncCluster(2, **{**FAST, "replica.lag.time.max.ms": 60000}) as c:
        await c.create_topic("e", 1, 2, {"unclean.leader.election.enable": "true"})
        tp = ("e", 0)
        old = c.leader_of("e", 0)
        new = 1 - old
        assert await asyncio.to_thread(
            produce, c.bootstrap_servers, "e", [b"r0", b"r1"], acks="all"
        ) == [None, None]
        await until(lambda: state(c, new, tp).log.high_watermark == 2)
        # the follower stops getting data; the old leader takes 3 records alone
        hold = c.faults(old).add(
            "FETCH", Delay(None), client_id=f"replica-fetcher-{new}", times=None
        )
        await asyncio.sleep(0.7)  # the follower's fetch in flight is now held too
        assert (
            await asyncio.to_thread(
                produce, c.bootstrap_servers, "e", [b"x0", b"x1", b"x2"], acks=1
            )
            == [None] * 3
        )
        assert state(c, old, tp).log.log_end_offset == 5
        await c.crash(old)
        c.faults(old).remove(hold)
        await until(lambda: c.leader_of("e", 0) == new)
        # the new leader writes its own records at the offsets the old one used
        assert await asyncio.to_thread(
            produce, c.bootstrap_servers, "e", [b"n0", b"n1"], acks=1
        ) == [None, None]
        await c.restart(old)
        await until(lambda: leo(c, old, tp) == 4, 20)
        await until(lambda: state(c, new, tp).log.high_watermark == 4)
        values = [r.value for r in c.nodes[old].records("e", 0)]
        assert values == [b"r0", b"r1", b"n0", b"n1"]
        assert replica_bytes(c, old, tp, 4) == replica_bytes(c, new, tp, 4)


async def test_offset_for_leader_epoch_is_served_to_clients_with_epoch_fencing():
    async with AsyncCluster(2, **FAST) as c:
        await c.create_topic("o", 1, 2)
        tp = ("o", 0)
        leader = c.leader_of("o", 0)
        assert (
            await asyncio.to_thread(
                produce, c.bootstrap_servers, "o", [b"a", b"b", b"c"], acks="all"
            )
            == [None] * 3
        )
        epoch = state(c, leader, tp).leader_epoch

        def ask(broker: int, current: int, wanted: int) -> Any:
            cl = WireClient(c.bootstrap_of(broker))
            try:
                body = {
                    "replica_id": -1,
                    "topics": [
                        {
                            "topic": "o",
                            "partitions": [
                                {
                                    "partition": 0,
                                    "current_leader_epoch": current,
                                    "leader_epoch": wanted,
                                }
                            ],
                        }
                    ],
                }
                return cl.call(23, 4, body).topics[0].partitions[0]
            finally:
                cl.sock.close()

        r = await asyncio.to_thread(ask, leader, epoch, epoch)
        assert (int(r.error_code), int(r.leader_epoch), int(r.end_offset)) == (0, epoch, 3)
        r = await asyncio.to_thread(ask, leader, epoch + 1, epoch)
        assert int(r.error_code) == ErrorCode.unknown_leader_epoch
        if epoch > 0:
            r = await asyncio.to_thread(ask, leader, epoch - 1, epoch)
            assert int(r.error_code) == ErrorCode.fenced_leader_epoch
        r = await asyncio.to_thread(ask, 1 - leader, -1, epoch)
        assert int(r.error_code) == ErrorCode.not_leader_or_follower
        epoch2 = await c.move_leader("o", 0, 1 - leader)
        r = await asyncio.to_thread(ask, 1 - leader, epoch2, epoch)
        # the old epoch ends where the new leader's epoch starts
        assert (int(r.error_code), int(r.leader_epoch), int(r.end_offset)) == (0, epoch, 3)


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
async def test_consumers_read_a_replicated_topic_after_its_leader_crashed(client):
    async with AsyncCluster(3, **FAST) as c:
        await c.create_topic("k", 1, 3, {"min.insync.replicas": "2"})
        values = [f"m{i}".encode() for i in range(50)]
        assert (
            await asyncio.to_thread(produce, c.bootstrap_servers, "k", values, acks="all")
            == [None] * 50
        )
        leader = c.leader_of("k", 0)
        await c.crash(leader)
        await until(lambda: c.leader_of("k", 0) not in (-1, leader))
        alive = ",".join(c.bootstrap_of(b) for b in c.live_ids)
        if client == "kafka-python":
            from kafka import KafkaConsumer

            def read() -> list[bytes]:
                cons = KafkaConsumer(
                    "k",
                    bootstrap_servers=alive,
                    auto_offset_reset="earliest",
                    consumer_timeout_ms=10000,
                )
                got = []
                for m in cons:
                    got.append(m.value)
                    if len(got) == 50:
                        break
                cons.close()
                return got

            got = await asyncio.to_thread(read)
        else:
            from aiokafka import AIOKafkaConsumer

            cons = AIOKafkaConsumer("k", bootstrap_servers=alive, auto_offset_reset="earliest")
            await cons.start()
            got = []
            try:
                async with asyncio.timeout(20):
                    async for m in cons:
                        got.append(m.value)
                        if len(got) == 50:
                            break
            finally:
                await cons.stop()
        assert got == values


async def test_acks_all_waits_for_every_isr_member_and_consumers_stop_at_the_hw():
    """Seed behaviours 27 and 30: with a follower's fetches held (still in the ISR), acks=1
    is answered after the leader's append, acks=all is not; consumers and ListOffsets see
    only up to the HW; released, the acks=all produce completes."""
    async with AsyncCluster(2, **{**FAST, "replica.lag.time.max.ms": 60000}) as c:
        await c.create_topic("h", 1, 2)
        tp = ("h", 0)
        leader = c.leader_of("h", 0)
        follower = 1 - leader
        assert await asyncio.to_thread(
            produce, c.bootstrap_servers, "h", [b"a", b"b"], acks="all"
        ) == [None, None]
        hold = c.faults(leader).add(
            "FETCH", Delay(None), client_id=f"replica-fetcher-{follower}", times=None
        )
        await asyncio.sleep(0.7)  # the follower's fetch in flight is held too
        assert await asyncio.to_thread(produce, c.bootstrap_servers, "h", [b"c"], acks=1) == [None]
        lp = state(c, leader, tp)
        assert (lp.log.log_end_offset, lp.log.high_watermark) == (3, 2)
        waiting = asyncio.create_task(
            asyncio.to_thread(produce, c.bootstrap_servers, "h", [b"d"], acks="all")
        )
        await until(lambda: lp.log.log_end_offset == 4)
        await asyncio.sleep(0.5)
        assert not waiting.done()  # the ISR member has not fetched it

        def read_all() -> tuple[list[bytes], int]:
            from kafka import KafkaConsumer
            from kafka import TopicPartition as KTP

            cons = KafkaConsumer(bootstrap_servers=c.bootstrap_servers, consumer_timeout_ms=2000)
            cons.assign([KTP("h", 0)])
            cons.seek_to_beginning()
            got = [m.value for m in cons]
            end = cons.end_offsets([KTP("h", 0)])[KTP("h", 0)]
            cons.close()
            return got, end

        got, end = await asyncio.to_thread(read_all)
        assert (got, end) == ([b"a", b"b"], 2)  # nothing above the HW
        c.faults(leader).remove(hold)
        assert await waiting == [None]
        assert lp.log.high_watermark == 4
        got, end = await asyncio.to_thread(read_all)
        assert (got, end) == ([b"a", b"b", b"c", b"d"], 4)


async def test_rf2_with_one_replica_out_of_the_isr_and_min_isr_1_takes_acks_all():
    """Seed behaviour 29."""
    async with AsyncCluster(2, **FAST) as c:
        await c.create_topic("one", 1, 2, {"min.insync.replicas": "1"})
        leader = c.leader_of("one", 0)
        c.faults(leader).add(
            "FETCH", Delay(None), client_id=f"replica-fetcher-{1 - leader}", times=None
        )
        assert await asyncio.to_thread(produce, c.bootstrap_servers, "one", [b"x"], acks=1) == [
            None
        ]
        await until(lambda: state(c, leader, ("one", 0)).isr == [leader])
        assert await asyncio.to_thread(produce, c.bootstrap_servers, "one", [b"y"], acks="all") == [
            None
        ]


def test_a_follower_joins_the_isr_only_at_the_hw_and_the_leaders_epoch_start():
    """Seed behaviour 34, on the Partition: a restarted replica behind the HW, or not yet
    at the offset where this leader's epoch began, is not added to the ISR."""
    import tempfile
    import uuid
    from pathlib import Path

    from kafkalite.log.log import Log
    from kafkalite.log.log_config import LogConfig
    from kafkalite.protocol.records import build_batch
    from kafkalite.replica.partition import LeaderAndIsrState, Partition

    with tempfile.TemporaryDirectory() as d:
        log = Log(Path(d) / "t-0", LogConfig(), topic="t", partition=0)
        log.append_as_leader(bytearray(build_batch([(None, b"v")] * 5)), 0)
        p = Partition("t", 0, uuid.uuid4(), 0)
        p.make_leader(LeaderAndIsrState(0, 1, [0], [0, 1], partition_epoch=0), log)
        assert p.leader_epoch_start_offset == 5
        p.update_follower_fetch_state(1, 3, 0)
        assert not p.isr_expand_candidate(1)  # behind the HW (5)
        p.update_follower_fetch_state(1, 5, 0)
        assert p.isr_expand_candidate(1)
        p.isr_change_pending = True
        assert not p.isr_expand_candidate(1)  # one ISR write at a time
        log.close()


async def test_rack_aware_replica_selector_sends_consumers_to_a_replica_in_their_rack():
    """KIP-392: the leader answers a v11+ consumer in another rack with the preferred read
    replica; librdkafka (client.rack) then fetches from that follower, which serves up to
    its high watermark."""
    racks = {0: {"broker.rack": "r0"}, 1: {"broker.rack": "r1"}, 2: {"broker.rack": "r2"}}
    selector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    async with AsyncCluster(
        3, broker_configs=racks, **{**FAST, "replica.selector.class": selector}
    ) as c:
        await c.create_topic("near", 1, 3)
        tp = ("near", 0)
        leader = c.leader_of("near", 0)
        follower = (leader + 1) % 3
        values = [f"n{i}".encode() for i in range(20)]
        assert (
            await asyncio.to_thread(produce, c.bootstrap_servers, "near", values, acks="all")
            == [None] * 20
        )
        await until(lambda: state(c, follower, tp).log.high_watermark == 20)
        served = c.faults(follower).add("FETCH", Delay(0), client_id="near-consumer", times=None)

        def consume() -> list[bytes]:
            from confluent_kafka import Consumer, TopicPartition

            cons = Consumer(
                {
                    "bootstrap.servers": c.bootstrap_servers,
                    "group.id": "near",
                    "client.id": "near-consumer",
                    "client.rack": f"r{follower}",
                    "enable.auto.commit": False,
                }
            )
            cons.assign([TopicPartition("near", 0, 0)])
            got = []
            while len(got) < 20:
                m = cons.poll(10)
                assert m is not None and m.error() is None
                got.append(m.value())
            cons.close()
            return got

        assert await asyncio.to_thread(consume) == values
        assert served.hits > 0  # the follower in the consumer's rack served it

        # a consumer without client metadata (kafka-python, Fetch below v11) still reads
        # from the leader only; a follower refuses it
        p = state(c, follower, tp)
        from kafkalite.replica.replica_manager import FetchParams, PartitionFetchInfo

        rm = c.kafka(follower).replica_manager
        [(_, r)] = rm.read_from_local_log(
            FetchParams(-1, 0, 1, 1 << 20, 0), [(tp, PartitionFetchInfo(0, 1 << 20))]
        )
        assert r.error == ErrorCode.not_leader_or_follower
        [(_, r)] = rm.read_from_local_log(
            FetchParams(-1, 0, 1, 1 << 20, 0, client_rack="r9"),
            [(tp, PartitionFetchInfo(0, 1 << 20, -1, p.leader_epoch))],
        )
        assert (r.error, r.high_watermark, r.preferred_read_replica) == (0, 20, -1)
        lrm = c.kafka(leader).replica_manager
        [(_, r)] = lrm.read_from_local_log(
            FetchParams(-1, 0, 1, 1 << 20, 0, client_rack=f"r{follower}"),
            [(tp, PartitionFetchInfo(0, 1 << 20))],
        )
        assert (r.error, r.preferred_read_replica, r.size) == (0, follower, 0)


def test_replication_quota_rate_and_throttled_replica_lists():
    from kafkalite.replica.replication_quota import ReplicationQuota, is_throttled_replica

    now = [100.0]
    q = ReplicationQuota(lambda: 1000, windows=3, window_s=1.0, clock=lambda: now[0])
    q.record(1500)
    assert q.rate() == 750.0 and not q.is_exceeded()  # over the 2 s minimum span
    q.record(1000)
    assert q.is_exceeded()
    now[0] += 3.5  # the samples age out
    assert q.rate() == 0.0 and not q.is_exceeded()
    assert ReplicationQuota(lambda: 2**63 - 1).is_exceeded() is False
    assert is_throttled_replica("*", 3, 7)
    assert is_throttled_replica("0:1, 3:7", 3, 7)
    assert not is_throttled_replica("3:1", 3, 7)
    assert not is_throttled_replica("", 3, 7)


async def test_leader_throttling_slows_an_out_of_sync_follower_but_it_catches_up():
    """KIP-73: an out-of-sync follower of a topic listing its leader as throttled is held
    to leader.replication.throttled.rate; in-sync followers are never throttled."""
    async with AsyncCluster(
        2,
        **{
            **FAST,
            "replica.lag.time.max.ms": 1000,
            "leader.replication.throttled.rate": 200_000,
            "replication.quota.window.num": 2,
            "replica.fetch.max.bytes": 50_000,  # several fetches to catch up
        },
    ) as c:
        await c.create_topic("thr", 1, 2, {"leader.replication.throttled.replicas": "*"})
        tp = ("thr", 0)
        leader = c.leader_of("thr", 0)
        follower = 1 - leader
        hold = c.faults(leader).add(
            "FETCH", Delay(None), client_id=f"replica-fetcher-{follower}", times=None
        )
        values = [bytes([i % 256]) * 10_000 for i in range(50)]  # 500 KB, 10 KB batches
        small = {"batch.size": 10_000}
        reports = await asyncio.to_thread(
            produce, c.bootstrap_servers, "thr", values, acks=1, **small
        )
        assert reports == [None] * 50
        await until(lambda: state(c, leader, tp).isr == [leader])
        c.faults(leader).remove(hold)
        end = state(c, leader, tp).log.log_end_offset
        await until(lambda: leo(c, follower, tp) == end, 30)
        quota = c.kafka(leader).replica_manager.leader_quota
        assert quota.throttled > 0  # data was held back at least once
        await until(lambda: follower in state(c, leader, tp).isr)
        assert replica_bytes(c, follower, tp, end) == replica_bytes(c, leader, tp, end)


async def test_follower_requests_need_a_brokers_signature():
    """A replica id moves the leader's view of a follower (and so the HW): as Kafka's
    CLUSTER_ACTION rule, only requests signed with the inter-broker secret are obeyed."""
    from tests.replica.wire import fetch
    from tests.server.raw_client import RawClient

    async with AsyncCluster(2, **FAST) as c:
        await c.create_topic("sig", 1, 2)
        leader = c.leader_of("sig", 0)
        k = c.kafka(leader)

        def attempt() -> tuple[int, int, int]:
            cl = RawClient.to(c.bootstrap_of(leader))
            try:
                r = cl.call(1, 12, fetch([("sig", 0, 0)], replica_id=1 - leader, wait_ms=0))
                unsigned = int(r.responses[0].partitions[0].error_code)
                body = {
                    "replica_id": 1 - leader,
                    "topics": [
                        {
                            "topic": "sig",
                            "partitions": [
                                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}
                            ],
                        }
                    ],
                }
                e = cl.call(23, 4, messages.build(messages.request_type(23, 4), body))
                epoch_unsigned = int(e.topics[0].partitions[0].error_code)
                cl.sign_in_as_broker(k, 1 - leader)
                r = cl.call(1, 12, fetch([("sig", 0, 0)], replica_id=1 - leader, wait_ms=0))
                return unsigned, epoch_unsigned, int(r.responses[0].partitions[0].error_code)
            finally:
                cl.close()

        unsigned, epoch_unsigned, signed = await asyncio.to_thread(attempt)
        assert unsigned == ErrorCode.topic_authorization_failed
        assert epoch_unsigned == ErrorCode.cluster_authorization_failed
        assert signed == ErrorCode.none


async def test_followers_replicate_fetch_responses_larger_than_the_readers_scratch_buffer():
    """Batches of 300 KB make each follower Fetch response exceed the frame reader's
    64 KiB scratch buffer, the path that reads a large response into its own buffer."""
    async with AsyncCluster(3, **FAST) as c:
        await c.create_topic("big", 1, 3, {"min.insync.replicas": "3"})
        tp = ("big", 0)
        leader = c.leader_of("big", 0)
        values = [bytes([i]) * 300_000 for i in range(6)]
        reports = await asyncio.to_thread(
            produce, c.bootstrap_servers, "big", values, acks="all", **{"linger.ms": 0}
        )
        assert reports == [None] * 6  # acks=all with min.insync 3: every follower has them
        await until(lambda: all(state(c, b, tp).log.high_watermark == 6 for b in range(3)))
        ref = replica_bytes(c, leader, tp, 6)
        assert len(ref) > 6 * 300_000
        for b in range(3):
            assert replica_bytes(c, b, tp, 6) == ref
