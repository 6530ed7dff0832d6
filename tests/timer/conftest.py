"""Fixtures for the timer tests."""

from __future__ import annotations

import pytest
from timer_helpers import FakeClock

from kafkalite.timer import SystemTimer


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(0)


@pytest.fixture
def timer(clock: FakeClock) -> SystemTimer:
    return SystemTimer(clock=clock)
