"""TimingWheel and TimerTaskList against the seed's worked examples (behaviours 27-34)."""

from __future__ import annotations

import pytest
from timer_helpers import FakeClock, RecordingQueue, RecordingTask

from kafkalite.timer import TaskCounter, TimerTaskEntry, TimerTaskList, TimingWheel


def make_wheel(start_ms: int = 0, tick_ms: int = 1, wheel_size: int = 20):
    queue = RecordingQueue()
    counter = TaskCounter()
    return TimingWheel(tick_ms, wheel_size, start_ms, counter, queue), queue, counter


def entry_at(expiration_ms: int) -> TimerTaskEntry:
    task = RecordingTask(expiration_ms, FakeClock(), [])
    return TimerTaskEntry(task, expiration_ms)


def level(wheel: TimingWheel, n: int) -> TimingWheel:
    for _ in range(n - 1):
        assert wheel.overflow_wheel is not None
        wheel = wheel.overflow_wheel
    return wheel


# -- 27: geometry and lazy overflow wheels -------------------------------------------


def test_tick_1_size_20_wheel_has_interval_20() -> None:
    wheel, _, _ = make_wheel()
    assert (wheel.tick_ms, wheel.wheel_size, wheel.interval) == (1, 20, 20)
    assert len(wheel.buckets) == 20


def test_overflow_wheels_tick_20_and_400_are_created_only_when_needed() -> None:
    wheel, _, _ = make_wheel()
    assert wheel.add(entry_at(19))
    assert wheel.overflow_wheel is None

    assert wheel.add(entry_at(350))
    level2 = wheel.overflow_wheel
    assert level2 is not None
    assert (level2.tick_ms, level2.interval) == (20, 400)
    assert level2.overflow_wheel is None

    assert wheel.add(entry_at(450))
    level3 = level2.overflow_wheel
    assert level3 is not None
    assert (level3.tick_ms, level3.interval) == (400, 8000)
    assert level3.overflow_wheel is None


def test_overflow_wheel_starts_at_the_parents_current_time() -> None:
    wheel, _, _ = make_wheel()
    wheel.advance_clock(37)
    wheel.add(entry_at(37 + 100))
    level2 = wheel.overflow_wheel
    assert level2 is not None
    assert level2.current_time == 20  # 37 rounded down to its 20 ms tick


def test_wheel_size_below_two_or_tick_below_one_is_rejected() -> None:
    with pytest.raises(ValueError):
        make_wheel(wheel_size=1)
    with pytest.raises(ValueError):
        make_wheel(tick_ms=0)


# -- 28, 29: where tasks land --------------------------------------------------------


def test_2ms_task_at_time_0_goes_to_slot_2() -> None:
    wheel, _, _ = make_wheel()
    entry = entry_at(2)
    bucket = wheel.buckets[2]
    assert wheel.add(entry)
    assert bucket.expiration == 2
    assert entry.list is bucket


def test_after_advancing_to_2_an_8ms_task_goes_to_slot_10_and_a_19ms_task_reuses_slot_1() -> None:
    wheel, _, _ = make_wheel()
    wheel.advance_clock(2)
    assert wheel.current_time == 2
    e8, e19 = entry_at(2 + 8), entry_at(2 + 19)
    assert wheel.add(e8) and wheel.add(e19)
    slot1 = wheel.buckets[1]
    assert e8.list is wheel.buckets[10]
    assert slot1.expiration == 21
    assert e19.list is slot1  # (2 + 19) mod 20: an expired slot reused
    assert wheel.overflow_wheel is None


def test_350ms_task_goes_to_level_2_slot_17() -> None:
    wheel, _, _ = make_wheel()
    entry = entry_at(350)
    wheel.add(entry)
    level2 = level(wheel, 2)
    assert entry.list is level2.buckets[17]
    assert level2.buckets[17].expiration == 340


def test_450ms_task_goes_to_level_3_slot_1_with_bucket_expiration_400() -> None:
    wheel, _, _ = make_wheel()
    entry = entry_at(450)
    wheel.add(entry)
    level3 = level(wheel, 3)
    assert entry.list is level3.buckets[1]
    assert level3.buckets[1].expiration == 400


def test_446_455_and_473ms_tasks_share_the_450ms_bucket() -> None:
    wheel, queue, counter = make_wheel()
    entries = [entry_at(ms) for ms in (450, 446, 455, 473)]
    for entry in entries:
        wheel.add(entry)
    bucket = level(wheel, 3).buckets[1]
    assert all(e.list is bucket for e in entries)
    assert list(bucket) == entries
    assert counter.value == 4
    assert queue.offered == [(bucket, 400)]  # queued once for the four


# -- 31: the clock -------------------------------------------------------------------


def test_current_time_is_always_a_multiple_of_tick() -> None:
    wheel, _, _ = make_wheel(start_ms=23, tick_ms=7, wheel_size=4)
    assert wheel.current_time == 21
    wheel.add(entry_at(23 + 500))  # creates overflow levels
    for t in (30, 31, 55, 120, 333, 1000):
        wheel.advance_clock(t)
        w: TimingWheel | None = wheel
        while w is not None:
            assert w.current_time % w.tick_ms == 0
            assert w.current_time <= t
            w = w.overflow_wheel
    assert wheel.current_time == 994


def test_advance_clock_is_a_no_op_below_current_time_plus_tick() -> None:
    wheel, _, _ = make_wheel(start_ms=40, tick_ms=10)
    wheel.advance_clock(49)
    assert wheel.current_time == 40
    wheel.advance_clock(10)  # never backwards
    assert wheel.current_time == 40
    wheel.advance_clock(50)
    assert wheel.current_time == 50


def test_advance_clock_cascades_to_overflow_wheels_at_their_tick() -> None:
    wheel, _, _ = make_wheel()
    wheel.add(entry_at(450))
    wheel.advance_clock(419)
    assert [level(wheel, n).current_time for n in (1, 2, 3)] == [419, 400, 400]


# -- 32: expired and cancelled entries -----------------------------------------------


def test_add_returns_false_for_an_already_expired_entry() -> None:
    wheel, queue, counter = make_wheel(start_ms=100)
    assert not wheel.add(entry_at(100))  # the current bucket counts as expired
    assert not wheel.add(entry_at(5))
    assert wheel.add(entry_at(101))
    assert counter.value == 1
    assert len(queue.offered) == 1


def test_add_returns_false_for_a_cancelled_entry() -> None:
    wheel, _, counter = make_wheel()
    entry = entry_at(5)
    entry.timer_task.cancel()
    assert entry.cancelled
    assert not wheel.add(entry)
    assert counter.value == 0


# -- 34: when buckets are queued ------------------------------------------------------


def test_bucket_is_queued_only_when_its_expiration_changes() -> None:
    wheel, queue, _ = make_wheel()
    wheel.add(entry_at(5))
    wheel.add(entry_at(5))
    wheel.add(entry_at(6))
    assert [exp for _, exp in queue.offered] == [5, 6]
    bucket = wheel.buckets[5]
    bucket.flush(lambda e: None)
    wheel.advance_clock(6)
    wheel.add(entry_at(25))  # same slot, new round: queued again
    assert [exp for _, exp in queue.offered] == [5, 6, 25]
    assert queue.offered[-1][0] is bucket


# -- TimerTaskList -------------------------------------------------------------------


def test_task_list_expiration_starts_at_minus_one_and_set_reports_change() -> None:
    bucket = TimerTaskList(TaskCounter())
    assert bucket.expiration == -1
    assert bucket.set_expiration(40)
    assert not bucket.set_expiration(40)
    assert bucket.set_expiration(60)


def test_flush_removes_all_entries_calls_fn_on_each_and_resets_expiration() -> None:
    counter = TaskCounter()
    bucket = TimerTaskList(counter)
    entries = [entry_at(ms) for ms in (3, 1, 2)]
    for e in entries:
        bucket.add(e)
    bucket.set_expiration(1)
    seen: list[TimerTaskEntry] = []
    bucket.flush(seen.append)
    assert seen == entries
    assert bucket.is_empty and bucket.expiration == -1
    assert counter.value == 0
    assert all(e.list is None for e in entries)


def test_adding_an_entry_to_a_list_removes_it_from_its_previous_list() -> None:
    counter = TaskCounter()
    a, b = TimerTaskList(counter), TimerTaskList(counter)
    entry = entry_at(1)
    a.add(entry)
    b.add(entry)
    assert a.is_empty and list(b) == [entry]
    assert entry.list is b
    assert counter.value == 1


def test_remove_is_o1_unlinking_from_the_middle_and_ignores_foreign_entries() -> None:
    counter = TaskCounter()
    bucket, other = TimerTaskList(counter), TimerTaskList(counter)
    e1, e2, e3 = entry_at(1), entry_at(2), entry_at(3)
    for e in (e1, e2, e3):
        bucket.add(e)
    foreign = entry_at(4)
    other.add(foreign)
    bucket.remove(e2)
    bucket.remove(foreign)  # not ours: untouched
    assert list(bucket) == [e1, e3]
    assert foreign.list is other
    assert e2.next is e2 and e2.prev is e2 and e2.list is None
    assert counter.value == 3


def test_task_counter_calls_on_empty_when_the_last_entry_leaves() -> None:
    calls: list[int] = []
    counter = TaskCounter(lambda: calls.append(counter.value))
    bucket = TimerTaskList(counter)
    e1, e2 = entry_at(1), entry_at(2)
    bucket.add(e1)
    bucket.add(e2)
    e1.remove()
    assert calls == []
    e2.remove()
    assert calls == [0]


def test_rebinding_a_task_to_a_new_entry_cancels_the_old_entry() -> None:
    counter = TaskCounter()
    bucket = TimerTaskList(counter)
    task = RecordingTask(5, FakeClock(), [])
    old = TimerTaskEntry(task, 5)
    bucket.add(old)
    new = TimerTaskEntry(task, 9)
    assert old.cancelled and not new.cancelled
    assert old.list is None and bucket.is_empty
    assert task.timer_task_entry is new
