"""TimingWheel: Kafka's hierarchical timing wheel.

A wheel is ``wheel_size`` buckets of ``tick_ms`` each and covers
``[current_time, current_time + interval)`` with ``interval = tick_ms * wheel_size``.
The bucket ``current_time`` points at counts as expired. Entries beyond the range go
to an overflow wheel whose tick is this wheel's interval; overflow wheels are created
only when first needed. Buckets are handed to a queue (the timer's delay queue) when
their expiration changes; when a bucket expires the timer advances the wheels to its
expiration and re-inserts its entries, which cascade down a level or run.

Insertion and removal are O(1) per level; only the queue, which holds buckets rather
than tasks, is ordered.
"""

from __future__ import annotations

from typing import Protocol

from kafkalite.timer.timer_task import TimerTaskEntry
from kafkalite.timer.timer_task_list import TaskCounter, TimerTaskList

__all__ = ["BucketQueue", "TimingWheel"]


class BucketQueue(Protocol):
    """Where a wheel offers a bucket whose expiration has just been (re)set."""

    def offer(self, bucket: TimerTaskList) -> None: ...


class TimingWheel:
    """One level of the hierarchy (the overflow wheels are reached through it)."""

    __slots__ = (
        "tick_ms",
        "wheel_size",
        "interval",
        "current_time",
        "buckets",
        "_task_counter",
        "_queue",
        "_overflow_wheel",
    )

    def __init__(
        self,
        tick_ms: int,
        wheel_size: int,
        start_ms: int,
        task_counter: TaskCounter,
        queue: BucketQueue,
    ) -> None:
        if tick_ms < 1:
            raise ValueError(f"tick_ms must be >= 1, got {tick_ms}")
        if wheel_size < 2:
            # With one bucket an overflow wheel would have the same tick: endless recursion.
            raise ValueError(f"wheel_size must be >= 2, got {wheel_size}")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval = tick_ms * wheel_size
        self.current_time = start_ms - start_ms % tick_ms
        self.buckets: tuple[TimerTaskList, ...] = tuple(
            TimerTaskList(task_counter) for _ in range(wheel_size)
        )
        self._task_counter = task_counter
        self._queue = queue
        self._overflow_wheel: TimingWheel | None = None

    @property
    def overflow_wheel(self) -> TimingWheel | None:
        """The next (coarser) level, or None if no entry has needed it yet."""
        return self._overflow_wheel

    def _add_overflow_wheel(self) -> TimingWheel:
        wheel = self._overflow_wheel
        if wheel is None:
            wheel = TimingWheel(
                self.interval, self.wheel_size, self.current_time, self._task_counter, self._queue
            )
            self._overflow_wheel = wheel
        return wheel

    def add(self, entry: TimerTaskEntry) -> bool:
        """Put ``entry`` in the right bucket of the right level.

        Returns False when the entry is cancelled or already expired (it is then the
        caller's job to run it); True when it was placed in a bucket.
        """
        # Hot path: Kafka's recursion over levels is a loop here, and the cancelled
        # check and set_expiration are inlined.
        if entry.timer_task._timer_task_entry is not entry:
            return False  # cancelled
        expiration = entry.expiration_ms
        wheel = self
        while True:
            tick = wheel.tick_ms
            current = wheel.current_time
            if expiration < current + tick:
                return False
            if expiration < current + wheel.interval:
                virtual_id = expiration // tick
                bucket = wheel.buckets[virtual_id % wheel.wheel_size]
                bucket.add(entry)
                # Queue the bucket only when it starts standing for a new slot.
                bucket_expiration = virtual_id * tick
                if bucket.expiration != bucket_expiration:
                    bucket.expiration = bucket_expiration
                    wheel._queue.offer(bucket)
                return True
            overflow = wheel._overflow_wheel
            wheel = overflow if overflow is not None else wheel._add_overflow_wheel()

    def advance_clock(self, time_ms: int) -> None:
        """Move ``current_time`` (rounded down to the tick) and cascade to coarser levels.

        A no-op unless ``time_ms >= current_time + tick_ms``.
        """
        wheel: TimingWheel | None = self
        while wheel is not None and time_ms >= wheel.current_time + wheel.tick_ms:
            wheel.current_time = time_ms - time_ms % wheel.tick_ms
            time_ms = wheel.current_time
            wheel = wheel._overflow_wheel

    def __repr__(self) -> str:
        return (
            f"TimingWheel(tick_ms={self.tick_ms}, wheel_size={self.wheel_size}, "
            f"current_time={self.current_time})"
        )
