"""``__transaction_state`` records in Kafka's exact formats, and a transaction's metadata.

Key: int16 key version 0, then TransactionLogKey v0 (TransactionalId: string).
Value: int16 value version, then TransactionLogValue (v0, or v1 flexible with
tagged PreviousProducerId, NextProducerId, ClientTransactionVersion), null for a
tombstone (an expired transactional id). kafkalite writes v0 for transactions
of the V1 protocol and v1 (with NextProducerId and ClientTransactionVersion 2)
for those of transactions V2 (KIP-890 part 2), as Kafka 4 does; it reads both.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum

from kafkalite.common import structs
from kafkalite.common.types import TopicPartition
from kafkalite.coordinator.group.offset_codec import java_string_hash, kafka_abs
from kafkalite.protocol.varint import decode_unsigned_varint, encode_unsigned_varint

TRANSACTION_STATE_TOPIC = "__transaction_state"
MAX_EPOCH = 32767  # Short.MaxValue
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

_VALUE_HEAD = struct.Struct(">qhib")  # producer id, epoch, timeout, status
_TIMES = struct.Struct(">qq")  # last update, start


class CodecError(ValueError):
    pass


class TxnState(IntEnum):
    """Kafka's TransactionState ids (as stored in TransactionStatus)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use (Kafka's stateName)."""
        return {
            TxnState.EMPTY: "Empty",
            TxnState.ONGOING: "Ongoing",
            TxnState.PREPARE_COMMIT: "PrepareCommit",
            TxnState.PREPARE_ABORT: "PrepareAbort",
            TxnState.COMPLETE_COMMIT: "CompleteCommit",
            TxnState.COMPLETE_ABORT: "CompleteAbort",
            TxnState.DEAD: "Dead",
            TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
        }[self]


#: states a transaction may go to from each state (Kafka's TransactionState.validPreviousStates)
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset(
        {TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}
    ),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset(
        {
            TxnState.ONGOING,
            TxnState.PREPARE_EPOCH_FENCE,
            TxnState.EMPTY,
            TxnState.COMPLETE_COMMIT,
            TxnState.COMPLETE_ABORT,
        }
    ),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """Utils.abs(transactionalId.hashCode) % partitions, as for groups."""
    return kafka_abs(java_string_hash(transactional_id)) % num_partitions


@dataclass(slots=True)
class TxnMetadata:
    """One transactional id's state (Kafka's TransactionMetadata)."""

    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_ms: int = -1
    txn_last_update_ms: int = -1
    #: the state a write to the log is moving to (CONCURRENT_TRANSACTIONS meanwhile)
    pending_state: TxnState | None = None
    #: transactions V2: the producer id the producer moves to when this transaction
    #: completes (its epoch was exhausted by the bump of EndTxn)
    next_producer_id: int = NO_PRODUCER_ID
    #: the transaction protocol of the producer's last transaction (2: KIP-890 part 2)
    client_txn_version: int = 0

    def copy_for_write(self, **changes: object) -> TxnMetadata:
        """The record to write: this metadata with ``changes`` (Kafka's TxnTransitMetadata)."""
        m = TxnMetadata(
            self.transactional_id,
            self.producer_id,
            self.last_producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            self.state,
            set(self.partitions),
            self.txn_start_ms,
            self.txn_last_update_ms,
            None,
            self.next_producer_id,
            self.client_txn_version,
        )
        for k, v in changes.items():
            setattr(m, k, v)
        return m

    def apply(self, m: TxnMetadata) -> None:
        """Take the written state (the write succeeded)."""
        self.producer_id = m.producer_id
        self.last_producer_id = m.last_producer_id
        self.producer_epoch = m.producer_epoch
        self.last_producer_epoch = m.last_producer_epoch
        self.txn_timeout_ms = m.txn_timeout_ms
        self.state = m.state
        self.partitions = set(m.partitions)
        self.txn_start_ms = m.txn_start_ms
        self.txn_last_update_ms = m.txn_last_update_ms
        self.next_producer_id = m.next_producer_id
        self.client_txn_version = m.client_txn_version
        self.pending_state = None


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return structs.I16.pack(len(b)) + b


def encode_key(transactional_id: str) -> bytes:
    return structs.I16.pack(0) + _string(transactional_id)


def decode_key(data: bytes) -> str:
    if len(data) < 4:
        raise CodecError("transaction log key is too short")
    version = structs.I16.unpack_from(data, 0)[0]
    if version != 0:
        raise CodecError(f"unknown transaction log key version {version}")
    n = structs.I16.unpack_from(data, 2)[0]
    return data[4 : 4 + n].decode("utf-8")


def encode_value(m: TxnMetadata) -> bytes:
    """TransactionLogValue: v0, or v1 for a transactions V2 producer (its tagged fields
    carry the id rotation and the client's transaction version). Empty and Complete*
    states store no partitions (as Kafka)."""
    if m.client_txn_version >= 2:
        return _encode_value_v1(m)
    out = bytearray(structs.I16.pack(0))
    out += _VALUE_HEAD.pack(m.producer_id, m.producer_epoch, m.txn_timeout_ms, int(m.state))
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(m.partitions):
        by_topic.setdefault(t, []).append(p)
    out += struct.pack(">i", len(by_topic))
    for t, ps in by_topic.items():
        out += _string(t)
        out += struct.pack(f">i{len(ps)}i", len(ps), *ps)
    out += _TIMES.pack(m.txn_last_update_ms, m.txn_start_ms)
    return bytes(out)


def _encode_value_v1(m: TxnMetadata) -> bytes:
    out = bytearray(structs.I16.pack(1))
    out += _VALUE_HEAD.pack(m.producer_id, m.producer_epoch, m.txn_timeout_ms, int(m.state))
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(m.partitions):
        by_topic.setdefault(t, []).append(p)
    out += encode_unsigned_varint(len(by_topic) + 1)
    for t, ps in by_topic.items():
        b = t.encode("utf-8")
        out += encode_unsigned_varint(len(b) + 1) + b
        out += encode_unsigned_varint(len(ps) + 1) + struct.pack(f">{len(ps)}i", *ps)
        out += b"\x00"  # no tagged fields
    out += _TIMES.pack(m.txn_last_update_ms, m.txn_start_ms)
    tags: list[tuple[int, bytes]] = []
    if m.last_producer_id != NO_PRODUCER_ID:
        tags.append((0, struct.pack(">q", m.last_producer_id)))
    if m.next_producer_id != NO_PRODUCER_ID:
        tags.append((1, struct.pack(">q", m.next_producer_id)))
    if m.client_txn_version:
        tags.append((2, structs.I16.pack(m.client_txn_version)))
    out += encode_unsigned_varint(len(tags))
    for tag, data in tags:
        out += encode_unsigned_varint(tag) + encode_unsigned_varint(len(data)) + data
    return bytes(out)


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    try:
        return _decode_value(transactional_id, data)
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as e:
        raise CodecError(f"undecodable transaction log value: {e}") from e


def _decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    version = structs.I16.unpack_from(data, 0)[0]
    if version not in (0, 1):
        raise CodecError(f"unknown transaction log value version {version}")
    flexible = version >= 1
    pos = 2
    pid, epoch, timeout, status = _VALUE_HEAD.unpack_from(data, pos)
    pos += _VALUE_HEAD.size

    def array_len() -> int:
        nonlocal pos
        if flexible:
            n, pos = decode_unsigned_varint(data, pos)
            return n - 1
        n = struct.unpack_from(">i", data, pos)[0]
        pos += 4
        return int(n)

    def string() -> str:
        nonlocal pos
        if flexible:
            n, pos = decode_unsigned_varint(data, pos)
            n -= 1
        else:
            n = structs.I16.unpack_from(data, pos)[0]
            pos += 2
        s = data[pos : pos + n].decode("utf-8")
        pos += n
        return s

    def skip_tags() -> dict[int, bytes]:
        nonlocal pos
        tags: dict[int, bytes] = {}
        if not flexible:
            return tags
        count, pos = decode_unsigned_varint(data, pos)
        for _ in range(count):
            tag, pos = decode_unsigned_varint(data, pos)
            size, pos = decode_unsigned_varint(data, pos)
            tags[tag] = data[pos : pos + size]
            pos += size
        return tags

    partitions: set[TopicPartition] = set()
    n_topics = array_len()
    for _ in range(max(n_topics, 0)):
        topic = string()
        n_parts = array_len()
        for _ in range(max(n_parts, 0)):
            partitions.add((topic, struct.unpack_from(">i", data, pos)[0]))
            pos += 4
        skip_tags()
    last_update, start = _TIMES.unpack_from(data, pos)
    pos += _TIMES.size
    tags = skip_tags()
    previous = struct.unpack(">q", tags[0])[0] if len(tags.get(0, b"")) == 8 else -1
    next_pid = struct.unpack(">q", tags[1])[0] if len(tags.get(1, b"")) == 8 else -1
    tv = structs.I16.unpack(tags[2])[0] if len(tags.get(2, b"")) == 2 else 0
    return TxnMetadata(
        transactional_id,
        pid,
        previous,
        epoch,
        NO_PRODUCER_EPOCH,
        timeout,
        TxnState(status),
        partitions,
        start,
        last_update,
        None,
        next_pid,
        tv,
    )


__all__ = [
    "MAX_EPOCH",
    "TRANSACTION_STATE_TOPIC",
    "CodecError",
    "TxnMetadata",
    "TxnState",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "partition_for",
]
