"""TimerTask and TimerTaskEntry: a unit of delayed work and its place in a wheel bucket.

A task is bound to at most one entry at a time. Re-scheduling a task (e.g. when a
bucket is flushed and its entries are re-inserted one level down) creates nothing
new: the same entry moves from list to list. An entry whose task has since been bound
to another entry, or unbound by :meth:`TimerTask.cancel`, is *cancelled* and is
dropped the next time the wheel sees it.

Everything runs on one asyncio event loop, so there are no locks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkalite.timer.timer_task_list import TimerTaskList

__all__ = ["TimerTask", "TimerTaskEntry"]


class TimerTask(ABC):
    """Work to run ``delay_ms`` after it is added to a timer, unless cancelled first."""

    __slots__ = ("delay_ms", "_timer_task_entry")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self._timer_task_entry: TimerTaskEntry | None = None

    @property
    def timer_task_entry(self) -> TimerTaskEntry | None:
        """The entry currently holding this task in a timer, if any."""
        return self._timer_task_entry

    def cancel(self) -> None:
        """Take the task out of its timer in O(1); it will never run from there."""
        entry = self._timer_task_entry
        if entry is not None:
            self._timer_task_entry = None
            entry.remove()

    def _set_timer_task_entry(self, entry: TimerTaskEntry) -> None:
        # Binding a new entry detaches the old one, so a task is never in two buckets.
        old = self._timer_task_entry
        if old is not None and old is not entry:
            old.remove()
        self._timer_task_entry = entry

    @abstractmethod
    def run(self) -> None:
        """Called on the event loop when the task expires."""


class TimerTaskEntry:
    """A node of a :class:`TimerTaskList`: one task and its absolute expiration.

    An entry that is not in any list links to itself (``next is prev is self``), which
    keeps the link fields non-optional.
    """

    __slots__ = ("timer_task", "expiration_ms", "list", "next", "prev")

    def __init__(self, timer_task: TimerTask, expiration_ms: int) -> None:
        self.timer_task = timer_task
        self.expiration_ms = expiration_ms
        self.list: TimerTaskList | None = None
        self.next: TimerTaskEntry = self
        self.prev: TimerTaskEntry = self
        # Bind (inlined _set_timer_task_entry: this is on every add).
        old = timer_task._timer_task_entry
        if old is not None:
            old.remove()
        timer_task._timer_task_entry = self

    @property
    def cancelled(self) -> bool:
        """True once the task was cancelled or re-bound to another entry."""
        return self.timer_task._timer_task_entry is not self

    def remove(self) -> None:
        """Unlink from the list holding this entry (no-op when unlinked)."""
        lst = self.list
        if lst is not None:
            lst.remove(self)

    def __repr__(self) -> str:
        return f"TimerTaskEntry(expiration_ms={self.expiration_ms}, task={self.timer_task!r})"
