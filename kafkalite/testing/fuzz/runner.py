"""Send attack frames over real connections and classify what the broker did with each.

After every fuzz frame the runner pipelines an ApiVersions v0 probe on the same
connection. Responses come back in request order, so the frames that arrive
before the probe's tell what happened to the fuzz frame: answered (with its
correlation id), silent (only a Produce may be: acks=0), or the connection
closed. Neither within ``timeout`` seconds is a stall, which is a finding, like
an answer with the wrong correlation id.
"""

from __future__ import annotations

import asyncio
import random
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from kafkalite.testing.fuzz.attack import (
    ATTACKS,
    AttackStats,
    FrameAttack,
    FuzzFrame,
    FuzzTarget,
    SocketAttack,
    frame_bytes,
)

_I32 = struct.Struct(">i")
_PROBE_CID = 0x7EAD0000
_PROBE = frame_bytes(18, 0, _PROBE_CID, b"", flexible=False, client_id=b"fuzz-probe")


@dataclass
class FuzzReport:
    stats: dict[str, AttackStats] = field(default_factory=dict)
    seconds: float = 0.0
    #: connections refused or reset before a frame was sent (the broker was down)
    connect_failures: int = 0

    @property
    def frames(self) -> int:
        return sum(s.sent for s in self.stats.values())

    def findings(self) -> list[str]:
        return [f"{name}: {f}" for name, s in self.stats.items() for f in s.findings]

    def table(self) -> str:
        rows = [
            f"{'class':14} {'sent':>9} {'answered':>9} {'silent':>7} {'closed':>8}"
            f" {'stalled':>8} {'wrong':>6}"
        ]
        for name, s in self.stats.items():
            rows.append(
                f"{name:14} {s.sent:9} {s.answered:9} {s.silent:7} {s.closed:8}"
                f" {s.stalled:8} {s.wrong:6}"
            )
        return "\n".join(rows)


async def read_api_versions(target: FuzzTarget) -> dict[int, tuple[int, int]]:
    """The broker's advertised APIs: key -> (min, max) (ApiVersions v0)."""
    reader, writer = await asyncio.open_connection(target.host, target.port)
    try:
        writer.write(_PROBE)
        frame = await _read_frame(reader)
    finally:
        writer.close()
    (count,) = _I32.unpack_from(frame, 6)
    apis = {}
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", frame, 10 + 6 * i)
        apis[key] = (lo, hi)
    return apis


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = _I32.unpack(await reader.readexactly(4))
    return await reader.readexactly(size)


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        self.writer.close()


async def _outcome(conn: _Connection, frame: FuzzFrame, stats: AttackStats, timeout: float) -> bool:
    """Send ``frame`` and the probe; record the outcome. False: the connection is gone."""
    data = frame.data
    try:
        conn.writer.write(data + _PROBE)
        await conn.writer.drain()
    except (ConnectionError, OSError):
        stats.closed += 1
        return False
    answers: list[bytes] = []
    try:
        async with asyncio.timeout(timeout):
            while True:
                resp = await _read_frame(conn.reader)
                if len(resp) >= 4 and _I32.unpack_from(resp, 0)[0] == _PROBE_CID:
                    break
                answers.append(resp)
    except TimeoutError:
        stats.stalled += 1
        stats.finding(f"stalled {timeout}s on {_describe(frame)}")
        return False
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        if answers:
            stats.answered += 1  # answered, then closed (e.g. a later garbled request)
        else:
            stats.closed += 1
        return False
    sent_key = struct.unpack_from(">h", data, 4)[0] if len(data) >= 6 else None
    sent_cid = _I32.unpack_from(data, 8)[0] if len(data) >= 12 else None
    if not answers:
        if sent_key == 0:
            stats.silent += 1  # acks=0
            return True
        stats.wrong += 1
        stats.finding(f"no response and no close: {_describe(frame)}")
        return True
    got = _I32.unpack_from(answers[0], 0)[0] if len(answers[0]) >= 4 else None
    if len(answers) != 1 or got != sent_cid:
        stats.wrong += 1
        stats.finding(
            f"{len(answers)} answers, correlation id {got} for {sent_cid}: {_describe(frame)}"
        )
        return True
    stats.answered += 1
    return True


def _describe(frame: FuzzFrame) -> str:
    head = frame.data[:200].hex()
    more = "..." if len(frame.data) > 200 else ""
    return f"api {frame.api_key} v{frame.version} ({frame.note}): {head}{more}"


async def _frame_worker(
    target: FuzzTarget,
    stream: Iterator[tuple[str, FuzzFrame]],
    report: FuzzReport,
    deadline: float,
    timeout: float,
) -> None:
    conn: _Connection | None = None
    try:
        for name, frame in stream:
            if time.monotonic() > deadline:
                break
            stats = report.stats[name]
            while conn is None:
                try:
                    reader, writer = await asyncio.open_connection(target.host, target.port)
                    conn = _Connection(reader, writer)
                except OSError:  # the broker is down (a crash being restarted): wait
                    report.connect_failures += 1
                    if time.monotonic() > deadline:
                        return
                    await asyncio.sleep(0.2)
            stats.sent += 1
            if not await _outcome(conn, frame, stats, timeout):
                conn.close()
                conn = None
    finally:
        if conn is not None:
            conn.close()


def _interleave(
    generators: dict[str, Iterator[FuzzFrame]], budget: dict[str, int] | None
) -> Iterator[tuple[str, FuzzFrame]]:
    """Round-robin over the classes, each up to its budget (None: for ever)."""
    left = dict(budget) if budget is not None else None
    names = list(generators)
    while names:
        for name in list(names):
            if left is not None:
                if left[name] <= 0:
                    names.remove(name)
                    continue
                left[name] -= 1
            try:
                yield name, next(generators[name])
            except StopIteration:
                names.remove(name)


async def run_fuzz(
    target: FuzzTarget,
    *,
    classes: list[str] | None = None,
    frames_per_class: int | None = None,
    seconds: float | None = None,
    connections: int = 4,
    seed: int = 0,
    timeout: float = 10.0,
) -> FuzzReport:
    """Run the registered attack classes (or ``classes``) against ``target``.

    Frame classes send ``frames_per_class`` frames each (split over the
    connections), or as many as fit in ``seconds``; socket classes run for
    ``seconds`` (or 5 s when only a frame budget is given). Deterministic for a
    given ``seed``, except for timing.
    """
    if not target.apis:
        target.apis = await read_api_versions(target)
    names = list(ATTACKS) if classes is None else classes
    report = FuzzReport({n: AttackStats() for n in names})
    frame_classes = [n for n in names if issubclass(ATTACKS[n], FrameAttack)]
    socket_classes = [n for n in names if issubclass(ATTACKS[n], SocketAttack)]
    deadline = time.monotonic() + (seconds if seconds is not None else 10**9)
    started = time.monotonic()
    tasks = []
    for worker in range(connections):
        gens = {}
        for n in frame_classes:
            attack = ATTACKS[n]()
            assert isinstance(attack, FrameAttack)
            gens[n] = attack.frames(random.Random(f"{seed}/{worker}/{n}"), target)
        budget = None
        if frames_per_class is not None:
            share = frames_per_class // connections + (worker < frames_per_class % connections)
            budget = dict.fromkeys(frame_classes, share)
        tasks.append(_frame_worker(target, _interleave(gens, budget), report, deadline, timeout))
    socket_seconds = seconds if seconds is not None else 5.0
    for n in socket_classes:
        attack = ATTACKS[n]()
        assert isinstance(attack, SocketAttack)
        tasks.append(
            attack.run(random.Random(f"{seed}/{n}"), target, report.stats[n], socket_seconds)
        )
    await asyncio.gather(*tasks)
    report.seconds = time.monotonic() - started
    return report
