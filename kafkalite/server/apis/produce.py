"""Produce (0): validate acks and records, append on the leader, answer per partition."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.replica_manager import ProduceResult
from kafkalite.server.connection import CloseConnection

if TYPE_CHECKING:
    from kafkalite.server.broker import KafkaBroker
    from kafkalite.server.request_channel import RequestContext

VALID_ACKS = (-1, 0, 1)


def handle_produce(broker: KafkaBroker, ctx: RequestContext, req: Any) -> Any:
    acks = int(req.acks)
    timeout_ms = int(req.timeout.total_seconds() * 1000)
    entries: dict[tuple[str, int], bytearray] = {}
    results: dict[tuple[str, int], ProduceResult] = {}
    order: list[tuple[str, list[int]]] = []

    # validate
    for td in req.topic_data:
        name = td.name
        order.append((name, [int(p.index) for p in td.partition_data]))
        for pd in td.partition_data:
            tp = (name, int(pd.index))
            if acks not in VALID_ACKS:
                results[tp] = ProduceResult(ErrorCode.invalid_required_acks)
            elif req.transactional_id is not None:
                results[tp] = ProduceResult(
                    ErrorCode.transactional_id_authorization_failed,
                    error_message="transactions are not supported yet",
                )
            elif pd.records is None or len(pd.records) == 0:
                results[tp] = ProduceResult(ErrorCode.corrupt_message, error_message="no records")
            elif name not in broker.metadata_cache.topics:
                results[tp] = ProduceResult(ErrorCode.unknown_topic_or_partition)
            else:
                entries[tp] = bytearray(pd.records)

    # act, then respond: now, or when acks=all completes (respond runs then)
    def respond(done: dict[tuple[str, int], ProduceResult]) -> dict[str, Any] | None:
        results.update(done)
        if acks == 0:
            if any(r.error for r in results.values()):
                # the only way to tell an acks=0 producer something went wrong (as Kafka does)
                raise CloseConnection(
                    "acks=0 produce failed; closing so the client refreshes metadata"
                )
            return None
        return {
            "throttle_time": 0,
            "responses": [
                {
                    "name": name,
                    "partition_responses": [_partition(i, results[(name, i)]) for i in parts],
                }
                for name, parts in order
            ],
        }

    if not entries:
        return respond({})
    return broker.replica_manager.append_records(timeout_ms, acks, entries, respond)


def _partition(index: int, r: ProduceResult) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": r.error,
        "base_offset": r.base_offset,
        "log_append_time": r.log_append_time,
        "log_start_offset": r.log_start_offset,
        "record_errors": [],
        "error_message": r.error_message,
    }
