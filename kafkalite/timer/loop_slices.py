"""Let the event loop run between the steps of long jobs.

Some requests do work proportional to what they name: a LeaderAndIsr for a
topic of 10,000 partitions creates 10,000 log directories, a StopReplica
deletes as many, an UpdateMetadata rebuilds as many cache entries, and the
controller moves as many partitions and replicas through its state machines.
Each step is short, but all of them in one go would hold the broker's event
loop for seconds, and every client of the broker would wait that long.

Such a job awaits :func:`pause` after each step (or batch of steps). Once the
thread's loop has been held for :data:`SLICE_S` since a job last yielded,
``pause`` lets the loop run one iteration (other requests, timers, I/O) before
the next step; otherwise it returns at once. The clock is shared by every job
of the thread, so two jobs that take turns still yield in time. Yielding is by
time, not by a step count: a step costs microseconds on a tmpfs and
milliseconds on a busy disk.
"""

from __future__ import annotations

import asyncio
import threading
import time

#: how long jobs may hold the loop before one of them lets others run
SLICE_S = 0.02


class _Clock(threading.local):
    #: monotonic time a job of this thread last yielded (or first asked)
    since: float | None = None


_clock = _Clock()


async def pause() -> None:
    """Yield to the loop if jobs have held it for :data:`SLICE_S` since one last did."""
    now = time.monotonic()
    since = _clock.since
    if since is None:
        _clock.since = now
    elif now - since >= SLICE_S:
        await asyncio.sleep(0)
        _clock.since = time.monotonic()
