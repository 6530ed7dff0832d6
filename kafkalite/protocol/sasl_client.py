"""The client side of SASL (SaslHandshake v1 + SaslAuthenticate v2) for the broker's own
connections to other brokers: the controller channel, replica fetchers, transaction
markers, controlled shutdown. PLAIN and SCRAM-SHA-256/512 (Kafka's inter-broker
mechanisms besides GSSAPI), over an asyncio stream pair just opened.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from kafkalite.common import structs
from kafkalite.protocol import messages, scram
from kafkalite.protocol.headers import skip_tagged_fields

__all__ = ["SaslAuthenticationError", "SaslClientCredentials", "authenticate", "client_tokens"]

_SASL_HANDSHAKE, _SASL_AUTHENTICATE = 17, 36
#: correlation ids of the exchange (the connection's own requests start after them)
_FIRST_CORRELATION = 0x7FFF0000


class SaslAuthenticationError(ConnectionError):
    """The other broker refused our credentials (its message, never ours)."""


@dataclass(frozen=True, slots=True)
class SaslClientCredentials:
    mechanism: str
    username: str
    password: str = field(repr=False)


async def _call(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    api_key: int,
    version: int,
    body: dict[str, Any],
    cid: int,
    client_id: bytes,
) -> Any:
    req_cls = messages.request_type(api_key, version)
    flexible = bool(req_cls.__flexible__)  # type: ignore[attr-defined]
    header = struct.pack(">hhih", api_key, version, cid, len(client_id)) + client_id
    if flexible:
        header += b"\x00"
    payload = header + messages.encode(messages.build(req_cls, body))
    writer.write(structs.I32.pack(len(payload)) + payload)
    await writer.drain()
    (size,) = structs.I32.unpack(await reader.readexactly(4))
    frame = await reader.readexactly(size)
    if structs.I32.unpack_from(frame, 0)[0] != cid:
        raise ConnectionError("SASL: unexpected correlation id")
    pos = skip_tagged_fields(frame, 4) if flexible else 4
    return messages.decode_response(api_key, version, frame, pos)


async def authenticate(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    creds: SaslClientCredentials,
    *,
    client_id: str = "kafkalite-broker",
) -> None:
    """Authenticate the connection; raises SaslAuthenticationError when refused."""
    cid = _FIRST_CORRELATION
    cid_bytes = client_id.encode()
    resp = await _call(
        reader, writer, _SASL_HANDSHAKE, 1, {"mechanism": creds.mechanism}, cid, cid_bytes
    )
    if int(resp.error_code) != 0:
        raise SaslAuthenticationError(
            f"SaslHandshake for {creds.mechanism} failed: error {int(resp.error_code)}"
            f" (enabled: {', '.join(resp.mechanisms)})"
        )

    async def step(token: bytes) -> bytes:
        nonlocal cid
        cid += 1
        r = await _call(
            reader, writer, _SASL_AUTHENTICATE, 2, {"auth_bytes": token}, cid, cid_bytes
        )
        if int(r.error_code) != 0:
            raise SaslAuthenticationError(
                f"SASL {creds.mechanism} authentication failed: {r.error_message}"
            )
        return bytes(r.auth_bytes)

    tokens = client_tokens(creds)
    token = next(tokens)
    while True:
        answer = await step(token)
        try:
            token = tokens.send(answer)
        except StopIteration:
            return


def client_tokens(creds: SaslClientCredentials) -> Generator[bytes, bytes, None]:
    """The client's SaslAuthenticate tokens, sans I/O: send each token yielded and send
    the server's answer back in; raises SaslAuthenticationError on a bad server answer.
    Shared by the broker's asyncio connections and the CLI's blocking client."""
    if creds.mechanism == "PLAIN":
        yield f"\x00{creds.username}\x00{creds.password}".encode()
        return
    mech = scram.mechanism(creds.mechanism)
    if mech is None:
        raise SaslAuthenticationError(f"unsupported client mechanism {creds.mechanism}")
    cnonce = scram.nonce()
    first, bare = scram.client_first_message(creds.username, cnonce)
    server_first = yield first.encode()
    full_nonce, salt, iterations = scram.parse_server_first(server_first)
    if not full_nonce.startswith(cnonce) or iterations < mech.min_iterations:
        raise SaslAuthenticationError("SCRAM: invalid server first message")
    salted = scram.salted_password(mech, creds.password.encode(), salt, iterations)
    without = f"c={scram.b64(b'n,,')},r={full_nonce}"
    auth_message = f"{bare},{server_first.decode()},{without}".encode()
    proof = scram.client_proof(mech, salted, auth_message)
    final, _ = scram.client_final_message("n,,", full_nonce, proof)
    server_final = yield final.encode()
    signature, error = scram.parse_server_final(server_final)
    expected = scram.server_signature(mech, scram.server_key(mech, salted), auth_message)
    if error is not None or signature != expected:
        raise SaslAuthenticationError("SCRAM: the server's signature does not verify")


async def open_connection(
    host: str,
    port: int,
    *,
    ssl: Any = None,
    sasl: SaslClientCredentials | None = None,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """``asyncio.open_connection``, then the SASL exchange when ``sasl`` is given (a
    SASL_PLAINTEXT / SASL_SSL listener): what every inter-broker client opens."""
    reader, writer = await asyncio.open_connection(host, port, ssl=ssl)
    if sasl is not None:
        try:
            await authenticate(reader, writer, sasl)
        except BaseException:
            writer.close()
            raise
    return reader, writer
