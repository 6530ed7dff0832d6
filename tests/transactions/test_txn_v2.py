"""Transactions V2 (KIP-890 part 2) on the wire, with kio-built requests: the feature is
finalized at 2, Produce v12+ adds partitions implicitly, TxnOffsetCommit v5 adds the offsets
partition, EndTxn v5 bumps the epoch on every end (returning the next id and epoch), a late
write of the old epoch is fenced, and EndTxn retries are recognised. V1 clients keep working
beside it (the rest of tests/transactions/ runs the V1 protocol)."""

from __future__ import annotations

import time

import pytest

from kafkalite.cli.wire_client import WireClient
from kafkalite.coordinator.transaction.txn_log import (
    TxnMetadata,
    TxnState,
    decode_value,
    encode_value,
)
from kafkalite.protocol.records import build_batch, decode_batch
from kafkalite.testing.embedded_broker import ThreadedBroker
from tests.transactions.eos import BROKER_CONFIG, create_topics, unique

PRODUCE, FETCH, OFFSET_FETCH, FIND_COORD, INIT, END_TXN, TXN_OFFSET_COMMIT = 0, 1, 9, 10, 22, 26, 28
_RETRIABLE = {
    "coordinator_not_available",
    "coordinator_load_in_progress",
    "not_coordinator",
    "concurrent_transactions",
    "not_enough_replicas",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = ThreadedBroker(tmp_path_factory.mktemp("txn-v2"), **BROKER_CONFIG)
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def wire(broker):
    c = WireClient(broker.bootstrap_servers)
    yield c
    c.close()


def _retry(fn):
    """Call until the answer is not a retriable error (as a client does)."""
    for _ in range(200):
        r = fn()
        code = r if isinstance(r, str) else r.error_code.name
        if code not in _RETRIABLE:
            return r
        time.sleep(0.05)
    return r


def _init(c: WireClient, tid: str) -> tuple[int, int]:
    c.call(FIND_COORD, 4, {"key_type": 1, "coordinator_keys": [tid]})
    r = _retry(
        lambda: c.call(
            INIT,
            5,
            {
                "transactional_id": tid,
                "transaction_timeout": 60000,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
    )
    assert r.error_code.name == "none"
    return int(r.producer_id), int(r.producer_epoch)


def _produce(c, tid, topic, values, pid, epoch, seq, v=12) -> str:
    records = build_batch(
        [(None, x) for x in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )

    def once() -> str:
        r = c.call(
            PRODUCE,
            v,
            {
                "transactional_id": tid,
                "acks": -1,
                "timeout": 5000,
                "topic_data": [
                    {"name": topic, "partition_data": [{"index": 0, "records": records}]}
                ],
            },
        )
        return str(r.responses[0].partition_responses[0].error_code.name)

    return _retry(once)


def _end(c, tid, pid, epoch, commit, v=5):
    return _retry(
        lambda: c.call(
            END_TXN,
            v,
            {
                "transactional_id": tid,
                "producer_id": pid,
                "producer_epoch": epoch,
                "committed": commit,
            },
        )
    )


def _describe(c, tid):
    return c.call(65, 0, {"transactional_ids": [tid]}).transaction_states[0]


def _wait_state(c, tid, state: str):
    s = None
    for _ in range(200):
        s = _describe(c, tid)
        if s.transaction_state == state:
            return s
        time.sleep(0.02)
    raise AssertionError(f"{tid} stayed {s.transaction_state if s else None}, not {state}")


def _committed_values(c, topic) -> list[bytes]:
    r = c.call(
        FETCH,
        12,
        {
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "isolation_level": 1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                    ],
                }
            ],
        },
    )
    p = r.responses[0].partitions[0]
    starts = {(int(a.producer_id), int(a.first_offset)) for a in p.aborted_transactions or ()}
    skipping: set[int] = set()  # producers inside an aborted transaction (as a consumer reads)
    out, pos, data = [], 0, p.records or b""
    while pos + 61 <= len(data):
        h, recs = decode_batch(data, pos)
        if (h.producer_id, h.base_offset) in starts:
            skipping.add(h.producer_id)
        if h.is_control:
            skipping.discard(h.producer_id)
        elif h.producer_id not in skipping:
            out += [r.value for r in recs]
        pos += h.batch_length + 12
    return out


def test_transaction_version_2_is_finalized(wire):
    r = wire.call(18, 4, {"client_software_name": "t", "client_software_version": "1"})
    finalized = {f.name: int(f.max_version_level) for f in r.finalized_features}
    supported = {f.name: int(f.max_version) for f in r.supported_features}
    assert finalized["transaction.version"] == 2 and supported["transaction.version"] == 2
    versions = {int(k.api_key): int(k.max_version) for k in r.api_keys}
    assert versions[END_TXN] == 5 and versions[TXN_OFFSET_COMMIT] == 5 and versions[24] == 5
    assert versions[PRODUCE] >= 12


def test_implicit_add_epoch_bump_and_fencing(wire, broker):
    topic, tid = unique("v2"), unique("tid")
    create_topics(broker.bootstrap_servers, topic, partitions=1)
    pid, epoch = _init(wire, tid)
    # no AddPartitionsToTxn: the Produce v12 adds the partition
    assert _produce(wire, tid, topic, [b"a", b"b"], pid, epoch, 0) == "none"
    s = _describe(wire, tid)
    assert s.transaction_state == "Ongoing"
    assert [(t.topic, list(t.partitions)) for t in s.topics] == [(topic, [0])]
    r = _end(wire, tid, pid, epoch, True)
    assert r.error_code.name == "none"
    assert (int(r.producer_id), int(r.producer_epoch)) == (pid, epoch + 1)
    # a retry of that EndTxn (the old epoch) succeeds with the same answer
    again = _end(wire, tid, pid, epoch, True)
    assert again.error_code.name == "none" and int(again.producer_epoch) == epoch + 1
    assert _end(wire, tid, pid, epoch, False).error_code.name == "invalid_txn_state"
    _wait_state(wire, tid, "CompleteCommit")
    # a late write of the committed transaction's epoch is fenced (the markers bumped it)
    assert _produce(wire, tid, topic, [b"late"], pid, epoch, 2) == "invalid_producer_epoch"
    assert _committed_values(wire, topic) == [b"a", b"b"]
    # the next transaction runs at the new epoch from sequence 0, and aborts
    e1 = epoch + 1
    assert _produce(wire, tid, topic, [b"x"], pid, e1, 0) == "none"
    r = _end(wire, tid, pid, e1, False)
    assert r.error_code.name == "none" and int(r.producer_epoch) == e1 + 1
    _wait_state(wire, tid, "CompleteAbort")
    assert _committed_values(wire, topic) == [b"a", b"b"]
    # an abort with nothing written still bumps the epoch; a commit of nothing is refused
    e2 = e1 + 1
    assert _end(wire, tid, pid, e2, True).error_code.name == "invalid_txn_state"
    r = _end(wire, tid, pid, e2, False)
    assert r.error_code.name == "none" and int(r.producer_epoch) == e2 + 1
    # an epoch that is neither current nor one behind is fenced
    assert _end(wire, tid, pid, epoch, False).error_code.name == "producer_fenced"
    assert _end(wire, tid, pid + 1, e2 + 1, False).error_code.name == (
        "invalid_producer_id_mapping"
    )
    # a V1 client (EndTxn v4) on the same id still ends its transaction without a bump
    _wait_state(wire, tid, "CompleteAbort")
    e3 = e2 + 1
    assert _produce(wire, tid, topic, [b"v1"], pid, e3, 0, v=12) == "none"
    assert _end(wire, tid, pid, e3, True, v=4).error_code.name == "none"
    s = _wait_state(wire, tid, "CompleteCommit")
    assert int(s.producer_epoch) == e3
    assert _committed_values(wire, topic) == [b"a", b"b", b"v1"]


def test_txn_offset_commit_v5_adds_the_offsets_partition(wire, broker):
    topic, tid, group = unique("v2o"), unique("tid"), unique("g")
    create_topics(broker.bootstrap_servers, topic, partitions=1)
    pid, epoch = _init(wire, tid)
    wire.call(FIND_COORD, 4, {"key_type": 0, "coordinator_keys": [group]})

    def commit():
        return _retry(
            lambda: (
                wire.call(
                    TXN_OFFSET_COMMIT,
                    5,
                    {
                        "transactional_id": tid,
                        "group_id": group,
                        "producer_id": pid,
                        "producer_epoch": epoch,
                        "generation_id": -1,
                        "member_id": "",
                        "group_instance_id": None,
                        "topics": [
                            {
                                "name": topic,
                                "partitions": [
                                    {
                                        "partition_index": 0,
                                        "committed_offset": 42,
                                        "committed_leader_epoch": -1,
                                        "committed_metadata": "",
                                    }
                                ],
                            }
                        ],
                    },
                )
                .topics[0]
                .partitions[0]
                .error_code.name
            )
        )

    assert commit() == "none"  # no AddOffsetsToTxn before it
    parts = {t.topic for t in _describe(wire, tid).topics}
    assert "__consumer_offsets" in parts
    assert _end(wire, tid, pid, epoch, True).error_code.name == "none"
    _wait_state(wire, tid, "CompleteCommit")
    r = wire.call(
        OFFSET_FETCH,
        8,
        {
            "groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}],
            "require_stable": True,
        },
    )
    assert int(r.groups[0].topics[0].partitions[0].committed_offset) == 42
    # the old epoch is fenced for offsets too
    assert commit() == "producer_fenced"


def test_v1_log_value_round_trip():
    m = TxnMetadata(
        "t", 7, 3, 5, 4, 60000, TxnState.PREPARE_COMMIT, {("a", 0), ("a", 2), ("b", 1)}, 10, 20
    )
    m.next_producer_id, m.client_txn_version = 9, 2
    data = encode_value(m)
    assert data[:2] == b"\x00\x01"  # TransactionLogValue v1 for a V2 transaction
    back = decode_value("t", data)
    assert (back.producer_id, back.last_producer_id, back.next_producer_id) == (7, 3, 9)
    assert back.client_txn_version == 2 and back.partitions == m.partitions
    assert (back.txn_start_ms, back.txn_last_update_ms, back.state) == (10, 20, m.state)
    m.client_txn_version = 0
    assert encode_value(m)[:2] == b"\x00\x00"


def test_implicit_add_on_a_leader_that_is_not_the_coordinator(tmp_path):
    """The leader adds the partition over AddPartitionsToTxn v5 (no ``verify_only``) to the
    coordinator on the other broker; the markers then fence the old epoch there."""
    from kafkalite.testing.in_process_cluster import ThreadedCluster

    config = {
        **BROKER_CONFIG,
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1,
    }
    with ThreadedCluster(2, tmp_path, **config) as c:
        topic, tid = unique("v2c"), unique("tid")
        boot = WireClient(c.bootstrap_servers)
        try:
            # the controller must know both brokers before anything is placed on them
            for _ in range(200):
                if len(boot.call(3, 12, {"topics": []}).brokers) == 2:
                    break
                time.sleep(0.05)
            create_topics(c.bootstrap_servers, topic, partitions=1)

            def find():
                r = boot.call(FIND_COORD, 4, {"key_type": 1, "coordinator_keys": [tid]})
                return r.coordinators[0]

            coordinator_id = int(_retry(find).node_id)
        finally:
            boot.close()
        other = next(i for i in c.live_ids if i != coordinator_id)
        if c.leader_of(topic, 0) != other:
            c.move_leader(topic, 0, other)
        leader = WireClient(c.bootstrap_of(other))
        coord = WireClient(c.bootstrap_of(coordinator_id))
        try:
            pid, epoch = _init(coord, tid)
            assert _produce(leader, tid, topic, [b"r1"], pid, epoch, 0) == "none"
            verifier = c.kafka(other).txn_verifier
            assert verifier is not None and c.call(lambda: len(verifier._connections)) == 1
            assert [t.topic for t in _describe(coord, tid).topics] == [topic]
            r = _end(coord, tid, pid, epoch, True)
            assert r.error_code.name == "none" and int(r.producer_epoch) == epoch + 1
            _wait_state(coord, tid, "CompleteCommit")
            assert _produce(leader, tid, topic, [b"late"], pid, epoch, 1) == (
                "invalid_producer_epoch"
            )
            assert _produce(leader, tid, topic, [b"r2"], pid, epoch + 1, 0) == "none"
            assert _end(coord, tid, pid, epoch + 1, True).error_code.name == "none"
            _wait_state(coord, tid, "CompleteCommit")
            assert _committed_values(leader, topic) == [b"r1", b"r2"]
        finally:
            leader.close()
            coord.close()


def test_an_exhausted_epoch_moves_the_producer_to_a_new_id(wire, broker):
    """EndTxn v5 at epoch 32766: the markers go out at 32767 under the old id, the
    response (and the next transaction) use a fresh id at epoch 0; a retry of that EndTxn
    (old id, 32766) is recognised (Kafka's ``retryOnOverflow``)."""
    topic, tid = unique("v2x"), unique("tid")
    create_topics(broker.bootstrap_servers, topic, partitions=1)
    pid, _ = _init(wire, tid)
    tc = broker.kafka.transaction_coordinator
    last = 32766

    def exhaust() -> None:
        m = tc.get(tid)
        m.producer_epoch, m.last_producer_epoch = last, last - 1

    broker.call(exhaust)
    assert _produce(wire, tid, topic, [b"old-id"], pid, last, 0) == "none"
    r = _end(wire, tid, pid, last, True)
    assert r.error_code.name == "none"
    new_pid, new_epoch = int(r.producer_id), int(r.producer_epoch)
    assert new_pid != pid and new_epoch == 0
    _wait_state(wire, tid, "CompleteCommit")
    again = _end(wire, tid, pid, last, True)
    assert again.error_code.name == "none"
    assert (int(again.producer_id), int(again.producer_epoch)) == (new_pid, 0)
    assert _produce(wire, tid, topic, [b"new-id"], new_pid, 0, 0) == "none"
    assert _end(wire, tid, new_pid, 0, True).error_code.name == "none"
    _wait_state(wire, tid, "CompleteCommit")
    assert _committed_values(wire, topic) == [b"old-id", b"new-id"]


def test_v2_state_survives_a_restart(tmp_path):
    """The coordinator reloads V2 transactions from their TransactionLogValue v1 records:
    the bumped epoch is kept, so the old epoch stays fenced and the new one goes on."""
    b = ThreadedBroker(tmp_path, **BROKER_CONFIG)
    b.start()
    try:
        topic, tid = unique("v2r"), unique("tid")
        create_topics(b.bootstrap_servers, topic, partitions=1)
        c = WireClient(b.bootstrap_servers)
        try:
            pid, epoch = _init(c, tid)
            assert _produce(c, tid, topic, [b"before"], pid, epoch, 0) == "none"
            assert _end(c, tid, pid, epoch, True).error_code.name == "none"
            _wait_state(c, tid, "CompleteCommit")
        finally:
            c.close()
        b.restart()
        c = WireClient(b.bootstrap_servers)
        try:
            c.call(FIND_COORD, 4, {"key_type": 1, "coordinator_keys": [tid]})
            s = _retry(lambda: _describe(c, tid))
            assert (s.transaction_state, int(s.producer_epoch)) == ("CompleteCommit", epoch + 1)
            assert b.call(lambda: b.kafka.transaction_coordinator.get(tid).client_txn_version) == 2
            assert _end(c, tid, pid, epoch - 1, False).error_code.name == "producer_fenced"
            assert _produce(c, tid, topic, [b"late"], pid, epoch, 1) == "invalid_producer_epoch"
            assert _produce(c, tid, topic, [b"after"], pid, epoch + 1, 0) == "none"
            assert _end(c, tid, pid, epoch + 1, True).error_code.name == "none"
            _wait_state(c, tid, "CompleteCommit")
            assert _committed_values(c, topic) == [b"before", b"after"]
        finally:
            c.close()
    finally:
        b.stop()
