"""Applies the client quotas to every client request (Kafka's ``KafkaApis`` and
``RequestHandlerHelper.throttle``), as KIP-219 has it: the response leaves at once
carrying ``throttle_time_ms``, and the connection is muted for that long
(:meth:`Connection.throttle`). No request is refused or delayed for a byte-rate
or request quota.

- ``producer_byte_rate``: the Produce request's size is recorded before it is
  handled (its records are appended whatever the throttle);
- ``consumer_byte_rate``: in the Fetch handler, which bounds the response by what
  the quota allows over its window and answers an empty response when the client
  is over (the records are not recorded then: Kafka's ``unrecordQuotaSensor``);
- ``request_percentage``: the time a client's connection holds the event loop
  (receiving, decoding, handling, writing what is ready), as a percentage of the
  loop, Kafka's I/O-thread time (:func:`loop_percent_seconds`);
- ``controller_mutation_rate``: in the topic handlers (KIP-599).

While no quota is configured at all, a request costs one attribute check here.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from kafkalite.network.api_spec import RequestContext
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.quota.managers import QuotaConfig, QuotaManagers
from kafkalite.server.config import BrokerConfig

Handler = Callable[[RequestContext, Any], Any]

_PRODUCE = int(ApiKey.PRODUCE)
_FETCH = int(ApiKey.FETCH)


def quota_config(config: BrokerConfig) -> QuotaConfig:
    return QuotaConfig(
        int(config["quota.window.num"]),
        int(config["quota.window.size.seconds"]),
        int(config["controller.quota.window.num"]),
        int(config["controller.quota.window.size.seconds"]),
    )


def principal_name(ctx: RequestContext) -> str:
    """The quota user of a request: its principal's name (ANONYMOUS without SASL)."""
    return ctx.connection.principal.name


def enforce(quotas: QuotaManagers, key: int, handler: Handler) -> Handler:
    """``handler`` with the byte-rate (Produce) and request quotas applied."""
    configs = quotas.configs
    produce, request = quotas.produce, quotas.request
    perf = time.perf_counter

    def quota_handler(ctx: RequestContext, req: Any) -> Any:
        if not configs.entries:
            return handler(ctx, req)
        if key == _FETCH and req.replica_id >= 0:
            return handler(ctx, req)  # followers: replication throttling, not client quotas
        user, client = principal_name(ctx), ctx.client_id or ""
        ms = 0
        if key == _PRODUCE:
            ms = produce.record_and_get_throttle_ms(user, client, ctx.size)
        # measured only for clients a request_percentage applies to
        timed = request.enabled and request.quota(user, client) is not None
        if timed:
            ms = max(ms, request.throttle_ms(user, client))
        ctx.throttle_ms = ms
        result = handler(ctx, req)
        if timed:
            request.record(user, client, loop_percent_seconds(ctx, perf()))
        if ms > 0:
            ctx.connection.throttle(ms)
            return with_throttle(result, ms)
        return result

    quota_handler.__wrapped__ = handler  # type: ignore[attr-defined]
    return quota_handler


def loop_percent_seconds(ctx: RequestContext, now: float) -> float:
    """What a request adds to its client's request_percentage: event-loop seconds * 100.

    The connection adds up the time its read callbacks hold the loop (receiving,
    decoding, handling, writing what is ready) once it is asked to; what it added
    since the last request is counted now. Its first request under the quota
    counts its own decoding and handling, until the connection measures.
    """
    conn = ctx.connection
    if not conn.measure_busy:
        conn.measure_busy = True
        return (now - ctx.received) * 100.0
    busy = conn.busy_s
    delta = busy - conn.busy_reported_s
    conn.busy_reported_s = busy
    return delta * 100.0


def with_throttle(result: Any, ms: int) -> Any:
    """``result`` (a response dict, or an awaitable of one) carrying ``throttle_time_ms``.

    Bytes (Produce, Fetch, Metadata) were encoded with ``ctx.throttle_ms`` already.
    """
    if isinstance(result, dict):
        if "throttle_time" in result:
            result["throttle_time"] = max(int(result["throttle_time"] or 0), ms)
        return result
    if isinstance(result, Awaitable):
        return _later(result, ms)
    return result


async def _later(result: Awaitable[Any], ms: int) -> Any:
    return with_throttle(await result, ms)
