"""InitProducerId (22): producer ids for idempotent producers.

Transactional ids need the transaction coordinator, which kafkalite does not
have yet: those requests get COORDINATOR_NOT_AVAILABLE (documented in
docs/status.md), so a transactional producer fails clearly instead of
half-working.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.coordinator.transaction.producer_id_manager import ProducerIdManager
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.server.apis.request_types import InitProducerIdRequest

MAX_EPOCH = 32767


async def handle_init_producer_id(
    producer_ids: ProducerIdManager, ctx: RequestContext, req: InitProducerIdRequest
) -> dict[str, Any]:
    # validate
    if req.transactional_id is not None:
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.coordinator_not_available,
            "producer_id": -1,
            "producer_epoch": -1,
        }
    pid = int(getattr(req, "producer_id", -1))
    epoch = int(getattr(req, "producer_epoch", -1))
    # act: an idempotent producer that already has an id bumps its epoch (KIP-360);
    # past the max epoch it gets a fresh id, as Kafka does
    if pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return {
            "throttle_time": 0,
            "error_code": 0,
            "producer_id": pid,
            "producer_epoch": epoch + 1,
        }
    new_pid = await producer_ids.generate_producer_id()
    # respond
    return {"throttle_time": 0, "error_code": 0, "producer_id": new_pid, "producer_epoch": 0}


def init_producer_id_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """The top-level error, with no producer id."""
    return {"throttle_time": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
