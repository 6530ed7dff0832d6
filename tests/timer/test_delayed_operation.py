"""DelayedOperation completion semantics (behaviour 35), injected clock, no loop."""

from __future__ import annotations

import logging

import pytest
from timer_helpers import FakeClock, FlagOp, drive

from kafkalite.timer import DelayedOperation, SystemTimer


def test_force_complete_returns_true_exactly_once_and_on_complete_runs_once() -> None:
    op = FlagOp(100)
    assert not op.is_completed
    assert op.force_complete()
    assert op.is_completed
    assert not op.force_complete()
    assert not op.force_complete()
    assert op.completions == 1
    assert op.expirations == 0


def test_on_expiration_runs_only_on_the_timeout_path(timer: SystemTimer, clock: FakeClock) -> None:
    timed_out = FlagOp(50)
    completed_early = FlagOp(50)
    timer.add(timed_out)
    timer.add(completed_early)
    completed_early.ready = True
    assert completed_early.try_complete()
    drive(timer, clock, 100)
    assert (timed_out.completions, timed_out.expirations) == (1, 1)
    assert (completed_early.completions, completed_early.expirations) == (1, 0)


def test_completed_operations_timer_entry_is_cancelled(
    timer: SystemTimer, clock: FakeClock
) -> None:
    op = FlagOp(1000)
    timer.add(op)
    entry = op.timer_task_entry
    assert entry is not None and entry.list is not None
    assert op.force_complete()
    assert entry.cancelled and entry.list is None
    assert op.timer_task_entry is None
    assert timer.size == 0
    drive(timer, clock, 2000)
    assert op.expirations == 0


def test_run_after_completion_does_nothing() -> None:
    op = FlagOp(10)
    op.force_complete()
    op.run()
    assert (op.completions, op.expirations) == (1, 0)


def test_try_complete_does_nothing_until_the_condition_holds() -> None:
    op = FlagOp(10)
    assert not op.try_complete()
    assert not op.is_completed
    op.ready = True
    assert op.try_complete()
    assert not op.try_complete()  # already completed: force_complete says no
    assert op.completions == 1


def test_reentrant_completion_from_on_complete_happens_once() -> None:
    class Reentrant(FlagOp):
        def on_complete(self) -> None:
            super().on_complete()
            # e.g. the response raises a high watermark that re-checks this op
            assert not self.force_complete()
            assert not self.safe_try_complete()
            self.run()

    op = Reentrant(10, ready=True)
    assert op.safe_try_complete()
    assert (op.completions, op.expirations) == (1, 0)


def test_safe_try_complete_skips_completed_ops_without_checking() -> None:
    op = FlagOp(10, ready=True)
    op.force_complete()
    checks = op.checks
    assert not op.safe_try_complete()
    assert op.checks == checks


def test_safe_try_complete_replays_a_check_requested_during_a_check() -> None:
    class SelfTriggering(FlagOp):
        def try_complete(self) -> bool:
            self.checks += 1
            if self.checks == 1:
                self.ready = True  # the check itself caused an event...
                assert not self.safe_try_complete()  # ...whose nested check is deferred
                return False
            return self.force_complete() if self.ready else False

    op = SelfTriggering(10)
    assert op.safe_try_complete()
    assert op.checks == 2 and op.completions == 1


def test_safe_try_complete_logs_a_failing_check_and_leaves_the_op_pending(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(FlagOp):
        def try_complete(self) -> bool:
            raise ValueError("bad check")

    op = Broken(10)
    with caplog.at_level(logging.ERROR, logger="kafkalite.timer.delayed_operation"):
        assert not op.safe_try_complete()
    assert not op.is_completed
    assert "bad check" in caplog.text


def test_on_complete_exception_is_logged_and_does_not_escape_force_complete(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Failing(FlagOp):
        def on_complete(self) -> None:
            raise RuntimeError("response failed")

    op = Failing(10)
    with caplog.at_level(logging.ERROR, logger="kafkalite.timer.delayed_operation"):
        assert op.force_complete()
    assert op.is_completed
    assert "response failed" in caplog.text


def test_delayed_operation_requires_try_complete_and_on_complete() -> None:
    class Incomplete(DelayedOperation):
        def try_complete(self) -> bool:
            return False

    with pytest.raises(TypeError):
        Incomplete(10)  # type: ignore[abstract]
