"""Property tests: random delays and cancellations against a hand-driven clock."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from timer_helpers import FakeClock

from kafkalite.timer import SystemTimer, TimerTask


@dataclass(slots=True)
class Plan:
    add_at: int
    delay_ms: int
    cancel_after: int | None  # ms after add_at, or never


class Probe(TimerTask):
    __slots__ = ("clock", "fired_at")

    def __init__(self, delay_ms: int, clock: FakeClock) -> None:
        super().__init__(delay_ms)
        self.clock = clock
        self.fired_at: list[int] = []

    def run(self) -> None:
        self.fired_at.append(self.clock())


plans = st.lists(
    st.builds(
        Plan,
        add_at=st.integers(0, 300),
        delay_ms=st.one_of(st.integers(0, 30), st.integers(0, 9000)),
        cancel_after=st.one_of(st.none(), st.integers(0, 9000)),
    ),
    min_size=1,
    max_size=40,
)


def simulate(
    timer: SystemTimer, clock: FakeClock, plan: list[Plan], steps: list[int]
) -> tuple[list[Probe], list[int], list[int | None]]:
    """Drive ``clock`` through ``steps``; at each: expire, then add, then cancel.

    A task is added at the first step at or after its ``add_at``; returns the probes,
    the clock time each was added at, and when each was cancelled (if it was).
    """
    probes = [Probe(p.delay_ms, clock) for p in plan]
    added_at = [-1] * len(plan)
    cancelled_at: list[int | None] = [None] * len(plan)
    added = [False] * len(plan)
    for now in steps:
        clock.now = now
        timer.advance_clock()
        for i, p in enumerate(plan):
            if not added[i] and p.add_at <= now:
                added[i] = True
                added_at[i] = now
                timer.add(probes[i])
        for i, p in enumerate(plan):
            if (
                added[i]
                and cancelled_at[i] is None
                and p.cancel_after is not None
                and added_at[i] + p.cancel_after <= now
            ):
                probes[i].cancel()
                cancelled_at[i] = now
    assert all(added)
    return probes, added_at, cancelled_at


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans)
def test_driving_the_clock_fires_exactly_the_uncancelled_tasks_within_one_tick(
    plan: list[Plan],
) -> None:
    clock = FakeClock(0)
    timer = SystemTimer(clock=clock)  # tick 1, wheel size 20
    horizon = max(p.add_at + p.delay_ms for p in plan) + 2
    probes, added_at, cancelled_at = simulate(timer, clock, plan, list(range(horizon + 1)))

    for p, probe, add_time, cancel_time in zip(plan, probes, added_at, cancelled_at, strict=True):
        expiration = add_time + p.delay_ms
        if cancel_time is not None and cancel_time < expiration:
            assert probe.fired_at == [], "a task cancelled before expiry never runs"
        else:
            assert len(probe.fired_at) == 1, "every other task runs exactly once"
            fired = probe.fired_at[0]
            assert expiration <= fired <= expiration + timer.wheel.tick_ms
            assert fired == expiration  # with a 1 ms tick and 1 ms steps: exactly on time
            if cancel_time is not None:
                assert fired <= cancel_time
    assert timer.size == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=plans,
    base=st.integers(0, 10**7),
    tick_ms=st.integers(1, 10),
    wheel_size=st.integers(2, 12),
    jumps=st.lists(st.integers(1, 60), min_size=1, max_size=20),
)
def test_any_tick_size_and_irregular_clock_jumps_never_fire_early_or_twice(
    plan: list[Plan], base: int, tick_ms: int, wheel_size: int, jumps: list[int]
) -> None:
    plan = [Plan(p.add_at + base, p.delay_ms, p.cancel_after) for p in plan]
    clock = FakeClock(base)
    timer = SystemTimer(tick_ms, wheel_size, clock=clock)
    horizon = max(p.add_at for p in plan) + max(jumps) + max(p.delay_ms for p in plan) + tick_ms
    steps, now, i = [], base, 0
    while now <= horizon:
        steps.append(now)
        now += jumps[i % len(jumps)]
        i += 1
    steps.append(now)
    probes, added_at, cancelled_at = simulate(timer, clock, plan, steps)

    for p, probe, add_time, cancel_time in zip(plan, probes, added_at, cancelled_at, strict=True):
        expiration = add_time + p.delay_ms
        due = expiration - expiration % tick_ms  # Kafka's wheel rounds down to the tick
        if cancel_time is None:
            assert len(probe.fired_at) == 1
        else:
            assert len(probe.fired_at) <= 1
        for fired in probe.fired_at:
            assert fired >= due, "never before its (tick-rounded) expiration"
            first_step_after = min(s for s in steps if s >= max(due, add_time + 1))
            assert fired <= first_step_after, "at the first clock step that makes it due"
            if cancel_time is not None:
                assert fired <= cancel_time
    assert timer.size == 0
