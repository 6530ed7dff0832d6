"""DelayedOperationPurgatory: watch, check, purge, expire (behaviours 36-38)."""

from __future__ import annotations

import pytest
from timer_helpers import FakeClock, FlagOp, drive

from kafkalite.timer import DelayedOperationPurgatory, SystemTimer

TP0 = ("topic", 0)
TP1 = ("topic", 1)


@pytest.fixture
def purgatory(clock: FakeClock) -> DelayedOperationPurgatory[FlagOp]:
    return DelayedOperationPurgatory("Produce", clock=clock)


def test_try_complete_else_watch_returns_true_and_registers_nothing_if_first_check_succeeds(
    purgatory: DelayedOperationPurgatory[FlagOp],
) -> None:
    op = FlagOp(1000, ready=True)
    assert purgatory.try_complete_else_watch(op, [TP0, TP1])
    assert op.is_completed and op.checks == 1
    assert purgatory.watched == 0 and purgatory.watch_keys == 0
    assert purgatory.num_delayed == 0


def test_try_complete_else_watch_watches_under_every_key_and_adds_to_timer(
    purgatory: DelayedOperationPurgatory[FlagOp],
) -> None:
    op = FlagOp(1000)
    assert not purgatory.try_complete_else_watch(op, [TP0, TP1, "group-a"])
    assert op.checks == 2  # before and after watching
    assert purgatory.watched == 3 and purgatory.watch_keys == 3
    assert purgatory.num_delayed == 1
    assert op.timer_task_entry is not None and op.timer_task_entry.list is not None


def test_try_complete_else_watch_returns_true_when_the_second_check_succeeds(
    purgatory: DelayedOperationPurgatory[FlagOp],
) -> None:
    class SecondTime(FlagOp):
        def try_complete(self) -> bool:
            self.ready = self.checks >= 1
            return super().try_complete()

    op = SecondTime(1000)
    assert purgatory.try_complete_else_watch(op, [TP0])
    assert op.completions == 1
    assert purgatory.num_delayed == 0  # never reached the timer


def test_try_complete_else_watch_needs_keys_and_watches_duplicates_once(
    purgatory: DelayedOperationPurgatory[FlagOp],
) -> None:
    with pytest.raises(ValueError):
        purgatory.try_complete_else_watch(FlagOp(10), [])
    purgatory.try_complete_else_watch(FlagOp(10), [TP0, TP0])
    assert purgatory.watched == 1


def test_zero_delay_op_expires_inline(purgatory: DelayedOperationPurgatory[FlagOp]) -> None:
    op = FlagOp(0)
    assert not purgatory.try_complete_else_watch(op, [TP0])
    assert op.is_completed and op.expirations == 1
    assert purgatory.num_delayed == 0


def test_check_and_complete_completes_satisfied_ops_and_drops_them(
    purgatory: DelayedOperationPurgatory[FlagOp],
) -> None:
    ops = [FlagOp(1000) for _ in range(4)]
    for op in ops:
        purgatory.try_complete_else_watch(op, [TP0])
    ops[1].ready = ops[3].ready = True
    assert purgatory.check_and_complete(TP0) == 2
    assert [op.is_completed for op in ops] == [False, True, False, True]
    assert purgatory.watched == 2
    assert purgatory.num_delayed == 2  # completed ops left the timer
    assert purgatory.check_and_complete(TP0) == 0


def test_check_and_complete_removes_an_empty_watcher_list(
    purgatory: DelayedOperationPurgatory[FlagOp],
) -> None:
    op = FlagOp(1000)
    purgatory.try_complete_else_watch(op, [TP0])
    op.ready = True
    assert purgatory.check_and_complete(TP0) == 1
    assert purgatory.watch_keys == 0
    assert purgatory.check_and_complete(TP0) == 0
    assert purgatory.check_and_complete("never-watched") == 0


def test_op_completed_through_one_key_is_dropped_from_the_other_when_checked(
    purgatory: DelayedOperationPurgatory[FlagOp],
) -> None:
    op = FlagOp(1000)
    purgatory.try_complete_else_watch(op, [TP0, TP1])
    op.ready = True
    assert purgatory.check_and_complete(TP0) == 1
    assert purgatory.watched == 1  # still listed under TP1
    assert purgatory.check_and_complete(TP1) == 0  # already done, just dropped
    assert purgatory.watched == 0
    assert op.completions == 1


def test_expired_op_times_out_once_and_is_dropped_from_watchers_when_checked(
    purgatory: DelayedOperationPurgatory[FlagOp], clock: FakeClock
) -> None:
    op = FlagOp(30)
    purgatory.try_complete_else_watch(op, [TP0])
    drive(purgatory.timer, clock, 29)
    assert not op.is_completed
    drive(purgatory.timer, clock, 30)
    assert (op.completions, op.expirations) == (1, 1)
    assert purgatory.num_delayed == 0
    assert purgatory.watched == 1
    op.ready = True
    assert purgatory.check_and_complete(TP0) == 0
    assert purgatory.watched == 0


def test_completed_ops_are_purged_once_their_estimate_exceeds_purge_interval(
    clock: FakeClock,
) -> None:
    purgatory: DelayedOperationPurgatory[FlagOp] = DelayedOperationPurgatory(
        "Fetch", purge_interval=10, clock=clock
    )
    done = []
    for i in range(10):
        op = FlagOp(1000)
        purgatory.try_complete_else_watch(op, [("t", i), "shared"])
        done.append(op)
    for op in done:
        op.force_complete()  # completed without any check on their keys
    assert purgatory.watched == 20
    assert purgatory.num_delayed == 0

    first = FlagOp(1000)
    purgatory.try_complete_else_watch(first, ["other"])  # 11 watched - 1 delayed: not > 10
    assert purgatory.watched == 21
    first.force_complete()
    purgatory.try_complete_else_watch(FlagOp(1000), ["other"])  # 12 - 1 > 10: purge
    assert purgatory.watched == 1
    assert purgatory.watch_keys == 1


def test_purge_completed_sweeps_all_watcher_lists(
    purgatory: DelayedOperationPurgatory[FlagOp],
) -> None:
    a, b = FlagOp(1000), FlagOp(1000)
    purgatory.try_complete_else_watch(a, [TP0, TP1])
    purgatory.try_complete_else_watch(b, [TP1])
    a.force_complete()
    assert purgatory.purge_completed() == 2
    assert purgatory.watched == 1 and purgatory.watch_keys == 1


def test_reentrant_check_on_the_same_key_reconsiders_earlier_ops(
    purgatory: DelayedOperationPurgatory[FlagOp],
) -> None:
    first = FlagOp(1000)

    class Trigger(FlagOp):
        def on_complete(self) -> None:
            super().on_complete()
            first.ready = True  # completing this op satisfies one checked earlier
            assert purgatory.check_and_complete(TP0) == 0  # folded into the outer sweep

    trigger = Trigger(1000)
    purgatory.try_complete_else_watch(first, [TP0])
    purgatory.try_complete_else_watch(trigger, [TP0])
    trigger.ready = True
    assert purgatory.check_and_complete(TP0) == 2
    assert first.completions == 1 and trigger.completions == 1
    assert purgatory.watch_keys == 0


def test_op_watched_from_on_complete_during_a_sweep_is_kept(
    purgatory: DelayedOperationPurgatory[FlagOp],
) -> None:
    follow_up = FlagOp(1000)

    class Spawner(FlagOp):
        def on_complete(self) -> None:
            super().on_complete()
            purgatory.try_complete_else_watch(follow_up, [TP0])

    spawner = Spawner(1000)
    purgatory.try_complete_else_watch(spawner, [TP0])
    spawner.ready = True
    assert purgatory.check_and_complete(TP0) == 1
    assert purgatory.watched == 1
    follow_up.ready = True
    assert purgatory.check_and_complete(TP0) == 1


def test_cancel_for_key_unwatches_and_untimes_pending_ops(
    purgatory: DelayedOperationPurgatory[FlagOp], clock: FakeClock
) -> None:
    pending, done = FlagOp(100), FlagOp(100)
    purgatory.try_complete_else_watch(pending, [TP0])
    purgatory.try_complete_else_watch(done, [TP0])
    done.force_complete()
    assert purgatory.cancel_for_key(TP0) == [pending]
    assert purgatory.watch_keys == 0 and purgatory.num_delayed == 0
    drive(purgatory.timer, clock, 200)
    assert not pending.is_completed  # the caller owns it now
    assert purgatory.cancel_for_key(TP0) == []


def test_produce_fetch_and_delete_records_purgatories_have_separate_timers(
    clock: FakeClock,
) -> None:
    produce: DelayedOperationPurgatory[FlagOp] = DelayedOperationPurgatory("Produce", clock=clock)
    fetch: DelayedOperationPurgatory[FlagOp] = DelayedOperationPurgatory("Fetch", clock=clock)
    delete: DelayedOperationPurgatory[FlagOp] = DelayedOperationPurgatory(
        "DeleteRecords", clock=clock
    )
    assert len({id(produce.timer), id(fetch.timer), id(delete.timer)}) == 3

    p, f, d = FlagOp(10), FlagOp(20), FlagOp(30)
    produce.try_complete_else_watch(p, [TP0])
    fetch.try_complete_else_watch(f, [TP0])
    delete.try_complete_else_watch(d, [TP0])
    assert (produce.num_delayed, fetch.num_delayed, delete.num_delayed) == (1, 1, 1)

    clock.now = 100
    produce.timer.advance_clock()  # only the produce purgatory's reaper ran
    assert p.expirations == 1 and not f.is_completed and not d.is_completed

    f.ready = True
    assert produce.check_and_complete(TP0) == 0  # watchers are per purgatory too
    assert fetch.check_and_complete(TP0) == 1


def test_a_timer_can_be_passed_in_and_is_not_shut_down_by_the_purgatory(
    clock: FakeClock,
) -> None:
    timer = SystemTimer(clock=clock)
    purgatory: DelayedOperationPurgatory[FlagOp] = DelayedOperationPurgatory("Heartbeat", timer)
    assert purgatory.timer is timer
    purgatory.try_complete_else_watch(FlagOp(10), ["group"])
    purgatory.shutdown()
    drive(timer, clock, 10)
    assert timer.size == 0
    with pytest.raises(ValueError):
        DelayedOperationPurgatory("x", timer, clock=clock)


# -- completion and expiry in the same bucket and tick ----------------------------------


class Sibling(FlagOp):
    """On completion force-completes ``sibling`` (e.g. one response satisfying another)."""

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.sibling: FlagOp | None = None
        self.completed_sibling: bool | None = None

    def on_complete(self) -> None:
        super().on_complete()
        if self.sibling is not None:
            self.completed_sibling = self.sibling.force_complete()


def test_expiring_op_completing_a_later_sibling_of_its_bucket_runs_each_once(
    purgatory: DelayedOperationPurgatory[FlagOp], clock: FakeClock
) -> None:
    first, second = Sibling(30), FlagOp(30)
    first.sibling = second
    purgatory.try_complete_else_watch(first, [TP0])
    purgatory.try_complete_else_watch(second, [TP1])
    assert first.timer_task_entry.list is second.timer_task_entry.list  # same bucket
    drive(purgatory.timer, clock, 30)  # one tick expires both
    assert first.completed_sibling is True
    assert (first.completions, first.expirations) == (1, 1)
    # completed by its sibling while the bucket was being flushed: not a timeout
    assert (second.completions, second.expirations) == (1, 0)
    assert purgatory.num_delayed == 0
    drive(purgatory.timer, clock, 100)
    assert (second.completions, second.expirations) == (1, 0)


def test_expiring_op_completing_an_already_expired_sibling_changes_nothing(
    purgatory: DelayedOperationPurgatory[FlagOp], clock: FakeClock
) -> None:
    first, second = FlagOp(30), Sibling(30)
    second.sibling = first  # first expires before second runs
    purgatory.try_complete_else_watch(first, [TP0])
    purgatory.try_complete_else_watch(second, [TP0])
    drive(purgatory.timer, clock, 30)
    assert second.completed_sibling is False
    assert (first.completions, first.expirations) == (1, 1)
    assert (second.completions, second.expirations) == (1, 1)


def test_expiry_that_checks_a_key_completes_a_due_op_through_its_watcher_once(
    purgatory: DelayedOperationPurgatory[FlagOp], clock: FakeClock
) -> None:
    """An expiring op's hook checks a key (as a timed-out produce would after moving a
    watermark); an op of the same tick that is now satisfied completes there, once,
    and its own expiry is then skipped."""
    waiting = FlagOp(30)

    class Checker(FlagOp):
        def on_expiration(self) -> None:
            super().on_expiration()
            waiting.ready = True
            self.checked = purgatory.check_and_complete(TP1)

    checker = Checker(30)
    purgatory.try_complete_else_watch(checker, [TP0])
    purgatory.try_complete_else_watch(waiting, [TP1])
    drive(purgatory.timer, clock, 30)
    assert checker.checked == 1
    assert (checker.completions, checker.expirations) == (1, 1)
    assert (waiting.completions, waiting.expirations) == (1, 0)
    assert purgatory.num_delayed == 0 and purgatory.check_and_complete(TP1) == 0


def test_op_completed_by_check_while_its_own_expiry_is_running_completes_once(
    purgatory: DelayedOperationPurgatory[FlagOp], clock: FakeClock
) -> None:
    """on_complete of an expiring op re-checks the op's own key: it is already completed
    there, so nothing runs twice."""

    class SelfCheck(FlagOp):
        def on_complete(self) -> None:
            super().on_complete()
            self.ready = True
            self.checked = purgatory.check_and_complete(TP0)

    op = SelfCheck(30)
    purgatory.try_complete_else_watch(op, [TP0])
    drive(purgatory.timer, clock, 30)
    assert op.checked == 0
    assert (op.completions, op.expirations) == (1, 1)
    assert purgatory.watched == 0
