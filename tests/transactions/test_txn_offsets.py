"""TxnOffsetCommit: a transaction's offsets count only once it commits, also across restarts
(seed 001 behaviour 21; KIP-447's UNSTABLE_OFFSET_COMMIT while they are pending)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.cli.wire_client import WireClient
from kafkalite.testing.embedded_broker import ThreadedBroker
from tests.transactions.eos import BROKER_CONFIG, create_topics


def _offset_fetch(bootstrap: str, group: str, topic: str, stable: bool) -> tuple[str, int]:
    c = WireClient(bootstrap)
    try:
        r = c.call(
            9,
            7,
            {
                "group_id": group,
                "topics": [{"name": topic, "partition_indexes": [0]}],
                "require_stable": stable,
            },
        )
        if not r.topics:  # a group-level error (the coordinator loading after a restart)
            return r.error_code.name, -1
        p = r.topics[0].partitions[0]
        return p.error_code.name, int(p.committed_offset)
    finally:
        c.close()


_SETTLING = ("unstable_offset_commit", "coordinator_load_in_progress", "not_coordinator")


def _settled_offset(bootstrap: str, group: str, topic: str) -> tuple[str, int]:
    """A require_stable fetch retried as clients do (KIP-447): EndTxn answers once the
    outcome is logged, and the markers that settle the pending offsets follow it."""
    deadline = time.monotonic() + 20
    got = _offset_fetch(bootstrap, group, topic, stable=True)
    while got[0] in _SETTLING and time.monotonic() < deadline:
        time.sleep(0.05)
        got = _offset_fetch(bootstrap, group, topic, stable=True)
    return got


def _txn(p: Producer, group_meta, topic: str, sink: str, offset: int, commit: bool | None) -> None:
    p.begin_transaction()
    p.produce(sink, value=b"x", partition=0)
    p.send_offsets_to_transaction([TopicPartition(topic, 0, offset)], group_meta, 10)
    if commit is None:
        assert p.flush(10) == 0
    elif commit:
        p.commit_transaction(10)
    else:
        p.abort_transaction(10)


def test_transactional_offsets_visible_only_on_commit_across_restarts(tmp_path):
    b = ThreadedBroker(tmp_path, **BROKER_CONFIG)
    b.start()
    try:
        bs = b.bootstrap_servers
        create_topics(bs, "src", "sink", partitions=1)
        group = "txn-offsets"
        meta = Consumer({"bootstrap.servers": bs, "group.id": group}).consumer_group_metadata()
        p = Producer(
            {"bootstrap.servers": bs, "transactional.id": "to", "transaction.timeout.ms": 2000}
        )
        p.init_transactions(10)
        _txn(p, meta, "src", "sink", 5, commit=True)
        assert _settled_offset(bs, group, "src") == ("none", 5)
        _txn(p, meta, "src", "sink", 9, commit=False)
        assert _settled_offset(bs, group, "src") == ("none", 5)
        _txn(p, meta, "src", "sink", 12, commit=None)  # left open
        assert _offset_fetch(bs, group, "src", stable=False) == ("none", 5)
        assert _offset_fetch(bs, group, "src", stable=True)[0] == "unstable_offset_commit"

        b.restart()
        bs = b.bootstrap_servers
        # replayed from __consumer_offsets: still pending until the coordinator aborts it
        assert _settled_offset(bs, group, "src") == ("none", 5)

        p2 = Producer({"bootstrap.servers": bs, "transactional.id": "to"})
        p2.init_transactions(10)
        _txn(p2, meta, "src", "sink", 20, commit=True)
        b.restart()
        assert _settled_offset(b.bootstrap_servers, group, "src") == ("none", 20)
    finally:
        b.stop()
