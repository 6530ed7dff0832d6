"""kill -9 the transaction coordinator's broker on a 3-broker cluster (issue 16).

Three ``kafkalite-server`` processes over a real ZooKeeper; ``__transaction_state``,
``__consumer_offsets`` and the data topic have RF=3 and min.insync.replicas=2. Each
round finds the coordinator of the transactional id (FindCoordinator key_type 1) and
kills its broker with SIGKILL, alternately

* right after a commit was acknowledged: the producer carries on with its next
  transaction (librdkafka finds the new coordinator itself), and the acknowledged
  commit stays visible: the new coordinator loads the replicated PrepareCommit and
  finishes the markers;
* mid-transaction (records in the log, no EndTxn): a new producer of the same id
  calls ``init_transactions``, the new coordinator aborts the open transaction
  (epoch bump), and a second id left open with no producer at all is aborted by the
  new coordinator once its timeout passes.

The victim restarts and rejoins the ISR of ``__transaction_state`` before the next
round. At the end a read_committed consumer sees every committed record exactly once
and no aborted or abandoned one, and the LSO of every partition has reached its end.

CI runs 2 rounds; ``KAFKALITE_SOAK=1`` runs 8.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any

from confluent_kafka import IsolationLevel, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from kafkalite.cli.wire_client import WireClient
from kafkalite.coordinator.transaction.txn_log import partition_for
from kafkalite.testing.process_cluster import ProcessCluster
from tests.controller.conftest import zookeeper  # noqa: F401  (the session fixture)
from tests.transactions.eos import read_all, unique

ROUNDS = 8 if os.environ.get("KAFKALITE_SOAK") else 2
TOPIC = "txn-ha"
PARTITIONS = 3
STATE_PARTITIONS = 3
PER_TXN = 6
#: the abandoned transaction's timeout: the new coordinator aborts it after this
ABANDONED_TIMEOUT_MS = 4000

BROKERS: dict[str, Any] = {
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "transaction.state.log.num.partitions": STATE_PARTITIONS,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 3,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
    "auto.leader.rebalance.enable": "false",
    "group.initial.rebalance.delay.ms": 0,
}


def _find_coordinator(c: ProcessCluster, tid: str, timeout_s: float = 40) -> int:
    """The broker id FindCoordinator (v3, key_type 1) names for ``tid``, asked of live brokers."""

    def ask() -> int | None:
        for s in c.servers.values():
            if not s.running:
                continue
            try:
                cl = WireClient(s.bootstrap, timeout=5)
            except OSError:
                continue
            try:
                r = cl.call(10, 3, {"key": tid, "key_type": 1})
            except OSError:
                continue
            finally:
                cl.close()
            if r.error_code == 0 and c.servers.get(int(r.node_id)) is not None:
                if c.servers[int(r.node_id)].running:
                    return int(r.node_id)
        return None

    return int(c.wait(ask, timeout_s, f"no coordinator for {tid}"))


def _producer(bootstrap: str, tid: str, timeout_ms: int = 60000) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": tid,
            "transaction.timeout.ms": timeout_ms,
            "linger.ms": 1,
            "topic.metadata.refresh.interval.ms": 1000,
            "retry.backoff.ms": 100,
        }
    )
    _retry(lambda: p.init_transactions(20), "init_transactions")
    return p


def _retry(fn: Any, what: str, timeout_s: float = 60) -> None:
    """Call ``fn`` again while it raises a retriable error (librdkafka's contract)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fn()
            return
        except KafkaException as e:
            err = e.args[0]
            if not err.retriable() or time.monotonic() > deadline:
                raise AssertionError(f"{what}: {err}") from e
            time.sleep(0.2)


class Txns:
    """One producer's transactions and what became of each (the expected outcome)."""

    def __init__(self) -> None:
        self.committed: list[bytes] = []
        self.aborted: list[bytes] = []
        self.n = 0

    def produce(self, p: Producer, tag: str) -> list[bytes]:
        values = [f"{tag}-{self.n}-{i}".encode() for i in range(PER_TXN)]
        self.n += 1
        p.begin_transaction()
        for i, v in enumerate(values):
            p.produce(TOPIC, value=v, partition=i % PARTITIONS)
        assert p.flush(60) == 0
        return values

    def commit(self, p: Producer, tag: str) -> None:
        values = self.produce(p, tag)
        _retry(lambda: p.commit_transaction(20), f"commit {tag}")
        self.committed += values

    def abort(self, p: Producer, tag: str) -> None:
        values = self.produce(p, tag)
        _retry(lambda: p.abort_transaction(20), f"abort {tag}")
        self.aborted += values


def _lso_and_end(admin: AdminClient) -> dict[int, tuple[int, int]]:
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    out: dict[int, tuple[int, int]] = {}
    lso = admin.list_offsets(
        {tp: OffsetSpec.latest() for tp in tps}, isolation_level=IsolationLevel.READ_COMMITTED
    )
    end = admin.list_offsets(
        {tp: OffsetSpec.latest() for tp in tps}, isolation_level=IsolationLevel.READ_UNCOMMITTED
    )
    for tp in tps:
        out[tp.partition] = (lso[tp].result(10).offset, end[tp].result(10).offset)
    return out


def _same_state_partition(tid: str) -> str:
    """Another transactional id whose coordinator is ``tid``'s (same state partition)."""
    want = partition_for(tid, STATE_PARTITIONS)
    while True:
        other = unique("abandoned")
        if partition_for(other, STATE_PARTITIONS) == want:
            return other


def _state_in_sync(c: ProcessCluster) -> bool:
    return all(
        len(c.partition_state("__transaction_state", p)["isr"]) == 3
        for p in range(STATE_PARTITIONS)
    )


def test_killing_the_transaction_coordinator(zookeeper, tmp_path):  # noqa: F811
    zk_connect = f"{zookeeper.connect_string}/txnha-{os.getpid()}-{time.monotonic_ns()}"
    c = ProcessCluster(3, tmp_path, zk_connect, BROKERS)
    producers: list[Producer] = []
    try:
        c.start()
        bs = c.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[
            TOPIC
        ].result(30)
        tid = unique("tid")
        txns = Txns()
        p = _producer(bs, tid)
        producers.append(p)
        c.wait(lambda: _state_in_sync(c), 30, "__transaction_state not in sync")
        txns.commit(p, "first")
        txns.abort(p, "aborted")
        abandoned: list[bytes] = []
        for rnd in range(ROUNDS):
            victim = _find_coordinator(c, tid)
            if rnd % 2 == 0:
                # right after an acknowledged commit
                txns.commit(p, f"acked{rnd}")
                c.servers[victim].kill9()
                txns.commit(p, f"after{rnd}")  # the client finds the new coordinator
            else:
                # mid-transaction, with a second id left open on the same coordinator
                other = _producer(bs, _same_state_partition(tid), ABANDONED_TIMEOUT_MS)
                producers.append(other)
                abandoned += Txns().produce(other, f"abandoned{rnd}")
                txns.commit(p, f"before{rnd}")
                txns.aborted += txns.produce(p, f"open{rnd}")
                c.servers[victim].kill9()
                # the application's recovery: a new producer of the same id fences the old
                # one; the new coordinator aborts the open transaction first
                p = _producer(bs, tid)
                producers.append(p)
                txns.commit(p, f"recovered{rnd}")
            assert _find_coordinator(c, tid) != victim
            c.servers[victim].start()
            c.wait(lambda: _state_in_sync(c), 60, f"round {rnd}: {victim} not back in the ISR")

        # every open transaction ends: the LSO of each partition reaches its end
        c.wait(
            lambda: all(lso == end for lso, end in _lso_and_end(admin).values()),
            40,
            "an open transaction still holds the LSO back",
        )
        seen = read_all(bs, TOPIC, "read_committed", len(txns.committed), timeout_s=40)
        counts = Counter(seen)
        assert max(counts.values()) == 1, [v for v, n in counts.items() if n > 1][:5]
        assert set(counts) == set(txns.committed), (
            sorted(set(txns.committed) - set(counts))[:5],
            sorted(set(counts) - set(txns.committed))[:5],
        )
        everything = set(read_all(bs, TOPIC, "read_uncommitted", len(txns.committed)))
        assert set(txns.aborted) | set(abandoned) <= everything  # in the log, never visible
    finally:
        c.stop()
