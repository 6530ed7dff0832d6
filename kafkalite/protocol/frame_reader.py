"""Size-prefixed response frames read straight into their own buffer.

``asyncio.StreamReader.readexactly`` copies every byte three times past the
socket read (into its buffer, out as a bytearray slice, then into ``bytes``)
and pauses and resumes the transport every 128 KiB. A follower reads its
leader's fetch responses, megabytes each, this way at the replication rate;
:class:`FrameProtocol` (a ``BufferedProtocol``) reads a large frame's body
with ``recv_into`` into the frame's own ``bytearray`` instead, and small
frames are cut from one scratch buffer. :meth:`FrameProtocol.read_frame`
returns ``bytes`` (kio's codecs refuse writable buffers: one copy);
:meth:`FrameProtocol.read_frame_view` hands a large frame out as a view of its
buffer, which the caller gives back with :meth:`FrameProtocol.recycle` once
done, so the next large frame is read into the same memory: no copy, no
allocation and no zero-fill per frame (a follower's fetch responses). The inter-broker clients open their
connection (and run SASL) over streams, then :func:`attach` moves the
transport to a ``FrameProtocol``.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
from collections.abc import Callable
from typing import Any

_SCRATCH = 64 * 1024


class _Waiter(asyncio.Future[None]):
    """The reader's future: once a frame completes, the waiting task resumes *inside*
    the protocol callback that completed it, not on the loop's next pass.

    A plain future schedules its task with ``call_soon``, which runs only after
    every other I/O callback of this poll: on a broker, after the produce requests
    its client connections read in the same turn (up to 4 MB each). A follower's
    fetch round trip waited for that once per response (5-10 ms at RF=3 acks=all,
    a tenth of the round trip). The task resumes at once only when no task is
    running (a protocol callback); otherwise (a frame fed from a task, a
    cancellation) the callbacks are scheduled as usual.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop=loop)
        self._on_done: list[tuple[Callable[[Any], object], contextvars.Context | None]] = []

    def add_done_callback(  # type: ignore[override]
        self, fn: Callable[[Any], object], *, context: contextvars.Context | None = None
    ) -> None:
        if self.done():
            super().add_done_callback(fn, context=context)
        else:
            self._on_done.append((fn, context))

    def remove_done_callback(self, fn: Callable[[Any], object]) -> int:
        before = len(self._on_done)
        self._on_done = [(f, c) for f, c in self._on_done if f != fn]
        return before - len(self._on_done) + super().remove_done_callback(fn)

    def set_result(self, result: None) -> None:
        super().set_result(result)
        self._run_callbacks(asyncio.current_task(self.get_loop()) is None)

    def set_exception(self, exception: type | BaseException) -> None:
        super().set_exception(exception)
        self._run_callbacks(False)

    def cancel(self, msg: Any | None = None) -> bool:
        if not super().cancel(msg):
            return False
        self._run_callbacks(False)
        return True

    def _run_callbacks(self, now: bool) -> None:
        callbacks, self._on_done = self._on_done, []
        loop = self.get_loop()
        for fn, context in callbacks:
            if now:
                if context is None:
                    fn(self)
                else:
                    context.run(fn, self)
            else:
                loop.call_soon(fn, self, context=context)


class FrameProtocol(asyncio.BufferedProtocol):
    """Collects the frames (without their size prefix) the peer sends."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        #: the stream writer the connection was opened with: kept, as dropping it closes
        #: the transport
        self.writer: asyncio.StreamWriter | None = None
        self._scratch = bytearray(_SCRATCH)
        self._sview = memoryview(self._scratch)
        self._send = 0  # bytes in the scratch buffer
        #: the large frame being read into its own buffer, and how much of it is in
        self._frame: bytearray | None = None
        self._fview: memoryview | None = None
        self._fpos = 0
        self._frames: collections.deque[bytes | memoryview] = collections.deque()
        #: a large frame's buffer given back by the reader (``recycle``), reused
        self._spare: bytearray | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._write_paused = False
        self._drain_waiter: asyncio.Future[None] | None = None

    # ---- asyncio callbacks ------------------------------------------------------------
    def get_buffer(self, sizehint: int) -> memoryview:
        if self._fview is not None:
            return self._fview[self._fpos :]
        return self._sview[self._send :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame is not None:
            self._fpos += nbytes
            if self._fpos == len(self._fview):  # type: ignore[arg-type]
                self._frames.append(self._fview)  # type: ignore[arg-type]
                self._frame = self._fview = None
                self._wake()
            return
        self._send += nbytes
        self._cut_frames()

    def _cut_frames(self) -> None:
        buf, end, pos = self._scratch, self._send, 0
        while end - pos >= 4:
            size = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
            if size < 0:
                self._fail(ValueError(f"negative frame size {size}"))
                return
            body = pos + 4
            if end - body >= size:
                self._frames.append(bytes(self._sview[body : body + size]))  # one copy
                pos = body + size
                continue
            if size + 4 > _SCRATCH:
                # too large for the scratch buffer: the rest goes into the frame itself
                spare, self._spare = self._spare, None
                frame = spare if spare is not None and len(spare) >= size else bytearray(size)
                view = memoryview(frame)[:size]
                have = end - body
                view[:have] = buf[body:end]
                self._frame, self._fview, self._fpos = frame, view, have
                pos = end
            break
        if pos:
            rest = end - pos
            if rest:
                buf[:rest] = buf[pos:end]
            self._send = rest
        if self._frames:
            self._wake()

    def eof_received(self) -> bool:
        self._fail(EOFError("connection closed by the peer"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc if exc is not None else EOFError("connection closed by the peer"))
        waiter = self._drain_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        waiter = self._drain_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # ---- the client's side ------------------------------------------------------------
    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        self._wake()

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    async def drain(self) -> None:
        if self._error is not None:
            raise ConnectionResetError("connection lost")
        if self._write_paused:
            self._drain_waiter = asyncio.get_running_loop().create_future()
            await self._drain_waiter

    async def read_frame(self) -> bytes:
        """The next whole frame; EOFError (or the transport's error) once the peer is gone."""
        frame = await self.read_frame_view()
        if type(frame) is bytes:
            return frame
        data = bytes(frame)
        self.recycle(frame)  # type: ignore[arg-type]
        return data

    def recycle(self, frame: bytes | memoryview) -> None:
        """Give a frame from :meth:`read_frame_view` back: the next large frame reuses its
        buffer. The caller (and every view it took of the frame) must be done with it."""
        if type(frame) is memoryview:
            buf = frame.obj
            frame.release()
            if isinstance(buf, bytearray) and (self._spare is None or len(buf) > len(self._spare)):
                self._spare = buf

    async def read_frame_view(self) -> bytes | memoryview:
        """The next whole frame without a copy: ``bytes`` for a small frame, else a view of
        the frame's buffer, valid until it is given back with :meth:`recycle`."""
        while not self._frames:
            if self._error is not None:
                raise self._error
            self._waiter = _Waiter(asyncio.get_running_loop())
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._frames.popleft()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def attach(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> FrameProtocol:
    """Move an open stream connection (nothing unread expected but kept) to a FrameProtocol."""
    proto = FrameProtocol()
    transport: Any = writer.transport
    leftover = bytes(reader._buffer)  # type: ignore[attr-defined]  # bytes SASL left unread
    proto.transport = transport
    proto.writer = writer
    transport.set_protocol(proto)
    while leftover:
        view = proto.get_buffer(len(leftover))
        n = min(len(view), len(leftover))
        view[:n] = leftover[:n]
        proto.buffer_updated(n)
        leftover = leftover[n:]
    transport.resume_reading()
    return proto
