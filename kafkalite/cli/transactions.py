"""``kafkalite transactions``: Kafka's ``kafka-transactions.sh`` (list, describe,
describe-producers, abort of a hanging transaction).

``list`` asks every broker (each coordinator knows its own transactional ids);
``abort`` finds the producer whose open transaction starts at ``--start-offset``
(DescribeProducers) and writes an ABORT marker for it with WriteTxnMarkers on
the partition's leader, as Kafka's ``Admin.abortTransaction`` does.
"""

from __future__ import annotations

import argparse
import struct
import sys
from dataclasses import dataclass
from typing import Any

from kafkalite.cli.wire_client import WireClient
from kafkalite.protocol.errors import ErrorCode

METADATA, WRITE_TXN_MARKERS, DESCRIBE_PRODUCERS = 3, 27, 61
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS, FIND_COORDINATOR = 65, 66, 10


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", required=True)
    sub = p.add_subparsers(dest="txn_cmd", required=True)
    ls = sub.add_parser("list", help="transactional ids and their states")
    ls.add_argument("--state", action="append", default=[])
    ls.add_argument("--producer-id", action="append", type=int, default=[])
    d = sub.add_parser("describe", help="one transactional id's state")
    d.add_argument("--transactional-id", required=True)
    dp = sub.add_parser("describe-producers", help="the active producers of a partition")
    dp.add_argument("--topic", required=True)
    dp.add_argument("--partition", type=int, required=True)
    a = sub.add_parser("abort", help="abort a hanging transaction on a partition")
    a.add_argument("--topic", required=True)
    a.add_argument("--partition", type=int, required=True)
    a.add_argument("--start-offset", type=int, required=True)


def _brokers(c: WireClient) -> dict[int, str]:
    md = c.call(
        METADATA, c.version_for(METADATA, 9), {"topics": [], "allow_auto_topic_creation": False}
    )
    return {int(b.node_id): f"{b.host}:{b.port}" for b in md.brokers}


def _leader(c: WireClient, topic: str, partition: int) -> str | None:
    md = c.call(
        METADATA,
        c.version_for(METADATA, 9),
        {"topics": [{"name": topic}], "allow_auto_topic_creation": False},
    )
    brokers = {int(b.node_id): f"{b.host}:{b.port}" for b in md.brokers}
    for t in md.topics:
        for p in t.partitions:
            if int(p.partition_index) == partition:
                return brokers.get(int(p.leader_id))
    return None


@dataclass
class _TxnState:
    error_code: int
    transactional_id: str
    transaction_state: str
    timeout_ms: int
    start_ms: int
    producer_id: int
    producer_epoch: int
    partitions: list[tuple[str, int]]


def _describe_transactions(c: WireClient, ids: list[str]) -> list[_TxnState]:
    """DescribeTransactions v0 decoded by hand: Kafka sends -1 as the start time of an id
    with no transaction yet, which kio's timestamp reader refuses."""
    frame, pos = c.call_raw(DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ids})

    def uvarint() -> int:
        nonlocal pos
        v, shift = 0, 0
        while True:
            b = frame[pos]
            pos += 1
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7

    def fixed(fmt: str) -> int:
        nonlocal pos
        (v,) = struct.unpack_from(fmt, frame, pos)
        pos += struct.calcsize(fmt)
        return int(v)

    def string() -> str:
        nonlocal pos
        n = uvarint() - 1
        s = frame[pos : pos + n].decode()
        pos += n
        return s

    def skip_tags() -> None:
        nonlocal pos
        for _ in range(uvarint()):
            uvarint()
            pos += uvarint()

    fixed(">i")  # throttle time
    out = []
    for _ in range(uvarint() - 1):
        err, tid, state = fixed(">h"), string(), string()
        timeout, start, pid, epoch = fixed(">i"), fixed(">q"), fixed(">q"), fixed(">h")
        parts = []
        for _ in range(uvarint() - 1):
            topic = string()
            parts += [(topic, fixed(">i")) for _ in range(uvarint() - 1)]
            skip_tags()
        skip_tags()
        out.append(_TxnState(err, tid, state, timeout, start, pid, epoch, parts))
    return out


def _producers(addr: str, topic: str, partition: int) -> Any:
    c = WireClient(addr)
    try:
        r = c.call(
            DESCRIBE_PRODUCERS,
            0,
            {"topics": [{"name": topic, "partition_indexes": [partition]}]},
        )
        return r.topics[0].partitions[0]
    finally:
        c.close()


def run(args: argparse.Namespace) -> int:
    c = WireClient(args.bootstrap_server)
    try:
        if args.txn_cmd == "list":
            rows = []
            for addr in _brokers(c).values():
                b = WireClient(addr)
                try:
                    r = b.call(
                        LIST_TRANSACTIONS,
                        b.version_for(LIST_TRANSACTIONS, 1),
                        {
                            "state_filters": args.state,
                            "producer_id_filters": args.producer_id,
                            "duration_filter": -1,
                        },
                    )
                finally:
                    b.close()
                rows += [
                    (t.transactional_id, int(t.producer_id), t.transaction_state)
                    for t in r.transaction_states
                ]
            print(f"{'TransactionalId':<40} {'ProducerId':>12} TransactionState")
            for tid, pid, state in sorted(rows):
                print(f"{tid:<40} {pid:>12} {state}")
            return 0
        if args.txn_cmd == "describe":
            fc = c.call(
                FIND_COORDINATOR,
                c.version_for(FIND_COORDINATOR, 4),
                {"key_type": 1, "coordinator_keys": [args.transactional_id]},
            )
            coord = fc.coordinators[0]
            if coord.error_code:
                print(f"Error: {coord.error_code.name}", file=sys.stderr)
                return 1
            b = WireClient(f"{coord.host}:{coord.port}")
            try:
                [st] = _describe_transactions(b, [args.transactional_id])
            finally:
                b.close()
            if st.error_code:
                print(f"Error: {ErrorCode(st.error_code).name}", file=sys.stderr)
                return 1
            parts = ",".join(f"{t}-{p}" for t, p in st.partitions)
            print(
                f"CoordinatorId\tTransactionalId\tProducerId\tProducerEpoch\tTransactionState"
                f"\tTransactionTimeoutMs\tCurrentTransactionStartTimeMs\tTopicPartitions\n"
                f"{coord.node_id}\t{st.transactional_id}\t{st.producer_id}\t{st.producer_epoch}"
                f"\t{st.transaction_state}\t{st.timeout_ms}\t{st.start_ms}\t{parts}"
            )
            return 0
        leader = _leader(c, args.topic, args.partition)
        if leader is None:
            print(f"Error: no leader for {args.topic}-{args.partition}", file=sys.stderr)
            return 1
        state = _producers(leader, args.topic, args.partition)
        if state.error_code:
            print(f"Error: {state.error_code.name}", file=sys.stderr)
            return 1
        if args.txn_cmd == "describe-producers":
            print(
                "ProducerId\tProducerEpoch\tLastSequence\tLastTimestamp\tCurrentTransactionStartOffset"
            )
            for p in state.active_producers:
                print(
                    f"{p.producer_id}\t{p.producer_epoch}\t{p.last_sequence}\t{p.last_timestamp}"
                    f"\t{p.current_txn_start_offset}"
                )
            return 0
        # abort
        match = [
            p for p in state.active_producers if p.current_txn_start_offset == args.start_offset
        ]
        if not match:
            print(
                f"Error: no open transaction starts at offset {args.start_offset} of "
                f"{args.topic}-{args.partition}",
                file=sys.stderr,
            )
            return 1
        p = match[0]
        b = WireClient(leader)
        try:
            r = b.call(
                WRITE_TXN_MARKERS,
                1,
                {
                    "markers": [
                        {
                            "producer_id": p.producer_id,
                            "producer_epoch": p.producer_epoch,
                            "transaction_result": False,
                            "topics": [{"name": args.topic, "partition_indexes": [args.partition]}],
                            "coordinator_epoch": max(int(p.coordinator_epoch), 0),
                        }
                    ]
                },
            )
        finally:
            b.close()
        code = r.markers[0].topics[0].partitions[0].error_code
        if code:
            print(f"Error: {code.name}", file=sys.stderr)
            return 1
        print(
            f"Aborted the transaction of producer {p.producer_id} (epoch {p.producer_epoch}) "
            f"starting at offset {args.start_offset} of {args.topic}-{args.partition}."
        )
        return 0
    finally:
        c.close()
