"""Listeners: accept TCP connections and hand them to :class:`Connection`.

Also enforces ``connections.max.idle.ms`` with one periodic sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import time

from kafkalite.server.config import Endpoint
from kafkalite.server.connection import Connection, TlsConnection
from kafkalite.server.request_channel import RequestChannel

log = logging.getLogger(__name__)


class SocketServer:
    def __init__(
        self,
        endpoints: list[Endpoint],
        channel: RequestChannel,
        *,
        idle_ms: int,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.endpoints = endpoints
        self.ssl_context = ssl_context
        self.channel = channel
        self.idle_ms = idle_ms
        self.bound: dict[str, tuple[str, int]] = {}
        self._socks: list[socket.socket] = []
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for ep in self.endpoints:
            family = socket.AF_INET6 if ":" in ep.host else socket.AF_INET
            s = socket.socket(family, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((ep.host or "0.0.0.0", ep.port))
            except OSError as e:
                s.close()
                raise OSError(e.errno, f"cannot listen on {ep}: {e.strerror}") from None
            s.listen(1024)
            s.setblocking(False)
            self._socks.append(s)
            self.bound[ep.listener] = s.getsockname()[:2]
            tls = self.ssl_context if ep.security_protocol == "SSL" else None
            self._tasks.append(loop.create_task(self._accept_loop(s, ep.listener, tls)))
            log.info("listening on %s://%s:%d", ep.listener, *self.bound[ep.listener])
        if self.idle_ms > 0:
            self._tasks.append(loop.create_task(self._idle_sweep()))

    async def _accept_loop(
        self, lsock: socket.socket, listener: str, tls: ssl.SSLContext | None
    ) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _addr = await loop.sock_accept(lsock)
            except asyncio.CancelledError:
                raise
            except OSError as e:
                log.warning("accept failed on %s: %s", listener, e)
                await asyncio.sleep(0.05)
                continue
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if tls is not None:
                    sock = tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
                    conn: Connection = TlsConnection(sock, listener, self.channel)
                else:
                    conn = Connection(sock, listener, self.channel)
                self.channel.connection_opened(conn)
                conn.start()
            except Exception:
                log.exception("could not set up a connection on %s", listener)
                sock.close()

    async def _idle_sweep(self) -> None:
        interval = min(self.idle_ms / 1000 / 2, 30.0)
        while True:
            await asyncio.sleep(max(interval, 0.01))
            deadline = time.monotonic() - self.idle_ms / 1000
            for conn in list(self.channel.connections):
                if conn.last_active < deadline and not conn.closed:
                    log.info("closing idle connection from %s (connections.max.idle.ms)", conn.peer)
                    conn.close()

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for s in self._socks:
            s.close()
        for conn in list(self.channel.connections):
            conn.close()
