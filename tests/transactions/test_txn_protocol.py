"""The transaction APIs on the wire (kio codecs): state machine errors, KIP-360, KIP-588's
error names per version, verify-only AddPartitionsToTxn, id expiration, and read_committed
long polls woken by the LSO (seed 001 behaviours 20, 23, 24)."""

from __future__ import annotations

import threading
import time

import pytest

from kafkalite.cli.wire_client import WireClient
from kafkalite.protocol.records import build_batch, decode_batch
from kafkalite.testing.embedded_broker import ThreadedBroker
from tests.transactions.eos import BROKER_CONFIG, create_topics, unique

INIT, ADD_PARTS, END_TXN, PRODUCE, FETCH = 22, 24, 26, 0, 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = ThreadedBroker(tmp_path_factory.mktemp("txn-wire"), **BROKER_CONFIG)
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


def _init(c: WireClient, tid: str, timeout_ms: int = 60000, pid=-1, epoch=-1, v=4):
    # as a client does: FindCoordinator first (it creates __transaction_state)
    c.call(10, 4, {"key_type": 1, "coordinator_keys": [tid]})
    for _ in range(100):
        r = c.call(
            INIT,
            v,
            {
                "transactional_id": tid,
                "transaction_timeout": timeout_ms,
                "producer_id": pid,
                "producer_epoch": epoch,
            },
        )
        if r.error_code.name not in (
            "coordinator_not_available",
            "coordinator_load_in_progress",
            "not_coordinator",
            "concurrent_transactions",
        ):
            return r
        time.sleep(0.05)
    return r


def _add(c: WireClient, tid: str, pid: int, epoch: int, topic: str, v: int = 3) -> str:
    r = c.call(
        ADD_PARTS,
        v,
        {
            "v3_and_below_transactional_id": tid,
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
        },
    )
    return r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code.name


def _end(c: WireClient, tid: str, pid: int, epoch: int, commit: bool, v: int = 3) -> str:
    r = c.call(
        END_TXN,
        v,
        {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": commit},
    )
    return r.error_code.name


def _produce(c: WireClient, tid, topic, values, pid=-1, epoch=-1, seq=-1) -> tuple[str, int]:
    records = build_batch(
        [(None, v) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=tid is not None,
    )
    r = c.call(
        PRODUCE,
        9,
        {
            "transactional_id": tid,
            "acks": -1,
            "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
        },
    )
    p = r.responses[0].partition_responses[0]
    return p.error_code.name, int(p.base_offset)


def _fetch(c: WireClient, topic: str, offset: int, wait_ms: int = 0):
    r = c.call(
        FETCH,
        11,
        {
            "max_wait": wait_ms,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "isolation_level": 1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                    ],
                }
            ],
        },
    )
    return r.responses[0].partitions[0]


def _values(records: bytes | None) -> list[bytes]:
    out, pos, data = [], 0, records or b""
    while pos + 61 <= len(data):
        h, recs = decode_batch(data, pos)
        if not h.is_control:
            out += [r.value for r in recs]
        pos += h.batch_length + 12
    return out


def test_state_machine_errors_and_kip_588_names(wire, broker):
    topic, tid = unique("sm"), unique("tid")
    create_topics(broker.bootstrap_servers, topic, partitions=1)
    r = _init(wire, tid)
    pid, epoch = int(r.producer_id), int(r.producer_epoch)
    assert r.error_code.name == "none" and epoch == 0
    assert _end(wire, tid, pid, epoch, True) == "invalid_txn_state"  # nothing to end
    assert _add(wire, tid, pid + 1, epoch, topic) == "invalid_producer_id_mapping"
    assert _add(wire, tid, pid, epoch, topic) == "none"
    assert _add(wire, "no-such-txn", pid, epoch, topic) == "invalid_producer_id_mapping"
    # a second InitProducerId fences this epoch (and aborts the open transaction)
    r2 = _init(wire, tid)
    assert (int(r2.producer_id), int(r2.producer_epoch)) == (pid, epoch + 2)
    assert _add(wire, tid, pid, epoch, topic, v=1) == "invalid_producer_epoch"  # before KIP-588
    assert _add(wire, tid, pid, epoch, topic, v=2) == "producer_fenced"
    assert _end(wire, tid, pid, epoch, True, v=1) == "invalid_producer_epoch"
    assert _end(wire, tid, pid, epoch, True, v=2) == "producer_fenced"


def test_kip_360_recovery_after_a_timed_out_transaction(wire, broker):
    topic, tid = unique("kip360"), unique("tid")
    create_topics(broker.bootstrap_servers, topic, partitions=1)
    r = _init(wire, tid, timeout_ms=500)
    pid, epoch = int(r.producer_id), int(r.producer_epoch)
    assert _add(wire, tid, pid, epoch, topic) == "none"
    assert _produce(wire, tid, topic, [b"t"], pid, epoch, 0)[0] == "none"
    deadline = time.monotonic() + 10
    state = None
    while time.monotonic() < deadline:
        state = wire.call(65, 0, {"transactional_ids": [tid]}).transaction_states[0]
        if state.transaction_state == "CompleteAbort":
            break  # the coordinator aborted it with a bumped epoch
        time.sleep(0.1)
    assert state is not None and state.transaction_state == "CompleteAbort"
    assert int(state.producer_epoch) == epoch + 1
    assert _end(wire, tid, pid, epoch, False) == "producer_fenced"
    # the producer names its id and old epoch: it gets the id back with a new epoch
    again = _init(wire, tid, timeout_ms=500, pid=pid, epoch=epoch)
    assert again.error_code.name == "none"
    assert int(again.producer_id) == pid and int(again.producer_epoch) > epoch + 1
    wrong = _init(wire, tid, pid=pid, epoch=0 if epoch else 7)
    assert wrong.error_code.name == "producer_fenced"


def test_verify_only_add_partitions(wire, broker):
    topic, tid = unique("verify"), unique("tid")
    create_topics(broker.bootstrap_servers, topic, partitions=2)
    r = _init(wire, tid)
    pid, epoch = int(r.producer_id), int(r.producer_epoch)
    assert _add(wire, tid, pid, epoch, topic) == "none"  # partition 0 only

    def verify(parts: list[int]) -> dict[int, str]:
        resp = wire.call(
            ADD_PARTS,
            4,
            {
                "transactions": [
                    {
                        "transactional_id": tid,
                        "producer_id": pid,
                        "producer_epoch": epoch,
                        "verify_only": True,
                        "topics": [{"name": topic, "partitions": parts}],
                    }
                ]
            },
        )
        res = resp.results_by_transaction[0].topic_results[0].results_by_partition
        return {int(p.partition_index): p.partition_error_code.name for p in res}

    assert verify([0, 1]) == {0: "none", 1: "invalid_txn_state"}
    assert verify([1]) == {1: "invalid_txn_state"}  # verifying adds nothing
    assert _end(wire, tid, pid, epoch, True) == "none"


def test_interleaved_records_lso_and_a_long_poll_woken_by_the_commit(wire, broker):
    topic, tid = unique("lso"), unique("tid")
    create_topics(broker.bootstrap_servers, topic, partitions=1)
    r = _init(wire, tid)
    pid, epoch = int(r.producer_id), int(r.producer_epoch)
    assert _produce(wire, None, topic, [b"before"])[0] == "none"  # offset 0
    assert _add(wire, tid, pid, epoch, topic) == "none"
    assert _produce(wire, tid, topic, [b"t1", b"t2"], pid, epoch, 0) == ("none", 1)
    assert _produce(wire, None, topic, [b"after"]) == ("none", 3)
    p = _fetch(wire, topic, 0)
    assert (int(p.high_watermark), int(p.last_stable_offset)) == (4, 1)
    assert _values(p.records) == [b"before"]  # up to the LSO only
    # a read_committed long poll at the LSO is woken by the commit marker
    got = {}
    other = WireClient(broker.bootstrap_servers)
    t = threading.Thread(target=lambda: got.setdefault("p", _fetch(other, topic, 1, 30000)))
    t.start()
    time.sleep(0.3)
    while _end(wire, tid, pid, epoch, True) == "concurrent_transactions":
        time.sleep(0.05)
    t.join(60)
    other.close()
    woken = got["p"]
    assert int(woken.last_stable_offset) == 5  # past the marker at offset 4
    assert _values(woken.records) == [b"t1", b"t2", b"after"]  # the marker is not a record


def test_transactional_id_expiration(tmp_path):
    b = ThreadedBroker(
        tmp_path,
        **{
            **BROKER_CONFIG,
            "transactional.id.expiration.ms": 1000,
            "transaction.remove.expired.transaction.cleanup.interval.ms": 200,
        },
    )
    b.start()
    wire = WireClient(b.bootstrap_servers)
    try:
        tid = unique("expire")
        assert _init(wire, tid).error_code.name == "none"

        def listed() -> set[str]:
            r = wire.call(66, 0, {"state_filters": [], "producer_id_filters": []})
            return {t.transactional_id for t in r.transaction_states}

        assert tid in listed()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and tid in listed():
            time.sleep(0.2)
        assert tid not in listed()
        state = wire.call(65, 0, {"transactional_ids": [tid]}).transaction_states[0]
        assert state.error_code.name == "transactional_id_not_found"
    finally:
        wire.close()
        b.stop()


def test_markers_of_an_older_coordinator_epoch_are_fenced(wire, broker):
    topic, tid = unique("coord-epoch"), unique("tid")
    create_topics(broker.bootstrap_servers, topic, partitions=1)
    r = _init(wire, tid)
    pid, epoch = int(r.producer_id), int(r.producer_epoch)

    def marker(coordinator_epoch: int) -> str:
        resp = wire.call(
            27,
            1,
            {
                "markers": [
                    {
                        "producer_id": pid,
                        "producer_epoch": epoch,
                        "transaction_result": False,
                        "topics": [{"name": topic, "partition_indexes": [0]}],
                        "coordinator_epoch": coordinator_epoch,
                    }
                ]
            },
        )
        return resp.markers[0].topics[0].partitions[0].error_code.name

    assert _add(wire, tid, pid, epoch, topic) == "none"
    assert _produce(wire, tid, topic, [b"x"], pid, epoch, 0)[0] == "none"
    assert marker(5) == "none"
    assert marker(3) == "transaction_coordinator_fenced"
    producers = wire.call(61, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
    [state] = producers.topics[0].partitions[0].active_producers
    assert (int(state.producer_id), int(state.coordinator_epoch)) == (pid, 5)
    assert int(state.current_txn_start_offset) == -1


def test_kip_890_verification_refuses_writes_outside_the_transaction(wire, broker):
    topic, tid = unique("verify-produce"), unique("tid")
    create_topics(broker.bootstrap_servers, topic, partitions=1)
    r = _init(wire, tid)
    pid, epoch = int(r.producer_id), int(r.producer_epoch)
    # partition 0 was never added to a transaction: the leader asks the coordinator, no
    assert _produce(wire, tid, topic, [b"stray"], pid, epoch, 0)[0] == "invalid_txn_state"
    assert _add(wire, tid, pid, epoch, topic) == "none"
    assert _produce(wire, tid, topic, [b"in"], pid, epoch, 0)[0] == "none"
    assert _end(wire, tid, pid, epoch, False) == "none"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        p = _fetch(wire, topic, 0)
        if int(p.last_stable_offset) == int(p.high_watermark):
            break  # the abort marker is written
        time.sleep(0.05)
    # a late write after the abort would open a transaction nobody closes: refused
    assert _produce(wire, tid, topic, [b"late"], pid, epoch, 1)[0] == "invalid_txn_state"
    p = _fetch(wire, topic, 0)
    assert int(p.last_stable_offset) == int(p.high_watermark)  # nothing left hanging


def test_without_verification_a_late_write_hangs_until_its_timeout(tmp_path):
    b = ThreadedBroker(
        tmp_path, **{**BROKER_CONFIG, "transaction.partition.verification.enable": False}
    )
    b.start()
    wire = WireClient(b.bootstrap_servers)
    try:
        topic, tid = unique("no-verify"), unique("tid")
        create_topics(b.bootstrap_servers, topic, partitions=1)
        r = _init(wire, tid)
        pid, epoch = int(r.producer_id), int(r.producer_epoch)
        assert _produce(wire, tid, topic, [b"stray"], pid, epoch, 0)[0] == "none"
        p = _fetch(wire, topic, 0)
        assert (int(p.last_stable_offset), int(p.high_watermark)) == (0, 1)
    finally:
        wire.close()
        b.stop()


def test_init_producer_id_naming_an_id_on_first_use_like_kafka(wire, broker):
    """KafkaApis/TransactionCoordinator: a new transactional id accepts whatever id and
    epoch the request names (@platformatic/kafka sends 0/0 on its first call: kafkalite
    answered PRODUCER_FENCED); without a transactional id every call gets a fresh id at
    epoch 0 (kafkalite bumped the named id's epoch, handing two producers id 0); an id
    without an epoch, or the reverse, is INVALID_REQUEST."""
    tid = unique("first-use")
    r = _init(wire, tid, pid=0, epoch=0)
    assert r.error_code.name == "none" and int(r.producer_epoch) == 0
    pid = int(r.producer_id)
    # now the id has an epoch: naming another producer's id is fenced, as before
    assert _init(wire, tid, pid=pid + 1000, epoch=0).error_code.name == "producer_fenced"
    ids = set()
    for _ in range(2):
        r = wire.call(
            INIT,
            4,
            {
                "transactional_id": None,
                "transaction_timeout": 1000,
                "producer_id": 0,
                "producer_epoch": 0,
            },
        )
        assert r.error_code.name == "none" and int(r.producer_epoch) == 0
        ids.add(int(r.producer_id))
    assert len(ids) == 2 and pid not in ids
    for named in ((5, -1), (-1, 5)):
        r = wire.call(
            INIT,
            4,
            {
                "transactional_id": None,
                "transaction_timeout": 1000,
                "producer_id": named[0],
                "producer_epoch": named[1],
            },
        )
        assert r.error_code.name == "invalid_request"
