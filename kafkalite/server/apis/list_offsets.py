"""ListOffsets (2): earliest, latest, by timestamp, max timestamp; isolation-aware latest."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalite.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.replica.replica_manager import ReplicaManager
    from kafkalite.server.apis.request_types import ListOffsetsRequest


def handle_list_offsets(
    rm: ReplicaManager, ctx: RequestContext, req: ListOffsetsRequest
) -> dict[str, Any]:
    # v0 had no isolation level; a consumer (-1) gets HW, a replica the LEO
    isolation = getattr(req, "isolation_level", 0) if req.replica_id < 0 else None
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            tp = (t.name, int(p.partition_index))
            entry: dict[str, Any] = {"partition_index": p.partition_index}
            try:
                offset, ts, epoch = rm.fetch_offset_for_timestamp(
                    tp, int(p.timestamp), isolation, int(getattr(p, "current_leader_epoch", -1))
                )
                if offset < 0:
                    # nothing found: Kafka answers NONE with offset/timestamp/epoch all -1
                    ts = epoch = -1
                entry.update(
                    error_code=ErrorCode.none, offset=offset, timestamp=ts, leader_epoch=epoch
                )
            except KafkaError as e:
                entry.update(error_code=e.code, offset=-1, timestamp=-1)
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def list_offsets_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """Every requested partition in error, with no offset."""
    return {
        "throttle_time": 0,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": int(p.partition_index),
                        "error_code": code,
                        "timestamp": -1,
                        "offset": -1,
                        "leader_epoch": -1,
                        "old_style_offsets": [],
                    }
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }
