"""Seeded fuzzing of the SASL listener before authentication.

The frame fuzzer (``tests/fuzz``) aims at a PLAINTEXT listener, where every request is
served. On a SASL listener the state before authentication is its own small machine
(ApiVersions, SaslHandshake, SaslAuthenticate, the v0 raw-token form) with its own
parsers: PLAIN's NUL-separated fields, SCRAM's attribute lists and nonces, OAUTHBEARER's
GS2 header and JWS. Each case here opens a connection and sends one hostile sequence:
random bytes, a frame with a bit flipped, random tokens after a valid handshake, a
SCRAM exchange whose client-final message is garbage. Every connection must be answered
or closed (never left hanging), nothing may be logged at ERROR, and afterwards every
mechanism still logs a real user in.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import random
import struct
from typing import Any

import pytest

from kafkalite.protocol import messages
from kafkalite.protocol.sasl_client import SaslClientCredentials, authenticate
from tests.security.conftest import PLAIN_USERS, SCRAM_USERS, SecureBroker, unsecured_jwt
from tests.security.wire import Wire, metadata, plain_login

CASES = 600
SEED = 20261127
#: a connection neither answered nor closed within this long is a finding
STALL_S = 8.0
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]


def _frame(api: int, version: int, body: dict[str, Any], cid: int = 1) -> bytes:
    cls = messages.request_type(api, version)
    hdr = struct.pack(">hhih", api, version, cid, 4) + b"fuzz"
    if cls.__flexible__:  # type: ignore[attr-defined]
        hdr += b"\x00"
    payload = hdr + messages.encode(messages.build(cls, body))
    return struct.pack(">i", len(payload)) + payload


def _handshake(mechanism: str, version: int = 1) -> bytes:
    return _frame(17, version, {"mechanism": mechanism})


def _authenticate(token: bytes, cid: int = 2) -> bytes:
    return _frame(36, 2, {"auth_bytes": token}, cid)


def _flip(data: bytes, rnd: random.Random) -> bytes:
    """One to three bytes changed at random (length prefix included)."""
    b = bytearray(data)
    for _ in range(rnd.randint(1, 3)):
        i = rnd.randrange(len(b))
        b[i] = rnd.randrange(256)
    return bytes(b)


def _token(rnd: random.Random) -> bytes:
    """A hostile token: random bytes, or something shaped like a real one but wrong."""
    shapes = [
        lambda: rnd.randbytes(rnd.choice([0, 1, 7, 64, 1000, 60_000])),
        lambda: b"\x00" * rnd.randint(0, 5),
        lambda: b"\x00alice\x00" + rnd.randbytes(rnd.randint(0, 40)),
        lambda: b"\x00" + rnd.randbytes(300) + b"\x00pw",
        lambda: b"n,,n=" + rnd.randbytes(rnd.randint(0, 30)) + b",r=" + rnd.randbytes(8),
        lambda: b"n,a=" + "é".encode() * rnd.randint(0, 50) + b",n=bob,r=x",
        lambda: b"p=tls-unique,,n=bob,r=abc",
        lambda: b"n,,n=bob,r=abc,e=" + rnd.randbytes(10),
        lambda: b"n,,auth=Bearer " + rnd.randbytes(rnd.randint(0, 80)) + b"\x01\x01",
        lambda: b"n,,\x01auth=Bearer a.b.c\x01\x01",
        lambda: (
            b"n,,\x01auth=Bearer "
            + unsecured_jwt("eve", lifetime_s=rnd.choice([-10, 0, 10**9])).encode()
            + b"\x01\x01"
        ),
        lambda: b"n,,\x01auth=Bearer " + base64.b64encode(rnd.randbytes(90)) + b"\x01\x01",
    ]
    return rnd.choice(shapes)()


def _case(rnd: random.Random) -> list[bytes]:
    """The frames of one hostile connection."""
    kind = rnd.randrange(7)
    mech = rnd.choice(MECHANISMS)
    if kind == 0:  # random bytes where a frame should be
        return [rnd.randbytes(rnd.randint(1, 200))]
    if kind == 1:  # a valid handshake with a byte or three changed
        return [_flip(_handshake(mech), rnd)]
    if kind == 2:  # a valid handshake, then a corrupted authenticate frame
        return [_handshake(mech), _flip(_authenticate(_token(rnd)), rnd)]
    if kind == 3:  # a valid handshake, then a hostile token
        return [_handshake(mech), _authenticate(_token(rnd))]
    if kind == 4:  # handshake v0, then a raw (unframed by Kafka's header) hostile token
        tok = _token(rnd)
        return [_handshake(mech, 0), struct.pack(">i", len(tok)) + tok]
    if kind == 5:  # SCRAM: a real client-first, then a garbage client-final
        scram = rnd.choice(["SCRAM-SHA-256", "SCRAM-SHA-512"])
        first = b"n,,n=bob,r=" + base64.b64encode(rnd.randbytes(18))
        return [_handshake(scram), _authenticate(first), _authenticate(_token(rnd), 3)]
    # a random mechanism name, then anything
    name = rnd.randbytes(rnd.randint(0, 40)).decode("latin-1")
    return [_handshake(name), _authenticate(_token(rnd))]


def _waits_for_more(frames: list[bytes]) -> bool:
    """Whether the bytes end inside a frame whose (sane) length asks for more.

    The broker rightly waits for the rest of such a frame, as Kafka does, until
    ``connections.max.idle.ms``; a length over the pre-authentication limit is
    closed at once instead (``test_a_large_frame_before_authentication_closes...``).
    """
    data, pos = b"".join(frames), 0
    while pos < len(data):
        if len(data) - pos < 4:
            return True
        (n,) = struct.unpack_from(">i", data, pos)
        if n < 0 or n > 512 * 1024:
            return False
        if len(data) - pos - 4 < n:
            return True
        pos += 4 + n
    return False


#: a Metadata request: after a hostile exchange it must never be served
PROBE = _frame(3, 12, {"topics": None, "allow_auto_topic_creation": False}, 99)


async def _closes(reader: asyncio.StreamReader, within_s: float) -> bool:
    """Reads (answers are fine) until EOF; False when the connection is still open then."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while (left := deadline - loop.time()) > 0:
        try:
            if not await asyncio.wait_for(reader.read(65536), left):
                return True
        except TimeoutError:
            return False
        except ConnectionError:
            return True
    return False


async def _run(port: int, frames: list[bytes]) -> str:
    """Sends one hostile exchange: 'closed' when the broker closed it by itself,
    'refused' when it was open and a Metadata request then closed it, 'open' when even
    that left it open (a finding: served, or hanging), 'waiting' for a frame cut short."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.writelines(frames)
        await writer.drain()
        if await _closes(reader, 1.0):
            return "closed"
        if _waits_for_more(frames):
            return "waiting"
        # e.g. a valid handshake not yet followed by its token, or OAUTHBEARER's error
        # challenge (RFC 7628) awaiting the client's reply: not authenticated either way
        writer.write(PROBE)
        await writer.drain()
        return "refused" if await _closes(reader, STALL_S) else "open"
    except ConnectionError:
        return "closed"
    finally:
        writer.close()


async def _storm(port: int, cases: list[list[bytes]]) -> list[str]:
    sem = asyncio.Semaphore(64)

    async def one(frames: list[bytes]) -> str:
        async with sem:
            return await _run(port, frames)

    return await asyncio.gather(*(one(c) for c in cases))


def test_hostile_sasl_exchanges_are_refused_and_every_mechanism_still_works(
    secure_broker: SecureBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    rnd = random.Random(SEED)
    cases = [_case(rnd) for _ in range(CASES)]
    port = secure_broker.broker.kafka.bound_port("SASL_PLAINTEXT")
    outcomes = asyncio.run(_storm(port, cases))

    # a hostile exchange never ends authenticated, and never hangs
    findings = [i for i, o in enumerate(outcomes) if o == "open"]
    assert findings == [], f"served or hanging after a hostile exchange: cases {findings[:10]}"
    assert outcomes.count("waiting") < CASES // 10  # most reach the parsers, not the framing
    assert outcomes.count("closed") > CASES // 2
    # the broker's own loggers (asyncio's can carry another test's leftovers)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors if r.name.startswith("kafkalite")] == []

    # every mechanism still logs its users in, on a fresh connection each
    w = Wire(port)
    assert int(plain_login(w, "alice", PLAIN_USERS["alice"]).error_code) == 0
    assert metadata(w).brokers
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):

        async def login(mech: str = mech) -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                await authenticate(
                    reader, writer, SaslClientCredentials(mech, "bob", SCRAM_USERS["bob"])
                )
            finally:
                writer.close()

        asyncio.run(login())
    w = Wire(port)
    assert int(w.call(17, 1, {"mechanism": "OAUTHBEARER"}).error_code) == 0
    token = f"n,,\x01auth=Bearer {unsecured_jwt('alice')}\x01\x01".encode()
    assert int(w.call(36, 2, {"auth_bytes": token}).error_code) == 0
    assert metadata(w).brokers
