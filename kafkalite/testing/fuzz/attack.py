"""Attack classes and their registry.

An attack class either produces frames (:class:`FrameAttack`: the runner
sends each one and checks the broker answered it or closed the connection) or
drives sockets itself (:class:`SocketAttack`: connection patterns such as
stalled length prefixes or clients that never read). Each registers under a
name with :func:`register`; the CI test and ``bench/fuzz_bench.py`` run every
registered class, so a new class is fuzzed everywhere once it is imported by
``kafkalite.testing.fuzz``.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from kafkalite.testing.fuzz.values import NamePools

_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class FuzzFrame:
    """One request as sent: ``data`` includes the 4-byte size prefix."""

    data: bytes
    #: what the attack meant to send (the header in ``data`` may be garbled on purpose)
    api_key: int
    version: int
    #: what was done to it, for a reproducer
    note: str = ""


@dataclass
class FuzzTarget:
    """What attacks know of the broker under test."""

    host: str
    port: int
    #: advertised APIs: key -> (min version, max version)
    apis: dict[int, tuple[int, int]]
    pools: NamePools = field(default_factory=NamePools)
    #: API keys no request is built for (e.g. while a known finding is being fixed)
    exclude_apis: frozenset[int] = frozenset()


@dataclass
class AttackStats:
    """Outcomes of one class's frames (or connections, for socket attacks)."""

    sent: int = 0
    answered: int = 0
    #: no response, and the connection stayed open (acks=0 produce)
    silent: int = 0
    closed: int = 0
    #: neither answered nor closed in time: a finding
    stalled: int = 0
    #: anything else wrong (a response with the wrong correlation id, a silent non-produce)
    wrong: int = 0
    findings: list[str] = field(default_factory=list)

    def finding(self, text: str) -> None:
        if len(self.findings) < 20:
            self.findings.append(text)


class FrameAttack:
    """Produces request frames; deterministic for a given ``rng``."""

    name: ClassVar[str] = ""

    def frames(self, rng: random.Random, target: FuzzTarget) -> Iterator[FuzzFrame]:
        raise NotImplementedError


class SocketAttack:
    """Drives its own connections for about ``seconds``; records what happened in ``stats``."""

    name: ClassVar[str] = ""

    async def run(
        self, rng: random.Random, target: FuzzTarget, stats: AttackStats, seconds: float
    ) -> None:
        raise NotImplementedError


Attack = type[FrameAttack] | type[SocketAttack]

#: every attack class by name, in registration order
ATTACKS: dict[str, Attack] = {}


def register(cls: Attack) -> Attack:
    """Class decorator: make ``cls`` part of every fuzz run."""
    if not cls.name or cls.name in ATTACKS:
        raise ValueError(f"attack class needs a unique name, got {cls.name!r}")
    ATTACKS[cls.name] = cls
    return cls


def frame_bytes(
    api_key: int,
    version: int,
    correlation_id: int,
    body: bytes,
    *,
    flexible: bool,
    client_id: bytes | None = b"fuzz",
) -> bytes:
    """A size-prefixed request: header v1 (v2 when ``flexible``) and ``body``."""
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id)) + client_id
    header = struct.pack(">hhi", api_key, version, correlation_id) + cid
    if flexible:
        header += b"\x00"
    payload = header + body
    return _I32.pack(len(payload)) + payload
