"""DeleteRecords (21): advance log start offsets; answered once the low watermark follows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.replica.replica_manager import ReplicaManager
    from kafkalite.server.apis.request_types import DeleteRecordsRequest


def handle_delete_records(
    rm: ReplicaManager, ctx: RequestContext, req: DeleteRecordsRequest
) -> Any:
    # validate and act: per-partition errors come back from the replica manager
    offsets: dict[tuple[str, int], int] = {
        (t.name, int(p.partition_index)): int(p.offset) for t in req.topics for p in t.partitions
    }
    timeout_ms = int(req.timeout.total_seconds() * 1000)
    result = rm.delete_records(timeout_ms, offsets)

    # respond, in request order
    def respond(done: dict[tuple[str, int], tuple[int, int]]) -> dict[str, Any]:
        return {
            "throttle_time": 0,
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {
                            "partition_index": p.partition_index,
                            "error_code": done[(t.name, int(p.partition_index))][0],
                            "low_watermark": done[(t.name, int(p.partition_index))][1],
                        }
                        for p in t.partitions
                    ],
                }
                for t in req.topics
            ],
        }

    if isinstance(result, dict):
        return respond(result)
    return _then(result, respond)


async def _then(fut: Any, fn: Any) -> Any:
    return fn(await fut)


def delete_records_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """Every requested partition in error, with no low watermark."""
    return {
        "throttle_time": 0,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": int(p.partition_index),
                        "error_code": code,
                        "low_watermark": -1,
                    }
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }
