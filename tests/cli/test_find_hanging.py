"""``kafkalite transactions find-hanging``'s decision (Kafka's filterHangingTransactions),
on the states a live broker rarely shows: a producer id no coordinator knows, and a
transaction whose coordinator has moved past the partition. The live command runs in
tests/transactions/test_txn_admin.py."""

from __future__ import annotations

from kafkalite.cli.transactions import OpenTxn, hanging


def txn(pid: int, topic: str = "t", partition: int = 0) -> OpenTxn:
    return OpenTxn(topic, partition, pid, 0, 0, 5, 1_700_000_000_000)


def test_unknown_producer_and_partition_outside_the_transaction_hang():
    known, orphan, moved = txn(1), txn(2), txn(3, partition=1)
    txn_ids = {1: "a", 3: "c"}
    described = {"a": [("t", 0)], "c": [("t", 0)]}
    assert hanging([known, orphan, moved], txn_ids, described) == [orphan, moved]
    # an id the coordinator could not describe: hanging too
    assert hanging([known], txn_ids, {}) == [known]
