"""Keep CPython's full (gen2) collections from scanning the broker's long-lived state.

A broker with thousands of partitions holds hundreds of thousands of objects
that live as long as the process (logs, segments, indexes, metadata). Each
full collection walks all of them; on this machine that was a 240 ms pause
with 10,000 partitions, stalling every connection. ``gc.freeze()`` moves
everything alive into the permanent generation, which collections skip.

The tuner freezes after start-up and again after each full collection (what
survives one is long-lived by definition), so a full collection only walks
what was promoted since the last one. Frozen objects are still freed by
reference counting; only cyclic garbage among them would stay. Deleting topics
releases a lot of such state, so :func:`unfreeze_after_release` hands the
frozen objects back to the collector, whose next full pass frees that garbage
and is then frozen again.

Process-wide, so only the server process installs it: an embedded broker in a
test process must not freeze its host's heap.

CPython's generation thresholds are left alone: raising gen0's from 700 to
10,000 made gen1 passes take up to 45 ms under produce load (each walks up to
ten gen0 batches), against about 1-9 ms with the default.
"""

from __future__ import annotations

import asyncio
import gc
import logging

log = logging.getLogger(__name__)

#: how often the loop checks whether a full collection ran and refreezes
CHECK_INTERVAL_S = 1.0


class GcTuner:
    """Freezes long-lived objects out of the collector's way; see the module docstring."""

    def __init__(self) -> None:
        self._full_collections = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """After start-up: collect once and freeze what is left."""
        gc.collect()
        gc.freeze()
        self._full_collections = gc.get_stats()[2]["collections"]
        self._task = asyncio.get_running_loop().create_task(self._refreeze_loop())
        log.info("gc: froze %d start-up objects", gc.get_freeze_count())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _refreeze_loop(self) -> None:
        while True:
            await asyncio.sleep(CHECK_INTERVAL_S)
            self.check()

    def check(self) -> bool:
        """Freeze the survivors if a full collection ran since the last check."""
        n = gc.get_stats()[2]["collections"]
        if n == self._full_collections:
            return False
        self._full_collections = n
        gc.freeze()
        return True


_tuner: GcTuner | None = None


def install() -> GcTuner:
    """Start the process-wide tuner (call on the running loop, after the broker started)."""
    global _tuner
    if _tuner is None:
        _tuner = GcTuner()
        _tuner.start()
    return _tuner


def uninstall() -> None:
    global _tuner
    if _tuner is not None:
        _tuner.stop()
        _tuner = None


def unfreeze_after_release() -> None:
    """Large state was dropped (topics deleted): let the next full collection see it."""
    if _tuner is not None:
        gc.unfreeze()
