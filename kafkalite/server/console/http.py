"""A small HTTP/1.1 server on asyncio for the console: GET, HEAD and form POSTs.

No framework: the console serves a handful of server-rendered pages on the broker's
own event loop, so the server is a stream reader with hard limits (line and header
sizes, body size, time to send a request) and one response per connection
(``Connection: close``), which keeps it simple and holds nothing between requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = ["HttpRequest", "HttpResponse", "HttpServer"]

log = logging.getLogger(__name__)

MAX_LINE = 8192
MAX_HEADERS = 100
MAX_BODY = 64 * 1024
READ_TIMEOUT_S = 10.0
#: connections served at once; more are closed at once (a console has a few users)
MAX_CONNECTIONS = 32

_REASONS = {
    200: "OK",
    303: "See Other",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    500: "Internal Server Error",
}


@dataclass(slots=True)
class HttpRequest:
    method: str
    #: decoded path segments: "/topics/a%2Fb" -> ["topics", "a/b"]
    segments: list[str]
    query: dict[str, str]
    form: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    def arg(self, name: str, default: str = "") -> str:
        """A form field, else a query parameter, else ``default``."""
        return self.form.get(name, self.query.get(name, default))


@dataclass(slots=True)
class HttpResponse:
    body: bytes | str
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def redirect(cls, location: str) -> HttpResponse:
        return cls("", 303, "text/plain", {"Location": location})

    def encode(self, head_only: bool) -> bytes:
        body = self.body.encode("utf-8") if isinstance(self.body, str) else self.body
        lines = [
            f"HTTP/1.1 {self.status} {_REASONS.get(self.status, 'Unknown')}",
            f"Content-Type: {self.content_type}",
            f"Content-Length: {len(body)}",
            "Connection: close",
            "X-Content-Type-Options: nosniff",
            "X-Frame-Options: DENY",
        ]
        headers = {"Cache-Control": "no-store", **self.headers}
        lines += [f"{k}: {v}" for k, v in headers.items()]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head if head_only else head + body


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def parse_target(target: str) -> tuple[list[str], dict[str, str]]:
    parts = urlsplit(target)
    segments = [unquote(s) for s in parts.path.split("/") if s]
    return segments, dict(parse_qsl(parts.query, keep_blank_values=True))


class HttpServer:
    """Serves ``handler`` on ``host:port`` (0 picks a free port) on the running loop."""

    def __init__(self, handler: Handler, host: str, port: int) -> None:
        self._handler = handler
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self._active = 0
        #: the connections being served: closing the server does not end them (a
        #: browser keeps idle ones open), so stop() cancels them
        self._serving: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, self._host, self._port, limit=MAX_LINE
        )

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for t in list(self._serving):
                t.cancel()
            await asyncio.gather(*self._serving, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _read_request(self, reader: asyncio.StreamReader) -> HttpRequest:
        try:
            line = await reader.readline()
        except ValueError:  # longer than the stream limit
            raise _BadRequest(400, "request line too long") from None
        parts = line.decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            raise _BadRequest(400, "bad request line")
        method, target = parts[0], parts[1]
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            try:
                raw = await reader.readline()
            except ValueError:
                raise _BadRequest(400, "header too long") from None
            if raw in (b"\r\n", b"\n", b""):
                break
            name, _, value = raw.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        else:
            raise _BadRequest(400, "too many headers")
        segments, query = parse_target(target)
        req = HttpRequest(method, segments, query, headers=headers)
        if method == "POST":
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                raise _BadRequest(400, "bad Content-Length") from None
            if length < 0 or length > MAX_BODY:
                raise _BadRequest(413, "form too large")
            body = await reader.readexactly(length) if length else b""
            ctype = headers.get("content-type", "")
            if body and not ctype.startswith("application/x-www-form-urlencoded"):
                raise _BadRequest(400, "forms only (application/x-www-form-urlencoded)")
            req.form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        elif method not in ("GET", "HEAD"):
            raise _BadRequest(405, "GET, HEAD and POST only")
        return req

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._active >= MAX_CONNECTIONS:
            writer.close()
            return
        self._active += 1
        task = asyncio.current_task()
        if task is not None:
            self._serving.add(task)
        head_only = False
        try:
            try:
                req = await asyncio.wait_for(self._read_request(reader), READ_TIMEOUT_S)
                head_only = req.method == "HEAD"
                resp = await self._handler(req)
            except _BadRequest as e:
                resp = HttpResponse(f"{e}\n", e.status, "text/plain; charset=utf-8")
            except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                return
            except Exception:  # a console bug must not take the broker down
                log.exception("console request failed")
                resp = HttpResponse("internal error\n", 500, "text/plain; charset=utf-8")
            writer.write(resp.encode(head_only))
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            self._active -= 1
            if task is not None:
                self._serving.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
