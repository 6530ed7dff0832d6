"""Connection-pattern attacks against a broker, for tests and the fuzz bench.

Each pattern is an ``async`` function ``(host, port, seconds, **options)`` that
runs against a live broker for about ``seconds`` and returns :class:`Counters`.
None of them needs a Kafka client: they speak just enough of the wire format
(ApiVersions v0 requests) to look like a client that misbehaves. A broker must
survive every one of them with bounded memory while serving other clients:

- :func:`stalled_length_prefix`: connections that announce a huge request and
  send nothing more;
- :func:`never_reading_client`: a client that pipelines requests and never
  reads a response;
- :func:`slowloris`: requests sent one byte at a time;
- :func:`idle_connections`: connections that connect and send nothing;
- :func:`connection_churn`: connects and closes as fast as possible;
- :func:`partial_frame_then_close`: half a request, then a close (or a reset).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = [
    "PATTERNS",
    "Counters",
    "api_versions_request",
    "connection_churn",
    "idle_connections",
    "never_reading_client",
    "partial_frame_then_close",
    "slowloris",
    "stalled_length_prefix",
]


@dataclass(slots=True)
class Counters:
    """What a pattern did; ``closed_by_broker`` counts connections the broker ended."""

    connections: int = 0
    requests_sent: int = 0
    bytes_sent: int = 0
    responses: int = 0
    closed_by_broker: int = 0
    #: connect or send failures other than the broker closing the connection
    errors: int = 0

    def add(self, other: Counters) -> None:
        for name in self.__slots__:  # type: ignore[attr-defined]
            setattr(self, name, getattr(self, name) + getattr(other, name))


def api_versions_request(correlation_id: int, client_id: bytes = b"hostile") -> bytes:
    """A whole ApiVersions v0 frame: the smallest request every broker answers."""
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


async def _connect(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, (host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether the broker closed ``sock`` (EOF or reset waiting to be read)."""
    try:
        return sock.recv(65536) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


async def _hold(socks: list[socket.socket], seconds: float, c: Counters) -> None:
    """Keep ``socks`` open for ``seconds``; count the ones the broker closes, then close all."""
    deadline = time.monotonic() + seconds
    open_socks = list(socks)
    while open_socks and time.monotonic() < deadline:
        await asyncio.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        still = []
        for s in open_socks:
            if _closed_by_peer(s):
                c.closed_by_broker += 1
                s.close()
            else:
                still.append(s)
        open_socks = still
    for s in open_socks:
        s.close()


async def stalled_length_prefix(
    host: str, port: int, seconds: float, *, connections: int = 20, size: int = 100 << 20
) -> Counters:
    """Each connection sends a 4-byte length prefix of ``size`` and nothing more."""
    c = Counters()
    socks = []
    try:
        for _ in range(connections):
            s = await _connect(host, port)
            socks.append(s)
            c.connections += 1
            s.send(struct.pack(">i", size))
            c.bytes_sent += 4
    except OSError:
        c.errors += 1
    await _hold(socks, seconds, c)
    return c


async def idle_connections(
    host: str, port: int, seconds: float, *, connections: int = 1000
) -> Counters:
    """``connections`` connections that send nothing (closed by connections.max.idle.ms)."""
    c = Counters()
    socks = []
    try:
        for _ in range(connections):
            socks.append(await _connect(host, port))
            c.connections += 1
    except OSError:
        c.errors += 1
    await _hold(socks, seconds, c)
    return c


async def never_reading_client(
    host: str, port: int, seconds: float, *, batch: int = 64, rcvbuf: int = 4096
) -> Counters:
    """Pipeline ApiVersions requests for ``seconds`` and never read a response.

    The receive buffer is kept small, so the broker's writes stall quickly; a
    broker that mutes the connection then stops reading it, and the sends block.
    """
    c = Counters()
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, (host, port))
        c.connections += 1
        deadline = time.monotonic() + seconds
        cid = 0
        while (left := deadline - time.monotonic()) > 0:
            data = b"".join(api_versions_request(cid + i) for i in range(batch))
            try:
                await asyncio.wait_for(loop.sock_sendall(sock, data), left)
            except TimeoutError:
                break  # the broker stopped reading us (muted): what a bounded broker does
            cid += batch
            c.requests_sent += batch
            c.bytes_sent += len(data)
    except (ConnectionError, OSError):
        c.closed_by_broker += 1
    finally:
        sock.close()
    return c


async def slowloris(
    host: str, port: int, seconds: float, *, connections: int = 10, interval: float = 1.0
) -> Counters:
    """Each connection sends a valid request one byte every ``interval`` seconds."""
    c = Counters()
    socks: list[socket.socket] = []
    try:
        for _ in range(connections):
            socks.append(await _connect(host, port))
            c.connections += 1
    except OSError:
        c.errors += 1
    frames = {s: api_versions_request(i) for i, s in enumerate(socks)}
    sent = dict.fromkeys(socks, 0)
    deadline = time.monotonic() + seconds
    while socks and time.monotonic() < deadline:
        for s in list(socks):
            frame = frames[s]
            try:
                s.send(frame[sent[s] : sent[s] + 1])
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                c.closed_by_broker += 1
                socks.remove(s)
                s.close()
                continue
            sent[s] += 1
            c.bytes_sent += 1
            if sent[s] == len(frame):
                c.requests_sent += 1
                sent[s] = 0
            with contextlib.suppress(BlockingIOError, InterruptedError, OSError):
                if s.recv(65536):
                    c.responses += 1
        await asyncio.sleep(interval)
    for s in socks:
        s.close()
    return c


async def connection_churn(
    host: str, port: int, seconds: float, *, concurrency: int = 8, send_first: bool = False
) -> Counters:
    """Connect and close as fast as possible (``send_first``: send a request, then close)."""
    c = Counters()
    deadline = time.monotonic() + seconds

    async def worker() -> None:
        while time.monotonic() < deadline:
            try:
                s = await _connect(host, port)
            except OSError:
                c.errors += 1
                await asyncio.sleep(0.01)
                continue
            c.connections += 1
            if send_first:
                with contextlib.suppress(OSError):
                    s.send(api_versions_request(1))
                    c.requests_sent += 1
            s.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return c


async def partial_frame_then_close(
    host: str, port: int, seconds: float, *, reset: bool = False
) -> Counters:
    """Send the first half of a request (prefix included), then close (or reset)."""
    c = Counters()
    deadline = time.monotonic() + seconds
    frame = api_versions_request(1)
    while time.monotonic() < deadline:
        try:
            s = await _connect(host, port)
        except OSError:
            c.errors += 1
            await asyncio.sleep(0.01)
            continue
        c.connections += 1
        try:
            s.send(frame[: len(frame) // 2])
            c.bytes_sent += len(frame) // 2
            if reset:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            c.errors += 1
        s.close()
        await asyncio.sleep(0)
    return c


#: name -> pattern, for the fuzz bench's registry
PATTERNS: dict[str, Callable[..., Awaitable[Counters]]] = {
    "stalled_length_prefix": stalled_length_prefix,
    "never_reading_client": never_reading_client,
    "slowloris": slowloris,
    "idle_connections": idle_connections,
    "connection_churn": connection_churn,
    "partial_frame_then_close": partial_frame_then_close,
}
