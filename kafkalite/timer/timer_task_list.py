"""TimerTaskList: one bucket of a timing wheel.

A circular doubly-linked list with a sentinel root, so add and remove are O(1) and
need no empty-list special cases. The bucket's ``expiration`` is the start of the
time slot it currently stands for (``-1`` when it stands for none); the timer queues
a bucket only when that value changes, and :meth:`TimerTaskList.flush` resets it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kafkalite.timer.timer_task import TimerTask, TimerTaskEntry

__all__ = ["TaskCounter", "TimerTaskList"]


class TaskCounter:
    """Number of entries in all buckets of one timer (Kafka's shared AtomicInteger).

    ``on_empty`` is called when the count drops to zero, which lets the timer disarm
    its event-loop callback as soon as the last pending task is cancelled.
    """

    __slots__ = ("value", "on_empty")

    def __init__(self, on_empty: Callable[[], None] | None = None) -> None:
        self.value = 0
        self.on_empty = on_empty


class _NoTask(TimerTask):
    """Task of the sentinel roots; never bound to an entry, never run."""

    __slots__ = ()

    def run(self) -> None:  # pragma: no cover - never scheduled
        raise AssertionError("sentinel task run")


_NO_TASK = _NoTask(-1)


def _new_root() -> TimerTaskEntry:
    # Built without __init__ so the shared sentinel task is never bound to a root.
    root = TimerTaskEntry.__new__(TimerTaskEntry)
    root.timer_task = _NO_TASK
    root.expiration_ms = -1
    root.list = None
    root.next = root
    root.prev = root
    return root


class TimerTaskList:
    """A bucket: entries whose expirations fall in one slot of one wheel."""

    __slots__ = ("_task_counter", "_root", "expiration")

    def __init__(self, task_counter: TaskCounter) -> None:
        self._task_counter = task_counter
        self._root = _new_root()
        self.expiration = -1

    def set_expiration(self, expiration_ms: int) -> bool:
        """Set the bucket's expiration; True only if it changed (i.e. must be queued)."""
        if self.expiration != expiration_ms:
            self.expiration = expiration_ms
            return True
        return False

    def add(self, entry: TimerTaskEntry) -> None:
        """Append ``entry``, first removing it from whatever list holds it."""
        if entry.list is not None:
            entry.list.remove(entry)
        root = self._root
        tail = root.prev
        entry.next = root
        entry.prev = tail
        entry.list = self
        tail.next = entry
        root.prev = entry
        self._task_counter.value += 1

    def remove(self, entry: TimerTaskEntry) -> None:
        """Unlink ``entry`` if it belongs to this list."""
        if entry.list is not self:
            return
        nxt = entry.next
        prev = entry.prev
        nxt.prev = prev
        prev.next = nxt
        entry.next = entry
        entry.prev = entry
        entry.list = None
        counter = self._task_counter
        counter.value -= 1
        if counter.value == 0 and counter.on_empty is not None:
            counter.on_empty()

    def flush(self, fn: Callable[[TimerTaskEntry], None]) -> None:
        """Remove every entry, pass each to ``fn`` (re-insert or run), reset expiration."""
        # Detach the whole chain first (one counter update instead of one per entry).
        # Each entry is unlinked before any fn runs, so a task that cancels a later
        # entry of this bucket merely unbinds it and fn then sees it as cancelled.
        root = self._root
        entries = []
        entry = root.next
        while entry is not root:
            nxt = entry.next
            entry.next = entry
            entry.prev = entry
            entry.list = None
            entries.append(entry)
            entry = nxt
        root.next = root
        root.prev = root
        if entries:
            counter = self._task_counter
            counter.value -= len(entries)
            if counter.value == 0 and counter.on_empty is not None:
                counter.on_empty()
        for entry in entries:
            fn(entry)
        self.expiration = -1

    @property
    def is_empty(self) -> bool:
        return self._root.next is self._root

    def __iter__(self) -> Iterator[TimerTaskEntry]:
        """Entries in insertion order (a snapshot, safe against concurrent removal)."""
        entries = []
        root = self._root
        entry = root.next
        while entry is not root:
            entries.append(entry)
            entry = entry.next
        return iter(entries)

    def __repr__(self) -> str:
        return f"TimerTaskList(expiration={self.expiration}, empty={self.is_empty})"
