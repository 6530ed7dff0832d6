"""What a handler is registered with (:class:`ApiSpec`, one row of the API table)
and what it is called with (:class:`RequestContext`).

The table itself is the server's (``kafkalite/server/apis``); the request
channel only reads it, so the row's type lives with the channel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkalite.network.connection import Connection

__all__ = ["ApiSpec", "RequestContext"]


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


@dataclass(slots=True)
class RequestContext:
    connection: Connection
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_flexible: bool
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def listener(self) -> str:
        return self.connection.listener
