"""Produce appends that must wait, kept in arrival order per partition.

Almost every produced batch is checked and appended inside its request's
dispatch, synchronously, in the order the requests arrive. A batch too large to
check in one step (one that inflates past a few MiB, or holds more than ~32k
records: see :mod:`kafkalite.protocol.record_validator`) is checked in slices
on the event loop, so that one request cannot hold every other client up (a
gigabyte-inflating batch takes seconds). Its request's appends then happen
later, and so must every later append to the same partitions: a producer
pipelines up to five requests, and an idempotent one's sequence numbers must
reach the log in order. Kafka gets the same order from its log lock, which its
request handlers hold while LogValidator runs.

Each partition with a deferred append has a *tail*: a future done once the
last request queued for it has appended. A request that touches a partition
with a tail is deferred too, and appends after the tails it found (it may run
its own checks meanwhile). Only two requests check in slices at a time, so
many concurrent bombs cost two decompression windows, not one per request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Generator
from typing import Any

log = logging.getLogger(__name__)

#: Requests whose batches are checked in slices at once; the others wait for a turn.
CONCURRENT_CHECKS = 2

Check = Generator[None, None, Any]
TopicPartition = tuple[str, int]


class AppendSequencer:
    """Per-broker: the partitions with deferred appends and the checks running."""

    __slots__ = ("_tails", "_turns")

    def __init__(self) -> None:
        self._tails: dict[TopicPartition, asyncio.Future[None]] = {}
        self._turns = asyncio.Semaphore(CONCURRENT_CHECKS)

    def busy(self, partitions: Collection[TopicPartition]) -> bool:
        """Must an append to these partitions wait for an earlier, deferred one?"""
        tails = self._tails
        return bool(tails) and any(tp in tails for tp in partitions)

    def defer(
        self,
        partitions: Collection[TopicPartition],
        checks: dict[TopicPartition, Check],
        append: Callable[[dict[TopicPartition, Any]], Any],
    ) -> asyncio.Future[Any]:
        """Finish ``checks`` in slices, then call ``append`` with their outcomes (each
        check's result, or the exception it raised) once every earlier deferred
        append to ``partitions`` is done. The future's result is ``append``'s (awaited
        when it is awaitable: acks=all)."""
        loop = asyncio.get_running_loop()
        tails = self._tails
        earlier = {tails[tp] for tp in partitions if tp in tails}
        mine: asyncio.Future[None] = loop.create_future()
        for tp in partitions:
            tails[tp] = mine
        return loop.create_task(self._run(partitions, checks, earlier, mine, append))

    async def _run(
        self,
        partitions: Collection[TopicPartition],
        checks: dict[TopicPartition, Check],
        earlier: set[asyncio.Future[None]],
        mine: asyncio.Future[None],
        append: Callable[[dict[TopicPartition, Any]], Any],
    ) -> Any:
        try:
            outcomes = await self._finish(checks) if checks else {}
            for tail in earlier:
                await tail
            result = append(outcomes)
        finally:
            mine.set_result(None)
            tails = self._tails
            for tp in partitions:
                if tails.get(tp) is mine:
                    del tails[tp]
        if asyncio.isfuture(result) or asyncio.iscoroutine(result):
            return await result
        return result

    async def _finish(self, checks: dict[TopicPartition, Check]) -> dict[TopicPartition, Any]:
        """Run each check to its end, one slice per event-loop iteration."""
        outcomes: dict[TopicPartition, Any] = {}
        async with self._turns:
            for tp, check in checks.items():
                while True:
                    try:
                        next(check)
                    except StopIteration as done:
                        outcomes[tp] = done.value
                        break
                    except Exception as e:  # the check's verdict (or a bug) for this partition
                        outcomes[tp] = e
                        break
                    await asyncio.sleep(0)
        return outcomes
