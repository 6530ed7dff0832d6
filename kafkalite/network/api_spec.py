"""What a handler is registered with (:class:`ApiSpec`, one row of the API table)
and what it is called with (:class:`RequestContext`).

The table itself is the server's (``kafkalite/server/apis``); the request
channel only reads it, so the row's type lives with the channel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkalite.common.principal import KafkaPrincipal

if TYPE_CHECKING:
    from kafkalite.network.connection import Connection
    from kafkalite.network.request_stats import ApiStats

__all__ = ["ApiSpec", "ErrorResponseBuilder", "RequestContext"]

#: ``(request, version, error_code) -> response``: the response to ``request`` with
#: ``error_code`` in every error field (per partition, topic, group or resource, or
#: top level), echoing the request's names and ids, as Kafka's
#: ``AbstractRequest.getErrorResponse``. None: this request gets no response at all
#: (acks=0 Produce), so a failure can only be told by closing the connection.
ErrorResponseBuilder = Callable[[Any, int, int], dict[str, Any] | None]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Callable[[Any, Any], Any]
    #: finish before the next request on the connection is dispatched (admin APIs
    #: whose work happens after the handler returns)
    serial: bool = False
    notes: str = ""
    #: what ApiVersions says when it differs from min_version (see KAFKA-18659:
    #: Produce is advertised from v0 so librdkafka <= 2.11 keeps compressing)
    advertised_min_version: int | None = None
    #: sent between brokers (controller requests), not by clients
    inter_broker: bool = False
    #: ``(frame, body_offset, version) -> request`` replacing kio's decoder on a hot path
    decoder: Callable[[bytes | memoryview, int, int], Any] | None = None
    #: the error response to a request of this API (every client API has one); used
    #: for a handler's unexpected errors (UNKNOWN_SERVER_ERROR) and by request interceptors
    error_response: ErrorResponseBuilder | None = None


@dataclass(slots=True)
class RequestContext:
    connection: Connection
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_flexible: bool
    extra: dict[str, Any] = field(default_factory=dict)
    #: bytes of the request frame (what a produce byte-rate quota counts)
    size: int = 0
    #: the throttle time the quotas owe so far, for handlers that encode their own
    #: response (Produce, Metadata); the connection is muted for it (KIP-219)
    throttle_ms: int = 0
    #: ``time.perf_counter()`` when the channel took the frame: a request's loop time
    #: (``request_percentage``) counts its decoding too, not only its handler
    received: float = 0.0
    #: the API's RequestMetrics; handlers that encode their own response (Produce,
    #: Fetch) add its error codes here. None outside a broker's request channel
    stats: ApiStats | None = None

    @property
    def listener(self) -> str:
        return self.connection.listener

    @property
    def principal(self) -> KafkaPrincipal:
        """The connection's authenticated principal (User:ANONYMOUS without SASL)."""
        return self.connection.principal
