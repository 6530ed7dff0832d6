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

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from kafkalite.protocol.record_batch import iter_headers

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 10 if os.environ.get("KAFKALITE_SOAK") else 2
TOPIC = "acks"
PARTITIONS = 6


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """One kafkalite-server process on a fixed port and data dir (restartable)."""

    def __init__(self, broker_id: int, root: Path, zk: str) -> None:
        self.broker_id = broker_id
        self.port = _free_port()
        self.dir = root / f"broker-{broker_id}"
        self.dir.mkdir(parents=True)
        self.cfg = self.dir / "server.properties"
        self.cfg.write_text(
            "\n".join(
                [
                    f"broker.id={broker_id}",
                    f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                    f"log.dirs={self.dir / 'data'}",
                    f"zookeeper.connect={zk}",
                    "zookeeper.session.timeout.ms=6000",
                    "default.replication.factor=3",
                    "min.insync.replicas=2",
                    "replica.lag.time.max.ms=10000",
                    "replica.fetch.backoff.ms=200",
                    "auto.leader.rebalance.enable=false",
                    "controlled.shutdown.retry.backoff.ms=200",
                    "kafkalite.log.fsync=false",
                    "",
                ]
            )
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        out = self.dir / f"out-{self.starts}.log"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        with open(out, "wb") as f:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kafkalite.cli.server", str(self.cfg)],
                cwd=self.dir,
                env=env,
                stdout=f,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            if b"ready on" in out.read_bytes():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"broker {self.broker_id} did not start:\n{out.read_text()[-3000:]}")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


class Recorder:
    """A producer thread writing p<partition>-<seq> round robin, recording the acks."""

    def __init__(self, bootstrap: str) -> None:
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
            p = seq % PARTITIONS
            try:
                self.producer.produce(
                    TOPIC,
                    f"p{p}-{seq // PARTITIONS}".encode(),
                    partition=p,
                    on_delivery=self._on_delivery,
                )
                seq += 1
            except BufferError:
                pass
            self.producer.poll(0.002)
        self.producer.flush(120)

    def first_ack_after(self, partition: int, t: float) -> float | None:
        with self.lock:
            times = [ts for _o, _v, ts in self.acked[partition] if ts > t]
        return min(times) if times else None


def _partition_states(zk: KazooClient) -> dict[int, dict[str, Any]]:
    out = {}
    for p in range(PARTITIONS):
        data, _ = zk.get(f"/brokers/topics/{TOPIC}/partitions/{p}/state")
        out[p] = json.loads(data)
    return out


def _wait(pred: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"{what} within {timeout}s")


def _segment_batches(data_dir: Path, partition: int) -> list[tuple[int, bytes]]:
    """(last offset, bytes) of every stored batch of the partition, in offset order."""
    d = data_dir / f"{TOPIC}-{partition}"
    out = []
    for seg in sorted(d.glob("*.log")):
        buf = seg.read_bytes()
        positions = list(iter_headers(buf))
        for i, (pos, h) in enumerate(positions):
            end = positions[i + 1][0] if i + 1 < len(positions) else pos + h.size
            out.append((h.base_offset + h.last_offset_delta, buf[pos:end]))
    return out


def test_no_acknowledged_record_is_lost_when_leaders_are_killed(zookeeper, tmp_path, capsys):
    chroot = f"/repl-{os.getpid()}-{int(time.time())}"
    zk_connect = f"{zookeeper.connect_string}{chroot}"
    servers = [ServerProcess(i, tmp_path, zk_connect) for i in (1, 2, 3)]
    zk = KazooClient(hosts=zk_connect)
    rec: Recorder | None = None
    try:
        for s in servers:
            s.start()
        zk.start()  # the brokers created the chroot
        bootstrap = ",".join(s.bootstrap for s in servers)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        fut = admin.create_topics(
            [NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})]
        )[TOPIC]
        fut.result(30)
        _wait(
            lambda: all(len(s["isr"]) == 3 for s in _partition_states(zk).values()),
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
            states = _partition_states(zk)
            leader = states[p]["leader"]
            victim = by_id[leader]
            t_kill = time.monotonic()
            victim.kill9()
            _wait(
                lambda p=p, leader=leader: _partition_states(zk)[p]["leader"] not in (-1, leader),
                40,
                f"round {rnd}: no new leader for partition {p}",
            )
            acked_at = _wait(
                lambda p=p, t=t_kill: rec.first_ack_after(p, t), 40, f"round {rnd}: no produce"
            )
            failovers.append((rnd, p, leader, acked_at - t_kill))
            victim.start()
            _wait(
                lambda b=leader: all(b in s["isr"] for s in _partition_states(zk).values()),
                60,
                f"round {rnd}: broker {leader} did not rejoin every ISR",
            )
        rec.stop.set()
        rec.thread.join(150)
        assert not rec.thread.is_alive()
        assert rec.errors == []
        with capsys.disabled():
            for rnd, p, leader, secs in failovers:
                print(
                    f"\nfailover round {rnd}: partition {p}, killed leader {leader}: "
                    f"first ack on the new leader after {secs:.2f}s",
                    end="",
                )
            print()

        # every acknowledged record, exactly once, in order, at its offset
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "verify",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        try:
            for p in range(PARTITIONS):
                acked = sorted(rec.acked[p])
                last = acked[-1][0]
                consumer.assign([TopicPartition(TOPIC, p, 0)])
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

        # replicas identical up to the high watermark: stop cleanly, compare segment bytes
        hw = {p: max(o for o, _v, _t in rec.acked[p]) + 1 for p in range(PARTITIONS)}
        _wait(
            lambda: all(len(s["isr"]) == 3 for s in _partition_states(zk).values()),
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
        for s in servers:
            s.stop()
        zk.stop()
        zk.close()
