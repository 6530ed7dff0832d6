"""InitProducerId (22): producer ids for idempotent and transactional producers.

Without a transactional id the broker hands out a fresh id from its block, as
Kafka does whatever id the request names. With one, the transaction
coordinator answers: it bumps the id's epoch, fences the previous producer and
aborts what it left open.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.coordinator.transaction.producer_id_manager import ProducerIdManager
    from kafkalite.coordinator.transaction.txn_coordinator import TransactionCoordinator
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.server.apis.request_types import InitProducerIdRequest


@dataclass(frozen=True, slots=True)
class InitProducerIdDeps:
    producer_ids: ProducerIdManager
    transactions: TransactionCoordinator


def _ms(v: Any) -> int:
    if isinstance(v, datetime.timedelta):
        return int(v / datetime.timedelta(milliseconds=1))
    return int(v)


async def handle_init_producer_id(
    deps: InitProducerIdDeps, ctx: RequestContext, req: InitProducerIdRequest
) -> dict[str, Any]:
    pid = int(getattr(req, "producer_id", -1))
    epoch = int(getattr(req, "producer_epoch", -1))
    if (pid == -1) != (epoch == -1):  # KafkaApis: an id without an epoch, or the reverse
        return init_producer_id_error_response(req, ctx.api_version, ErrorCode.invalid_request)
    if req.transactional_id is not None:
        r = await deps.transactions.handle_init_producer_id(
            req.transactional_id, _ms(req.transaction_timeout), pid, epoch
        )
        code = r.error
        if code == ErrorCode.producer_fenced and ctx.api_version < 4:
            code = ErrorCode.invalid_producer_epoch  # KIP-588: older clients' name for it
        return {
            "throttle_time": 0,
            "error_code": code,
            "producer_id": r.producer_id,
            "producer_epoch": r.producer_epoch,
        }
    # Without a transactional id Kafka "blindly accepts the request" and hands out a
    # fresh id at epoch 0, whatever id and epoch the producer names (clients such as
    # @platformatic/kafka send 0/0 on their first call); bumping the named id's epoch
    # instead would give two producers the same id.
    new_pid = await deps.producer_ids.generate_producer_id()
    return {"throttle_time": 0, "error_code": 0, "producer_id": new_pid, "producer_epoch": 0}


def init_producer_id_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """The top-level error, with no producer id."""
    return {"throttle_time": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
