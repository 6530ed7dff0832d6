"""Request dispatch: header → API table → kio body codec → handler → framed response.

A handler returns one of:
- a ``dict`` describing the response (encoded with kio for the request's version);
- ``bytes`` or a list of byte chunks / :class:`FileRange` (a pre-encoded body);
- ``None``: no response at all (acks=0 produce);
- an awaitable of any of these, completed later (delayed operations).

A :data:`RequestInterceptor` set on the channel sees each decoded client request
before its handler (franz-go kfake's ``ControlKey``): the test harness's fault
injection (:mod:`kafkalite.testing.faults`) is built on it; production brokers
leave it unset.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.common import structs
from kafkalite.common.principal import USER_TYPE, KafkaPrincipal
from kafkalite.network.api_spec import ApiSpec, RequestContext
from kafkalite.network.connection import Connection
from kafkalite.network.request_stats import ApiStats, count_errors
from kafkalite.network.responses import CloseConnection, FileRange
from kafkalite.network.unexpected_errors import describe_unexpected
from kafkalite.protocol import messages
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.headers import (
    MalformedRequest,
    parse_request_header,
    response_header,
    skip_tagged_fields,
)

if TYPE_CHECKING:
    from kafkalite.security.sasl.authenticator import SaslServerAuthenticator

log = logging.getLogger(__name__)
_perf_counter = time.perf_counter
_UNKNOWN_SERVER_ERROR = int(ErrorCode.unknown_server_error)
_FETCH = int(ApiKey.FETCH)
_ILLEGAL_SASL_STATE = int(ErrorCode.illegal_sasl_state)
#: SaslServerAuthenticator.admits' answers (kafkalite.security.sasl.authenticator)
_SASL_CLOSE, _SASL_ILLEGAL_STATE = 1, 2


@dataclass(frozen=True, slots=True)
class Intercepted:
    """An interceptor's answer in place of the handler's.

    ``result`` is anything a handler returns: a response dict, encoded bytes, None
    for no response, or an awaitable of one, which may itself wait and then run
    the request's handler (``spec.handler``), to delay a request. An awaitable
    raising :class:`CloseConnection` closes the connection once the responses
    before it are sent.
    """

    result: Any


#: Sees each client request before its handler, given its context, decoded body and
#: table row. Returns None to pass it on, or an :class:`Intercepted` to answer it now or
#: later; raises :class:`CloseConnection` to fail it (the connection closes, as when a
#: handler raises it; ``ctx.connection.close()`` first drops the responses queued ahead).
RequestInterceptor = Callable[[RequestContext, Any, ApiSpec], Intercepted | None]


def _unexpected(spec: ApiSpec, request: Any, version: int, exc: Exception) -> dict[str, Any]:
    """The answer to a request whose handler raised ``exc`` (a bug): UNKNOWN_SERVER_ERROR in
    the API's error response (Kafka's ``KafkaApis.handleError``), or a concise
    CloseConnection when there is none (acks=0 Produce)."""
    what = describe_unexpected(f"{spec.name} v{version}", exc)
    builder = spec.error_response
    body = None
    if builder is not None:
        try:
            body = builder(request, version, _UNKNOWN_SERVER_ERROR)
        except Exception as e:
            what += "; " + describe_unexpected(f"the error response to {spec.name} v{version}", e)
    if body is None:
        raise CloseConnection(what)
    log.warning("answering UNKNOWN_SERVER_ERROR: %s", what)
    return body


async def _guarded(
    coro: Coroutine[Any, Any, Any], spec: ApiSpec, request: Any, version: int
) -> Any:
    """``coro``'s result; an unexpected exception is answered as :func:`_unexpected` says."""
    try:
        return await coro
    except (CloseConnection, MalformedRequest, asyncio.CancelledError):
        raise
    except Exception as e:
        return _unexpected(spec, request, version, e)


class RequestChannel:
    """Shared by every connection of one broker."""

    def __init__(self, api_table: dict[int, ApiSpec], *, max_request_size: int) -> None:
        self.api_table = api_table
        self.max_request_size = max_request_size
        self.connections: set[Connection] = set()
        #: the request hook (tests' fault injection); None in production
        self.interceptor: RequestInterceptor | None = None
        self.requests_total: dict[int, int] = {}
        #: False stops the per-request metrics (``kafkalite.request.metrics.enabled``):
        #: handlers then see ``ctx.stats`` None and count nothing
        self.record_metrics = True
        #: told of every closed connection (share sessions end with theirs, as in Kafka)
        self.close_listeners: list[Callable[[object], None]] = []
        #: per API: errors in responses and the time histograms (RequestMetrics)
        self.api_stats: dict[int, ApiStats] = {}
        #: Fetch's times again by who fetched (Kafka's FetchConsumer / FetchFollower)
        self.fetch_consumer_stats = ApiStats()
        self.fetch_follower_stats = ApiStats()
        #: connections accepted and closed per listener since start-up
        self.connections_created: dict[str, int] = {}
        self.connections_closed: dict[str, int] = {}

    def connection_opened(self, conn: Connection) -> None:
        self.connections.add(conn)
        created = self.connections_created
        created[conn.listener] = created.get(conn.listener, 0) + 1

    def connection_closed(self, conn: Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            closed = self.connections_closed
            closed[conn.listener] = closed.get(conn.listener, 0) + 1
        for listener in self.close_listeners:
            listener(conn)

    def stats_of(self, api_key: int) -> ApiStats:
        stats = self.api_stats.get(api_key)
        if stats is None:
            stats = self.api_stats[api_key] = ApiStats()
        return stats

    def handle(
        self, conn: Connection, frame: bytes | memoryview
    ) -> tuple[Any, Callable[[Any], Any], bool] | None:
        """Decode one frame and start its handler. ``frame`` is ``bytes``, or for a
        large Produce a writable view of the connection's buffer (``Connection._hand_over``)."""
        received = _perf_counter()
        sasl = conn.sasl
        if sasl is not None and sasl.raw_tokens:
            return self._raw_sasl_token(conn, sasl, bytes(frame))
        hdr = parse_request_header(frame)
        spec = self.api_table.get(hdr.api_key)
        if spec is None:
            raise CloseConnection(f"unknown api key {hdr.api_key}")
        self.requests_total[hdr.api_key] = self.requests_total.get(hdr.api_key, 0) + 1
        illegal_sasl_state = False
        if sasl is not None and not sasl.open:
            verdict = sasl.admits(hdr.api_key)
            if verdict == _SASL_CLOSE:
                raise CloseConnection(sasl.refusal(hdr.api_key))
            illegal_sasl_state = verdict == _SASL_ILLEGAL_STATE
        version = hdr.api_version
        if not spec.min_version <= version <= spec.max_version:
            if hdr.api_key == ApiKey.API_VERSIONS:
                # v0-shaped reply so any client can read the error and retry lower
                body = self._api_versions_fallback()
                return body, self._framer(hdr.correlation_id, False, 18, 0), False
            raise CloseConnection(
                f"unsupported version {version} of {spec.name} (supported {spec.min_version}-{spec.max_version})"
            )
        flexible = messages.is_flexible_request(hdr.api_key, version)
        body_offset = skip_tagged_fields(frame, hdr.size) if flexible else hdr.size
        decoder = spec.decoder
        if decoder is not None:
            request = decoder(frame, body_offset, version)  # raises MalformedRequest
        else:
            if type(frame) is not bytes:  # only a Produce is handed a view
                frame = bytes(frame)
            try:
                request = messages.decode_request(hdr.api_key, version, frame, body_offset)
            except Exception as e:  # kio raises many kinds on garbage input
                raise MalformedRequest(f"cannot decode {spec.name} v{version}: {e!r}") from None
        stats = self.api_stats.get(hdr.api_key)
        if stats is None and self.record_metrics:
            stats = self.stats_of(hdr.api_key)
        ctx = RequestContext(
            conn,
            hdr.api_key,
            version,
            hdr.correlation_id,
            hdr.client_id,
            flexible,
            size=len(frame),
            received=received,
            stats=stats,
        )
        # ApiVersions responses always use header v0 (KIP-511)
        resp_flexible = flexible and hdr.api_key != ApiKey.API_VERSIONS
        # RequestQueueTimeMs: since the socket read that completed this frame (frames held
        # back by the connection's bounds or a quota wait here)
        queue_s = received - conn.last_active
        times = stats
        if hdr.api_key == _FETCH and stats is not None:
            # timed under FetchConsumer or FetchFollower only: Kafka's all-Fetch
            # histograms are their sum, added up when scraped (errors stay on Fetch's)
            times = (
                self.fetch_follower_stats
                if getattr(request, "replica_id", -1) >= 0
                else self.fetch_consumer_stats
            )
            times.requests += 1
        if illegal_sasl_state:
            # Kafka answers the request with ILLEGAL_SASL_STATE, then closes
            assert sasl is not None
            log.info("closing connection from %s: %s", conn.peer, sasl.refusal(hdr.api_key))
            conn.close_after_response()
            builder = spec.error_response
            refused = None if builder is None else builder(request, version, _ILLEGAL_SASL_STATE)
            if refused is None:
                raise CloseConnection(sasl.refusal(hdr.api_key))
            framer = self._framer(
                hdr.correlation_id,
                resp_flexible,
                hdr.api_key,
                version,
                stats,
                received,
                queue_s,
                _perf_counter(),
                times,
                conn.send_marks,
            )
            return refused, framer, False
        interceptor = self.interceptor
        if interceptor is not None:
            intercepted = interceptor(ctx, request, spec)
            if intercepted is not None:
                framer = self._framer(
                    hdr.correlation_id,
                    resp_flexible,
                    hdr.api_key,
                    version,
                    stats,
                    received,
                    queue_s,
                    _perf_counter(),
                    times,
                    conn.send_marks,
                )
                return intercepted.result, framer, spec.serial
        try:
            result = spec.handler(ctx, request)
        except (CloseConnection, MalformedRequest):
            raise
        except Exception as e:  # a bug: UNKNOWN_SERVER_ERROR (or close), keep serving
            result = _unexpected(spec, request, version, e)
        else:
            if inspect.iscoroutine(result):
                result = _guarded(result, spec, request, version)
        framer = self._framer(
            hdr.correlation_id,
            resp_flexible,
            hdr.api_key,
            version,
            stats,
            received,
            queue_s,
            _perf_counter(),
            times,
            conn.send_marks,
        )
        return result, framer, spec.serial

    @staticmethod
    def _raw_sasl_token(
        conn: Connection, sasl: SaslServerAuthenticator, token: bytes
    ) -> tuple[Any, Callable[[Any], Any], bool]:
        """A SASL token after SaslHandshake v0: no Kafka header, the answer a bare
        size-prefixed token; a failure can only be told by closing (Kafka's v0)."""
        response, failed = sasl.authenticate(0, token)
        if failed:
            raise CloseConnection(f"SASL authentication failed: {response['error_message']}")
        if sasl.authenticated:
            conn.principal = KafkaPrincipal(USER_TYPE, str(sasl.user))
        challenge: bytes = response["auth_bytes"]

        def frame(result: Any) -> list[Any]:
            return [structs.I32.pack(len(result)) + result]

        return challenge, frame, True

    def _api_versions_fallback(self) -> dict[str, Any]:
        return {
            "error_code": ErrorCode.unsupported_version,
            "api_keys": self.api_versions_list(),
        }

    def api_versions_list(self) -> list[dict[str, int]]:
        return [
            {
                "api_key": s.key,
                "max_version": s.max_version,
                "min_version": s.min_version
                if s.advertised_min_version is None
                else s.advertised_min_version,
            }
            for s in sorted(self.api_table.values(), key=lambda s: s.key)
        ]

    @staticmethod
    def _framer(
        correlation_id: int,
        flexible: bool,
        api_key: int,
        version: int,
        stats: ApiStats | None = None,
        received: float = 0.0,
        queue_s: float = 0.0,
        local_end: float = 0.0,
        times: ApiStats | None = None,
        send_marks: list[tuple[ApiStats, float]] | None = None,
    ) -> Callable[[Any], list[Any] | None]:
        """The response's encoder; with ``stats`` it also records the request's times
        (the handler returned at ``local_end``; the rest until now is remote time) in
        ``times`` (a Fetch's FetchConsumer/FetchFollower stats) or else ``stats``, and,
        for a response dict, its error codes (handlers that encode their own response
        count theirs); with ``send_marks`` (the connection's) it leaves the mark from
        which the connection times the response's send (ResponseSendTimeMs)."""
        head = response_header(correlation_id, flexible)

        def frame(result: Any) -> list[Any] | None:
            if stats is not None:
                now = _perf_counter()
                timed = stats if times is None else times
                timed.record(queue_s, local_end - received, now - local_end)
                if type(result) is dict:
                    count_errors(result, stats.errors)
                if result is None:
                    return None
                if send_marks is not None:
                    send_marks.append((timed, now))
            elif result is None:
                return None
            if isinstance(result, dict):
                try:
                    body: Any = messages.encode_response(api_key, version, result)
                except Exception as e:  # a bug: the connection closes (as Kafka's would)
                    what = f"encoding the response to api {api_key} v{version}"
                    log.warning(describe_unexpected(what, e))
                    raise ConnectionAbortedError(what) from None
            else:
                body = result
            if isinstance(body, bytes | bytearray | memoryview):
                return [structs.I32.pack(len(head) + len(body)) + head, body]
            size = len(head)
            for p in body:
                size += p.size if isinstance(p, FileRange) else len(p)
            return [structs.I32.pack(size) + head, *body]

        return frame
