"""Produce (0): validate acks and records, append on the leader, answer per partition.

The request comes from :mod:`kafkalite.protocol.produce`'s parser (records are
views into the request frame) and the response is written by its encoder: no
kio entity per partition on this path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.produce import PartitionResponse, ProduceRequest, encode_produce_response
from kafkalite.protocol.record_batch import BatchHeader, InvalidRecordBatch, ValidatedRecords
from kafkalite.protocol.record_validator import (
    InvalidTimestamp,
    TopicLimits,
    check_client_batch,
    check_request_records,
)
from kafkalite.replica.replica_manager import ProduceResult
from kafkalite.server.connection import CloseConnection

if TYPE_CHECKING:
    from kafkalite.server.broker import KafkaBroker
    from kafkalite.server.request_channel import RequestContext

VALID_ACKS = (-1, 0, 1)


def handle_produce(broker: KafkaBroker, ctx: RequestContext, req: ProduceRequest) -> Any:
    acks = req.acks
    timeout_ms = req.timeout_ms
    entries: dict[tuple[str, int], bytearray] = {}
    validated: dict[tuple[str, int], ValidatedRecords] = {}
    results: dict[tuple[str, int], ProduceResult] = {}
    record_errors: dict[tuple[str, int], list[tuple[int, str]]] = {}
    order: list[tuple[str, list[int]]] = []
    now = broker.clock_ms()

    # validate
    for td in req.topic_data:
        name = td.name
        order.append((name, [p.index for p in td.partition_data]))
        for pd in td.partition_data:
            tp = (name, pd.index)
            if acks not in VALID_ACKS:
                results[tp] = ProduceResult(ErrorCode.invalid_required_acks)
            elif req.transactional_id is not None:
                results[tp] = ProduceResult(
                    ErrorCode.transactional_id_authorization_failed,
                    error_message="transactions are not supported yet",
                )
            elif name not in broker.metadata_cache.topics:
                results[tp] = ProduceResult(ErrorCode.unknown_topic_or_partition)
            else:
                try:
                    records = pd.records or b""
                    size = check_request_records(records, ctx.api_version)
                    h = _check_batch(broker, tp, records, size, now)
                    # a trailing partial batch is dropped, as Kafka's log trims it
                    entries[tp] = bytearray(memoryview(records)[:size])
                    if h is not None:  # the log need not parse it and check its CRC again
                        validated[tp] = ValidatedRecords(
                            [(0, size)], [h], h.last_offset_delta + 1, h.max_timestamp, size
                        )
                except InvalidTimestamp as e:
                    results[tp] = ProduceResult(e.error_code, error_message=str(e))
                    record_errors[tp] = e.record_errors
                except InvalidRecordBatch as e:
                    results[tp] = ProduceResult(e.error_code, error_message=str(e) or None)

    # act, then respond: now, or when acks=all completes (respond runs then)
    def respond(done: dict[tuple[str, int], ProduceResult]) -> bytes | None:
        results.update(done)
        if acks == 0:
            if any(r.error for r in results.values()):
                # the only way to tell an acks=0 producer something went wrong (as Kafka does)
                raise CloseConnection(
                    "acks=0 produce failed; closing so the client refreshes metadata"
                )
            return None
        return encode_produce_response(
            ctx.api_version,
            [
                (name, [_partition((name, i), results[(name, i)], record_errors) for i in parts])
                for name, parts in order
            ],
        )

    if not entries:
        return respond({})
    return broker.replica_manager.append_records(
        timeout_ms, acks, entries, respond, validated=validated
    )


def _check_batch(
    broker: KafkaBroker, tp: tuple[str, int], records: Any, size: int, now: int
) -> BatchHeader | None:
    """The log-level checks Kafka makes on a client batch (LogValidator), on the leader;
    the checked header, or None when this broker does not lead the partition."""
    p = broker.replica_manager.get_partition(tp)
    if p is None or p.log is None or not p.is_leader:
        return None  # the append answers UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER
    cfg = p.log.config
    return check_client_batch(
        records,
        size,
        TopicLimits(
            cfg.max_message_bytes,
            cfg.log_append_time,
            cfg.message_timestamp_before_max_ms,
            cfg.message_timestamp_after_max_ms,
        ),
        now,
    )


def _partition(
    tp: tuple[str, int],
    r: ProduceResult,
    record_errors: dict[tuple[str, int], list[tuple[int, str]]],
) -> PartitionResponse:
    return (
        tp[1],
        r.error,
        r.base_offset,
        r.log_append_time,
        r.log_start_offset,
        record_errors.get(tp, ()),
        r.error_message,
    )
