"""Helpers for the timer tests: a hand-driven clock, recording tasks and ops."""

from __future__ import annotations

from collections.abc import Callable

from kafkalite.timer import DelayedOperation, SystemTimer, TimerTask, TimerTaskList


class FakeClock:
    """Injectable clock (monotonic ms) that only moves when a test says so."""

    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class RecordingTask(TimerTask):
    """Appends ``(name, clock())`` to ``fired`` when run."""

    __slots__ = ("name", "clock", "fired")

    def __init__(
        self, delay_ms: int, clock: Callable[[], int], fired: list[tuple[str, int]], name: str = ""
    ) -> None:
        super().__init__(delay_ms)
        self.name = name
        self.clock = clock
        self.fired = fired

    def run(self) -> None:
        self.fired.append((self.name, self.clock()))


class RecordingQueue:
    """BucketQueue that just remembers what it was offered."""

    def __init__(self) -> None:
        self.offered: list[tuple[TimerTaskList, int]] = []

    def offer(self, bucket: TimerTaskList) -> None:
        self.offered.append((bucket, bucket.expiration))


class FlagOp(DelayedOperation):
    """Completes when ``ready`` is set; counts every callback."""

    def __init__(self, delay_ms: int, ready: bool = False) -> None:
        super().__init__(delay_ms)
        self.ready = ready
        self.checks = 0
        self.completions = 0
        self.expirations = 0

    def try_complete(self) -> bool:
        self.checks += 1
        if self.ready:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expirations += 1


def drive(timer: SystemTimer, clock: FakeClock, until: int) -> None:
    """Step the clock 1 ms at a time up to ``until``, letting the timer expire buckets."""
    while clock.now < until:
        clock.now += 1
        timer.advance_clock()
