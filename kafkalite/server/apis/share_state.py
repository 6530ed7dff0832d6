"""The share-state coordinator's inter-broker APIs (KIP-932 "share group state
persistence"): InitializeShareGroupState (83), ReadShareGroupState (84),
WriteShareGroupState (85), DeleteShareGroupState (86), ReadShareGroupStateSummary (87).

A partition leader serving a share group reads and writes the share-partition state
through these, sent to the broker FindCoordinator (key type SHARE) names: the share
group's coordinator, which keeps the state in ``__consumer_offsets``
(:mod:`kafkalite.coordinator.share.share_state`, docs/share-groups.md). Every
(topic, partition) is answered on its own, with Kafka's errors (NOT_COORDINATOR,
FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, ...).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kafkalite.coordinator.share.share_codec import ShareSnapshot, StateBatch
from kafkalite.coordinator.share.share_state import StateResult
from kafkalite.server.apis.share import ShareDeps

if TYPE_CHECKING:
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.server.apis.request_types import (
        DeleteShareGroupStateRequest,
        InitializeShareGroupStateRequest,
        ReadShareGroupStateRequest,
        ReadShareGroupStateSummaryRequest,
        WriteShareGroupStateRequest,
    )

#: ShareSnapshot delivery states that count as delivered for good (acknowledged, archived)
_COMPLETE = (2, 4)


def _complete_count(snap: ShareSnapshot) -> int:
    return sum(
        b.last_offset - b.first_offset + 1 for b in snap.batches if b.delivery_state in _COMPLETE
    )


def _result(partition: int, r: StateResult) -> dict[str, Any]:
    return {"partition": partition, "error_code": r.error, "error_message": r.message}


def _per_topic(topics: Any, code: int, message: str | None = None, **extra: Any) -> list[Any]:
    return [
        {
            "topic_id": t.topic_id,
            "partitions": [
                {
                    "partition": int(p.partition),
                    "error_code": code,
                    "error_message": message,
                    **extra,
                }
                for p in t.partitions
            ],
        }
        for t in topics
    ]


# ---- InitializeShareGroupState (83) ---------------------------------------------------
async def handle_initialize_share_group_state(
    deps: ShareDeps, ctx: RequestContext, req: InitializeShareGroupStateRequest
) -> dict[str, Any]:
    store = deps.coordinator.share.state
    results = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            r = await store.initialize(
                req.group_id,
                t.topic_id or uuid.UUID(int=0),
                int(p.partition),
                int(p.state_epoch),
                int(p.start_offset),
            )
            parts.append(_result(int(p.partition), r))
        results.append({"topic_id": t.topic_id, "partitions": parts})
    return {"results": results}


def initialize_share_group_state_error_response(
    req: Any, version: int, code: int
) -> dict[str, Any]:
    return {"results": _per_topic(req.topics, code)}


# ---- ReadShareGroupState (84) ----------------------------------------------------------
def handle_read_share_group_state(
    deps: ShareDeps, ctx: RequestContext, req: ReadShareGroupStateRequest
) -> dict[str, Any]:
    store = deps.coordinator.share.state
    results = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            r = store.read(
                req.group_id, t.topic_id or uuid.UUID(int=0), int(p.partition), int(p.leader_epoch)
            )
            snap = r.snapshot if r.error == 0 else None
            parts.append(
                {
                    **_result(int(p.partition), r),
                    "state_epoch": -1 if snap is None else snap.state_epoch,
                    "start_offset": -1 if snap is None else snap.start_offset,
                    "state_batches": []
                    if snap is None
                    else [
                        {
                            "first_offset": b.first_offset,
                            "last_offset": b.last_offset,
                            "delivery_state": b.delivery_state,
                            "delivery_count": b.delivery_count,
                        }
                        for b in snap.batches
                    ],
                }
            )
        results.append({"topic_id": t.topic_id, "partitions": parts})
    return {"results": results}


def read_share_group_state_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {
        "results": _per_topic(req.topics, code, state_epoch=-1, start_offset=-1, state_batches=[])
    }


# ---- WriteShareGroupState (85) ---------------------------------------------------------
async def handle_write_share_group_state(
    deps: ShareDeps, ctx: RequestContext, req: WriteShareGroupStateRequest
) -> dict[str, Any]:
    store = deps.coordinator.share.state
    results = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            snap = ShareSnapshot(
                int(p.start_offset),
                int(p.state_epoch),
                [
                    StateBatch(
                        int(b.first_offset),
                        int(b.last_offset),
                        int(b.delivery_state),
                        int(b.delivery_count),
                    )
                    for b in p.state_batches
                ],
                int(p.leader_epoch),
            )
            r = await store.write(
                req.group_id, t.topic_id or uuid.UUID(int=0), int(p.partition), snap
            )
            parts.append(_result(int(p.partition), r))
        results.append({"topic_id": t.topic_id, "partitions": parts})
    return {"results": results}


def write_share_group_state_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {"results": _per_topic(req.topics, code)}


# ---- DeleteShareGroupState (86) --------------------------------------------------------
async def handle_delete_share_group_state(
    deps: ShareDeps, ctx: RequestContext, req: DeleteShareGroupStateRequest
) -> dict[str, Any]:
    store = deps.coordinator.share.state
    keys = [
        (t.topic_id or uuid.UUID(int=0), int(p.partition)) for t in req.topics for p in t.partitions
    ]
    r = await store.delete(req.group_id, keys)
    return {"results": _per_topic(req.topics, r.error, r.message)}


def delete_share_group_state_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {"results": _per_topic(req.topics, code)}


# ---- ReadShareGroupStateSummary (87) ---------------------------------------------------
def handle_read_share_group_state_summary(
    deps: ShareDeps, ctx: RequestContext, req: ReadShareGroupStateSummaryRequest
) -> dict[str, Any]:
    store = deps.coordinator.share.state
    results = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            r = store.summary(req.group_id, t.topic_id or uuid.UUID(int=0), int(p.partition))
            snap = r.snapshot if r.error == 0 else None
            row = {
                **_result(int(p.partition), r),
                "state_epoch": -1 if snap is None else snap.state_epoch,
                "leader_epoch": -1 if snap is None else snap.leader_epoch,
                "start_offset": -1 if snap is None else snap.start_offset,
            }
            if ctx.api_version >= 1:
                row["delivery_complete_count"] = -1 if snap is None else _complete_count(snap)
            parts.append(row)
        results.append({"topic_id": t.topic_id, "partitions": parts})
    return {"results": results}


def read_share_group_state_summary_error_response(
    req: Any, version: int, code: int
) -> dict[str, Any]:
    extra: dict[str, Any] = {"state_epoch": -1, "leader_epoch": -1, "start_offset": -1}
    if version >= 1:
        extra["delivery_complete_count"] = -1
    return {"results": _per_topic(req.topics, code, **extra)}
