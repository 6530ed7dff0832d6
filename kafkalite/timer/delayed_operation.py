"""DelayedOperation: work that completes on an external event or on its timeout.

A subclass implements :meth:`~DelayedOperation.try_complete` (check the condition and
call :meth:`~DelayedOperation.force_complete` when it holds),
:meth:`~DelayedOperation.on_complete` (build the response; runs exactly once) and
optionally :meth:`~DelayedOperation.on_expiration` (timeout-only bookkeeping, after
``on_complete``). Subclasses must call ``super().__init__(delay_ms)``.

Concurrency: everything runs on the broker's single event loop, so no locks are
needed. What can still happen is re-entrancy (``on_complete`` raising a high
watermark that re-checks the same operation), and that is made safe: completion flips
a flag before ``on_complete`` runs, so it happens exactly once, and a check requested
while the operation is already being checked is replayed by the outer check instead
of recursing.

Awaiting: a request handler can wait for the outcome with ``await op`` (or
``await op.completion()``). The future is created lazily on first use, so operations
nobody awaits cost nothing. It resolves with ``None`` right after ``on_complete``,
or with the exception ``on_complete`` raised, so the handler sees the failure.
``await op`` shields the shared future: cancelling the waiting task (e.g. the client
went away) does not cancel the operation, which still completes or times out.

Exceptions from ``on_complete`` never escape ``force_complete`` (they would abort a
purgatory sweep that is completing other clients' operations); they are handed to
the future, or logged if nobody asked for one. Exceptions from ``try_complete`` in
:meth:`~DelayedOperation.safe_try_complete` are logged and the operation stays
pending until its timeout.
"""

from __future__ import annotations

import asyncio
import logging
from abc import abstractmethod
from collections.abc import Generator
from typing import Any

from kafkalite.timer.timer_task import TimerTask

__all__ = ["DelayedOperation"]

logger = logging.getLogger(__name__)


class DelayedOperation(TimerTask):
    """A timer task that may complete before its delay runs out."""

    __slots__ = ("_completed", "_checking", "_recheck", "_future", "_error")

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self._completed = False
        self._checking = False
        self._recheck = False
        self._future: asyncio.Future[None] | None = None
        self._error: BaseException | None = None

    @property
    def is_completed(self) -> bool:
        return self._completed

    # -- to implement -----------------------------------------------------------------

    @abstractmethod
    def try_complete(self) -> bool:
        """Check the completion condition; if met, return ``self.force_complete()``."""

    @abstractmethod
    def on_complete(self) -> None:
        """The completion logic (e.g. send the response); called exactly once."""

    def on_expiration(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Called after ``on_complete`` when completion came from the timeout."""

    # -- completion -------------------------------------------------------------------

    def force_complete(self) -> bool:
        """Complete now. True only for the call that actually completed the operation.

        Cancels the timer entry, then runs ``on_complete`` and resolves the future.
        """
        if self._completed:
            return False
        self._completed = True
        self.cancel()
        try:
            self.on_complete()
        except Exception as exc:
            self._error = exc
            fut = self._future
            if fut is None:
                logger.exception("on_complete of %r failed", self)
            elif not fut.done():
                fut.set_exception(exc)
        else:
            fut = self._future
            if fut is not None and not fut.done():
                fut.set_result(None)
        return True

    def run(self) -> None:
        """Timer expiry: complete, and if that was us, run the expiration hook."""
        if self.force_complete():
            self.on_expiration()

    def safe_try_complete(self) -> bool:
        """``try_complete`` guarded against completion, re-entrancy and exceptions.

        A call made while this operation is already being checked (from inside its
        own ``try_complete``) does not recurse: it asks the outer call to check again.
        """
        if self._completed:
            return False
        if self._checking:
            self._recheck = True
            return False
        self._checking = True
        try:
            while True:
                self._recheck = False
                try:
                    done = self.try_complete()
                except Exception:
                    logger.exception("try_complete of %r failed", self)
                    return False
                if done or self._completed or not self._recheck:
                    return done
        finally:
            self._checking = False

    # -- awaiting ---------------------------------------------------------------------

    def completion(self) -> asyncio.Future[None]:
        """Future resolved after ``on_complete`` (created on the running loop on first call)."""
        fut = self._future
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            self._future = fut
            if self._completed:
                if self._error is not None:
                    fut.set_exception(self._error)
                else:
                    fut.set_result(None)
        return fut

    def __await__(self) -> Generator[Any, None, None]:
        return asyncio.shield(self.completion()).__await__()
