"""A minimal blocking Kafka wire client for the admin CLI (kio codecs, one broker).

The CLI must work with only kafkalite installed, so it does not depend on a
third-party Kafka client. It speaks TLS and SASL (PLAIN, SCRAM-SHA-256/512) as the
tool's ``--command-config`` says (:func:`configure`, called once per tool run).
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any

from kafkalite.cli.common import ClientSecurity, CliError
from kafkalite.common import structs
from kafkalite.protocol import messages
from kafkalite.protocol.headers import skip_tagged_fields
from kafkalite.protocol.sasl_client import (
    SaslAuthenticationError,
    SaslClientCredentials,
    client_tokens,
)

#: the tool's security settings (one tool runs per process): see :func:`configure`
_security = ClientSecurity()


def configure(security: ClientSecurity) -> None:
    """Connect every later WireClient as ``security`` says (TLS, SASL)."""
    global _security
    _security = security


def _tls_context(sec: ClientSecurity) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=sec.cafile)
    ctx.check_hostname = sec.check_hostname
    if not sec.check_hostname and sec.cafile is None:
        ctx.verify_mode = ssl.CERT_REQUIRED
    if sec.certfile:
        ctx.load_cert_chain(sec.certfile, sec.keyfile, sec.key_password)
    return ctx


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 30.0) -> None:
        host, port = bootstrap.split(",")[0].strip().rsplit(":", 1)
        host = host.strip("[]")
        sock = socket.create_connection((host, int(port)), timeout=timeout)
        sec = _security
        if sec.tls:
            try:
                sock = _tls_context(sec).wrap_socket(sock, server_hostname=host)
            except (ssl.SSLError, OSError) as e:
                sock.close()
                raise CliError(f"TLS handshake with {host}:{port} failed: {e}") from None
        self.sock = sock
        self._cid = 0
        self.versions: dict[int, tuple[int, int]] = {}
        if sec.sasl:
            self._authenticate(sec)
        resp = self.call(18, 0, {})
        self.versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys
        }

    def _authenticate(self, sec: ClientSecurity) -> None:
        """SaslHandshake v1 + SaslAuthenticate v2, before any other request (KIP-152)."""
        if sec.mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise CliError(f"sasl.mechanism {sec.mechanism} is not supported by this tool", 2)
        if sec.username is None:
            raise CliError("SASL needs sasl.jaas.config or sasl.username/sasl.password", 2)
        resp = self.call(17, 1, {"mechanism": sec.mechanism})
        if int(resp.error_code):
            raise CliError(
                f"the broker refused SASL mechanism {sec.mechanism} "
                f"(enabled: {', '.join(resp.mechanisms)})"
            )
        creds = SaslClientCredentials(sec.mechanism, sec.username, sec.password or "")
        tokens = client_tokens(creds)
        try:
            token = next(tokens)
            while True:
                r = self.call(36, 2, {"auth_bytes": token})
                if int(r.error_code):
                    raise CliError(f"SASL authentication failed: {r.error_message}")
                try:
                    token = tokens.send(bytes(r.auth_bytes))
                except StopIteration:
                    return
        except SaslAuthenticationError as e:
            raise CliError(str(e)) from None

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
