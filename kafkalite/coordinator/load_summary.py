"""One log line per wave of coordinator partition loads, not one per partition.

A broker that becomes leader of ``__consumer_offsets`` loads its 50 partitions at
once; a line each ("loaded 0 groups from __consumer_offsets-17") buries the rest
of the start-up log. Each load reports here (and at DEBUG); when no load is left
in progress one INFO line sums them up.
"""

from __future__ import annotations

import logging
import time

__all__ = ["LoadSummary"]


class LoadSummary:
    def __init__(self, logger: logging.Logger, what: str, topic: str) -> None:
        self._log = logger
        self._what = what
        self._topic = topic
        self._items = 0
        self._partitions = 0
        self._t0 = 0.0

    def started(self, loading_before: int) -> None:
        """A load starts; ``loading_before`` loads were already in progress."""
        if loading_before == 0 and self._partitions == 0:
            self._t0 = time.monotonic()

    def finished(self, partition: int, items: int, loading_left: int) -> None:
        """A load is done; ``loading_left`` are still in progress."""
        self._log.debug("loaded %d %s from %s-%d", items, self._what, self._topic, partition)
        self._items += items
        self._partitions += 1
        if loading_left == 0:
            self._log.info(
                "loaded %d %s from %d %s partition%s in %.0f ms",
                self._items,
                self._what,
                self._partitions,
                self._topic,
                "" if self._partitions == 1 else "s",
                (time.monotonic() - self._t0) * 1000,
            )
            self._items = self._partitions = 0
