"""DelayedOperationPurgatory: where delayed operations wait for an event or their timeout.

Operations are watched under keys (any hashable: ``(topic, partition)`` tuples,
group ids ...). An event on a key (high watermark moved, log appended, member joined)
calls :meth:`DelayedOperationPurgatory.check_and_complete`, which retries the
operations watching that key. Each operation is also in the purgatory's own
:class:`SystemTimer`, which force-completes it at its deadline.

An operation completed through one key (or by its timer) stays in the other keys'
watcher lists until they are next checked; once the estimated number of such dead
entries exceeds ``purge_interval``, all watcher lists are swept.

Single event loop, no locks; re-entrant calls (an ``on_complete`` that triggers a
check on a key being checked) are safe: the inner check is folded into the outer
sweep, which makes another pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

from kafkalite.timer.delayed_operation import DelayedOperation
from kafkalite.timer.system_timer import Clock, SystemTimer

__all__ = ["DelayedOperationPurgatory"]

T = TypeVar("T", bound=DelayedOperation)


class _Watchers(Generic[T]):
    """Operations watching one key, in watch order."""

    __slots__ = ("ops", "busy", "recheck")

    def __init__(self) -> None:
        self.ops: list[T] = []
        self.busy = False  # a sweep of this list is on the stack
        self.recheck = False  # a check was requested during that sweep

    def try_complete_watched(self) -> int:
        """Try every pending operation; drop completed ones. Returns how many we completed."""
        if self.busy:
            self.recheck = True
            return 0
        self.busy = True
        completed = 0
        try:
            while True:
                self.recheck = False
                ops = self.ops
                done_this_pass = 0
                i = 0
                # Index loop over the live list: operations watched re-entrantly are seen.
                while i < len(ops):
                    op = ops[i]
                    i += 1
                    if not op.is_completed and op.safe_try_complete():
                        done_this_pass += 1
                self.ops = [op for op in ops if not op.is_completed]
                completed += done_this_pass
                # Another pass only if a completion here may have satisfied an earlier op.
                if not (self.recheck and done_this_pass):
                    break
        finally:
            self.busy = False
            self.recheck = False
        return completed

    def purge_completed(self) -> int:
        before = len(self.ops)
        if not self.busy:  # a running sweep compacts the list itself
            self.ops = [op for op in self.ops if not op.is_completed]
        return before - len(self.ops)


class DelayedOperationPurgatory(Generic[T]):
    """Watcher lists keyed by any hashable, plus a timer for the timeouts."""

    def __init__(
        self,
        name: str,
        timer: SystemTimer | None = None,
        purge_interval: int = 1000,
        *,
        clock: Clock | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if timer is not None and (clock is not None or loop is not None):
            raise ValueError("pass either a timer or clock/loop for a new one, not both")
        self.name = name
        self._owns_timer = timer is None
        self._timer = timer if timer is not None else SystemTimer(clock=clock, loop=loop)
        self.purge_interval = purge_interval
        self._watchers: dict[Hashable, _Watchers[T]] = {}
        # Operations ever watched minus those known gone: drives the purge (Kafka's
        # estimatedTotalOperations).
        self._estimated_total = 0

    @property
    def timer(self) -> SystemTimer:
        return self._timer

    @property
    def num_delayed(self) -> int:
        """Operations waiting in the timer (Kafka's NumDelayedOperations)."""
        return self._timer.size

    @property
    def watched(self) -> int:
        """Entries across all watcher lists, completed-but-unpurged included (PurgatorySize)."""
        return sum(len(w.ops) for w in self._watchers.values())

    @property
    def watch_keys(self) -> int:
        """Number of keys with a watcher list."""
        return len(self._watchers)

    def try_complete_else_watch(self, op: T, keys: Iterable[Hashable]) -> bool:
        """Complete ``op`` now if possible, else watch it under every key and time it.

        Returns True if the operation was completed by this call. If the first check
        succeeds nothing is registered. The second check, after watching, closes the
        window in which an event on a key could have been missed.
        """
        unique_keys = list(dict.fromkeys(keys))
        if not unique_keys:
            raise ValueError("the watch key list can't be empty")
        if op.safe_try_complete():
            return True
        watched = False
        for key in unique_keys:
            if op.is_completed:  # completed re-entrantly while we were watching
                return False
            watchers = self._watchers.get(key)
            if watchers is None:
                watchers = self._watchers[key] = _Watchers()
            watchers.ops.append(op)
            if not watched:
                watched = True
                self._estimated_total += 1
        if op.safe_try_complete():
            return True
        if not op.is_completed:
            self._timer.add(op)
            if op.is_completed:  # expired inline by add (delay <= 0)
                op.cancel()
        self._maybe_purge()
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Retry the operations watching ``key``; returns how many completed."""
        watchers = self._watchers.get(key)
        if watchers is None:
            return 0
        completed = watchers.try_complete_watched()
        if not watchers.ops and not watchers.busy and self._watchers.get(key) is watchers:
            del self._watchers[key]
        return completed

    def cancel_for_key(self, key: Hashable) -> list[T]:
        """Stop watching ``key`` and take its pending operations out of the timer.

        The operations are returned uncompleted; the caller must complete them (they
        will no longer time out). Other keys' watcher lists keep them until purged.
        """
        watchers = self._watchers.pop(key, None)
        if watchers is None:
            return []
        pending = [op for op in watchers.ops if not op.is_completed]
        for op in pending:
            op.cancel()
        return pending

    def purge_completed(self) -> int:
        """Drop completed operations from every watcher list; returns how many."""
        purged = 0
        for key, watchers in list(self._watchers.items()):
            purged += watchers.purge_completed()
            if not watchers.ops and not watchers.busy:
                del self._watchers[key]
        return purged

    def _maybe_purge(self) -> None:
        num_delayed = self._timer.size
        if self._estimated_total - num_delayed > self.purge_interval:
            self._estimated_total = num_delayed
            self.purge_completed()

    def shutdown(self) -> None:
        """Stop the timer this purgatory created (a timer passed in is left alone)."""
        if self._owns_timer:
            self._timer.shutdown()

    def __repr__(self) -> str:
        return (
            f"DelayedOperationPurgatory({self.name!r}, delayed={self.num_delayed}, "
            f"keys={len(self._watchers)})"
        )
