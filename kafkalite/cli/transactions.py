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
import time
from dataclasses import dataclass
from typing import Any

from kafkalite.cli.common import pretty_table
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
    ls.add_argument("--duration-filter", type=int, default=-1, help="ms; only older ones")
    d = sub.add_parser("describe", help="one transactional id's state")
    d.add_argument("--transactional-id", required=True)
    dp = sub.add_parser("describe-producers", help="the active producers of a partition")
    dp.add_argument("--topic", required=True)
    dp.add_argument("--partition", type=int, required=True)
    fh = sub.add_parser("find-hanging", help="open transactions their coordinator does not know")
    fh.add_argument("--broker-id", type=int)
    fh.add_argument("--topic")
    fh.add_argument("--partition", type=int)
    fh.add_argument("--max-transaction-timeout", type=int, default=15, help="minutes")
    a = sub.add_parser("abort", help="abort a hanging transaction on a partition")
    a.add_argument("--topic", required=True)
    a.add_argument("--partition", type=int, required=True)
    a.add_argument("--start-offset", type=int)
    a.add_argument("--producer-id", type=int)
    a.add_argument("--producer-epoch", type=int)
    a.add_argument("--coordinator-epoch", type=int)


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
class _Spec:
    """The producer whose transaction ``abort`` ends (Kafka's AbortTransactionSpec)."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


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


@dataclass
class OpenTxn:
    """A producer's open transaction on a partition (DescribeProducers)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp: int


def hanging(
    candidates: list[OpenTxn], txn_ids: dict[int, str], described: dict[str, list[tuple[str, int]]]
) -> list[OpenTxn]:
    """Kafka's filterHangingTransactions: an open transaction hangs when no transactional
    id has its producer id, or its id's transaction does not include the partition (the
    coordinator will never write that partition's marker)."""
    out = []
    for t in candidates:
        tid = txn_ids.get(t.producer_id)
        if tid is None or tid not in described or (t.topic, t.partition) not in described[tid]:
            out.append(t)
    return out


def _find_hanging(c: WireClient, args: argparse.Namespace) -> int:
    if args.topic is None and args.broker_id is None:
        print(
            "Error: The `find-hanging` command requires either --topic or --broker-id to limit "
            "the scope of the search",
            file=sys.stderr,
        )
        return 2
    if args.partition is not None and args.topic is None:
        print("Error: The --partition argument requires --topic to be provided", file=sys.stderr)
        return 2
    md = c.call(
        METADATA,
        c.version_for(METADATA, 9),
        {
            "topics": None if args.topic is None else [{"name": args.topic}],
            "allow_auto_topic_creation": False,
        },
    )
    brokers = {int(b.node_id): f"{b.host}:{b.port}" for b in md.brokers}
    # (topic, partition) -> the broker to ask: --broker-id's replicas, else the leader
    where: dict[tuple[str, int], int] = {}
    for t in md.topics:
        if t.error_code:
            print(f"Error: topic {t.name}: {t.error_code.name}", file=sys.stderr)
            return 1
        for p in t.partitions:
            if args.partition is not None and int(p.partition_index) != args.partition:
                continue
            if args.broker_id is None:
                where[(t.name, int(p.partition_index))] = int(p.leader_id)
            elif args.broker_id in [int(r) for r in p.replica_nodes]:
                where[(t.name, int(p.partition_index))] = args.broker_id
    now = int(time.time() * 1000)
    max_ms = args.max_transaction_timeout * 60_000
    candidates: list[OpenTxn] = []
    for node in sorted(set(where.values())):
        if node not in brokers:
            continue
        tps = sorted(tp for tp, n in where.items() if n == node)
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        b = WireClient(brokers[node])
        try:
            r = b.call(
                DESCRIBE_PRODUCERS,
                0,
                {"topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]},
            )
        finally:
            b.close()
        for t in r.topics:
            for p in t.partitions:
                for s in p.active_producers if not p.error_code else ():
                    if s.current_txn_start_offset >= 0 and now - s.last_timestamp > max_ms:
                        candidates.append(
                            OpenTxn(
                                t.name,
                                int(p.partition_index),
                                int(s.producer_id),
                                int(s.producer_epoch),
                                int(s.coordinator_epoch),
                                int(s.current_txn_start_offset),
                                int(s.last_timestamp),
                            )
                        )
    txn_ids: dict[int, str] = {}
    described: dict[str, list[tuple[str, int]]] = {}
    if candidates:
        pids = sorted({t.producer_id for t in candidates})
        for addr in brokers.values():
            b = WireClient(addr)
            try:
                r = b.call(
                    LIST_TRANSACTIONS,
                    b.version_for(LIST_TRANSACTIONS, 1),
                    {"state_filters": [], "producer_id_filters": pids, "duration_filter": -1},
                )
                ids = {str(x.transactional_id): int(x.producer_id) for x in r.transaction_states}
                txn_ids.update({pid: tid for tid, pid in ids.items()})
                for st in _describe_transactions(b, sorted(ids)) if ids else []:
                    if not st.error_code:
                        described[st.transactional_id] = list(st.partitions)
            finally:
                b.close()
    rows = [
        [
            t.topic,
            str(t.partition),
            str(t.producer_id),
            str(t.producer_epoch),
            str(t.coordinator_epoch),
            str(t.start_offset),
            str(t.last_timestamp),
            str((now - t.last_timestamp) // 60_000),
        ]
        for t in hanging(candidates, txn_ids, described)
    ]
    pretty_table(
        [
            "Topic",
            "Partition",
            "ProducerId",
            "ProducerEpoch",
            "CoordinatorEpoch",
            "StartOffset",
            "LastTimestamp",
            "Duration(min)",
        ],
        rows,
    )
    return 0


def run(args: argparse.Namespace) -> int:
    c = WireClient(args.bootstrap_server)
    try:
        if args.txn_cmd == "list":
            rows = []
            for node, addr in sorted(_brokers(c).items()):
                b = WireClient(addr)
                try:
                    r = b.call(
                        LIST_TRANSACTIONS,
                        b.version_for(LIST_TRANSACTIONS, 1),
                        {
                            "state_filters": args.state,
                            "producer_id_filters": args.producer_id,
                            "duration_filter": args.duration_filter,
                        },
                    )
                finally:
                    b.close()
                rows += [
                    [t.transactional_id, str(node), str(int(t.producer_id)), t.transaction_state]
                    for t in r.transaction_states
                ]
            pretty_table(
                ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], sorted(rows)
            )
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
            started = st.start_ms >= 0
            pretty_table(
                [
                    "CoordinatorId",
                    "TransactionalId",
                    "ProducerId",
                    "ProducerEpoch",
                    "TransactionState",
                    "TransactionTimeoutMs",
                    "CurrentTransactionStartTimeMs",
                    "TransactionDurationMs",
                    "TopicPartitions",
                ],
                [
                    [
                        str(coord.node_id),
                        st.transactional_id,
                        str(st.producer_id),
                        str(st.producer_epoch),
                        st.transaction_state,
                        str(st.timeout_ms),
                        str(st.start_ms) if started else "None",
                        str(int(time.time() * 1000) - st.start_ms) if started else "None",
                        parts,
                    ]
                ],
            )
            return 0
        if args.txn_cmd == "find-hanging":
            return _find_hanging(c, args)
        leader = _leader(c, args.topic, args.partition)
        if leader is None:
            print(f"Error: no leader for {args.topic}-{args.partition}", file=sys.stderr)
            return 1
        state = _producers(leader, args.topic, args.partition)
        if state.error_code:
            print(f"Error: {state.error_code.name}", file=sys.stderr)
            return 1
        if args.txn_cmd == "describe-producers":
            pretty_table(
                [
                    "ProducerId",
                    "ProducerEpoch",
                    "LatestCoordinatorEpoch",
                    "LastSequence",
                    "LastTimestamp",
                    "CurrentTransactionStartOffset",
                ],
                [
                    [
                        str(p.producer_id),
                        str(p.producer_epoch),
                        str(p.coordinator_epoch),
                        str(p.last_sequence),
                        str(p.last_timestamp),
                        str(p.current_txn_start_offset)
                        if p.current_txn_start_offset >= 0
                        else "None",
                    ]
                    for p in state.active_producers
                ],
            )
            return 0
        # abort: by --start-offset (DescribeProducers finds the producer), or by
        # --producer-id/--producer-epoch/--coordinator-epoch, as kafka-transactions.sh
        if args.start_offset is None:
            if args.producer_id is None or args.producer_epoch is None:
                print(
                    "Error: The transaction to abort must be identified either with "
                    "--start-offset or with --producer-id, --producer-epoch, and "
                    "--coordinator-epoch",
                    file=sys.stderr,
                )
                return 2
            p: Any = _Spec(args.producer_id, args.producer_epoch, args.coordinator_epoch or 0)
        else:
            match = [
                p for p in state.active_producers if p.current_txn_start_offset == args.start_offset
            ]
            if not match:
                print(
                    f"Error: Could not find any open transactions starting at offset "
                    f"{args.start_offset} on partition {args.topic}-{args.partition}",
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
            print(f"Error: Failed to abort transaction: {code.name}", file=sys.stderr)
            return 1
        return 0  # silent on success, as kafka-transactions.sh
    finally:
        c.close()
