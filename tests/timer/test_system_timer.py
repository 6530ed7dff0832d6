"""SystemTimer driven by an injected clock, no event loop (behaviours 30-34)."""

from __future__ import annotations

import logging

import pytest
from timer_helpers import FakeClock, RecordingTask, drive

from kafkalite.timer import DelayQueue, SystemTimer, TaskCounter, TimerTask, TimerTaskList


def level(timer: SystemTimer, n: int):
    wheel = timer.wheel
    for _ in range(n - 1):
        assert wheel.overflow_wheel is not None
        wheel = wheel.overflow_wheel
    return wheel


def test_450ms_task_cascades_through_levels_and_fires_at_450(
    timer: SystemTimer, clock: FakeClock
) -> None:
    fired: list[tuple[str, int]] = []
    task = RecordingTask(450, clock, fired, "t450")
    timer.add(task)
    entry = task.timer_task_entry
    assert entry is not None
    assert entry.list is level(timer, 3).buckets[1]

    drive(timer, clock, 399)
    assert entry.list is level(timer, 3).buckets[1]

    drive(timer, clock, 400)  # level-3 bucket expires: re-inserted, not run
    assert fired == []
    assert entry.list is level(timer, 2).buckets[2]  # [440, 460)
    assert entry.list.expiration == 440

    drive(timer, clock, 440)  # level-2 bucket expires: re-inserted into level 1
    assert fired == []
    assert entry.list is level(timer, 1).buckets[450 % 20]
    assert entry.list.expiration == 450

    drive(timer, clock, 449)
    assert fired == []
    drive(timer, clock, 450)
    assert fired == [("t450", 450)]
    assert timer.size == 0


def test_tasks_sharing_a_coarse_bucket_each_fire_at_their_own_time(
    timer: SystemTimer, clock: FakeClock
) -> None:
    fired: list[tuple[str, int]] = []
    for ms in (473, 446, 455, 450):
        timer.add(RecordingTask(ms, clock, fired, str(ms)))
    drive(timer, clock, 500)
    assert fired == [("446", 446), ("450", 450), ("455", 455), ("473", 473)]


def test_late_advance_fires_every_due_task_in_one_call(
    timer: SystemTimer, clock: FakeClock
) -> None:
    fired: list[tuple[str, int]] = []
    for ms in (2, 350, 450, 7999, 9000):
        timer.add(RecordingTask(ms, clock, fired, str(ms)))
    clock.now = 8000
    assert timer.advance_clock()
    assert [name for name, _ in fired] == ["2", "350", "450", "7999"]
    assert timer.size == 1
    assert not timer.advance_clock()  # nothing new is due
    drive(timer, clock, 9000)
    assert fired[-1] == ("9000", 9000)


def test_expired_task_runs_immediately_on_add(timer: SystemTimer, clock: FakeClock) -> None:
    fired: list[tuple[str, int]] = []
    timer.add(RecordingTask(0, clock, fired, "zero"))
    timer.add(RecordingTask(-5, clock, fired, "negative"))
    assert fired == [("zero", 0), ("negative", 0)]
    assert timer.size == 0


def test_cancelled_task_never_runs_and_its_entry_leaves_the_bucket(
    timer: SystemTimer, clock: FakeClock
) -> None:
    fired: list[tuple[str, int]] = []
    keep = RecordingTask(30, clock, fired, "keep")
    drop = RecordingTask(30, clock, fired, "drop")
    timer.add(keep)
    timer.add(drop)
    entry = drop.timer_task_entry
    assert entry is not None
    bucket = entry.list
    assert bucket is not None
    assert timer.size == 2

    drop.cancel()
    assert entry.list is None and entry.cancelled
    assert [e.timer_task for e in bucket] == [keep]
    assert timer.size == 1
    drop.cancel()  # idempotent

    drive(timer, clock, 100)
    assert fired == [("keep", 30)]


def test_cancel_while_cascading_keeps_the_task_from_running(
    timer: SystemTimer, clock: FakeClock
) -> None:
    fired: list[tuple[str, int]] = []
    task = RecordingTask(450, clock, fired)
    timer.add(task)
    drive(timer, clock, 441)  # now in level 1
    task.cancel()
    drive(timer, clock, 500)
    assert fired == [] and timer.size == 0


def test_task_cancelling_a_later_task_of_the_same_bucket_prevents_it_from_running(
    timer: SystemTimer, clock: FakeClock
) -> None:
    fired: list[tuple[str, int]] = []
    victim = RecordingTask(40, clock, fired, "victim")

    class Canceller(TimerTask):
        def run(self) -> None:
            fired.append(("canceller", clock()))
            victim.cancel()

    timer.add(Canceller(40))
    timer.add(victim)
    drive(timer, clock, 100)
    assert fired == [("canceller", 40)]
    assert timer.size == 0


def test_adding_a_task_again_reschedules_it(timer: SystemTimer, clock: FakeClock) -> None:
    fired: list[tuple[str, int]] = []
    task = RecordingTask(10, clock, fired)
    timer.add(task)
    clock.now = 5
    timer.add(task)  # the first entry is cancelled by rebinding
    assert timer.size == 1
    drive(timer, clock, 40)
    assert fired == [("", 15)]


def test_size_counts_pending_tasks(timer: SystemTimer, clock: FakeClock) -> None:
    fired: list[tuple[str, int]] = []
    tasks = [RecordingTask(ms, clock, fired) for ms in (5, 50, 500, 5000)]
    for t in tasks:
        timer.add(t)
    assert timer.size == 4
    drive(timer, clock, 50)
    assert timer.size == 2
    tasks[3].cancel()
    assert timer.size == 1


def test_task_exception_is_logged_not_propagated(
    timer: SystemTimer, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    fired: list[tuple[str, int]] = []

    class Boom(TimerTask):
        def run(self) -> None:
            raise RuntimeError("boom")

    timer.add(Boom(3))
    timer.add(RecordingTask(3, clock, fired, "after"))
    with caplog.at_level(logging.ERROR, logger="kafkalite.timer.system_timer"):
        drive(timer, clock, 3)
    assert fired == [("after", 3)]
    assert "boom" in caplog.text


def test_task_run_may_add_new_tasks(timer: SystemTimer, clock: FakeClock) -> None:
    fired: list[tuple[str, int]] = []

    class Chain(TimerTask):
        def __init__(self, delay_ms: int, remaining: int) -> None:
            super().__init__(delay_ms)
            self.remaining = remaining

        def run(self) -> None:
            fired.append(("chain", clock()))
            if self.remaining:
                timer.add(Chain(25, self.remaining - 1))

    timer.add(Chain(25, 3))
    drive(timer, clock, 200)
    assert fired == [("chain", 25), ("chain", 50), ("chain", 75), ("chain", 100)]


def test_idle_timer_jumps_its_wheel_to_now_on_the_next_add(
    timer: SystemTimer, clock: FakeClock
) -> None:
    fired: list[tuple[str, int]] = []
    clock.now = 1_000_000
    timer.add(RecordingTask(5, clock, fired))
    assert timer.wheel.current_time == 1_000_000
    assert timer.wheel.overflow_wheel is None  # no catching up through coarse levels
    drive(timer, clock, 1_000_005)
    assert fired == [("", 1_000_005)]


def test_advance_clock_with_explicit_time(clock: FakeClock) -> None:
    timer = SystemTimer(clock=clock)
    fired: list[tuple[str, int]] = []
    timer.add(RecordingTask(100, clock, fired))
    assert not timer.advance_clock(99)
    clock.now = 100
    assert timer.advance_clock(100)
    assert fired == [("", 100)]


def test_no_loop_means_nothing_is_scheduled(timer: SystemTimer, clock: FakeClock) -> None:
    timer.add(RecordingTask(100, clock, []))
    assert timer.next_wakeup_ms is None


def test_non_default_tick_rounds_expiry_down_to_the_tick() -> None:
    clock = FakeClock(3)
    timer = SystemTimer(tick_ms=10, wheel_size=8, clock=clock)
    assert timer.wheel.current_time == 0
    fired: list[tuple[str, int]] = []
    timer.add(RecordingTask(35, clock, fired))  # expires at 38, bucket [30, 40)
    drive(timer, clock, 29)
    assert fired == []
    drive(timer, clock, 30)
    assert fired == [("", 30)]


def test_delay_queue_skips_stale_records() -> None:
    heads: list[int] = []
    queue = DelayQueue(heads.append)
    counter = TaskCounter()
    a, b = TimerTaskList(counter), TimerTaskList(counter)
    a.set_expiration(10)
    queue.offer(a)
    b.set_expiration(5)
    queue.offer(b)
    assert heads == [10, 5]
    b.set_expiration(30)  # b reused for a later slot: its record at 5 is stale
    queue.offer(b)
    assert queue.peek_expiration() == 10
    assert queue.poll(9) is None
    assert queue.poll(100) is a
    assert queue.poll(100) is b
    assert queue.poll(100) is None
    assert len(queue) == 0


def test_delay_queue_reset_forgets_buckets_and_their_expirations() -> None:
    queue = DelayQueue()
    bucket = TimerTaskList(TaskCounter())
    bucket.set_expiration(7)
    queue.offer(bucket)
    queue.reset()
    assert len(queue) == 0 and bucket.expiration == -1
