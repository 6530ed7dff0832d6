"""SystemTimer: the timing wheel driven by the asyncio event loop.

Kafka pairs its wheel with a ``DelayQueue`` of buckets and a reaper thread polling it.
Here the queue is a heap of buckets keyed by expiration and the event loop is the
reaper: the timer keeps exactly one ``loop.call_at`` handle, armed for the earliest
bucket, and re-arms it only when an earlier bucket appears. When it fires, every
bucket due by then is flushed: its entries are re-inserted, cascading to a finer
level or, once expired, running inline on the loop. Adding and cancelling stay O(1):
the heap is touched only when a bucket's expiration changes, which is at most once
per bucket per slot.

The clock is injectable (monotonic milliseconds). With no running loop (and no loop
given) nothing is scheduled, and tests drive time by hand with :meth:`advance_clock`.

Expiry is at tick granularity, as in Kafka: a task fires when the clock reaches its
expiration rounded down to ``tick_ms`` (exactly on time with the default 1 ms tick).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Callable

from kafkalite.timer.timer_task import TimerTask, TimerTaskEntry
from kafkalite.timer.timer_task_list import TaskCounter, TimerTaskList
from kafkalite.timer.timing_wheel import TimingWheel

__all__ = ["Clock", "DelayQueue", "SystemTimer", "monotonic_ms"]

logger = logging.getLogger(__name__)

Clock = Callable[[], int]


def monotonic_ms() -> int:
    """The default clock: monotonic time in whole milliseconds."""
    return time.monotonic_ns() // 1_000_000


class DelayQueue:
    """Heap of buckets ordered by expiration, with a non-blocking poll.

    A heap record is stale when its bucket's expiration no longer matches it (the
    bucket was flushed, or reset while idle, and reused); stale records are skipped.
    ``on_new_head(expiration)`` is called when an offered bucket becomes the earliest.
    """

    __slots__ = ("_heap", "_seq", "_on_new_head")

    def __init__(self, on_new_head: Callable[[int], None] | None = None) -> None:
        self._heap: list[tuple[int, int, TimerTaskList]] = []
        self._seq = 0  # tie-breaker: buckets themselves are never compared
        self._on_new_head = on_new_head

    def offer(self, bucket: TimerTaskList) -> None:
        expiration = bucket.expiration
        self._seq += 1
        heap = self._heap
        heapq.heappush(heap, (expiration, self._seq, bucket))
        if heap[0][2] is bucket and self._on_new_head is not None:
            self._on_new_head(expiration)

    def poll(self, now_ms: int) -> TimerTaskList | None:
        """Pop the earliest bucket with expiration <= ``now_ms``, or return None."""
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            expiration, _, bucket = heapq.heappop(heap)
            if bucket.expiration == expiration:
                return bucket
        return None

    def peek_expiration(self) -> int | None:
        """Expiration of the earliest live bucket (stale records are dropped)."""
        heap = self._heap
        while heap:
            expiration, _, bucket = heap[0]
            if bucket.expiration == expiration:
                return expiration
            heapq.heappop(heap)
        return None

    def reset(self) -> None:
        """Forget every bucket. Only valid when no bucket holds an entry."""
        for _, _, bucket in self._heap:
            bucket.expiration = -1
        self._heap.clear()

    def __len__(self) -> int:
        return len(self._heap)


class SystemTimer:
    """Hierarchical timer whose reaper is the event loop (one armed handle, no threads)."""

    __slots__ = (
        "_clock",
        "_loop",
        "_task_counter",
        "_delay_queue",
        "_wheel",
        "_handle",
        "_wakeup_ms",
        "_processing",
        "_shut_down",
    )

    def __init__(
        self,
        tick_ms: int = 1,
        wheel_size: int = 20,
        *,
        clock: Clock | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._clock: Clock = clock if clock is not None else monotonic_ms
        self._loop = loop
        self._task_counter = TaskCounter(self._on_empty)
        self._delay_queue = DelayQueue(self._on_new_head)
        self._wheel = TimingWheel(
            tick_ms, wheel_size, self._clock(), self._task_counter, self._delay_queue
        )
        self._handle: asyncio.TimerHandle | None = None
        self._wakeup_ms: int | None = None  # clock time the handle is armed for
        self._processing = False
        self._shut_down = False

    # -- introspection ----------------------------------------------------------------

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def wheel(self) -> TimingWheel:
        """The finest wheel (its overflow wheels hang off it)."""
        return self._wheel

    @property
    def size(self) -> int:
        """Number of tasks pending in the timer."""
        return self._task_counter.value

    @property
    def next_wakeup_ms(self) -> int | None:
        """Clock time the loop callback is armed for; None when nothing is scheduled."""
        return self._wakeup_ms

    # -- adding and expiring ----------------------------------------------------------

    def add(self, task: TimerTask) -> None:
        """Schedule ``task`` to run ``task.delay_ms`` from now (inline if already due)."""
        now = self._clock()
        if self._task_counter.value == 0 and not self._processing:
            # Idle: every bucket is empty, so the wheels can jump to now instead of
            # catching up bucket by bucket after a quiet period.
            self._delay_queue.reset()
            self._wheel.advance_clock(now)
        entry = TimerTaskEntry(task, now + task.delay_ms)
        if entry.expiration_ms <= now:
            # Due by the clock even if the wheels lag behind it (they advance only
            # as buckets expire): run now rather than at the next wakeup.
            self._run(task)
            return
        self._add_entry(entry)
        if self._wakeup_ms is None and self._task_counter.value:
            self._rearm()

    def _add_entry(self, entry: TimerTaskEntry) -> None:
        if not self._wheel.add(entry) and not entry.cancelled:
            self._run(entry.timer_task)

    @staticmethod
    def _run(task: TimerTask) -> None:
        try:
            task.run()
        except Exception:
            logger.exception("timer task %r failed", task)

    def advance_clock(self, now_ms: int | None = None) -> bool:
        """Flush every bucket due by ``now_ms`` (default: the clock); True if any was.

        This is what the loop callback does; tests with an injected clock call it
        directly. Nested calls from a running task are ignored.
        """
        if self._processing:
            return False
        now = self._clock() if now_ms is None else now_ms
        queue = self._delay_queue
        bucket = queue.poll(now)
        if bucket is None:
            if self._wakeup_ms is None:
                self._rearm()
            return False
        self._processing = True
        try:
            while bucket is not None:
                self._wheel.advance_clock(bucket.expiration)
                bucket.flush(self._add_entry)
                bucket = queue.poll(now)
        finally:
            self._processing = False
        self._rearm()
        return True

    def shutdown(self) -> None:
        """Stop scheduling loop callbacks; pending tasks stay but expire only by hand."""
        self._shut_down = True
        self._disarm()

    # -- loop scheduling --------------------------------------------------------------

    def _get_loop(self) -> asyncio.AbstractEventLoop | None:
        if self._loop is not None:
            return self._loop
        # The non-raising variant: this runs on every add while no loop is running.
        return asyncio.events._get_running_loop()

    def _arm(self, expiration_ms: int) -> None:
        if self._shut_down:
            return
        loop = self._get_loop()
        if loop is None:
            return
        if self._handle is not None:
            self._handle.cancel()
        delay_ms = expiration_ms - self._clock()
        when = loop.time() + (delay_ms / 1000.0 if delay_ms > 0 else 0.0)
        self._handle = loop.call_at(when, self._fire)
        self._wakeup_ms = expiration_ms

    def _disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._wakeup_ms = None

    def _rearm(self) -> None:
        if self._task_counter.value == 0:
            self._disarm()
            return
        expiration = self._delay_queue.peek_expiration()
        if expiration is None:
            self._disarm()
        elif expiration != self._wakeup_ms:
            self._arm(expiration)

    def _on_new_head(self, expiration_ms: int) -> None:
        # Re-arm only for an earlier bucket; flushing re-arms once at the end.
        if not self._processing and (self._wakeup_ms is None or expiration_ms < self._wakeup_ms):
            self._arm(expiration_ms)

    def _on_empty(self) -> None:
        # The last pending task left: no reason to wake the loop.
        if not self._processing:
            self._disarm()

    def _fire(self) -> None:
        self._handle = None
        self._wakeup_ms = None
        self.advance_clock()

    def __repr__(self) -> str:
        return f"SystemTimer(size={self.size}, next_wakeup_ms={self._wakeup_ms})"
