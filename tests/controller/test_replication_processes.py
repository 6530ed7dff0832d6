"""The acceptance test of replication: three ``kafkalite-server`` processes over a real
ZooKeeper, leaders killed with SIGKILL while an idempotent acks=all producer writes.

RF=3, min.insync.replicas=2, 6 partitions. Each round kills the leader of one
partition (rotating over partitions, so over brokers), waits for the first
acknowledged produce on that partition (the failover time, printed), restarts the
victim and waits until it is back in every ISR. Afterwards every acknowledged record
is read back exactly once, in order, at its acknowledged offset, and the three
replicas' segments hold identical bytes up to the high watermark.

CI runs 2 rounds; ``KAFKALITE_SOAK=1`` runs the issue's full 10.
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.cli.wire_client import WireClient
from kafkalite.protocol.record_batch import iter_headers
from kafkalite.testing.process_cluster import ProcessCluster

ROUNDS = 10 if os.environ.get("KAFKALITE_SOAK") else 2
TOPIC = "acks"
PARTITIONS = 6


class Recorder:
    """A producer thread writing p<partition>-<seq> round robin, recording the acks."""

    def __init__(self, bootstrap: str, topic: str = TOPIC, partitions: int = PARTITIONS) -> None:
        self.topic, self.partitions = topic, partitions
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 120000,
                "retry.backoff.ms": 50,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.acked: dict[int, list[tuple[int, bytes, float]]] = defaultdict(list)
        #: when each value was handed to the producer
        self.sent_at: dict[bytes, float] = {}
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
            return
        with self.lock:
            self.acked[msg.partition()].append((msg.offset(), msg.value(), time.monotonic()))

    def _run(self) -> None:
        seq = 0
        while not self.stop.is_set():
            p = seq % self.partitions
            value = f"p{p}-{seq // self.partitions}".encode()
            self.sent_at[value] = time.monotonic()
            try:
                self.producer.produce(
                    self.topic,
                    value,
                    partition=p,
                    on_delivery=self._on_delivery,
                )
                seq += 1
            except BufferError:
                pass
            self.producer.poll(0.002)
        self.producer.flush(120)

    def largest_gap(self, partition: int, start: float, end: float) -> float:
        """The longest time without an ack on ``partition`` between ``start`` and ``end``."""
        with self.lock:
            times = sorted(ts for _o, _v, ts in self.acked[partition] if start <= ts <= end)
        points = [start, *times, end]
        return max(b - a for a, b in zip(points, points[1:], strict=False))

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(150)
        assert not self.thread.is_alive()
        assert self.errors == []

    def verify(self, bootstrap: str) -> None:
        """Every acknowledged record is read back once, in order, at its offset."""
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "verify",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        try:
            for p in range(self.partitions):
                acked = sorted(self.acked[p])
                last = acked[-1][0]
                consumer.assign([TopicPartition(self.topic, p, 0)])
                got: list[tuple[int, bytes]] = []
                while not got or got[-1][0] < last:
                    m = consumer.poll(10)
                    assert m is not None, f"partition {p}: stuck at {got[-1:] or 'start'}"
                    assert m.error() is None, m.error()
                    got.append((m.offset(), m.value()))
                values = [v for _o, v in got]
                assert len(values) == len(set(values)), f"partition {p}: duplicates"
                seqs = [int(v.split(b"-")[1]) for v in values]
                assert seqs == sorted(seqs), f"partition {p}: out of order"
                at = dict(got)
                for off, v, _t in acked:
                    assert at.get(off) == v, (
                        f"partition {p}: acked {v!r} at {off}, read {at.get(off)!r}"
                    )
        finally:
            consumer.close()

    def first_ack_after(self, partition: int, t: float) -> float | None:
        """When the first record handed to the producer after ``t`` was acknowledged."""
        with self.lock:
            times = [ts for _o, v, ts in self.acked[partition] if self.sent_at[v] > t]
        return min(times) if times else None


def _partition_states(c: ProcessCluster) -> dict[int, dict[str, Any]]:
    return {p: c.partition_state(TOPIC, p) for p in range(PARTITIONS)}


def _wait(pred: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"{what} within {timeout}s")


def _segment_batches(data_dir: Path, partition: int, topic: str = TOPIC) -> list[tuple[int, bytes]]:
    """(last offset, bytes) of every stored batch of the partition, in offset order."""
    d = data_dir / f"{topic}-{partition}"
    out = []
    for seg in sorted(d.glob("*.log")):
        buf = seg.read_bytes()
        positions = list(iter_headers(buf))
        for i, (pos, h) in enumerate(positions):
            end = positions[i + 1][0] if i + 1 < len(positions) else pos + h.size
            out.append((h.base_offset + h.last_offset_delta, buf[pos:end]))
    return out


def test_no_acknowledged_record_is_lost_when_leaders_are_killed(zookeeper, tmp_path, capsys):
    zk_connect = f"{zookeeper.connect_string}/repl-{os.getpid()}-{time.monotonic_ns()}"
    c = ProcessCluster(
        3,
        tmp_path,
        zk_connect,
        {"replica.lag.time.max.ms": 10000, "auto.leader.rebalance.enable": "false"},
    )
    servers = list(c.servers.values())
    rec: Recorder | None = None
    try:
        c.start()
        bootstrap = c.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        fut = admin.create_topics(
            [NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})]
        )[TOPIC]
        fut.result(30)
        _wait(
            lambda: all(len(s["isr"]) == 3 for s in _partition_states(c).values()),
            30,
            "topic not fully in sync",
        )
        rec = Recorder(bootstrap)
        rec.thread.start()
        _wait(lambda: all(len(rec.acked[p]) > 20 for p in range(PARTITIONS)), 30, "no acks")
        failovers = []
        by_id = {s.broker_id: s for s in servers}
        for rnd in range(ROUNDS):
            p = rnd % PARTITIONS
            states = _partition_states(c)
            leader = states[p]["leader"]
            victim = by_id[leader]
            t_kill = time.monotonic()
            victim.kill9()
            _wait(
                lambda p=p, leader=leader: (
                    c.partition_state(TOPIC, p)["leader"] not in (-1, leader)
                ),
                40,
                f"round {rnd}: no new leader for partition {p}",
            )
            elected = time.monotonic() - t_kill
            acked_at = _wait(
                lambda p=p, t=t_kill: rec.first_ack_after(p, t), 40, f"round {rnd}: no produce"
            )
            failovers.append((rnd, p, leader, elected, acked_at - t_kill))
            victim.start()
            _wait(
                lambda b=leader: all(b in s["isr"] for s in _partition_states(c).values()),
                60,
                f"round {rnd}: broker {leader} did not rejoin every ISR",
            )
        rec.finish()
        with capsys.disabled():
            for rnd, p, leader, elected, secs in failovers:
                print(
                    f"\nfailover round {rnd}: partition {p}, killed leader {leader}: new leader "
                    f"in ZooKeeper after {elected:.2f}s, first ack on it after {secs:.2f}s",
                    end="",
                )
            print()

        # every acknowledged record, exactly once, in order, at its offset
        rec.verify(bootstrap)

        # replicas identical up to the high watermark: stop cleanly, compare segment bytes
        hw = {p: max(o for o, _v, _t in rec.acked[p]) + 1 for p in range(PARTITIONS)}
        _wait(
            lambda: all(len(s["isr"]) == 3 for s in _partition_states(c).values()),
            30,
            "replicas not all in sync at the end",
        )
        time.sleep(1.0)  # the followers' last fetch
        for s in servers:
            s.stop()
        for p in range(PARTITIONS):
            copies = []
            for s in servers:
                batches = _segment_batches(s.dir / "data", p)
                copies.append(b"".join(b for last, b in batches if last < hw[p]))
            assert copies[0] and copies[0] == copies[1] == copies[2], f"partition {p} diverges"
    finally:
        if rec is not None and rec.thread.is_alive():
            rec.stop.set()
            rec.thread.join(30)
        c.stop()


def _chroot(zookeeper: Any) -> str:
    return f"{zookeeper.connect_string}/repl-{os.getpid()}-{time.monotonic_ns()}"


def _create(bootstrap: str, topic: str, assignment: list[list[int]], **config: str) -> None:
    """Create with a replica assignment (kafka-python: confluent-kafka 2.16 refuses one)."""
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics(
            [
                KNewTopic(
                    topic,
                    -1,
                    -1,
                    replica_assignments=dict(enumerate(assignment)),
                    topic_configs=config,
                )
            ]
        )
    finally:
        admin.close()


def _produce(bootstrap: str, topic: str, values: list[bytes], acks: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 2})
    errors: list[Any] = []
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda e, _m: errors.append(e) if e else None)
    assert p.flush(30) == 0 and errors == []


def _epoch_end(bootstrap: str, topic: str, epoch: int) -> tuple[int, int, int]:
    """OffsetForLeaderEpoch as a client asks it (KIP-320): (error, epoch, end offset)."""
    cl = WireClient(bootstrap)
    try:
        body = {
            "replica_id": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": epoch}
                    ],
                }
            ],
        }
        r = cl.call(23, 4, body).topics[0].partitions[0]
        return int(r.error_code), int(r.leader_epoch), int(r.end_offset)
    finally:
        cl.sock.close()


def test_a_sigstopped_follower_leaves_the_isr_and_rejoins_and_unclean_election(zookeeper, tmp_path):
    c = ProcessCluster(3, tmp_path, _chroot(zookeeper), {"replica.lag.time.max.ms": 2000})
    rec: Recorder | None = None
    try:
        c.start()
        bootstrap = c.bootstrap_servers
        _create(bootstrap, "s", [[1, 2, 3]], **{"min.insync.replicas": "2"})
        _create(bootstrap, "clean", [[1, 2]], **{"min.insync.replicas": "1"})
        _create(
            bootstrap,
            "dirty",
            [[1, 2]],
            **{"min.insync.replicas": "1", "unclean.leader.election.enable": "true"},
        )
        c.wait(lambda: len(c.partition_state("s", 0)["isr"]) == 3, 30, "s not in sync")

        # SIGSTOP: the follower leaves the ISR, acks=all goes on with 2 of 3, then it rejoins
        rec = Recorder(bootstrap, "s", 1)
        rec.thread.start()
        c.wait(lambda: len(rec.acked[0]) > 50, 30, "no acks")
        c.servers[3].sigstop()
        t_stop = time.monotonic()
        c.wait(lambda: 3 not in c.partition_state("s", 0)["isr"], 30, "3 still in the ISR")
        shrunk = time.monotonic()
        c.wait(lambda: rec.first_ack_after(0, shrunk + 1.0), 30, "no acks with 2 of 3")
        # the shrink reaches clients' metadata (isr_change_notification -> UpdateMetadata)
        md_admin = AdminClient({"bootstrap.servers": c.servers[1].bootstrap})
        c.wait(
            lambda: 3 not in md_admin.list_topics("s", timeout=10).topics["s"].partitions[0].isrs,
            30,
            "the ISR shrink not in metadata",
        )
        c.servers[3].sigcont()
        c.wait(lambda: 3 in c.partition_state("s", 0)["isr"], 60, "3 did not rejoin the ISR")
        rec.finish()
        rec.verify(bootstrap)
        print(f"\nSIGSTOP: follower out of the ISR after {shrunk - t_stop:.2f}s")

        # unclean election: the whole ISR dies; only the topic that allows it comes back
        for t in ("clean", "dirty"):
            _produce(bootstrap, t, [f"a{i}".encode() for i in range(10)], "all")
        c.servers[2].kill9()
        c.wait(
            lambda: all(c.partition_state(t, 0)["isr"] == [1] for t in ("clean", "dirty")),
            30,
            "2 still in the ISR",
        )
        old_epoch = c.partition_state("dirty", 0)["leader_epoch"]
        for t in ("clean", "dirty"):
            _produce(c.servers[1].bootstrap, t, [f"b{i}".encode() for i in range(5)], "1")
        c.servers[1].kill9()
        admin = AdminClient({"bootstrap.servers": c.servers[3].bootstrap})

        def leader(t: str) -> int:
            return int(admin.list_topics(t, timeout=10).topics[t].partitions[0].leader)

        c.wait(lambda: leader("clean") == leader("dirty") == -1, 30, "no offline partition")
        c.servers[2].start()
        c.wait(lambda: c.partition_state("dirty", 0)["leader"] == 2, 30, "no unclean election")
        time.sleep(1.0)
        assert leader("clean") == -1  # stays offline: its only ISR member is dead
        # a client that read up to 15 at old_epoch detects the truncation (KIP-320): the new
        # leader's largest epoch <= old_epoch ends at 10
        code, epoch, end = _epoch_end(c.servers[2].bootstrap, "dirty", old_epoch)
        assert (code, end) == (0, 10) and 0 <= epoch <= old_epoch
        c.servers[1].start()
        c.wait(lambda: c.partition_state("clean", 0)["leader"] == 1, 30, "clean not back")
        c.wait(lambda: c.partition_state("dirty", 0)["isr"] == [2, 1], 30, "1 did not rejoin")
        _produce(bootstrap, "dirty", [b"c0"], "all")
        time.sleep(1.0)
        c.stop()
        dirty = [
            b"".join(b for _l, b in _segment_batches(c.servers[i].dir / "data", 0, "dirty"))
            for i in (1, 2)
        ]
        assert dirty[0] == dirty[1]  # the former leader dropped its 5 unreplicated records
        lasts = [last for last, _b in _segment_batches(c.servers[1].dir / "data", 0, "dirty")]
        assert lasts[-1] == 10  # a0..a9 and c0
    finally:
        if rec is not None and rec.thread.is_alive():
            rec.stop.set()
            rec.thread.join(30)
        c.stop()


def test_controlled_shutdown_and_a_reassignment_under_a_running_producer(zookeeper, tmp_path):
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient

    c = ProcessCluster(4, tmp_path, _chroot(zookeeper), {"auto.leader.rebalance.enable": "false"})
    rec: Recorder | None = None
    try:
        c.start()
        bootstrap = c.bootstrap_servers
        _create(bootstrap, "mv", [[1, 2, 3]], **{"min.insync.replicas": "2"})
        c.wait(lambda: len(c.partition_state("mv", 0)["isr"]) == 3, 30, "mv not in sync")
        rec = Recorder(bootstrap, "mv", 1)
        rec.thread.start()
        c.wait(lambda: len(rec.acked[0]) > 50, 30, "no acks")

        # SIGTERM of the leader: controlled shutdown moves leadership first
        leader = c.partition_state("mv", 0)["leader"]
        t0 = time.monotonic()
        c.servers[leader].stop()
        t1 = time.monotonic()
        c.wait(lambda: rec.first_ack_after(0, t1 + 0.5), 30, "no acks after the shutdown")
        gap = rec.largest_gap(0, t0, time.monotonic())
        print(f"\ncontrolled shutdown of leader {leader}: longest gap between acks {gap:.2f}s")
        c.servers[leader].start()
        c.wait(lambda: len(c.partition_state("mv", 0)["isr"]) == 3, 30, "not back in sync")

        # reassignment [1,2,3] -> [2,3,4] through the admin API, the producer running
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            result = admin.alter_partition_reassignments({KTopicPartition("mv", 0): [2, 3, 4]})
            assert all(v is None for v in result.values()), result
            c.wait(
                lambda: (
                    not admin.list_partition_reassignments()
                    and sorted(c.partition_state("mv", 0)["isr"]) == [2, 3, 4]
                ),
                60,
                "reassignment not done",
            )
        finally:
            admin.close()
        c.wait(lambda: not (c.servers[1].dir / "data" / "mv-0").exists(), 30, "old replica kept")
        t2 = time.monotonic()
        c.wait(lambda: rec.first_ack_after(0, t2), 30, "no acks after the reassignment")
        rec.finish()
        rec.verify(bootstrap)
    finally:
        if rec is not None and rec.thread.is_alive():
            rec.stop.set()
            rec.thread.join(30)
        c.stop()
