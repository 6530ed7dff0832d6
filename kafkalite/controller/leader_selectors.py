"""Partition leader selection strategies (seed 000 §6.4.3, 002-controller §8).

Each takes the assignment (AR) order as the preference order: AR is fixed at
assignment time while the ISR order may change, so "first live AR replica in
the ISR" is deterministic across controllers.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

NO_LEADER = -1


def offline_partition_leader(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], unclean: bool
) -> tuple[int, list[int]]:
    """Leader and new ISR after the leader went offline (or at creation).

    First live replica in AR order that is in the ISR. With none: if unclean
    election is enabled, the first live AR replica with ISR [leader]; otherwise
    no leader and the ISR is left as it was.
    """
    live_isr = [r for r in isr if r in live]
    for r in assignment:
        if r in live and r in live_isr:
            return r, live_isr
    if unclean:
        for r in assignment:
            if r in live:
                return r, [r]
    return NO_LEADER, list(isr)


def reassigned_partition_leader(
    reassigned: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> int:
    for r in reassigned:
        if r in live and r in isr:
            return r
    return NO_LEADER


def preferred_replica_leader(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> int:
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return NO_LEADER


def controlled_shutdown_leader(
    assignment: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    shutting_down: Collection[int],
) -> tuple[int, list[int]]:
    new_isr = [r for r in isr if r not in shutting_down]
    for r in assignment:
        if r in live and r in new_isr:
            return r, new_isr
    return NO_LEADER, new_isr
