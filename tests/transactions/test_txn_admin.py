"""DescribeProducers, DescribeTransactions, ListTransactions and ``kafkalite transactions``."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from kafkalite.cli.admin import main
from kafkalite.cli.wire_client import WireClient
from tests.transactions.eos import BROKER_CONFIG, create_topics, read_all, unique


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    from kafkalite.testing.embedded_broker import ThreadedBroker

    b = ThreadedBroker(tmp_path_factory.mktemp("txn-admin"), **BROKER_CONFIG)
    b.start()
    try:
        yield b.bootstrap_servers
    finally:
        b.stop()


def _hanging(bootstrap: str, topic: str, tid: str) -> Producer:
    p = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 60000}
    )
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"hanging", partition=0)
    assert p.flush(10) == 0
    return p


def test_admin_apis_and_cli_abort_a_hanging_transaction(bootstrap, capsys):
    topic, tid = unique("hang"), unique("tid")
    create_topics(bootstrap, topic, partitions=1)
    _hanging(bootstrap, topic, tid)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value=b"after", partition=0)
    assert plain.flush(10) == 0

    c = WireClient(bootstrap)
    try:
        listed = c.call(
            66,
            1,
            {
                "state_filters": ["Ongoing", "Bogus"],
                "producer_id_filters": [],
                "duration_filter": -1,
            },
        )
        assert list(listed.unknown_state_filters) == ["Bogus"]
        assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
            (tid, "Ongoing")
        ]
        none = c.call(
            66, 0, {"state_filters": ["CompleteCommit"], "producer_id_filters": []}
        ).transaction_states
        assert tid not in {t.transactional_id for t in none}
        described = c.call(65, 0, {"transactional_ids": [tid, "no-such-id"]}).transaction_states
        assert described[0].transaction_state == "Ongoing"
        assert [(t.topic, list(t.partitions)) for t in described[0].topics] == [(topic, [0])]
        assert described[1].error_code.name == "transactional_id_not_found"
        producers = (
            c.call(61, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
            .topics[0]
            .partitions[0]
        )
        [active] = [p for p in producers.active_producers if p.current_txn_start_offset == 0]
        assert active.producer_id == described[0].producer_id
    finally:
        c.close()

    assert main(["transactions", "--bootstrap-server", bootstrap, "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert [tid, "0", "Ongoing"] == [
        r.split()[i] for r in out if r.startswith(tid) for i in (0, 1, 3)
    ]
    assert (
        main(
            ["transactions", "--bootstrap-server", bootstrap, "describe", "--transactional-id", tid]
        )
        == 0
    )
    assert "Ongoing" in capsys.readouterr().out
    args = ["transactions", "--bootstrap-server", bootstrap]
    where = ["--topic", topic, "--partition", "0"]
    assert main([*args, "describe-producers", *where]) == 0
    out = capsys.readouterr().out.splitlines()
    # kafka-transactions.sh's table (ToolsUtils.prettyPrintTable: padded, tab-ended)
    assert out[0].split() == [
        "ProducerId",
        "ProducerEpoch",
        "LatestCoordinatorEpoch",
        "LastSequence",
        "LastTimestamp",
        "CurrentTransactionStartOffset",
    ]
    assert out[1].endswith("\t") and out[1].split()[-1] == "0"
    # find-hanging: the open transaction is a candidate (older than 0 minutes) but its
    # coordinator still has the partition in it: not hanging, Kafka's header only
    assert main([*args, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0"]) == 0
    assert capsys.readouterr().out.split() == [
        "Topic",
        "Partition",
        "ProducerId",
        "ProducerEpoch",
        "CoordinatorEpoch",
        "StartOffset",
        "LastTimestamp",
        "Duration(min)",
    ]
    assert main([*args, "find-hanging"]) == 2
    assert "requires either --topic or --broker-id" in capsys.readouterr().err
    assert main([*args, "abort", *where, "--start-offset", "5"]) == 1
    assert capsys.readouterr().err == (
        f"Error: Could not find any open transactions starting at offset 5 on partition {topic}-0\n"
    )
    assert main([*args, "abort", *where, "--start-offset", "0"]) == 0
    assert capsys.readouterr().out == ""  # silent on success, as Kafka's tool
    # the LSO moved: read_committed sees the record behind the hanging transaction
    assert read_all(bootstrap, topic, "read_committed", 1, timeout_s=10, partitions=1) == [b"after"]


def test_find_coordinator_key_type_1_batched(bootstrap):
    c = WireClient(bootstrap)
    try:
        r = c.call(10, 4, {"key_type": 1, "coordinator_keys": ["a", "b", ""]})
        codes = [x.error_code.name for x in r.coordinators]
        assert codes[:2] == ["none", "none"] and codes[2] == "invalid_request"
        assert {x.node_id for x in r.coordinators[:2]} == {0}
        r3 = c.call(10, 3, {"key": "a", "key_type": 1})
        assert r3.error_code.name == "none" and r3.node_id == 0
    finally:
        c.close()


def test_cli_describes_an_id_without_a_transaction(bootstrap, capsys):
    tid = unique("idle")
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    args = ["transactions", "--bootstrap-server", bootstrap, "describe", "--transactional-id"]
    assert main([*args, tid]) == 0
    row = [v.strip() for v in capsys.readouterr().out.splitlines()[1].split("\t")]
    assert row[1] == tid and row[4] == "Empty" and row[6:8] == ["None", "None"]
    assert main([*args, "never-seen"]) == 1
    assert "TRANSACTIONAL_ID_NOT_FOUND" in capsys.readouterr().err.upper()
