"""OffsetForLeaderEpoch (23): where a leader epoch ends in the leader's log.

Followers ask it before fetching after a leader change and truncate to the
answer (KIP-101/279); consumers ask it after a leader change to detect log
truncation (KIP-320, librdkafka and the Java client). Both are served by the
partition's leader only, with the current-leader-epoch fencing of Fetch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalite.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.replica.replica_manager import ReplicaManager
    from kafkalite.server.apis.request_types import OffsetForLeaderEpochRequest


def handle_offset_for_leader_epoch(
    rm: ReplicaManager, ctx: RequestContext, req: OffsetForLeaderEpochRequest
) -> dict[str, Any]:
    if getattr(req, "replica_id", -1) >= 0 and not getattr(ctx.connection, "broker_peer", False):
        # as a follower's Fetch: a replica id needs a broker's signed request (CLUSTER_ACTION)
        return offset_for_leader_epoch_error_response(
            req, ctx.api_version, ErrorCode.cluster_authorization_failed
        )
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            tp = (str(t.topic), int(p.partition))
            try:
                epoch, end = rm.last_offset_for_leader_epoch(
                    tp, int(p.current_leader_epoch), int(p.leader_epoch)
                )
                code = ErrorCode.none
            except KafkaError as e:
                code, epoch, end = e.code, -1, -1
            parts.append(
                {
                    "error_code": code,
                    "partition": p.partition,
                    "leader_epoch": epoch,
                    "end_offset": end,
                }
            )
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def offset_for_leader_epoch_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """Every requested partition in error, with undefined epoch and offset."""
    return {
        "throttle_time": 0,
        "topics": [
            {
                "topic": t.topic,
                "partitions": [
                    {
                        "error_code": code,
                        "partition": int(p.partition),
                        "leader_epoch": -1,
                        "end_offset": -1,
                    }
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }
