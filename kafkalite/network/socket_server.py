"""Listeners: accept TCP connections and hand them to :class:`Connection`.

Also enforces ``connections.max.idle.ms`` with one periodic sweep (which also
reads connections whose reset the event loop did not report), the
connection count limits (:mod:`connection_quotas`), and gives every connection
the broker-wide request queue and the per-connection bounds
(:mod:`request_queue`).

Accepting is a reader callback on the listening socket that accepts up to
``_ACCEPT_BATCH`` connections per wake-up (not a future per accept), so a storm
of connects and closes costs little, and a listener that cannot accept (the
process is out of descriptors, or ``max.connections`` is reached) stops being
polled instead of spinning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
import socket
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kafkalite.network.connection import Connection, TlsConnection
from kafkalite.network.connection_quotas import ConnectionQuotas
from kafkalite.network.heap_trim import HeapTrimmer
from kafkalite.network.request_channel import RequestChannel
from kafkalite.network.request_queue import ConnectionLimits, RequestQueue

if TYPE_CHECKING:
    from kafkalite.security.sasl.authenticator import SaslServerAuthenticator

log = logging.getLogger(__name__)

#: connections accepted per wake-up of a listener before other callbacks run
_ACCEPT_BATCH = 64
#: pause after accept() fails (EMFILE ...) before polling the listener again
_ACCEPT_BACKOFF_S = 0.1
#: how often (and after how long without traffic) quiet connections are checked
#: for a readable socket the event loop did not report
_POKE_INTERVAL_S = 2.0


class ListenerEndpoint(Protocol):
    """A listener to bind (the server's ``config.Endpoint`` is one)."""

    @property
    def listener(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def security_protocol(self) -> str: ...


@dataclass(slots=True)
class _Listener:
    name: str
    sock: socket.socket
    tls: ssl.SSLContext | None
    #: SASL listeners: a new authenticator per connection
    sasl: Callable[[], SaslServerAuthenticator] | None = None
    polling: bool = False


class SocketServer:
    def __init__(
        self,
        endpoints: Sequence[ListenerEndpoint],
        channel: RequestChannel,
        *,
        idle_ms: int,
        ssl_context: ssl.SSLContext | None = None,
        limits: ConnectionLimits | None = None,
        queue: RequestQueue | None = None,
        quotas: ConnectionQuotas | None = None,
        sasl: Mapping[str, Callable[[], SaslServerAuthenticator]] | None = None,
    ) -> None:
        self.endpoints = endpoints
        #: listener name -> a new SASL authenticator (SASL_PLAINTEXT / SASL_SSL listeners)
        self.sasl = dict(sasl or {})
        self.ssl_context = ssl_context
        self.channel = channel
        self.idle_ms = idle_ms
        self.limits = limits or ConnectionLimits()
        self.queue = queue or RequestQueue()
        self.quotas = quotas or ConnectionQuotas()
        self.bound: dict[str, tuple[str, int]] = {}
        self._listeners: list[_Listener] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._ips: dict[int, str] = {}
        self._stopped = False
        #: times accepting paused for max.connection.creation.rate (KIP-612)
        self.accept_throttles = 0
        #: connections held and closed for their address's connection_creation_rate
        self.throttled_ip_connections = 0
        self._held: set[socket.socket] = set()
        #: returns the heap of many closed connections to the OS
        self.heap_trimmer = HeapTrimmer(lambda: len(self._ips))

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
            self.bound[ep.listener] = s.getsockname()[:2]
            tls = self.ssl_context if ep.security_protocol in ("SSL", "SASL_SSL") else None
            sasl = None
            if ep.security_protocol.startswith("SASL_"):
                sasl = self.sasl.get(ep.listener)
                if sasl is None:
                    s.close()
                    raise ValueError(f"listener {ep.listener} has no SASL configuration")
            lst = _Listener(ep.listener, s, tls, sasl)
            self._listeners.append(lst)
            self._poll(lst)
            log.info("listening on %s://%s:%d", ep.listener, *self.bound[ep.listener])
        self._tasks.append(loop.create_task(self._sweep()))

    # ---- accepting ----------------------------------------------------------
    def _poll(self, lst: _Listener) -> None:
        if not lst.polling and not self._stopped:
            lst.polling = True
            asyncio.get_running_loop().add_reader(lst.sock.fileno(), self._on_acceptable, lst)

    def _unpoll(self, lst: _Listener) -> None:
        if lst.polling:
            lst.polling = False
            asyncio.get_running_loop().remove_reader(lst.sock.fileno())

    def _on_acceptable(self, lst: _Listener) -> None:
        quotas = self.quotas
        for _ in range(_ACCEPT_BATCH):
            if quotas.full(lst.name):
                self._unpoll(lst)  # polled again when a connection closes
                return
            now_ms = int(time.monotonic() * 1000)
            delay = quotas.creation_delay_ms(lst.name, now_ms)
            if delay > 0:
                # KIP-612: over the connection creation rate, new connections wait
                self.accept_throttles += 1
                self._unpoll(lst)
                asyncio.get_running_loop().call_later(delay / 1000, self._poll, lst)
                return
            try:
                sock, addr = lst.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                # out of descriptors (EMFILE/ENFILE) or buffers: the listener stays readable,
                # so stop polling it for a moment instead of spinning
                log.warning("accept failed on %s: %s", lst.name, e)
                self._unpoll(lst)
                asyncio.get_running_loop().call_later(_ACCEPT_BACKOFF_S, self._poll, lst)
                return
            quotas.record_creation(lst.name, now_ms)
            self._setup(sock, addr, lst)

    def _setup(self, sock: socket.socket, addr: object, lst: _Listener) -> None:
        ip = str(addr[0]) if isinstance(addr, tuple) else str(addr)
        throttle_ms = self.quotas.ip_throttle_ms(ip, int(time.monotonic() * 1000))
        if throttle_ms > 0:
            log.info(
                "Throttling connection from %s for %d ms: connection_creation_rate exceeded",
                ip,
                throttle_ms,
            )
            self.throttled_ip_connections += 1
            # held unread, then closed (Kafka's DelayedCloseSocket)
            self._held.add(sock)
            asyncio.get_running_loop().call_later(throttle_ms / 1000, self._close_held, sock)
            return
        if not self.quotas.admit(ip, lst.name):
            log.info(
                "Rejected connection from %s, address already has the configured maximum of %d"
                " connections.",
                ip,
                self.quotas.limit_for(ip),
            )
            sock.close()
            return
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            cls = Connection
            if lst.tls is not None:
                sock = lst.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
                cls = TlsConnection
            conn = cls(
                sock,
                lst.name,
                self.channel,
                limits=self.limits,
                queue=self.queue,
                on_close=self._closed,
            )
            if lst.sasl is not None:
                conn.sasl = lst.sasl()
        except OSError as e:  # the client left before we set it up (reset, ...)
            log.debug("connection from %s on %s gone before set-up: %s", ip, lst.name, e)
            self.quotas.release(ip, lst.name)
            sock.close()
            return
        except Exception:
            log.exception("could not set up a connection on %s", lst.name)
            self.quotas.release(ip, lst.name)
            sock.close()
            return
        self._ips[conn.id] = ip
        self.channel.connection_opened(conn)
        conn.start()
        self.heap_trimmer.opened()
        if self.quotas.over_limit():
            self._close_least_recently_active()

    def _close_held(self, sock: socket.socket) -> None:
        if sock in self._held:
            self._held.discard(sock)
            sock.close()

    def _close_least_recently_active(self) -> None:
        protected = self.quotas.protected_listener
        victims = [c for c in self.channel.connections if c.listener != protected]
        if victims:
            victim = min(victims, key=lambda c: c.last_active)
            log.info(
                "closing connection from %s on %s: max.connections=%d reached and the"
                " inter-broker listener needs a slot",
                victim.peer,
                victim.listener,
                self.quotas.max_connections,
            )
            victim.close()

    def _closed(self, conn: Connection) -> None:
        ip = self._ips.pop(conn.id, None)
        if ip is None:
            return
        self.quotas.release(ip, conn.listener)
        for lst in self._listeners:
            if not lst.polling and not self.quotas.full(lst.name):
                self._poll(lst)
        if not self._stopped:
            self.heap_trimmer.closed()

    # ---- idle and dead connections ------------------------------------------
    async def _sweep(self) -> None:
        """Close idle connections (``connections.max.idle.ms``) and poke quiet readable ones."""
        idle_s = self.idle_ms / 1000 if self.idle_ms > 0 else None
        interval = _POKE_INTERVAL_S if idle_s is None else min(idle_s / 2, _POKE_INTERVAL_S)
        while True:
            await asyncio.sleep(max(interval, 0.01))
            now = time.monotonic()
            if idle_s is not None:
                deadline = now - idle_s
                for conn in list(self.channel.connections):
                    if conn.last_active < deadline and not conn.closed:
                        log.info(
                            "closing idle connection from %s (connections.max.idle.ms)", conn.peer
                        )
                        conn.close()
            self._poke_quiet(now - _POKE_INTERVAL_S)

    def _poke_quiet(self, quiet_since: float) -> None:
        """Read connections that are readable (data, EOF or a reset) but were not called back.

        uvloop drops the reader of a socket whose reset came with data still
        unread; such a connection would otherwise stay open until it is idle
        for ``connections.max.idle.ms``. One ``poll`` finds them.
        """
        quiet = {
            c.fd: c
            for c in self.channel.connections
            if c.reading and c.last_active < quiet_since and not c.closed
        }
        if not quiet:
            return
        p = select.poll()
        for fd in quiet:
            p.register(fd, select.POLLIN | select.POLLPRI)
        try:
            ready = p.poll(0)
        except OSError:
            return
        for fd, _events in ready:
            conn = quiet.get(fd)
            if conn is not None:
                conn.poke()

    async def stop(self) -> None:
        self._stopped = True
        for sock in list(self._held):
            self._close_held(sock)
        self.heap_trimmer.cancel()
        for lst in self._listeners:
            self._unpoll(lst)
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        for lst in self._listeners:
            lst.sock.close()
        for conn in list(self.channel.connections):
            conn.close()
