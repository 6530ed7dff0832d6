"""A bare Kafka wire client (kio codecs) for what stock clients never send."""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any

from kafkalite.protocol import messages
from kafkalite.protocol.headers import skip_tagged_fields


class Wire:
    def __init__(self, port: int, *, tls: ssl.SSLContext | None = None) -> None:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock = tls.wrap_socket(s, server_hostname="localhost") if tls else s
        self.cid = 0

    def send(self, api: int, version: int, body: dict[str, Any]) -> int:
        cls = messages.request_type(api, version)
        flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]
        self.cid += 1
        hdr = struct.pack(">hhih", api, version, self.cid, 4) + b"wire"
        if flexible:
            hdr += b"\x00"
        payload = hdr + messages.encode(messages.build(cls, body))
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        return self.cid

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def read_frame(self) -> bytes | None:
        """The next response frame, None when the broker closed the connection."""
        head = self._exactly(4)
        if head is None:
            return None
        return self._exactly(struct.unpack(">i", head)[0])

    def _exactly(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except (ConnectionResetError, ssl.SSLError):
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def call(self, api: int, version: int, body: dict[str, Any]) -> Any:
        self.send(api, version, body)
        frame = self.read_frame()
        if frame is None:
            return None
        cls = messages.request_type(api, version)
        flexible = bool(cls.__flexible__) and api != 18  # type: ignore[attr-defined]
        pos = skip_tagged_fields(frame, 4) if flexible else 4
        return messages.decode_response(api, version, frame, pos)

    def closed(self) -> bool:
        """Whether the broker closed the connection (reads EOF)."""
        return self.read_frame() is None

    def close(self) -> None:
        self.sock.close()


def metadata(w: Wire) -> Any:
    return w.call(3, 12, {"topics": None, "allow_auto_topic_creation": False})


def plain_login(w: Wire, user: str, password: str, version: int = 2) -> Any:
    hs = w.call(17, 1, {"mechanism": "PLAIN"})
    assert int(hs.error_code) == 0
    return w.call(36, version, {"auth_bytes": f"\x00{user}\x00{password}".encode()})
