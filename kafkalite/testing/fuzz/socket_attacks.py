"""The connection patterns of :mod:`kafkalite.testing.hostile_connections` as attack classes.

Each class runs its pattern in bursts (``burst_s`` long, then ``pause_s`` idle)
until the run's time is up, so a long fuzz run mixes every pattern with the
frame classes without one of them (connection churn) taking the fuzzing
process's whole CPU. What a burst did is added to the class's
:class:`AttackStats`: ``sent`` counts connections opened, ``answered`` the
responses read, ``closed`` the connections the broker ended, and ``wrong`` the
connects or sends that failed for another reason (a finding: the broker
stopped accepting).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from kafkalite.testing import hostile_connections as hc
from kafkalite.testing.fuzz.attack import AttackStats, FuzzTarget, SocketAttack, register


class PatternAttack(SocketAttack):
    """A connection pattern run in bursts."""

    pattern: ClassVar[Callable[..., Awaitable[hc.Counters]]]
    options: ClassVar[dict[str, Any]] = {}
    burst_s: ClassVar[float] = 20.0
    pause_s: ClassVar[float] = 10.0

    async def run(
        self, rng: random.Random, target: FuzzTarget, stats: AttackStats, seconds: float
    ) -> None:
        deadline = time.monotonic() + seconds
        # start somewhere in the first pause, so the patterns' bursts do not all line up
        await asyncio.sleep(min(rng.uniform(0, self.pause_s), max(0.0, seconds / 10)))
        while (left := deadline - time.monotonic()) > 0.1:
            c = await type(self).pattern(
                target.host, target.port, min(self.burst_s, left), **self.options
            )
            stats.sent += c.connections
            stats.answered += c.responses
            stats.closed += c.closed_by_broker
            if c.errors:
                stats.wrong += c.errors
                stats.finding(f"{c.errors} connects or sends failed in a {self.name} burst")
            pause = min(self.pause_s, deadline - time.monotonic())
            if pause > 0:
                await asyncio.sleep(pause)


@register
class StalledLengthPrefix(PatternAttack):
    """20 connections each announce a 100 MiB request and send nothing more."""

    name = "stalled-prefix"
    pattern = hc.stalled_length_prefix


@register
class NeverReadingClient(PatternAttack):
    """A client pipelines requests and never reads a response."""

    name = "never-reading"
    pattern = hc.never_reading_client


@register
class Slowloris(PatternAttack):
    """10 connections send a request one byte a second."""

    name = "slowloris"
    pattern = hc.slowloris


@register
class IdleConnections(PatternAttack):
    """500 connections that send nothing."""

    name = "idle"
    pattern = hc.idle_connections
    options = {"connections": 500}


@register
class ConnectionChurn(PatternAttack):
    """Connects and closes as fast as 4 workers can, in short bursts."""

    name = "churn"
    pattern = hc.connection_churn
    options = {"concurrency": 4, "send_first": True}
    burst_s = 2.0
    pause_s = 18.0


@register
class PartialFrameThenReset(PatternAttack):
    """Half a request, then a reset, in short bursts."""

    name = "partial-reset"
    pattern = hc.partial_frame_then_close
    options = {"reset": True}
    burst_s = 2.0
    pause_s = 18.0
