"""A minimal blocking Kafka wire client for the admin CLI (kio codecs, one broker).

The CLI must work with only kafkalite installed, so it does not depend on a
third-party Kafka client.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafkalite.common import structs
from kafkalite.protocol import messages
from kafkalite.protocol.headers import skip_tagged_fields


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 30.0) -> None:
        host, port = bootstrap.split(",")[0].strip().rsplit(":", 1)
        self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        self._cid = 0
        self.versions: dict[int, tuple[int, int]] = {}
        resp = self.call(18, 0, {})
        self.versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys
        }

    def version_for(self, api_key: int, ours: int) -> int:
        lo, hi = self.versions.get(api_key, (0, ours))
        v = min(hi, ours)
        if v < lo:
            raise RuntimeError(
                f"broker does not support api {api_key} at a version this tool knows"
            )
        return v

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        frame, pos = self.call_raw(api_key, version, body)
        return messages.decode_response(api_key, version, frame, pos)

    def call_raw(self, api_key: int, version: int, body: dict[str, Any]) -> tuple[bytes, int]:
        """The response frame and where its body starts (for fields kio cannot decode,
        such as DescribeTransactions' -1 start time)."""
        self._cid += 1
        req_cls = messages.request_type(api_key, version)
        flexible = bool(req_cls.__flexible__)  # type: ignore[attr-defined]
        cid = b"\x00\x09kafkalite"
        header = (
            struct.pack(">hhi", api_key, version, self._cid) + cid + (b"\x00" if flexible else b"")
        )
        payload = header + messages.encode(messages.build(req_cls, body))
        self.sock.sendall(structs.I32.pack(len(payload)) + payload)
        size = structs.I32.unpack(self._read(4))[0]
        frame = self._read(size)
        resp_flexible = flexible and api_key != 18
        pos = skip_tagged_fields(frame, 4) if resp_flexible else 4
        return frame, pos

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()
