"""Structured fuzzing of a broker over TCP: attack classes, a runner, and a registry.

``run_fuzz(FuzzTarget(host, port, {}))`` sends frames of every registered
attack class (``ATTACKS``) and reports, per class, how many the broker
answered, how many closed the connection, and any it did neither for. Frame
classes live in :mod:`~kafkalite.testing.fuzz.frame_attacks`; the connection
patterns of :mod:`kafkalite.testing.hostile_connections` are registered as
:class:`SocketAttack` classes in :mod:`~kafkalite.testing.fuzz.socket_attacks`. Used by
``tests/fuzz`` (a short run in CI) and ``bench/fuzz_bench.py`` (a long one
against a broker process with a canary producer and consumer).
"""

from __future__ import annotations

from kafkalite.testing.fuzz import frame_attacks as frame_attacks
from kafkalite.testing.fuzz import socket_attacks as socket_attacks
from kafkalite.testing.fuzz.attack import (
    ATTACKS,
    AttackStats,
    FrameAttack,
    FuzzFrame,
    FuzzTarget,
    SocketAttack,
    register,
)
from kafkalite.testing.fuzz.runner import FuzzReport, read_api_versions, run_fuzz
from kafkalite.testing.fuzz.values import NamePools

__all__ = [
    "ATTACKS",
    "AttackStats",
    "FrameAttack",
    "FuzzFrame",
    "FuzzReport",
    "FuzzTarget",
    "NamePools",
    "SocketAttack",
    "frame_attacks",
    "read_api_versions",
    "register",
    "run_fuzz",
    "socket_attacks",
]
