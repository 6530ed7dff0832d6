"""kill -9 the broker process mid-stream, again and again: no acknowledged record is lost.

The broker runs as a real OS process (``python -m kafkalite.cli.server``);
confluent-kafka produces with acks=1 and no retries, recording every
acknowledged (partition, offset, value). After each SIGKILL the broker is
restarted on the same dir and port and the producer carries on. At the end
every acknowledged record must be at its acknowledged offset, and no value
may appear twice (each was sent once).
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.protocol.record_batch import iter_headers

KILLS = 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    """``kafkalite.cli.server`` on a fixed port and data dir, restartable."""

    def __init__(self, tmp_path: Path, **extra: object) -> None:
        self.port = _free_port()
        self.dir = tmp_path
        self.data = tmp_path / "data"
        self.cfg = tmp_path / "server.yaml"
        lines = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data),
            "broker.id": 0,
            "auto.create.topics.enable": "true",
            "num.partitions": 3,
            "offsets.topic.replication.factor": 1,
            "group.initial.rebalance.delay.ms": 0,
            "log.segment.bytes": 65536,
            "log.flush.offset.checkpoint.interval.ms": 200,
            "log.segment.delete.delay.ms": 0,
            **extra,
        }
        self.cfg.write_text("".join(f"{k}: {v}\n" for k, v in lines.items()))
        self.proc: subprocess.Popen[str] | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        err = open(self.dir / f"broker-{self.starts}.err", "w")  # noqa: SIM115 - owned by the process
        self.starts += 1
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkalite.cli.server", str(self.cfg), "--log-level", "WARNING"],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
        err.close()
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "ready on" not in line:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"broker did not start: {line!r}\n"
                + (self.dir / f"broker-{self.starts - 1}.err").read_text()
            )

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.proc.stdout.close()  # type: ignore[union-attr]
        self.proc = None

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        finally:
            self.proc.stdout.close()  # type: ignore[union-attr]
            self.proc = None


@pytest.fixture
def broker_process(tmp_path: Path):  # noqa: ANN201
    procs: list[BrokerProcess] = []

    def make(**extra: object) -> BrokerProcess:
        b = BrokerProcess(tmp_path, **extra)
        procs.append(b)
        return b

    yield make
    for b in procs:
        if b.proc is not None:
            b.kill()


def _consume_all(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int, bytes]]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "crash-check",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 20,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[tuple[int, int, bytes]] = []
    eof: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(eof) < partitions:
            assert time.monotonic() < deadline, (
                f"no EOF on partitions {set(range(partitions)) - eof}"
            )
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                raise KafkaException(m.error())
            out.append((m.partition(), m.offset(), m.value()))
    finally:
        c.close()
    return out


class Deliveries:
    """Every acknowledged (partition, offset, value), and how many sends failed."""

    def __init__(self) -> None:
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed = 0

    def report(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            self.failed += 1


def _crash_producer(bootstrap: str, **config: object) -> Producer:
    """No retries (each value is sent once) and quick reconnects to a restarted broker."""
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "retries": 0,
            "enable.idempotence": False,
            "message.timeout.ms": 20_000,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 500,
            **config,
        }
    )


def test_kill_9_mid_stream_loses_no_acknowledged_record(broker_process: Any) -> None:
    rng = random.Random(int(os.environ.get("KAFKALITE_CRASH_SEED", "0")) or None)
    b: BrokerProcess = broker_process()
    b.start()
    topic = "crash-stream"
    acks = Deliveries()
    p = _crash_producer(b.bootstrap, **{"acks": 1, "linger.ms": 2, "retry.backoff.ms": 20})
    seq = 0
    for _ in range(KILLS):
        kill_at = time.monotonic() + rng.uniform(0.05, 0.4)
        while time.monotonic() < kill_at:
            for _ in range(20):
                p.produce(topic, value=b"v%08d" % seq, on_delivery=acks.report)
                seq += 1
            p.poll(0)
            time.sleep(0.002)
        b.kill()
        p.poll(0)
        b.start()
    remaining = p.flush(30)
    assert remaining == 0
    assert len(acks.acked) + acks.failed == seq
    assert len(acks.acked) > seq // 4, (len(acks.acked), seq)
    # one more crash before checking, so the final read is itself after a recovery
    b.kill()
    b.start()
    got = _consume_all(b.bootstrap, topic, 3)
    at = {(part, off): v for part, off, v in got}
    missing = [(part, off, v) for part, off, v in acks.acked if at.get((part, off)) != v]
    assert not missing, f"{len(missing)} acknowledged records lost or moved, e.g. {missing[:5]}"
    dupes = [v for v, n in Counter(v for _p, _o, v in got).items() if n > 1]
    assert not dupes, f"values stored twice: {dupes[:5]}"
    assert all(v.startswith(b"v") and int(v[1:]) < seq for _p, _o, v in got)
    b.stop()


def _batches(seg: Path) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of each batch of a segment file."""
    data = seg.read_bytes()
    return [(pos, h.size, h.base_offset) for pos, h in iter_headers(data)]


@pytest.mark.parametrize(
    ("stop", "damage"),
    [("kill", "truncate"), ("kill", "flip"), ("term", "truncate")],
)
def test_corrupt_tail_of_the_active_segment_is_truncated_exactly_there(
    broker_process: Any, stop: str, damage: str
) -> None:
    b: BrokerProcess = broker_process()
    b.start()
    topic = "tail"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": 1, "linger.ms": 0})
    values = [b"value-%03d" % i for i in range(40)]
    for v in values:
        p.produce(topic, value=v)
        p.flush(10)  # one batch per record
    if stop == "kill":
        b.kill()
    else:
        b.stop()
    seg = max((b.data / f"{topic}-0").glob("*.log"))
    batches = _batches(seg)
    pos, size, base = batches[-1]
    assert base == 39
    if damage == "truncate":
        os.truncate(seg, pos + size // 2)
    else:
        raw = bytearray(seg.read_bytes())
        raw[pos + size - 3] ^= 0x55  # inside the record: the CRC no longer matches
        seg.write_bytes(bytes(raw))
    b.start()
    assert seg.stat().st_size == pos  # truncated exactly at the damaged batch
    got = _consume_all(b.bootstrap, topic, 1)
    assert [(o, v) for _p, o, v in got] == list(enumerate(values[:39]))
    # the log continues at the first lost offset
    offsets: list[int] = []
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": 1, "linger.ms": 0})
    p.produce(topic, value=b"again", on_delivery=lambda _e, m: offsets.append(m.offset()))
    assert p.flush(10) == 0
    assert offsets == [39]
    b.stop()
    log = "".join(f.read_text() for f in sorted(b.dir.glob("broker-*.err")))
    assert "truncat" in log.lower() or "invalid" in log.lower()


def _big_value(seq: int) -> bytes:
    """1 KiB that does not compress, its number first: each value is checked byte for byte."""
    return b"v%08d" % seq + random.Random(seq).randbytes(1015)


def test_kill_9_after_produce_requests_over_1_mib_loses_no_acknowledged_record(
    broker_process: Any,
) -> None:
    """Produce requests over 1 MiB are received into a mapping and appended from it
    (``Connection._hand_over``), not from a copy: acks=all requests of about 3 MB, three
    kill -9s, and every acknowledged record is back at its offset, byte for byte."""
    b: BrokerProcess = broker_process(
        **{"message.max.bytes": 4 << 20, "log.segment.bytes": 32 << 20, "num.partitions": 1}
    )
    b.start()
    topic = "crash-large"
    acks = Deliveries()
    p = _crash_producer(
        b.bootstrap,
        **{
            "acks": "all",
            "linger.ms": 100,
            "batch.size": 3_000_000,
            "message.max.bytes": 4_000_000,
        },
    )
    seq = 0
    for _ in range(3):
        for _ in range(6000):  # about two 3 MB requests
            p.produce(topic, value=_big_value(seq), on_delivery=acks.report)
            seq += 1
            if seq % 500 == 0:
                p.poll(0)
        p.flush(30)
        b.kill()
        b.start()
    assert p.flush(30) == 0
    assert len(acks.acked) + acks.failed == seq
    assert len(acks.acked) > seq // 2, (len(acks.acked), seq)
    segs = sorted((b.data / f"{topic}-0").glob("*.log"))
    assert max(size for seg in segs for _pos, size, _off in _batches(seg)) > 1 << 20
    got = _consume_all(b.bootstrap, topic, 1)
    at = {(part, off): v for part, off, v in got}
    missing = [(part, off) for part, off, v in acks.acked if at.get((part, off)) != v]
    assert not missing, f"{len(missing)} acknowledged records lost or changed, e.g. {missing[:5]}"
    assert all(v == _big_value(int(v[1:9])) for _p, _o, v in got)
    b.stop()
