"""One reload at a time for state kept in the metadata store and watched there.

Quotas, SCRAM credentials, ACLs and client-metrics subscriptions each keep a copy of
znodes and reload it when a change-notification watch fires (Kafka's
``/config/changes`` and ``/kafka-acl-changes``). Watches fire on the store's thread or
loop, often several in a burst, and a reload itself re-arms the watch; so the rule is
the same for all of them: never two reloads at once, one more after a burst that came
during a reload, and a retry after a store error (a session move, a dropped
connection) instead of losing the change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kafkalite.metadata.store import MetadataStoreError

log = logging.getLogger(__name__)


class ChangeWatcher:
    """Runs ``reload`` when :meth:`on_change` is called, coalescing calls.

    ``reload`` re-arms the watch itself (it passes :meth:`on_change` as the watch of
    the children it reads), so a change between its read and the next one is not lost.
    """

    def __init__(
        self, reload: Callable[[], Awaitable[None]], what: str, retry_s: float = 1.0
    ) -> None:
        self._reload_fn = reload
        self._what = what
        self._retry_s = retry_s
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self._stopped = False

    def on_change(self, _event: Any = None) -> None:
        if self._stopped:
            return
        if self._task is not None and not self._task.done():
            self._again = True  # reload once more when this one is done
            return
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            self._again = False
            try:
                await self._reload_fn()
            except MetadataStoreError as e:
                log.warning("reloading %s failed (retrying): %s", self._what, e)
                await asyncio.sleep(self._retry_s)
                self._again = True
            if not self._again or self._stopped:
                return

    async def stop(self) -> None:
        self._stopped = True
        t = self._task
        if t is not None and not t.done():
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
