"""SystemTimer and the purgatory on a real event loop (no precise timing asserts)."""

from __future__ import annotations

import asyncio

import pytest
from timer_helpers import FlagOp

from kafkalite.timer import DelayedOperationPurgatory, SystemTimer, TimerTask, monotonic_ms


class EventTask(TimerTask):
    """Sets an asyncio.Event and records the clock when run."""

    def __init__(self, delay_ms: int, timer: SystemTimer) -> None:
        super().__init__(delay_ms)
        self.timer = timer
        self.event = asyncio.Event()
        self.fired_at: int | None = None

    def run(self) -> None:
        self.fired_at = self.timer.clock()
        self.event.set()


async def test_20ms_task_fires_on_the_loop_not_before_its_deadline() -> None:
    timer = SystemTimer()
    task = EventTask(20, timer)
    added_at = monotonic_ms()
    timer.add(task)
    assert timer.next_wakeup_ms is not None
    await asyncio.wait_for(task.event.wait(), timeout=5)
    assert task.fired_at is not None and task.fired_at >= added_at + 20
    assert timer.size == 0
    assert timer.next_wakeup_ms is None  # nothing left: the loop is not woken again


async def test_many_tasks_across_wheel_levels_all_fire() -> None:
    timer = SystemTimer(tick_ms=1, wheel_size=4)  # tiny wheel: delays below cross 3 levels
    tasks = [EventTask(ms, timer) for ms in (1, 3, 7, 19, 33, 64, 80)]
    start = monotonic_ms()
    for t in tasks:
        timer.add(t)
    await asyncio.wait_for(asyncio.gather(*(t.event.wait() for t in tasks)), timeout=5)
    for t in tasks:
        assert t.fired_at is not None and t.fired_at >= start + t.delay_ms


async def test_adding_an_earlier_task_rearms_the_loop_callback() -> None:
    timer = SystemTimer()
    late = EventTask(60_000, timer)
    timer.add(late)
    late_wakeup = timer.next_wakeup_ms
    assert late_wakeup is not None

    early = EventTask(20, timer)
    timer.add(early)
    early_wakeup = timer.next_wakeup_ms
    assert early_wakeup is not None and early_wakeup < late_wakeup

    later = EventTask(30_000, timer)
    timer.add(later)  # not earlier: the armed callback stays
    assert timer.next_wakeup_ms == early_wakeup

    await asyncio.wait_for(early.event.wait(), timeout=5)
    assert not late.event.is_set() and not later.event.is_set()
    assert timer.size == 2
    assert timer.next_wakeup_ms is not None and timer.next_wakeup_ms > early_wakeup

    late.cancel()
    later.cancel()
    assert timer.next_wakeup_ms is None


async def test_completing_an_op_cancels_the_loop_timer_when_nothing_else_is_pending() -> None:
    purgatory: DelayedOperationPurgatory[FlagOp] = DelayedOperationPurgatory("Fetch")
    op = FlagOp(60_000)
    assert not purgatory.try_complete_else_watch(op, [("t", 0)])
    assert purgatory.timer.next_wakeup_ms is not None

    op.ready = True
    assert purgatory.check_and_complete(("t", 0)) == 1
    assert purgatory.num_delayed == 0
    assert purgatory.timer.next_wakeup_ms is None
    await asyncio.wait_for(op, timeout=1)
    assert (op.completions, op.expirations) == (1, 0)


async def test_awaiting_an_op_that_times_out_resolves_after_on_expiration() -> None:
    purgatory: DelayedOperationPurgatory[FlagOp] = DelayedOperationPurgatory("Produce")
    op = FlagOp(20)
    purgatory.try_complete_else_watch(op, [("t", 0)])
    await asyncio.wait_for(op, timeout=5)
    assert (op.completions, op.expirations) == (1, 1)
    purgatory.shutdown()


async def test_awaiting_an_op_completed_before_the_first_await_returns_at_once() -> None:
    op = FlagOp(10, ready=True)
    assert op.safe_try_complete()
    await asyncio.wait_for(op, timeout=1)
    assert op.completion().done()


async def test_on_complete_failure_is_raised_to_the_awaiting_handler() -> None:
    class Failing(FlagOp):
        def on_complete(self) -> None:
            raise RuntimeError("cannot build response")

    op = Failing(60_000)
    waiter = asyncio.ensure_future(asyncio.wait_for(op, timeout=5))
    await asyncio.sleep(0)
    op.force_complete()
    with pytest.raises(RuntimeError, match="cannot build response"):
        await waiter

    late = Failing(10)
    late.force_complete()  # no future yet: logged, then handed to the future when asked
    with pytest.raises(RuntimeError):
        await late


async def test_cancelling_a_waiter_does_not_cancel_the_operation() -> None:
    purgatory: DelayedOperationPurgatory[FlagOp] = DelayedOperationPurgatory("Fetch")
    op = FlagOp(60_000)
    purgatory.try_complete_else_watch(op, ["key"])

    async def handler() -> None:
        await op

    waiter = asyncio.ensure_future(handler())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert not op.completion().cancelled()
    assert purgatory.num_delayed == 1

    op.ready = True
    assert purgatory.check_and_complete("key") == 1
    await asyncio.wait_for(op, timeout=1)


async def test_shutdown_disarms_the_timer() -> None:
    timer = SystemTimer()
    task = EventTask(20, timer)
    timer.add(task)
    timer.shutdown()
    assert timer.next_wakeup_ms is None
    await asyncio.sleep(0.05)
    assert not task.event.is_set()
    assert timer.size == 1


def test_timer_created_outside_the_loop_schedules_on_a_loop_passed_in() -> None:
    loop = asyncio.new_event_loop()
    try:
        timer = SystemTimer(loop=loop)
        task = EventTask(5, timer)
        timer.add(task)  # scheduled on the (not yet running) loop
        assert timer.next_wakeup_ms is not None
        loop.run_until_complete(asyncio.wait_for(task.event.wait(), timeout=5))
    finally:
        loop.close()


def test_timer_fires_on_uvloop() -> None:
    uvloop = pytest.importorskip("uvloop")

    async def main() -> None:
        timer = SystemTimer()
        tasks = [EventTask(ms, timer) for ms in (1, 20, 45)]
        start = monotonic_ms()
        for t in tasks:
            timer.add(t)
        await asyncio.wait_for(asyncio.gather(*(t.event.wait() for t in tasks)), timeout=5)
        for t in tasks:
            assert t.fired_at is not None and t.fired_at >= start + t.delay_ms

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())
