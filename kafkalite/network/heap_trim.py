"""Give the heap memory of closed connections back to the operating system.

CPython frees a closed connection's objects at once, but glibc keeps freed
chunks in its heap (only a free top of the heap is returned), so after 10,000
connections close the process would keep most of the memory they used.
``malloc_trim(0)`` returns the free pages. It walks the heap, so it runs only
when the number of live connections fell by ``drop`` from its peak (a storm of
connects and closes keeps the live count low and never triggers it), a moment
after the closes, and at most every ``min_interval_s``.

Without glibc (musl, macOS) it does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


def _load_malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


_malloc_trim = _load_malloc_trim()


class HeapTrimmer:
    """Watches the live connection count; trims the heap after a large drop."""

    __slots__ = ("live", "drop", "delay_s", "min_interval_s", "trims", "_peak", "_handle", "_last")

    def __init__(
        self,
        live: Callable[[], int],
        *,
        drop: int = 1000,
        delay_s: float = 1.0,
        min_interval_s: float = 10.0,
    ) -> None:
        self.live = live
        self.drop = drop
        self.delay_s = delay_s
        self.min_interval_s = min_interval_s
        self.trims = 0
        self._peak = 0
        self._handle: asyncio.TimerHandle | None = None
        self._last = float("-inf")

    def opened(self) -> None:
        n = self.live()
        if n > self._peak:
            self._peak = n

    def closed(self) -> None:
        if self._handle is None and self._peak - self.live() >= self.drop:
            wait = max(self.delay_s, self._last + self.min_interval_s - time.monotonic())
            self._handle = asyncio.get_running_loop().call_later(wait, self._trim)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _trim(self) -> None:
        self._handle = None
        self._last = time.monotonic()
        self._peak = self.live()
        if _malloc_trim is not None:
            _malloc_trim(0)
            self.trims += 1
            log.debug("returned freed heap memory to the OS after connections closed")
