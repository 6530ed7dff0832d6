"""One client connection: size-prefixed frames in, responses out in request order.

Reading and writing use the raw non-blocking socket (not an asyncio transport)
because a Fetch response is header bytes interleaved with ``os.sendfile``
ranges of segment files, and a transport cannot splice a sendfile into its
buffer. Requests are dispatched as soon as they are parsed (pipelining); the
synchronous part of a handler (e.g. the log append) runs in arrival order, and
anything it leaves pending (a long-poll fetch, an acks=all produce) is a future
the writer awaits in order. APIs marked ``serial`` finish before the next
request on the connection is dispatched, as Kafka does for every request.

Memory follows what the client actually sends and reads: a connection owns no
read buffer until a read ends inside a frame, the buffer grows with the bytes
that arrive (never from the length prefix alone) and is dropped once emptied;
a connection stops being read while too many of its responses are unwritten
(``ConnectionLimits``) or the broker-wide queue is full (``RequestQueue``).
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
import mmap
import os
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kafkalite.common import structs
from kafkalite.common.principal import ANONYMOUS_PRINCIPAL, KafkaPrincipal
from kafkalite.network.request_queue import ConnectionLimits, RequestQueue
from kafkalite.network.request_stats import ApiStats, record_sends
from kafkalite.network.responses import CloseConnection, FileRange, Parts
from kafkalite.network.unexpected_errors import report_unexpected
from kafkalite.protocol.headers import MalformedRequest

if TYPE_CHECKING:
    from kafkalite.network.request_channel import RequestChannel
    from kafkalite.security.sasl.authenticator import SaslServerAuthenticator

log = logging.getLogger(__name__)

#: one read of a connection that holds no partial frame goes here (one per thread,
#: shared by its connections: a read is dispatched or copied out before the next)
_SCRATCH_BYTES = 256 * 1024
#: smallest buffer a connection allocates for a frame that did not arrive whole
_MIN_BUFFER = 4096
#: an emptied buffer larger than this is dropped at once; smaller ones once idle
_KEEP_BYTES = 1 << 20
_TRIM_SECONDS = 1.0
#: recv calls per readable callback while a frame is incomplete (others get their turn)
_READS_PER_WAKEUP = 16
#: requests one connection may start per turn of the event loop: a client pipelining
#: thousands of cheap requests (256 KiB of ApiVersions is 13,000 of them) would
#: otherwise hold the loop for seconds while every other client waits (Kafka's
#: processors give each connection one request per poll)
_FRAMES_PER_TURN = 128
_NO_BUFFER = bytearray()
_NO_VIEW = memoryview(_NO_BUFFER)
_local = threading.local()
_perf_counter = time.perf_counter
#: ResponseSendTimeMs marks a connection keeps at most while it never drains
_MAX_SEND_MARKS = 4096


def _thread_scratch() -> memoryview:
    view: memoryview | None = getattr(_local, "scratch", None)
    if view is None:
        view = _local.scratch = memoryview(bytearray(_SCRATCH_BYTES))
    return view


class Connection:
    __slots__ = (
        "sock",
        "fd",
        "peer",
        "listener",
        "channel",
        "loop",
        "client_software_name",
        "client_software_version",
        "id",
        "last_active",
        "control_plane",
        "broker_peer",
        "principal",
        "sasl",
        "_close_after",
        "_pending",
        "_wake",
        "_closed",
        "_eof",
        "_writer_task",
        "_reader_task",
        "_reading",
        "_resume_scheduled",
        "_resume_fut",
        "_readable_fut",
        "_blocked",
        "_turn_left",
        "_yielded",
        "_serial_wait",
        "_scratch",
        "_rbuf",
        "_rview",
        "_rstart",
        "_rend",
        "_trim_handle",
        "_reserved",
        "_unsent",
        "send_marks",
        "_max_inflight",
        "_max_queued",
        "_queue",
        "_on_close",
        "_throttled",
        "_throttle_handle",
        "measure_busy",
        "busy_s",
        "busy_reported_s",
    )

    _next_id = 0
    #: the reader may sendmsg ready responses itself (not through TLS)
    direct_writes = True

    def __init__(
        self,
        sock: socket.socket,
        listener: str,
        channel: RequestChannel,
        *,
        limits: ConnectionLimits | None = None,
        queue: RequestQueue | None = None,
        on_close: Callable[[Connection], None] | None = None,
    ) -> None:
        Connection._next_id += 1
        self.id = Connection._next_id
        self.sock = sock
        self.fd = sock.fileno()
        try:
            self.peer = sock.getpeername()
        except OSError:
            self.peer = ("?", 0)
        self.listener = listener
        self.channel = channel
        self.loop = asyncio.get_running_loop()
        self.client_software_name: str | None = None
        self.client_software_version: str | None = None
        self.last_active = time.monotonic()
        #: carries controller requests (decided by its first request, revoked when one
        #: fails the controller-request authenticator): exempt from
        #: the broker-wide queue bounds, as Kafka's control plane has its own queue
        self.control_plane: bool | None = None
        #: a broker proved itself here (a follower request carrying the inter-broker
        #: authenticator): its follower fetches are obeyed (Kafka's CLUSTER_ACTION)
        self.broker_peer = False
        #: who is on the other end: ANONYMOUS until SASL or a client certificate says
        self.principal: KafkaPrincipal = ANONYMOUS_PRINCIPAL
        #: the SASL state machine of a SASL_PLAINTEXT / SASL_SSL connection, else None
        self.sasl: SaslServerAuthenticator | None = None
        #: close once the response being dispatched is written (a failed authentication)
        self._close_after = False
        #: responses in request order: a future (not answered yet), an encoded
        #: response ``(parts, nbytes)`` (an int second: no encoder), or ``_CLOSE``
        self._pending: collections.deque[tuple[Any, Any]] = collections.deque()
        self._wake: asyncio.Future[None] | None = None
        self._closed = False
        self._eof = False
        self._writer_task: asyncio.Task[None] | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._reading = False
        self._resume_scheduled = False
        self._resume_fut: asyncio.Future[None] | None = None
        self._readable_fut: asyncio.Future[None] | None = None
        self._blocked = False
        #: requests this connection may still start in this turn (``_FRAMES_PER_TURN``)
        self._turn_left = _FRAMES_PER_TURN
        #: used up its turn: not read or dispatched until ``_next_turn`` runs
        self._yielded = False
        self._serial_wait: asyncio.Future[Any] | None = None
        self._scratch = _thread_scratch()
        # no buffer of its own until a read ends inside a frame (see _keep)
        #: a bytearray, or an anonymous mapping for a frame over 1 MiB (see _grow)
        self._rbuf: bytearray | mmap.mmap = _NO_BUFFER
        self._rview = _NO_VIEW
        self._rstart = self._rend = 0
        self._trim_handle: asyncio.TimerHandle | None = None
        #: bytes of the frame being received, counted in the broker-wide queue
        self._reserved = 0
        #: bytes of encoded responses not yet written to the socket
        self._unsent = 0
        #: ``(stats, also, encoded_at)`` of responses encoded since the connection last
        #: had no unwritten byte: their ResponseSendTimeMs ends when it next has none
        self.send_marks: list[tuple[ApiStats, float]] = []
        limits = limits or ConnectionLimits()
        self._max_inflight = limits.max_inflight
        self._max_queued = limits.max_queued_bytes
        self._queue = queue if queue is not None else RequestQueue()
        self._on_close = on_close
        #: muted by a quota (KIP-219) until ``_throttle_handle`` fires
        self._throttled = False
        self._throttle_handle: asyncio.TimerHandle | None = None
        #: whether to add up the event-loop time this connection's reads take (set for
        #: clients under a request_percentage quota: reading, decoding, handling and
        #: writing what is ready, per callback); off, it costs one attribute check
        self.measure_busy = False
        self.busy_s = 0.0
        #: the part of ``busy_s`` the request quota has counted already
        self.busy_reported_s = 0.0

    # ---- lifecycle ----------------------------------------------------------
    def start(self) -> None:
        # a persistent reader callback, not a task awaiting sock_recv_into: no
        # future, task step or epoll_ctl pair per request (issue 7's latency)
        self._start_reading()
        self._writer_task = self.loop.create_task(self._write_loop())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._reading:
            self._stop_reading()
        for t in (self._reader_task, self._writer_task):
            if t is not None and t is not asyncio.current_task():
                t.cancel()
        for fut, _ in self._pending:
            if isinstance(fut, asyncio.Future) and not fut.done():
                fut.cancel()
        self._pending.clear()
        self.send_marks.clear()
        if self._trim_handle is not None:
            self._trim_handle.cancel()
            self._trim_handle = None
        if self._throttle_handle is not None:
            self._throttle_handle.cancel()
            self._throttle_handle = None
        self._drop_buffer()
        self._release_reservation()
        self._queue.forget(self.id)
        try:
            self.sock.close()
        except OSError:
            pass
        self.channel.connection_closed(self)
        if self._on_close is not None:
            self._on_close(self)

    @property
    def closed(self) -> bool:
        return self._closed

    def close_after_response(self) -> None:
        """Read nothing more; close once the response of the request being handled (and
        those before it) are written: Kafka's answer to a failed SASL exchange."""
        self._close_after = True

    @property
    def reading(self) -> bool:
        """Whether the socket is being read (False: muted by a bound, or closing)."""
        return self._reading

    @property
    def buffered_bytes(self) -> int:
        """Size of this connection's own read buffer (0 when idle)."""
        return len(self._rbuf)

    @property
    def inflight(self) -> int:
        """Requests whose responses are not written yet."""
        return len(self._pending)

    @property
    def unsent_bytes(self) -> int:
        """Bytes of encoded responses not yet written to the socket."""
        return self._unsent

    @property
    def throttled(self) -> bool:
        """Muted by a quota (:meth:`throttle`)."""
        return self._throttled

    def throttle(self, ms: int) -> None:
        """Read no request for ``ms`` (KIP-219): the response owing it still goes out now.

        Kafka's processor mutes the channel after sending a throttled response;
        here reading stops at once and the responses already queued are written
        as usual, which is the same for the client: it hears its answer with
        ``throttle_time_ms`` and the broker reads nothing more from it until the
        time is over. A longer throttle extends the mute; a shorter one does not
        shorten it.
        """
        if ms <= 0 or self._closed:
            return
        until = self.loop.time() + ms / 1000
        h = self._throttle_handle
        if h is not None:
            if h.when() >= until:
                return
            h.cancel()
        self._throttled = True
        self._throttle_handle = self.loop.call_at(until, self._unthrottle)
        if self._reading:
            self._stop_reading()

    def _unthrottle(self) -> None:
        self._throttle_handle = None
        self._throttled = False
        if not self._closed:
            self._resume()  # reads again, and dispatches what arrived meanwhile

    # ---- flow control -------------------------------------------------------
    def _may_dispatch(self) -> bool:
        """Whether the next request may start: the connection's and the broker's bounds."""
        return (
            self._serial_wait is None
            and not self._throttled
            and not self._yielded
            and len(self._pending) < self._max_inflight
            and self._unsent < self._max_queued
            # a paused queue still lets through the buffered frame it already counts
            and (not self._queue.paused or bool(self.control_plane) or bool(self._reserved))
        )

    def _want_read(self) -> bool:
        """Whether to read the socket: ``_may_dispatch``, or finish a frame the queue counts."""
        if (
            self._closed
            or self._eof
            or self._serial_wait is not None
            or self._yielded
            or self._throttled
        ):
            return False
        if len(self._pending) >= self._max_inflight or self._unsent >= self._max_queued:
            return False  # muted until its responses drain (the client is not reading)
        if self._queue.paused and self.control_plane is not True:
            if self.control_plane is None:
                return True  # read its first request, to learn if it is the controller's
            # start no new request, but finish receiving (and then handle) one the
            # queue admitted before it filled, as Kafka's memory pool
            return self._rend - self._rstart < self._reserved
        return True

    def _update_reading(self) -> None:
        """Read the socket or stop reading it, as the bounds say; arrange to be resumed."""
        if self._want_read():
            if not self._reading:
                self._start_reading()
            return
        if self._reading:
            self._stop_reading()
        if self._queue.paused and not self.control_plane and not self._closed:
            self._queue.wait(self.id, self._resume)
        # per-connection bounds: the writer resumes it (_maybe_resume) as responses drain;
        # a serial request: _serial_done

    def _maybe_resume(self) -> None:
        """Called when responses were written while muted: read again if the bounds allow."""
        if not self._resume_scheduled and self._want_read():
            self._resume_scheduled = True
            self.loop.call_soon(self._resume)

    def _resume(self) -> None:
        self._resume_scheduled = False
        if self._closed or self._reading:
            return
        self._turn_left = _FRAMES_PER_TURN
        if self._want_read():
            self._start_reading()
            if self.measure_busy:
                t0 = _perf_counter()
                self._after_read()  # the frames that arrived while muted
                self.busy_s += _perf_counter() - t0
            else:
                self._after_read()
        elif self._queue.paused and not self.control_plane:
            self._queue.wait(self.id, self._resume)  # paused again meanwhile

    def _start_reading(self) -> None:
        self._reading = True
        self.loop.add_reader(self.fd, self._on_readable)

    def _stop_reading(self) -> None:
        self._reading = False
        self.loop.remove_reader(self.fd)

    def _serial_done(self, _: Any) -> None:
        self._serial_wait = None
        if not self._closed:
            self._resume()

    # ---- reading ------------------------------------------------------------
    def _on_readable(self) -> None:
        """The socket has bytes: ``recv``, dispatch the whole frames, flush.

        Level-triggered, so what one ``recv`` leaves is read on the next call. A
        connection without a partial frame reads into the thread's shared scratch
        buffer and keeps only the tail of a frame that did not arrive whole, so an
        idle connection holds no buffer at all.

        While a frame is incomplete it reads on until the socket is drained: uvloop
        silently drops the reader of a socket whose reset arrived together with
        data, so the reset must be seen by a ``recv`` of this call (else a client
        that sends half a request and resets would hold its connection until
        ``connections.max.idle.ms``).
        """
        if self.measure_busy:
            t0 = _perf_counter()
            try:
                self._read_ready()
            finally:
                self.busy_s += _perf_counter() - t0
        else:
            self._read_ready()

    def _read_ready(self) -> None:
        self._turn_left = _FRAMES_PER_TURN
        if self._read_once() and self._rend and self._reading:
            for _ in range(_READS_PER_WAKEUP - 1):
                if not self._read_once() or not self._rend or not self._reading:
                    return

    def _read_once(self) -> bool:
        """One ``recv`` and the dispatch of what it completed; False: nothing more to read now."""
        if self._rend or len(self._rbuf) >= _SCRATCH_BYTES:
            try:
                n = self.sock.recv_into(self._room())
            except (BlockingIOError, InterruptedError):
                return False
            except OSError:  # ConnectionError included
                self._reader_done()
                return False
            if n == 0:
                self._reader_done()
                return False
            self._rend += n
            self.last_active = time.monotonic()
            self._after_read()
            return not self._closed
        view = self._scratch
        try:
            n = self.sock.recv_into(view)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            self._reader_done()
            return False
        if n == 0:
            self._reader_done()
            return False
        self.last_active = time.monotonic()
        try:
            start = self._dispatch_frames(view, 0, n)
        except Exception as e:
            report_unexpected(self.peer, "reading requests", e)
            start = -1
        if start < 0:
            self._reader_done()
            return False
        if start < n:
            self._keep(view[start:n])
        self._after_dispatch()
        return not self._closed

    def poke(self) -> None:
        """Read now: the socket is readable but no callback came (see ``_on_readable``)."""
        if self._closed or not self._reading:
            return
        if self.direct_writes:
            self._on_readable()
            return
        fut = self._readable_fut
        if fut is not None and not fut.done():
            fut.set_result(None)  # the TLS reader retries its recv

    def _after_read(self) -> None:
        """Dispatch the whole frames in this connection's buffer, then flush."""
        try:
            start = self._dispatch_frames(self._rview, self._rstart, self._rend)
        except Exception as e:
            report_unexpected(self.peer, "reading requests", e)
            start = -1
        if start < 0:
            self._reader_done()
            return
        self._consumed(start)
        self._after_dispatch()

    def _after_dispatch(self) -> None:
        """Write what is ready; go on dispatching if that lifted a bound, else maybe mute."""
        while True:
            if self._rend and not self._reserved:
                self._update_reservation()
            self._flush()
            if self._closed:
                return
            if not (self._blocked and self._may_dispatch()):
                break
            try:
                start = self._dispatch_frames(self._rview, self._rstart, self._rend)
            except Exception as e:
                report_unexpected(self.peer, "reading requests", e)
                start = -1
            if start < 0:
                self._reader_done()
                return
            self._consumed(start)
        if (
            self._reading
            and self._serial_wait is None
            and not self._yielded
            and len(self._pending) < self._max_inflight
            and self._unsent < self._max_queued
            and not self._queue.paused
        ):
            return  # the common case: go on reading
        self._update_reading()

    def _reader_done(self) -> None:
        """EOF or a read error: stop reading, let queued responses drain, then close."""
        self._eof = True
        if self._reading:
            self._stop_reading()
        if not self._closed:
            self._flush()
            self._pending.append((None, _CLOSE))
            self._wakeup()

    def _dispatch_frames(self, view: memoryview, start: int, end: int) -> int:
        """Dispatch the whole frames in ``view[start:end]`` while the bounds allow.

        Returns where the undispatched bytes start, or -1 to close the connection.
        ``_blocked`` tells whether a bound (not a partial frame) stopped it.
        """
        self._blocked = False
        max_bytes = self.channel.max_request_size
        sasl = self.sasl
        if sasl is not None and not sasl.authenticated:
            # Kafka's sasl.server.max.receive.size: an unauthenticated client cannot make
            # the broker buffer socket.request.max.bytes
            max_bytes = min(max_bytes, sasl.context.config.max_receive_size)
        pending, queue = self._pending, self._queue
        max_inflight, max_queued = self._max_inflight, self._max_queued
        while end - start >= 4:
            if (
                self.control_plane is None
                and end - start >= 6
                and (self.sasl is None or self.sasl.authenticated)
            ):
                # the controller's connections send controller requests (keys 4-7) only
                self.control_plane = view[start + 4] == 0 and 4 <= view[start + 5] <= 7
            if (  # _may_dispatch, inlined: this runs for every request
                self._serial_wait is not None
                or self._throttled
                or len(pending) >= max_inflight
                or self._unsent >= max_queued
                or (queue.paused and not self.control_plane and not self._counted(view, start))
            ):
                self._blocked = True
                break
            if self._turn_left <= 0:
                self._end_turn()
                self._blocked = True
                break
            size = structs.I32.unpack_from(view, start)[0]
            if size < 0 or size > max_bytes:
                log.warning(
                    "closing connection from %s: request of %d bytes exceeds socket.request.max.bytes=%d",
                    self.peer,
                    size,
                    max_bytes,
                )
                return -1
            if end - start - 4 < size:
                break
            if self._reserved and start == self._rstart and view is self._rview:
                self._release_reservation()  # the admitted frame is handled now
            if size >= _KEEP_BYTES and view is self._rview and start + 4 + size == end:
                frame: bytes | memoryview = self._hand_over(start, size)
            else:
                frame = bytes(view[start + 4 : start + 4 + size])
            start += 4 + size
            self._turn_left -= 1
            if not self._dispatch(frame) or self._closed:
                return -1
        return start

    def _end_turn(self) -> None:
        """The turn's requests are started: let the other connections' callbacks run first."""
        if not self._yielded:
            self._yielded = True
            self.loop.call_soon(self._next_turn)

    def _next_turn(self) -> None:
        self._yielded = False
        if self._closed:
            return
        self._turn_left = _FRAMES_PER_TURN
        if not self._reading:  # stopped only if another bound holds it too
            self._resume()  # (measures its own loop time)
        elif self.measure_busy:
            t0 = _perf_counter()
            self._after_read()
            self.busy_s += _perf_counter() - t0
        else:
            self._after_read()

    def _hand_over(self, start: int, size: int) -> bytes | memoryview:
        """A large frame that fills the end of our buffer: a Produce gets the buffer itself.

        A large request is almost always a Produce, and its batch is appended from a
        writable view of the request (offsets are assigned in it), so handing over
        the buffer instead of copying it keeps a 48 MiB request at 48 MiB of broker
        memory rather than three times that. The buffer was going to be dropped
        anyway (``_KEEP_BYTES``); the connection starts a new one for what follows.
        Other APIs decode from ``bytes`` (kio's reader), so they get a copy.
        """
        view = self._rview
        if view[start + 4] != 0 or view[start + 5] != 0:  # api key 0: Produce
            return bytes(view[start + 4 : start + 4 + size])
        frame = view[start + 4 : start + 4 + size]
        self._drop_buffer()
        return frame

    # ---- the connection's own read buffer ----------------------------------
    def _keep(self, data: memoryview) -> None:
        """Copy what one read left (a frame's head, or frames a bound held back) to our buffer.

        Sized from the bytes that arrived, never from the length prefix alone: a
        client announcing 100 MiB and sending nothing costs ``_MIN_BUFFER``.
        """
        n = len(data)
        if len(self._rbuf) < n:
            size = max(n, _MIN_BUFFER)
            if n >= 4:
                need = 4 + structs.I32.unpack_from(data, 0)[0]
                if need > n:
                    size = max(n, min(need, 2 * n), _MIN_BUFFER)
            self._rbuf = bytearray(size)
            self._rview = memoryview(self._rbuf)
        self._rview[:n] = data
        self._rstart, self._rend = 0, n

    def _consumed(self, start: int) -> None:
        """The buffer's frames up to ``start`` are dispatched."""
        if start < self._rend:
            self._rstart = start
            return
        self._rstart = self._rend = 0
        if len(self._rbuf) > _KEEP_BYTES:
            self._drop_buffer()  # a large frame is done: give its memory back now
        elif self._trim_handle is None and self._rbuf is not _NO_BUFFER:
            self._trim_handle = self.loop.call_later(_TRIM_SECONDS, self._trim)

    def _trim(self) -> None:
        """Drop the (empty) read buffer of a connection that stopped sending."""
        self._trim_handle = None
        if self._closed or self._rend or self._rbuf is _NO_BUFFER:
            return  # a partial frame: _consumed re-arms this once it is dispatched
        if time.monotonic() - self.last_active >= _TRIM_SECONDS:
            self._drop_buffer()
        else:
            self._trim_handle = self.loop.call_later(_TRIM_SECONDS, self._trim)

    def _drop_buffer(self) -> None:
        self._rbuf = _NO_BUFFER
        self._rview = _NO_VIEW
        self._rstart = self._rend = 0

    def _room(self) -> memoryview:
        """Free space at the end of the read buffer: compacted, or grown when full."""
        if self._rend == len(self._rbuf):
            if self._rstart > 0:
                start, end = self._rstart, self._rend
                self._rview[0 : end - start] = self._rview[start:end]
                self._rstart, self._rend = 0, end - start
            else:
                self._grow()
        return self._rview[self._rend :]

    def _grow(self) -> None:
        """Double the full buffer, but never past the frame being received.

        A frame that outgrows ``_KEEP_BYTES`` (more than 1 MiB of it has arrived)
        gets one anonymous mapping of its whole size instead: its pages become
        resident only as the bytes arrive, so memory still follows what the client
        sent, and the frame is not copied (and zero-filled) again at each doubling
        (a 48 MiB Produce held the loop 61 ms in its last doubling alone).
        """
        used = self._rend - self._rstart
        size = max(2 * len(self._rbuf), _MIN_BUFFER)
        buf: bytearray | mmap.mmap
        if used >= 4:
            need = 4 + structs.I32.unpack_from(self._rview, self._rstart)[0]
            if need > used:
                size = min(size, need)
                if size > _KEEP_BYTES:
                    size = need
        buf = mmap.mmap(-1, size) if size > _KEEP_BYTES else bytearray(size)
        view = memoryview(buf)
        # through a view: bytearray slice assignment from a memoryview copies it first
        view[:used] = self._rview[self._rstart : self._rend]
        self._rbuf = buf
        self._rview = view
        self._rstart, self._rend = 0, used

    def _counted(self, view: memoryview, start: int) -> bool:
        """Whether the frame at ``start`` is the one the queue already counts (it may start)."""
        return bool(self._reserved) and start == self._rstart and view is self._rview

    def _update_reservation(self) -> None:
        """Admit the buffered head frame to the broker-wide queue (queued.max.request.bytes).

        Its announced size is counted from its prefix until it is dispatched, as
        Kafka's memory pool allocates a receive; while the queue is full a new
        frame is not admitted (and not read on, see ``_want_read``).
        """
        if self._reserved or self.control_plane or self._queue.paused:
            return
        if self._rend - self._rstart >= 4:
            size = structs.I32.unpack_from(self._rview, self._rstart)[0]
            if 0 <= size <= self.channel.max_request_size:
                self._reserved = 4 + size
                self._queue.reserve(self._reserved)

    def _release_reservation(self) -> None:
        if self._reserved:
            self._queue.reserve(-self._reserved)
            self._reserved = 0

    async def _read_loop(self) -> None:
        """The reader for sockets that need a task (TLS); same framing as ``_on_readable``."""
        try:
            while True:
                while not self._reading:
                    if self._closed or self._eof:
                        return
                    self._resume_fut = self.loop.create_future()
                    await self._resume_fut
                room = self._room()
                buf = self._rbuf
                n = await self._recv_into(room)
                if n == 0:
                    return
                if self._rbuf is not buf:
                    # the idle trim dropped the (empty) buffer while this read waited: the
                    # bytes are in the old one
                    data = bytes(room[:n])
                    while len(self._room()) < n:
                        self._grow()
                    self._room()[:n] = data
                self._rend += n
                self.last_active = time.monotonic()
                self._turn_left = _FRAMES_PER_TURN
                if self.measure_busy:
                    t0 = _perf_counter()
                    self._after_read()
                    self.busy_s += _perf_counter() - t0
                else:
                    self._after_read()
                if self._closed or self._eof:
                    return
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            raise
        except Exception as e:
            report_unexpected(self.peer, "reading requests", e)
        finally:
            self._reader_done()

    async def _recv_into(self, mv: memoryview) -> int:
        return await self.loop.sock_recv_into(self.sock, mv)

    def _dispatch(self, frame: bytes | memoryview) -> bool:
        try:
            result = self.channel.handle(self, frame)
        except MalformedRequest as e:
            log.warning("closing connection from %s: malformed request: %s", self.peer, e)
            return False
        except CloseConnection as e:
            log.warning("closing connection from %s: %s", self.peer, e)
            return False
        if result is None:
            return True
        value, encode, serial = result
        if isinstance(value, Awaitable) and not isinstance(value, asyncio.Future):
            value = asyncio.ensure_future(value)
            if not self.control_plane:
                # a handler still running: what Kafka's request queue bounds
                self._queue.acquire(len(frame))
                value.add_done_callback(_Release(self._queue, len(frame)))
        if isinstance(value, asyncio.Future):
            if not value.done():
                if serial:
                    # no further request is dispatched until it finishes
                    self._serial_wait = value
                    value.add_done_callback(self._serial_done)
                # a delayed response (long poll, acks=all) leaves from its completion
                # callback when it reaches the head, without a writer-task step
                value.add_done_callback(self._on_response_done)
            self._pending.append((value, encode))
            return not self._close_after
        try:
            parts = encode(value)
        except Exception as e:
            report_unexpected(self.peer, "encoding a response", e)
            return False
        if parts:
            # encoded now, so the bytes waiting for this client are known (max_queued);
            # most responses are a header and a pre-encoded body (_nbytes inlined)
            if len(parts) == 2 and type(parts[1]) is not FileRange:
                n = len(parts[0]) + len(parts[1])
            else:
                n = _nbytes(parts)
            self._unsent += n
            self._pending.append((parts, n))
        return not self._close_after

    def _on_response_done(self, fut: asyncio.Future[Any]) -> None:
        if self._closed:
            return
        pending = self._pending
        if pending and pending[0][0] is not fut and not fut.cancelled() and fut.exception() is None:
            # behind a response still being written: encode it now so its bytes count
            for i, (value, encode) in enumerate(pending):
                if value is fut:
                    try:
                        parts = encode(fut.result()) or []
                    except Exception as e:
                        report_unexpected(self.peer, "encoding a response", e)
                        self.close()
                        return
                    n = _nbytes(parts)
                    self._unsent += n
                    pending[i] = (parts, n)
                    break
        self._flush()

    def _flush(self) -> None:
        """Write the responses that are ready from the reader's task, if the writer is idle.

        Called once the frames of one read are dispatched: their responses go out
        in one ``sendmsg`` without a hop through the writer task. What cannot be
        written now (a pending future, a file range, a full socket buffer) is left,
        in order, to the writer.
        """
        pending = self._pending
        if not pending or self._closed:
            return
        w = self._wake
        if w is None or w.done():
            return  # the writer is busy (or already woken): it will take them in order
        try:
            chunks, n = self._take_ready()
            if self.direct_writes:
                chunks = _copy_small_ranges(chunks)
        except ConnectionAbortedError:
            self.close()
            return
        except Exception as e:
            report_unexpected(self.peer, "encoding a response", e)
            self.close()
            return
        if chunks:
            if not self.direct_writes:
                pending.appendleft((chunks, n))
            else:
                # file ranges too: a follower's fetch response leaves in this step instead
                # of one event-loop turn later from the writer task (each turn of a busy
                # broker's loop is a whole batch of produce appends: a fetch round trip
                # that waits for fewer turns replicates more per second)
                try:
                    rest = _send_now(self.fd, self.sock, chunks)
                except ConnectionAbortedError:  # a file range shrank (logged)
                    self.close()
                    return
                except OSError:
                    self.close()
                    return
                if rest:
                    # the socket is full: the rest waits for the writer, still counted
                    left = _nbytes(rest)
                    self._unsent += left - n
                    pending.appendleft((rest, left))
                else:
                    self._unsent -= n
                    if not self._unsent and self.send_marks:
                        record_sends(self.send_marks, _perf_counter())
            self.last_active = time.monotonic()
        if not self._reading:
            self._maybe_resume()
        if pending:
            head = pending[0][0]
            if not isinstance(head, asyncio.Future) or head.done():
                w.set_result(None)  # else the head's completion callback flushes

    def _take_ready(self) -> tuple[Parts, int]:
        """Pop the responses at the head that need no waiting: their chunks and counted bytes."""
        pending = self._pending
        chunks: Parts = []
        n = 0
        while pending:
            value, encode = pending[0]
            if type(encode) is int:  # encoded: (parts, nbytes)
                pending.popleft()
                chunks += value
                n += encode
                continue
            if encode is _CLOSE:
                break
            if not value.done() or value.cancelled() or value.exception() is not None:
                break  # the writer awaits it (and handles its failure)
            pending.popleft()
            parts = encode(value.result())
            if parts:
                size = _nbytes(parts)
                self._unsent += size
                chunks += parts
                n += size
        return chunks, n

    def _wakeup(self) -> None:
        w = self._wake
        if w is not None and not w.done():
            w.set_result(None)

    # ---- writing ------------------------------------------------------------
    async def _write_loop(self) -> None:
        pending = self._pending
        try:
            while True:
                if not pending:
                    self._wake = self.loop.create_future()
                    await self._wake
                    self._wake = None
                    continue
                value, encode = pending[0]
                if encode is _CLOSE:
                    break
                if type(encode) is not int:  # a response future
                    if not value.done():
                        # its completion callback flushes (or wakes this task)
                        self._wake = self.loop.create_future()
                        await self._wake
                        self._wake = None
                        continue
                    if value.cancelled():
                        break
                    try:
                        value.result()
                    except CloseConnection as e:
                        log.warning("closing connection from %s: %s", self.peer, e)
                        break
                    except Exception as e:
                        report_unexpected(self.peer, "a request", e)
                        break
                # the head and whatever queued up behind it go out in one sendmsg
                parts, n = self._take_ready()
                if not parts:
                    if not self._reading:
                        self._maybe_resume()
                    continue
                await self.send_parts(parts)
                self._unsent -= n
                marks = self.send_marks
                if marks and (not self._unsent or len(marks) > _MAX_SEND_MARKS):
                    # drained, or never drained under a long pipelined burst: a bound on
                    # the marks (those still unwritten are then timed up to this write)
                    record_sends(marks, _perf_counter())
                self.last_active = time.monotonic()
                if not self._reading:
                    self._maybe_resume()
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            return
        except Exception as e:
            report_unexpected(self.peer, "writing responses", e)
        self.close()

    async def send_parts(self, parts: Parts) -> None:
        """Write byte chunks with sendmsg and file ranges with sendfile, in order."""
        chunks: list[Any] = []
        if self.direct_writes:
            parts = _copy_small_ranges(parts)
        for p in parts:
            if isinstance(p, FileRange):
                if chunks:
                    await self._send_buffers(chunks)
                    chunks = []
                await self._sendfile(p)
            else:
                chunks.append(p)
        if chunks:
            await self._send_buffers(chunks)

    async def _send_buffers(self, chunks: list[Any]) -> None:
        while chunks:
            try:
                chunks = _send_some(self.sock, chunks)
            except BlockingIOError:
                await self._wait_writable()
            except InterruptedError:
                continue

    async def _sendfile(self, r: FileRange) -> None:
        offset, remaining = r.offset, r.size
        while remaining > 0:
            try:
                n = os.sendfile(self.fd, r.fd, offset, remaining)
            except BlockingIOError:
                await self._wait_writable()
                continue
            except InterruptedError:
                continue
            except OSError as e:
                if e.errno in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                    data = os.pread(r.fd, remaining, offset)
                    if len(data) < remaining:
                        raise _truncated(r, offset + len(data), remaining - len(data)) from None
                    await self._send_buffers([data])
                    return
                raise
            if n == 0:
                # the file is shorter than the range we promised in the frame size (it was
                # truncated under us): never fill in bytes that are not there, drop the client
                raise _truncated(r, offset, remaining)
            offset += n
            remaining -= n

    async def _wait_readable(self) -> None:
        fut: asyncio.Future[None] = self.loop.create_future()
        self._readable_fut = fut

        def ready() -> None:
            if not fut.done():
                fut.set_result(None)

        self.loop.add_reader(self.fd, ready)
        try:
            await fut
        finally:
            self._readable_fut = None
            self.loop.remove_reader(self.fd)

    async def _wait_writable(self) -> None:
        fut: asyncio.Future[None] = self.loop.create_future()

        def ready() -> None:
            if not fut.done():
                fut.set_result(None)

        self.loop.add_writer(self.fd, ready)
        try:
            await fut
        finally:
            self.loop.remove_writer(self.fd)


class TlsConnection(Connection):
    """A connection on an SSL listener: TLS in user space, so file ranges are copied.

    The kernel cannot encrypt, so there is no sendfile here: each file range is
    read with ``pread`` and written through the TLS socket (Kafka does the same).
    """

    __slots__ = ("principal_builder",)
    direct_writes = False
    #: the principal of the client certificate (set by the socket server for mTLS)
    principal_builder: Callable[[ssl.SSLSocket], KafkaPrincipal] | None

    def start(self) -> None:
        self._reading = True
        self._reader_task = self.loop.create_task(self._handshake_then_read())
        self._writer_task = self.loop.create_task(self._write_loop())

    def _start_reading(self) -> None:
        self._reading = True
        fut = self._resume_fut
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _stop_reading(self) -> None:
        self._reading = False  # the read loop parks before its next recv

    async def _handshake_then_read(self) -> None:
        sock: ssl.SSLSocket = self.sock  # type: ignore[assignment]
        try:
            while True:
                try:
                    sock.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    await self._wait_readable()
                except ssl.SSLWantWriteError:
                    await self._wait_writable()
        except (ssl.SSLError, OSError) as e:
            log.warning("TLS handshake with %s failed: %s", self.peer, e)
            self.close()
            return
        builder: Callable[[ssl.SSLSocket], KafkaPrincipal] | None = getattr(
            self, "principal_builder", None
        )
        if builder is not None:
            try:  # the client certificate's principal (ssl.principal.mapping.rules)
                self.principal = builder(sock)
            except ValueError as e:
                log.warning("TLS client %s refused: %s", self.peer, e)
                self.close()
                return
        await self._read_loop()

    async def _recv_into(self, mv: memoryview) -> int:
        sock: ssl.SSLSocket = self.sock  # type: ignore[assignment]
        while True:
            try:
                return sock.recv_into(mv)
            except ssl.SSLWantReadError:
                await self._wait_readable()
            except ssl.SSLWantWriteError:
                await self._wait_writable()
            except ssl.SSLZeroReturnError:
                return 0

    async def _send_buffers(self, chunks: list[Any]) -> None:
        data = memoryview(b"".join(bytes(c) if isinstance(c, memoryview) else c for c in chunks))
        sock: ssl.SSLSocket = self.sock  # type: ignore[assignment]
        off = 0
        while off < len(data):
            try:
                off += sock.send(data[off : off + _TLS_WRITE_CHUNK])
            except ssl.SSLWantWriteError:
                await self._wait_writable()
            except ssl.SSLWantReadError:
                await self._wait_readable()

    async def _sendfile(self, r: FileRange) -> None:
        offset, remaining = r.offset, r.size
        while remaining > 0:
            n = min(remaining, 1 << 20)
            data = os.pread(r.fd, n, offset)
            if not data:
                raise _truncated(r, offset, remaining)  # never send made-up bytes
            await self._send_buffers([data])
            offset += len(data)
            remaining -= len(data)


_TLS_WRITE_CHUNK = 256 * 1024


def _truncated(r: FileRange, offset: int, remaining: int) -> ConnectionAbortedError:
    log.warning(
        "closing connection: segment file shrank while sending it (%d bytes missing at %d);"
        " the client will retry",
        remaining,
        offset,
    )
    return ConnectionAbortedError(f"file range of fd {r.fd} truncated at {offset}")


#: file ranges up to this size are copied into the response's ``sendmsg``: a
#: ``pread`` of a cached page and one ``sendmsg`` cost less than ``sendmsg`` +
#: ``sendfile`` + ``sendmsg``, and the response can leave from the reader without
#: a writer-task hop (a consumer at the log end fetches a few small batches at a
#: time). Larger ranges, a backlog read, still go out with ``sendfile``.
COPY_RANGE_BYTES = 16 * 1024


def _copy_small_ranges(chunks: Parts) -> Parts:
    """``chunks`` with each small FileRange replaced by its bytes."""
    if not any(type(c) is FileRange and c.size <= COPY_RANGE_BYTES for c in chunks):
        return chunks
    out: Parts = []
    for c in chunks:
        if type(c) is FileRange and c.size <= COPY_RANGE_BYTES:
            data = c.read_bytes()
            if len(data) < c.size:
                # never send made-up bytes: the frame size promised c.size
                raise _truncated(c, c.offset + len(data), c.size - len(data))
            out.append(data)
        else:
            out.append(c)
    return out


def _CLOSE(_: Any) -> None:  # sentinel encoder: close after draining
    return None


def _nbytes(parts: Parts) -> int:
    """Bytes held in memory by a response's chunks (file ranges are not)."""
    n = 0
    for p in parts:
        if type(p) is not FileRange:
            n += len(p)
    return n


class _Release:
    """Done callback of a handler task: give its place in the broker-wide queue back."""

    __slots__ = ("queue", "nbytes")

    def __init__(self, queue: RequestQueue, nbytes: int) -> None:
        self.queue = queue
        self.nbytes = nbytes

    def __call__(self, _: Any) -> None:
        self.queue.release(self.nbytes)


#: at most this many buffers per sendmsg (Linux's IOV_MAX is 1024)
_MAX_IOV = 512


def _send_now(fd: int, sock: socket.socket, chunks: Parts) -> Parts:
    """Send ``chunks`` (bytes and file ranges, in order) until the socket is full; returns
    what is left, a partly sent file range as the range of its unsent bytes.

    A file that sendfile cannot serve is left (with everything after it) to the
    writer task, which copies it. Raises ConnectionAbortedError if a file range
    shrank (the frame size promised its bytes).
    """
    i = 0
    while i < len(chunks):
        c = chunks[i]
        if type(c) is not FileRange:
            j = i + 1
            while j < len(chunks) and type(chunks[j]) is not FileRange:
                j += 1
            try:
                rest = _send_some(sock, list(chunks[i:j]))
            except (BlockingIOError, InterruptedError):
                return list(chunks[i:])
            if rest:
                return [*rest, *chunks[j:]]
            i = j
            continue
        offset, remaining = c.offset, c.size
        while remaining > 0:
            try:
                sent = os.sendfile(fd, c.fd, offset, remaining)
            except (BlockingIOError, InterruptedError):
                sent = -1
            except OSError as e:
                if e.errno in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                    sent = -1  # the writer task's fallback copies it
                else:
                    raise
            if sent < 0:
                left = c if remaining == c.size else FileRange(c.fd, offset, remaining, c.owner)
                return [left, *chunks[i + 1 :]]
            if sent == 0:
                raise _truncated(c, offset, remaining)
            offset += sent
            remaining -= sent
        i += 1
    return []


def _send_some(sock: socket.socket, chunks: list[Any]) -> list[Any]:
    """One ``sendmsg`` of ``chunks``; returns what is left (a partial chunk keeps its tail).

    Raises BlockingIOError when the socket buffer is full.
    """
    if len(chunks) > _MAX_IOV:
        head, tail = chunks[:_MAX_IOV], chunks[_MAX_IOV:]
    else:
        head, tail = chunks, []
    sent = sock.sendmsg(head)
    for i, c in enumerate(head):
        n = len(c)
        if sent < n:
            return [memoryview(c)[sent:], *head[i + 1 :], *tail]
        sent -= n
    return tail
