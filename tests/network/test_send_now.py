"""_send_now: responses (bytes and sendfile ranges) leave from the reader's step, in order,
and a full socket leaves exactly the unsent rest (a partly sent range as its tail)."""

from __future__ import annotations

import os
import socket
import tempfile

import pytest

from kafkalite.network.connection import _send_now
from kafkalite.network.responses import FileRange


def _drain(sock: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            data = sock.recv(1 << 20)
        except BlockingIOError:
            return out
        if not data:
            return out
        out += data


def test_ranges_and_bytes_go_out_in_order_across_full_socket_buffers() -> None:
    content = os.urandom(3 << 20)
    with tempfile.TemporaryFile() as f:
        f.write(content)
        f.flush()
        a, b = socket.socketpair()
        try:
            a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
            a.setblocking(False)
            b.setblocking(False)
            fd = f.fileno()
            rest: list = [b"head", FileRange(fd, 100, 2 << 20), b"mid", FileRange(fd, 0, 50)]
            want = b"head" + content[100 : 100 + (2 << 20)] + b"mid" + content[:50]
            got = b""
            partial_range_seen = False
            for _ in range(10_000):
                rest = _send_now(a.fileno(), a, rest)
                partial_range_seen |= any(
                    type(c) is FileRange and c.offset not in (0, 100) for c in rest
                )
                got += _drain(b)
                if not rest:
                    break
            got += _drain(b)
            assert rest == []
            assert partial_range_seen  # the socket filled inside a range at least once
            assert got == want
        finally:
            a.close()
            b.close()


def test_a_range_past_the_end_of_its_file_closes_instead_of_sending_made_up_bytes() -> None:
    with tempfile.TemporaryFile() as f:
        f.write(b"x" * 1000)
        f.flush()
        a, b = socket.socketpair()
        try:
            a.setblocking(False)
            with pytest.raises(ConnectionAbortedError):
                _send_now(a.fileno(), a, [b"h", FileRange(f.fileno(), 0, 2000)])
        finally:
            a.close()
            b.close()
