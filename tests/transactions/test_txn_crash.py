"""kill -9 the broker (a real process) in the middle of transactions, then restart it.

Before the kill: one committed transaction, one aborted one (its abort marker and
``.txnindex`` entry written), one left open with its records in the log, and,
with a second transactional id, a commit the coordinator acknowledged (its
markers may or may not have been written when the process dies). After the
restart: the open transaction is aborted by the coordinator once its timeout
passes and the LSO moves past it, the acknowledged commit is completed from
``__transaction_state``, crash recovery rebuilt the aborted-transaction index,
and a read_committed consumer sees exactly the committed records.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from tests.transactions.eos import create_topics, read_all


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    """``python -m kafkalite.cli.server`` on a fixed port and data dir."""

    def __init__(self, tmp_path: Path) -> None:
        self.port = _free_port()
        self.dir = tmp_path
        self.cfg = tmp_path / "server.yaml"
        values = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(tmp_path / "data"),
            "broker.id": 0,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 3,
            "transaction.state.log.num.partitions": 3,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
            "group.initial.rebalance.delay.ms": 0,
            "log.flush.offset.checkpoint.interval.ms": 60000,
        }
        self.cfg.write_text("".join(f"{k}: {v}\n" for k, v in values.items()))
        self.proc: subprocess.Popen[str] | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        err_path = self.dir / f"broker-{self.starts}.err"
        self.starts += 1
        with open(err_path, "w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kafkalite.cli.server", str(self.cfg)],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert "ready on" in line, err_path.read_text()

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.proc.stdout.close()  # type: ignore[union-attr]
        self.proc = None


@pytest.fixture
def proc(tmp_path: Path):  # noqa: ANN201
    b = BrokerProcess(tmp_path)
    b.start()
    yield b
    if b.proc is not None:
        b.kill9()


def _txn_producer(bootstrap: str, tid: str, timeout_ms: int = 60000) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": tid,
            "transaction.timeout.ms": timeout_ms,
            "linger.ms": 1,
        }
    )
    p.init_transactions(30)
    return p


def _lso_and_end(bootstrap: str, topic: str) -> tuple[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    lso = admin.list_offsets(
        {tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED
    )[tp].result(10)
    end = admin.list_offsets(
        {tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_UNCOMMITTED
    )[tp].result(10)
    return lso.offset, end.offset


def _produce(p: Producer, topic: str, prefix: str, n: int = 10) -> None:
    for i in range(n):
        p.produce(topic, value=f"{prefix}-{i}".encode(), partition=0)
    assert p.flush(30) == 0


def test_kill_9_mid_transaction_then_restart(proc: BrokerProcess) -> None:
    topic = "crash-txn"
    create_topics(proc.bootstrap, topic, partitions=1)
    hanging = _txn_producer(proc.bootstrap, "hanging", timeout_ms=4000)
    hanging.begin_transaction()
    _produce(hanging, topic, "committed")
    hanging.commit_transaction(30)
    hanging.begin_transaction()
    _produce(hanging, topic, "aborted")
    hanging.abort_transaction(30)
    hanging.begin_transaction()
    _produce(hanging, topic, "open")  # in the log, never committed
    acked = _txn_producer(proc.bootstrap, "acked")
    acked.begin_transaction()
    _produce(acked, topic, "acked")
    acked.commit_transaction(30)  # acknowledged: PrepareCommit is in __transaction_state
    lso, end = _lso_and_end(proc.bootstrap, topic)
    assert lso < end  # the open transaction holds the LSO back

    proc.kill9()
    proc.start()

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lso, end = _lso_and_end(proc.bootstrap, topic)
        if lso == end:
            break
        time.sleep(0.2)
    assert lso == end, "the coordinator aborted the open transaction after its timeout"
    values = read_all(proc.bootstrap, topic, "read_committed", 20, timeout_s=20, partitions=1)
    assert sorted(v.decode() for v in values) == sorted(
        [f"committed-{i}" for i in range(10)] + [f"acked-{i}" for i in range(10)]
    )
    every = read_all(proc.bootstrap, topic, "read_uncommitted", 40, timeout_s=20, partitions=1)
    assert len(every) == 40  # the aborted and the timed-out records are still in the log

    # the transactional id carries on with a new epoch
    again = _txn_producer(proc.bootstrap, "hanging")
    again.begin_transaction()
    _produce(again, topic, "after")
    again.commit_transaction(30)
    values = read_all(proc.bootstrap, topic, "read_committed", 30, timeout_s=20, partitions=1)
    assert len(values) == 30 and len(set(values)) == 30
    assert {f"after-{i}".encode() for i in range(10)} <= set(values)
