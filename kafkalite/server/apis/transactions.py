"""Transactions: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
WriteTxnMarkers (27), TxnOffsetCommit (28), DescribeProducers (61),
DescribeTransactions (65), ListTransactions (66).

The coordinator side lives in ``coordinator/transaction`` (the state machine)
and ``coordinator/group/txn_offsets`` (pending offsets); WriteTxnMarkers is the
partition side: it appends control batches on this broker's leaders.
"""

from __future__ import annotations

import datetime
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.common.types import TopicPartition
from kafkalite.coordinator.group.group_metadata import OffsetAndMetadata
from kafkalite.coordinator.group.txn_offsets import (
    complete_txn_offsets,
    handle_txn_commit_offsets,
)
from kafkalite.coordinator.transaction.txn_log import TxnState
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.record_validator import WritableBuffer
from kafkalite.protocol.records import ControlRecordType, build_control_batch

if TYPE_CHECKING:
    from kafkalite.coordinator.group.group_coordinator import GroupCoordinator
    from kafkalite.coordinator.transaction.txn_coordinator import TransactionCoordinator
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.replica.replica_manager import ReplicaManager
    from kafkalite.server.apis.request_types import (
        AddOffsetsToTxnRequest,
        AddPartitionsToTxnRequest,
        DescribeProducersRequest,
        DescribeTransactionsRequest,
        EndTxnRequest,
        ListTransactionsRequest,
        TxnOffsetCommitRequest,
        WriteTxnMarkersRequest,
    )
    from kafkalite.server.metadata_cache import MetadataCache
    from kafkalite.server.txn_verifier import TxnVerifier

OFFSETS_TOPIC = "__consumer_offsets"
#: -1 ms (kio's int64 timestamps are datetimes; Kafka writes -1 for "no transaction")
_NO_TIME = datetime.datetime.fromtimestamp(-0.001, tz=datetime.UTC)


@dataclass(frozen=True, slots=True)
class TxnDeps:
    coordinator: TransactionCoordinator
    groups: GroupCoordinator
    replica_manager: ReplicaManager
    metadata_cache: MetadataCache
    request_timeout_ms: int
    #: adds the offsets partition for TxnOffsetCommit v5 (transactions V2)
    txn_verifier: TxnVerifier | None = None


def _fenced(code: int, version: int, first_fenced_version: int) -> int:
    """Older request versions know PRODUCER_FENCED as INVALID_PRODUCER_EPOCH (KIP-588)."""
    if code == ErrorCode.producer_fenced and version < first_fenced_version:
        return int(ErrorCode.invalid_producer_epoch)
    return int(code)


def _ms(v: Any) -> int:
    if isinstance(v, datetime.timedelta):
        return int(v / datetime.timedelta(milliseconds=1))
    return int(v)


# ---- AddPartitionsToTxn (24) --------------------------------------------------------


async def handle_add_partitions_to_txn(
    deps: TxnDeps, ctx: RequestContext, req: AddPartitionsToTxnRequest
) -> dict[str, Any]:
    version = ctx.api_version
    if version < 4:
        results = await _add_partitions(
            deps,
            version,
            req.v3_and_below_transactional_id,  # type: ignore[union-attr]
            int(req.v3_and_below_producer_id),  # type: ignore[union-attr]
            int(req.v3_and_below_producer_epoch),  # type: ignore[union-attr]
            req.v3_and_below_topics,  # type: ignore[union-attr]
            verify_only=False,
        )
        return {"throttle_time": 0, "results_by_topic_v3_and_below": results}
    out = []
    for txn in req.transactions:  # type: ignore[union-attr]
        topics = await _add_partitions(
            deps,
            version,
            txn.transactional_id,
            int(txn.producer_id),
            int(txn.producer_epoch),
            txn.topics,
            verify_only=bool(txn.verify_only),
        )
        out.append({"transactional_id": txn.transactional_id, "topic_results": topics})
    return {"throttle_time": 0, "error_code": 0, "results_by_transaction": out}


async def _add_partitions(
    deps: TxnDeps,
    version: int,
    transactional_id: str,
    pid: int,
    epoch: int,
    topics: Any,
    *,
    verify_only: bool,
) -> list[dict[str, Any]]:
    cache = deps.metadata_cache
    errors: dict[TopicPartition, int] = {}
    wanted: list[TopicPartition] = []
    for t in topics:
        meta = cache.get_topic(t.name)
        for p in t.partitions:
            tp = (t.name, int(p))
            if meta is None or int(p) not in meta.partitions:
                errors[tp] = ErrorCode.unknown_topic_or_partition
            else:
                wanted.append(tp)
    if errors:
        # as Kafka: nothing is added when one partition is unknown
        for tp in wanted:
            errors[tp] = ErrorCode.operation_not_attempted
    elif verify_only:
        errors = deps.coordinator.verify_partitions(transactional_id, pid, epoch, wanted)
    else:
        # v4+ come from brokers (a V2 producer's implicit add, KIP-890 part 2) and from
        # clients such as @platformatic/kafka that speak V1 with the batched form: the
        # protocol is known for sure at EndTxn (v5 or not), so v4+ leave it as it is
        errors = await deps.coordinator.handle_add_partitions(
            transactional_id, pid, epoch, wanted, client_txn_version=None if version >= 4 else 0
        )
    by_topic: dict[str, list[dict[str, int]]] = defaultdict(list)
    for t in topics:
        for p in t.partitions:
            by_topic[t.name].append(
                {
                    "partition_index": int(p),
                    "partition_error_code": _fenced(errors[(t.name, int(p))], version, 2),
                }
            )
    return [{"name": name, "results_by_partition": ps} for name, ps in by_topic.items()]


def add_partitions_to_txn_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    if version < 4:
        return {
            "throttle_time": 0,
            "results_by_topic_v3_and_below": [
                {
                    "name": t.name,
                    "results_by_partition": [
                        {"partition_index": int(p), "partition_error_code": code}
                        for p in t.partitions
                    ],
                }
                for t in req.v3_and_below_topics
            ],
        }
    return {"throttle_time": 0, "error_code": code, "results_by_transaction": []}


# ---- AddOffsetsToTxn (25) -----------------------------------------------------------


async def handle_add_offsets_to_txn(
    deps: TxnDeps, ctx: RequestContext, req: AddOffsetsToTxnRequest
) -> dict[str, Any]:
    gm = deps.groups.manager
    tp = (OFFSETS_TOPIC, gm.partition_for(req.group_id))
    await deps.groups.ensure_offsets_topic()
    result = await deps.coordinator.handle_add_partitions(
        req.transactional_id,
        int(req.producer_id),
        int(req.producer_epoch),
        [tp],
        client_txn_version=0,
    )
    return {"throttle_time": 0, "error_code": _fenced(result[tp], ctx.api_version, 2)}


def add_offsets_to_txn_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code}


# ---- EndTxn (26) --------------------------------------------------------------------


async def handle_end_txn(deps: TxnDeps, ctx: RequestContext, req: EndTxnRequest) -> dict[str, Any]:
    """v0-4: transactions V1; v5: V2 (KIP-890 part 2), the epoch bumps and the response
    carries the producer id and epoch for the next transaction."""
    args = (req.transactional_id, int(req.producer_id), int(req.producer_epoch))
    if ctx.api_version < 5:
        code = await deps.coordinator.handle_end_txn(*args, bool(req.committed))
        return {"throttle_time": 0, "error_code": _fenced(code, ctx.api_version, 2)}
    r = await deps.coordinator.handle_end_txn_v2(*args, bool(req.committed))
    return {
        "throttle_time": 0,
        "error_code": r.error,
        "producer_id": r.producer_id if not r.error else -1,
        "producer_epoch": r.producer_epoch if not r.error else -1,
    }


def end_txn_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    if version >= 5:
        return {"throttle_time": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time": 0, "error_code": code}


# ---- WriteTxnMarkers (27) -----------------------------------------------------------


async def handle_write_txn_markers(
    deps: TxnDeps, ctx: RequestContext, req: WriteTxnMarkersRequest
) -> dict[str, Any]:
    """Append each marker on this broker's leaders (acks=all), answer per partition."""
    rm = deps.replica_manager
    out = []
    for marker in req.markers:
        pid, epoch = int(marker.producer_id), int(marker.producer_epoch)
        commit = bool(marker.transaction_result)
        ctype = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        entries: dict[TopicPartition, WritableBuffer] = {}
        fenced: dict[TopicPartition, int] = {}
        coordinator_epoch = int(marker.coordinator_epoch)
        for t in marker.topics:
            for p in t.partition_indexes:
                tp: TopicPartition = (str(t.name), int(p))
                if coordinator_epoch < _coordinator_epoch_of(rm, tp, pid):
                    # a marker from a coordinator that has been superseded (Kafka's
                    # ProducerAppendInfo.checkCoordinatorEpoch)
                    fenced[tp] = ErrorCode.transaction_coordinator_fenced
                    continue
                entries[tp] = bytearray(
                    build_control_batch(
                        ctype,
                        int(marker.coordinator_epoch),
                        producer_id=pid,
                        producer_epoch=epoch,
                    )
                )
        result: Any = rm.append_records(deps.request_timeout_ms, -1, entries) if entries else {}
        if not isinstance(result, dict):
            result = await result
        errors: dict[TopicPartition, int] = {tp: int(r.error) for tp, r in result.items()}
        errors.update(fenced)
        for (topic, partition), e in errors.items():
            if topic == OFFSETS_TOPIC and e == 0:
                complete_txn_offsets(deps.groups, partition, pid, commit)
        by_topic: dict[str, list[dict[str, int]]] = defaultdict(list)
        for (topic, partition), e in errors.items():
            by_topic[topic].append({"partition_index": partition, "error_code": e})
        out.append(
            {
                "producer_id": pid,
                "topics": [{"name": n, "partitions": ps} for n, ps in by_topic.items()],
            }
        )
    return {"markers": out}


def _coordinator_epoch_of(rm: ReplicaManager, tp: TopicPartition, pid: int) -> int:
    p = rm.get_partition(tp)
    if p is None or p.log is None or not p.is_leader:
        return -1
    entry = p.log.producer_state.producers.get(pid)
    return -1 if entry is None else entry.coordinator_epoch


def write_txn_markers_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {
        "markers": [
            {
                "producer_id": int(m.producer_id),
                "topics": [
                    {
                        "name": t.name,
                        "partitions": [
                            {"partition_index": int(p), "error_code": code}
                            for p in t.partition_indexes
                        ],
                    }
                    for t in m.topics
                ],
            }
            for m in req.markers
        ]
    }


# ---- TxnOffsetCommit (28) -----------------------------------------------------------


async def handle_txn_offset_commit(
    deps: TxnDeps, ctx: RequestContext, req: TxnOffsetCommitRequest
) -> dict[str, Any]:
    version = ctx.api_version
    cache = deps.metadata_cache
    now = deps.coordinator.clock_ms()
    errors: dict[TopicPartition, int] = {}
    to_commit: dict[TopicPartition, OffsetAndMetadata] = {}
    for t in req.topics:
        meta = cache.get_topic(t.name)
        for p in t.partitions:
            tp = (t.name, int(p.partition_index))
            if meta is None or tp[1] not in meta.partitions:
                errors[tp] = ErrorCode.unknown_topic_or_partition
            else:
                to_commit[tp] = OffsetAndMetadata(
                    offset=int(p.committed_offset),
                    leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                    metadata=p.committed_metadata or "",
                    commit_timestamp=now,
                )
    if to_commit and version >= 5:
        # transactions V2: the producer sent no AddOffsetsToTxn; the group coordinator
        # adds the group's offsets partition to the transaction first (KIP-890 part 2)
        code = await _add_offsets_partition(deps, req)
        if code:
            errors.update(dict.fromkeys(to_commit, code))
            to_commit.clear()
    if to_commit:
        results = await handle_txn_commit_offsets(
            deps.groups,
            req.group_id,
            int(req.producer_id),
            int(req.producer_epoch),
            getattr(req, "member_id", "") or "",
            getattr(req, "group_instance_id", None),
            int(getattr(req, "generation_id", -1)),
            to_commit,
        )
        errors.update(results)
    return {
        "throttle_time": 0,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": int(p.partition_index),
                        "error_code": _fenced(errors[(t.name, int(p.partition_index))], version, 3),
                    }
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }


async def _add_offsets_partition(deps: TxnDeps, req: TxnOffsetCommitRequest) -> int:
    """The coordinator's answer to adding ``__consumer_offsets``' partition of the group,
    as TxnOffsetCommit errors (retriable ones as CONCURRENT_TRANSACTIONS, which clients
    retry; a fenced epoch as PRODUCER_FENCED)."""
    verifier = deps.txn_verifier
    if verifier is None:
        return int(ErrorCode.coordinator_not_available)
    await deps.groups.ensure_offsets_topic()
    tp = (OFFSETS_TOPIC, deps.groups.manager.partition_for(req.group_id))
    result: Any = verifier.verify(
        req.transactional_id,
        int(req.producer_id),
        int(req.producer_epoch),
        [tp],
        add=True,
        errors_for=_txn_offset_commit_error,
    )
    if not isinstance(result, dict):
        result = await result
    return int(result.get(tp, ErrorCode.unknown_server_error))


def _txn_offset_commit_error(code: int) -> int:
    if code in (
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.network_exception,
        ErrorCode.request_timed_out,
    ):
        return int(ErrorCode.concurrent_transactions)
    return int(code)


def txn_offset_commit_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": int(p.partition_index), "error_code": code}
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }


# ---- DescribeProducers (61) ---------------------------------------------------------


def handle_describe_producers(
    deps: TxnDeps, ctx: RequestContext, req: DescribeProducersRequest
) -> dict[str, Any]:
    rm = deps.replica_manager
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partition_indexes:
            tp = (t.name, int(p))
            entry: dict[str, Any] = {
                "partition_index": int(p),
                "error_code": 0,
                "error_message": None,
                "active_producers": [],
            }
            try:
                part = rm.leader_partition_or_error(tp)
            except Exception as e:
                code = getattr(e, "code", ErrorCode.unknown_topic_or_partition)
                entry["error_code"] = int(code)
                parts.append(entry)
                continue
            assert part.log is not None
            ongoing = part.log.ongoing_transactions()
            state = part.producer_state()
            pids = set(state.producers) | set(ongoing)
            for pid in sorted(pids):
                pe = state.producers.get(pid)
                last = pe.batches[-1] if pe is not None and pe.batches else None
                entry["active_producers"].append(
                    {
                        "producer_id": pid,
                        "producer_epoch": pe.epoch if pe is not None else -1,
                        "last_sequence": last.last_seq if last is not None else -1,
                        "last_timestamp": last.max_timestamp if last is not None else -1,
                        "coordinator_epoch": pe.coordinator_epoch if pe is not None else -1,
                        "current_txn_start_offset": ongoing.get(pid, -1),
                    }
                )
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def describe_producers_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": int(p),
                        "error_code": code,
                        "error_message": None,
                        "active_producers": [],
                    }
                    for p in t.partition_indexes
                ],
            }
            for t in req.topics
        ],
    }


# ---- DescribeTransactions (65) ------------------------------------------------------


def handle_describe_transactions(
    deps: TxnDeps, ctx: RequestContext, req: DescribeTransactionsRequest
) -> dict[str, Any]:
    tc = deps.coordinator
    states = []
    for tid in req.transactional_ids:
        entry: dict[str, Any] = {
            "error_code": 0,
            "transactional_id": tid,
            "transaction_state": "",
            "transaction_timeout": 0,
            "transaction_start_time": 0,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
        code = tc._status(tid)
        m = tc.get(tid) if not code else None
        if not code and (m is None or m.state == TxnState.DEAD):
            code = ErrorCode.transactional_id_not_found
        if code or m is None:
            entry["error_code"] = int(code)
            states.append(entry)
            continue
        by_topic: dict[str, list[int]] = defaultdict(list)
        for t, p in sorted(m.partitions):
            by_topic[t].append(p)
        entry.update(
            transaction_state=m.state.kafka_name,
            transaction_timeout=m.txn_timeout_ms,
            transaction_start_time=_NO_TIME if m.txn_start_ms < 0 else m.txn_start_ms,
            producer_id=m.producer_id,
            producer_epoch=m.producer_epoch,
            topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
        )
        states.append(entry)
    return {"throttle_time": 0, "transaction_states": states}


def describe_transactions_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "transaction_states": [
            {
                "error_code": code,
                "transactional_id": tid,
                "transaction_state": "",
                "transaction_timeout": 0,
                "transaction_start_time": 0,
                "producer_id": -1,
                "producer_epoch": -1,
                "topics": [],
            }
            for tid in req.transactional_ids
        ],
    }


# ---- ListTransactions (66) ----------------------------------------------------------

_STATE_NAMES = {s.kafka_name for s in TxnState}


def handle_list_transactions(
    deps: TxnDeps, ctx: RequestContext, req: ListTransactionsRequest
) -> dict[str, Any]:
    filters = list(req.state_filters)
    unknown = [s for s in filters if s not in _STATE_NAMES]
    duration = int(getattr(req, "duration_filter", -1))
    pattern_text = getattr(req, "transactional_id_pattern", None)
    pattern = None
    if pattern_text:
        try:
            pattern = re.compile(pattern_text).fullmatch
        except re.error:
            return {
                "throttle_time": 0,
                "error_code": ErrorCode.invalid_regular_expression,
                "unknown_state_filters": [],
                "transaction_states": [],
            }
    listed = deps.coordinator.list_transactions(
        [s for s in filters if s in _STATE_NAMES],
        [int(p) for p in req.producer_id_filters],
        duration,
        (lambda s: pattern(s) is not None) if pattern is not None else None,
    )
    if filters and not [s for s in filters if s in _STATE_NAMES]:
        listed = []
    return {
        "throttle_time": 0,
        "error_code": 0,
        "unknown_state_filters": unknown,
        "transaction_states": [
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "transaction_state": t.state,
            }
            for t in listed
        ],
    }


def list_transactions_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": code,
        "unknown_state_filters": [],
        "transaction_states": [],
    }
