"""FrameProtocol cuts size-prefixed frames out of whatever chunks the socket delivers."""

from __future__ import annotations

import asyncio
import random

import pytest

from kafkalite.protocol.frame_reader import _SCRATCH, FrameProtocol


def _feed(proto: FrameProtocol, data: bytes, rng: random.Random) -> None:
    """Deliver ``data`` as the transport would: recv_into each buffer asked for."""
    pos = 0
    while pos < len(data):
        buf = proto.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), len(data) - pos, rng.randint(1, 3 * _SCRATCH))
        buf[:n] = data[pos : pos + n]
        proto.buffer_updated(n)
        pos += n


def test_frames_small_and_large_in_arbitrary_chunks() -> None:
    rng = random.Random(7)
    sizes = [0, 1, 3, 100, _SCRATCH - 4, _SCRATCH - 3, _SCRATCH, 5 * _SCRATCH + 17, 2, 1 << 20]
    frames = [bytes(rng.getrandbits(8) for _ in range(min(s, 64))) * (s // 64 + 1) for s in sizes]
    frames = [f[:s] for f, s in zip(frames, sizes, strict=True)]
    wire = b"".join(len(f).to_bytes(4, "big") + f for f in frames)

    async def run() -> list[bytes]:
        proto = FrameProtocol()
        _feed(proto, wire, rng)
        proto.connection_lost(None)
        got = [await proto.read_frame() for _ in frames]
        assert all(type(f) is bytes for f in got)  # kio's codecs refuse writable buffers
        with pytest.raises(EOFError):
            await proto.read_frame()
        return got

    assert asyncio.run(run()) == frames


def test_a_waiting_reader_wakes_on_the_frame_and_on_the_peer_going_away() -> None:
    async def run() -> None:
        proto = FrameProtocol()
        waiting = asyncio.ensure_future(proto.read_frame())
        await asyncio.sleep(0)
        assert not waiting.done()
        _feed(proto, b"\x00\x00\x00\x02hi", random.Random(1))
        assert await waiting == b"hi"
        waiting = asyncio.ensure_future(proto.read_frame())
        await asyncio.sleep(0)
        proto.connection_lost(ConnectionResetError("reset"))
        with pytest.raises(ConnectionResetError):
            await waiting

    asyncio.run(run())


def test_large_frames_as_views_reuse_the_buffer_given_back() -> None:
    """read_frame_view hands a large frame out without a copy; once recycled, the next
    large frame is read into the same buffer, and a frame not given back is never
    overwritten."""
    rng = random.Random(3)
    a, b, c = (bytes([i]) * (3 * _SCRATCH) for i in (1, 2, 3))

    async def run() -> None:
        proto = FrameProtocol()
        _feed(proto, len(a).to_bytes(4, "big") + a, rng)
        fa = await proto.read_frame_view()
        assert type(fa) is memoryview and fa == a
        buf = fa.obj
        proto.recycle(fa)
        _feed(proto, len(b).to_bytes(4, "big") + b, rng)
        fb = await proto.read_frame_view()
        assert type(fb) is memoryview and fb == b and fb.obj is buf  # reused
        # not given back: the next frame gets a buffer of its own
        _feed(proto, len(c).to_bytes(4, "big") + c, rng)
        fc = await proto.read_frame_view()
        assert type(fc) is memoryview and fc == c and fc.obj is not buf
        assert fb == b  # untouched
        assert await _small(proto) == b"ok"

    async def _small(proto: FrameProtocol) -> bytes:
        _feed(proto, b"\x00\x00\x00\x02ok", rng)
        return await proto.read_frame()

    asyncio.run(run())


def test_a_waiting_reader_resumes_inside_the_callback_that_completes_its_frame() -> None:
    """The reader runs before the callback returns (not on the loop's next pass), so a
    follower's next fetch leaves while the rest of that poll's callbacks still wait."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        proto = FrameProtocol()
        order: list[str] = []

        async def reader() -> None:
            for _ in range(2):
                frame = await proto.read_frame()
                order.append(f"read {frame!r}")

        task = loop.create_task(reader())
        await asyncio.sleep(0)

        def deliver(data: bytes) -> None:  # a protocol callback: no task is running
            order.append("callback")
            _feed(proto, data, random.Random(3))
            order.append("callback done")

        loop.call_soon(deliver, b"\x00\x00\x00\x01a")
        await asyncio.sleep(0.01)
        # fed from inside a task (as ``attach`` does), it is scheduled: no re-entry
        _feed(proto, b"\x00\x00\x00\x01b", random.Random(4))
        order.append("task fed")
        await task
        assert order == ["callback", "read b'a'", "callback done", "task fed", "read b'b'"]

    asyncio.run(run())


def test_a_waiting_reader_is_still_cancelled_and_timed_out() -> None:
    async def run() -> None:
        proto = FrameProtocol()
        waiting = asyncio.ensure_future(proto.read_frame())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                await proto.read_frame()
        _feed(proto, b"\x00\x00\x00\x02ok", random.Random(5))
        assert await proto.read_frame() == b"ok"

    asyncio.run(run())
