"""A deliberately dumb Kafka wire client for protocol edge cases: it sends what
it is told, including garbage, and reads raw frames back."""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafkalite.protocol import messages
from kafkalite.protocol.headers import skip_tagged_fields

_I32 = struct.Struct(">i")


def request_bytes(
    api_key: int, version: int, correlation_id: int, body: Any, client_id: str | None = "raw"
) -> bytes:
    try:
        flexible = messages.is_flexible_request(api_key, version)
    except Exception:  # a version no schema knows: send a flexible header, as a newer client would
        flexible = True
    cid = (
        b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id)) + client_id.encode()
    )
    header = (
        struct.pack(">hhi", api_key, version, correlation_id) + cid + (b"\x00" if flexible else b"")
    )
    payload = header + (messages.encode(body) if not isinstance(body, bytes) else body)
    return _I32.pack(len(payload)) + payload


class RawClient:
    def __init__(self, host: str, port: int, timeout: float = 10) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self._cid = 0

    @classmethod
    def to(cls, bootstrap: str) -> RawClient:
        host, port = bootstrap.rsplit(":", 1)
        return cls(host, int(port))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(
        self,
        api_key: int,
        version: int,
        body: Any,
        *,
        correlation_id: int | None = None,
        client_id: str | None = "raw",
    ) -> int:
        if correlation_id is None:
            self._cid += 1
            correlation_id = self._cid
        self.sock.sendall(request_bytes(api_key, version, correlation_id, body, client_id))
        return correlation_id

    def read_frame(self) -> bytes:
        head = self._read_exact(4)
        (size,) = _I32.unpack(head)
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by broker")
            buf += chunk
        return bytes(buf)

    def read_response(self, api_key: int, version: int) -> tuple[int, Any]:
        frame = self.read_frame()
        (cid,) = _I32.unpack_from(frame, 0)
        flexible = messages.response_type(api_key, version).__flexible__ and api_key != 18
        pos = skip_tagged_fields(frame, 4) if flexible else 4
        obj, _ = messages._reader(messages.response_type(api_key, version))(frame, pos)
        return cid, obj

    def call(self, api_key: int, version: int, body: Any) -> Any:
        cid = self.send(api_key, version, body)
        got_cid, obj = self.read_response(api_key, version)
        assert got_cid == cid
        return obj

    def is_closed(self, timeout: float = 5) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()
