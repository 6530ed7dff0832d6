"""DeleteRecords (21): advance the log start offset (low watermark)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalite.log.errors import LogError
from kafkalite.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkalite.server.broker import KafkaBroker
    from kafkalite.server.request_channel import RequestContext


def handle_delete_records(broker: KafkaBroker, ctx: RequestContext, req: Any) -> dict[str, Any]:
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                low = broker.replica_manager.delete_records(
                    (t.name, int(p.partition_index)), int(p.offset)
                )
                parts.append(
                    {"partition_index": p.partition_index, "low_watermark": low, "error_code": 0}
                )
            except KafkaError as e:
                parts.append(
                    {
                        "partition_index": p.partition_index,
                        "low_watermark": -1,
                        "error_code": e.code,
                    }
                )
            except LogError as e:
                parts.append(
                    {
                        "partition_index": p.partition_index,
                        "low_watermark": -1,
                        "error_code": ErrorCode(e.error_code),
                    }
                )
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
