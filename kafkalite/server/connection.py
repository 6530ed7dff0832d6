"""One client connection: size-prefixed frames in, responses out in request order.

Reading and writing use the raw non-blocking socket (not an asyncio transport)
because a Fetch response is header bytes interleaved with ``os.sendfile``
ranges of segment files, and a transport cannot splice a sendfile into its
buffer. Requests are dispatched as soon as they are parsed (pipelining); the
synchronous part of a handler (e.g. the log append) runs in arrival order, and
anything it leaves pending (a long-poll fetch, an acks=all produce) is a future
the writer awaits in order. APIs marked ``serial`` finish before the next
request on the connection is dispatched, as Kafka does for every request.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
import os
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kafkalite.protocol.headers import MalformedRequest
from kafkalite.server.unexpected_errors import report_unexpected

if TYPE_CHECKING:
    from kafkalite.server.request_channel import RequestChannel

log = logging.getLogger(__name__)

_I32 = struct.Struct(">i")
_READ_CHUNK = 256 * 1024


class FileRange:
    """A byte range of an open file, sent with sendfile (or copied for TLS).

    ``owner`` is whatever keeps ``fd`` open (a log segment's file, which closes
    when its last reference goes): held until the range has been sent.
    """

    __slots__ = ("fd", "offset", "size", "owner")

    def __init__(self, fd: int, offset: int, size: int, owner: object = None) -> None:
        self.fd = fd
        self.offset = offset
        self.size = size
        self.owner = owner

    def read_bytes(self) -> bytes:
        return os.pread(self.fd, self.size, self.offset)


#: A response on the wire: byte chunks and file ranges, in order.
Parts = list[Any]


class CloseConnection(Exception):
    """Raised by a handler to drop the connection (e.g. an unknown api key)."""


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
        "_pending",
        "_wake",
        "_closed",
        "last_active",
        "_writer_task",
        "_reader_task",
        "_reading",
        "_rbuf",
        "_rview",
        "_rstart",
        "_rend",
        "_serial_wait",
        "id",
        "muted_until",
        "faults",
    )

    _next_id = 0
    #: the reader may sendmsg ready responses itself (not through TLS)
    direct_writes = True

    def __init__(self, sock: socket.socket, listener: str, channel: RequestChannel) -> None:
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
        self._pending: collections.deque[
            tuple[asyncio.Future[Any] | Any, Callable[[Any], Parts | None]]
        ] = collections.deque()
        self._wake: asyncio.Future[None] | None = None
        self._closed = False
        self.last_active = time.monotonic()
        self._writer_task: asyncio.Task[None] | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._reading = False
        self._rbuf = bytearray(_READ_CHUNK)
        self._rview = memoryview(self._rbuf)
        self._rstart = self._rend = 0
        self._serial_wait: asyncio.Future[Any] | None = None
        self.muted_until = 0.0
        self.faults: Any = None

    # ---- lifecycle ----------------------------------------------------------
    def start(self) -> None:
        # a persistent reader callback, not a task awaiting sock_recv_into: no
        # future, task step or epoll_ctl pair per request (issue 7's latency)
        self.loop.add_reader(self.fd, self._on_readable)
        self._reading = True
        self._writer_task = self.loop.create_task(self._write_loop())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._reading:
            self._reading = False
            self.loop.remove_reader(self.fd)
        for t in (self._reader_task, self._writer_task):
            if t is not None and t is not asyncio.current_task():
                t.cancel()
        for fut, _ in self._pending:
            if isinstance(fut, asyncio.Future) and not fut.done():
                fut.cancel()
        self._pending.clear()
        try:
            self.sock.close()
        except OSError:
            pass
        self.channel.connection_closed(self)

    @property
    def closed(self) -> bool:
        return self._closed

    # ---- reading ------------------------------------------------------------
    def _on_readable(self) -> None:
        """The socket has bytes: one ``recv``, dispatch the whole frames, flush.

        Level-triggered, so what one ``recv`` leaves is read on the next call.
        """
        try:
            n = self.sock.recv_into(self._room())
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # ConnectionError included
            self._reader_done()
            return
        if n == 0:
            self._reader_done()
            return
        self._rend += n
        self.last_active = time.monotonic()
        self._after_read()

    def _after_read(self) -> None:
        try:
            ok = self._dispatch_frames()
        except Exception as e:
            report_unexpected(self.peer, "reading requests", e)
            ok = False
        if not ok:
            self._reader_done()
            return
        self._flush()
        wait = self._serial_wait
        if wait is not None and self._reading:
            # a serial API: no further request is dispatched until it finishes
            self._reading = False
            self.loop.remove_reader(self.fd)
            wait.add_done_callback(self._serial_done)

    def _serial_done(self, _: Any) -> None:
        self._serial_wait = None
        if self._closed:
            return
        self._reading = True
        self.loop.add_reader(self.fd, self._on_readable)
        self._after_read()  # the frames that arrived behind it

    def _reader_done(self) -> None:
        """EOF or a read error: stop reading, let queued responses drain, then close."""
        if self._reading:
            self._reading = False
            self.loop.remove_reader(self.fd)
        if not self._closed:
            self._flush()
            self._pending.append((None, _CLOSE))
            self._wakeup()

    def _room(self) -> memoryview:
        """Free space at the end of the read buffer: compacted, or grown when full."""
        if self._rend == len(self._rbuf):
            if self._rstart > 0:
                self._compact()
            else:
                self._grow(2 * len(self._rbuf))
        return self._rview[self._rend :]

    def _compact(self) -> None:
        start, end = self._rstart, self._rend
        self._rview[0 : end - start] = self._rview[start:end]
        self._rstart, self._rend = 0, end - start

    def _grow(self, size: int) -> None:
        self._rview.release()
        self._rbuf.extend(bytes(size - len(self._rbuf)))
        self._rview = memoryview(self._rbuf)

    def _dispatch_frames(self) -> bool:
        """Dispatch every whole frame in the buffer (up to a serial API); False: close."""
        buf, view = self._rbuf, self._rview
        start, end = self._rstart, self._rend
        max_bytes = self.channel.max_request_size
        while end - start >= 4 and self._serial_wait is None:
            size = _I32.unpack_from(buf, start)[0]
            if size < 0 or size > max_bytes:
                log.warning(
                    "closing connection from %s: request of %d bytes exceeds socket.request.max.bytes=%d",
                    self.peer,
                    size,
                    max_bytes,
                )
                return False
            if end - start - 4 < size:
                if start + 4 + size > len(buf):
                    # make room for the whole frame: move it to the front, grow if needed
                    self._compact()
                    if 4 + size > len(self._rbuf):
                        self._grow(4 + size)
                    return True
                break
            frame = bytes(view[start + 4 : start + 4 + size])
            start += 4 + size
            self._rstart = start
            if not self._dispatch(frame) or self._closed:
                return False
        if start == end:
            self._rstart = self._rend = 0
        return True

    async def _read_loop(self) -> None:
        """The reader for sockets that need a task (TLS); same framing as ``_on_readable``."""
        try:
            while True:
                self._flush()
                n = await self._recv_into(self._room())
                if n == 0:
                    return
                self._rend += n
                self.last_active = time.monotonic()
                while True:
                    if not self._dispatch_frames():
                        return
                    wait = self._serial_wait
                    if wait is None:
                        break
                    self._flush()
                    try:
                        await wait
                    except Exception:
                        pass
                    self._serial_wait = None
                if self._closed:
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

    def _dispatch(self, frame: bytes) -> bool:
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
        if isinstance(value, asyncio.Future) and not value.done():
            if serial:
                self._serial_wait = value
            # a delayed response (long poll, acks=all) leaves from its completion
            # callback when it reaches the head, without a writer-task step
            value.add_done_callback(self._on_response_done)
        # written by _flush once this read's frames are dispatched, or by the writer
        self._pending.append((value, encode))
        return True

    def _on_response_done(self, _: Any) -> None:
        if not self._closed:
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
            chunks = self._take_ready()
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
            if not self.direct_writes or any(isinstance(c, FileRange) for c in chunks):
                pending.appendleft((chunks, _PARTS))
            else:
                try:
                    rest = _send_some(self.sock, chunks)
                except (BlockingIOError, InterruptedError):
                    rest = chunks
                except OSError:
                    self.close()
                    return
                if rest:
                    pending.appendleft((rest, _PARTS))
            self.last_active = time.monotonic()
        if pending:
            head = pending[0][0]
            if not isinstance(head, asyncio.Future) or head.done():
                w.set_result(None)  # else the head's completion callback flushes

    def _take_ready(self) -> Parts:
        """Pop and encode the responses at the head that need no waiting; their chunks."""
        pending = self._pending
        chunks: Parts = []
        while pending:
            value, encode = pending[0]
            if encode is _CLOSE:
                break
            if isinstance(value, asyncio.Future):
                if not value.done() or value.cancelled() or value.exception() is not None:
                    break  # the writer awaits it (and handles its failure)
                value = value.result()
            pending.popleft()
            parts = encode(value)
            if parts:
                chunks.extend(parts)
        return chunks

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
                if isinstance(value, asyncio.Future):
                    if not value.done():
                        # its completion callback flushes (or wakes this task)
                        self._wake = self.loop.create_future()
                        await self._wake
                        self._wake = None
                        continue
                    try:
                        value = value.result()
                    except CloseConnection as e:
                        log.warning("closing connection from %s: %s", self.peer, e)
                        break
                    except Exception as e:
                        report_unexpected(self.peer, "a request", e)
                        break
                if pending and pending[0][1] is encode:
                    pending.popleft()
                parts = encode(value)
                if pending:
                    # what queued up behind it goes out in the same sendmsg
                    more = self._take_ready()
                    if more:
                        parts = [*(parts or ()), *more]
                if not parts:
                    continue
                if self.muted_until:
                    delay = self.muted_until - time.monotonic()
                    self.muted_until = 0.0
                    if delay > 0:
                        await asyncio.sleep(delay)
                await self.send_parts(parts)
                self.last_active = time.monotonic()
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

        def ready() -> None:
            if not fut.done():
                fut.set_result(None)

        self.loop.add_reader(self.fd, ready)
        try:
            await fut
        finally:
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

    __slots__ = ()
    direct_writes = False

    def start(self) -> None:
        self._reader_task = self.loop.create_task(self._handshake_then_read())
        self._writer_task = self.loop.create_task(self._write_loop())

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


def _PARTS(parts: Parts) -> Parts:  # already encoded (the rest of a coalesced write)
    return parts


#: at most this many buffers per sendmsg (Linux's IOV_MAX is 1024)
_MAX_IOV = 512


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
