"""Timer benchmark: kafkalite SystemTimer vs asyncio call_later vs heapq with lazy deletion.

    python bench/timer_bench.py [--n 1000000] [--seed 7]

N timers with random delays in 1..30000 ms, three measurements per implementation,
each on fresh state:

* add        - schedule N timers;
* cancel     - cancel those N timers (asyncio: including the heap rebuild that its
               next loop iteration does once over half the handles are cancelled;
               heapq: just the flag, the memory is reclaimed only by later pops);
* add+expire - schedule N timers, then jump the clock past the longest delay and run
               every expiry (the wheel cascades each entry down its levels).

All three run inside a running stdlib asyncio loop with a virtual clock, so nothing
sleeps: the SystemTimer gets an injected clock (its loop callback is armed but never
reached), and the loop's ``time()`` is patched for call_later. The cyclic GC is
disabled while timing. Figures are ops/s (N divided by the phase's wall time).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import heapq
import itertools
import random
import time
from collections.abc import Callable, Coroutine
from typing import Any

from kafkalite.timer import SystemTimer, TimerTask

MAX_DELAY_MS = 30_000


class Counter:
    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def hit(self) -> None:
        self.n += 1


class BenchTask(TimerTask):
    __slots__ = ("counter",)

    def __init__(self, delay_ms: int, counter: Counter) -> None:
        super().__init__(delay_ms)
        self.counter = counter

    def run(self) -> None:
        self.counter.n += 1


def timed(fn: Callable[[], None]) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    finally:
        gc.enable()


async def atimed(fn: Callable[[], Coroutine[Any, Any, None]]) -> float:
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        await fn()
        return time.perf_counter() - start
    finally:
        gc.enable()


# -- kafkalite SystemTimer -------------------------------------------------------------


async def bench_system_timer(delays: list[int]) -> dict[str, float]:
    n = len(delays)
    now = [0]

    def clock() -> int:
        return now[0]

    counter = Counter()
    results: dict[str, float] = {}

    timer = SystemTimer(clock=clock)
    tasks = [BenchTask(d, counter) for d in delays]
    add = timer.add

    def add_all() -> None:
        for t in tasks:
            add(t)

    results["add"] = timed(add_all)

    def cancel_all() -> None:
        for t in tasks:
            t.cancel()

    results["cancel"] = timed(cancel_all)
    assert timer.size == 0
    timer.shutdown()

    now[0] = 0
    timer = SystemTimer(clock=clock)
    tasks = [BenchTask(d, counter) for d in delays]
    add = timer.add

    def add_and_expire() -> None:
        for t in tasks:
            add(t)
        now[0] = MAX_DELAY_MS + 1
        timer.advance_clock()

    results["add+expire"] = timed(add_and_expire)
    assert counter.n == n and timer.size == 0, (counter.n, timer.size)
    timer.shutdown()
    return results


# -- asyncio loop.call_later ----------------------------------------------------------


async def bench_call_later(delays: list[int]) -> dict[str, float]:
    n = len(delays)
    loop = asyncio.get_running_loop()
    base = loop.time()
    offset = [0.0]
    loop.time = lambda: base + offset[0]  # type: ignore[method-assign]
    counter = Counter()
    hit = counter.hit
    seconds = [d / 1000.0 for d in delays]
    results: dict[str, float] = {}
    try:
        handles: list[asyncio.TimerHandle] = []
        call_later = loop.call_later

        def add_all() -> None:
            handles.extend([call_later(s, hit) for s in seconds])

        results["add"] = timed(add_all)

        async def cancel_all() -> None:
            for h in handles:
                h.cancel()
            await asyncio.sleep(0)  # the loop drops cancelled handles from its heap

        results["cancel"] = await atimed(cancel_all)
        handles.clear()
        await asyncio.sleep(0)

        async def add_and_expire() -> None:
            for s in seconds:
                call_later(s, hit)
            offset[0] = MAX_DELAY_MS / 1000.0 + 1.0
            while counter.n < n:
                await asyncio.sleep(0)

        results["add+expire"] = await atimed(add_and_expire)
        assert counter.n == n
    finally:
        del loop.time  # type: ignore[method-assign]
    return results


# -- heapq with lazy deletion ---------------------------------------------------------


class HeapTimer:
    """The textbook baseline: a binary heap, cancellation marks entries dead."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[list[Any]] = []
        self._seq = itertools.count()

    def add(self, expiration_ms: int, fn: Callable[[], None]) -> list[Any]:
        entry = [expiration_ms, next(self._seq), fn]
        heapq.heappush(self._heap, entry)
        return entry

    @staticmethod
    def cancel(entry: list[Any]) -> None:
        entry[2] = None

    def expire(self, now_ms: int) -> None:
        heap = self._heap
        pop = heapq.heappop
        while heap and heap[0][0] <= now_ms:
            fn = pop(heap)[2]
            if fn is not None:
                fn()


async def bench_heapq(delays: list[int]) -> dict[str, float]:
    n = len(delays)
    counter = Counter()
    hit = counter.hit
    results: dict[str, float] = {}

    heap_timer = HeapTimer()
    entries: list[list[Any]] = []

    def add_all() -> None:
        add = heap_timer.add
        entries.extend([add(d, hit) for d in delays])

    results["add"] = timed(add_all)

    def cancel_all() -> None:
        cancel = HeapTimer.cancel
        for e in entries:
            cancel(e)

    results["cancel"] = timed(cancel_all)

    heap_timer = HeapTimer()

    def add_and_expire() -> None:
        add = heap_timer.add
        for d in delays:
            add(d, hit)
        heap_timer.expire(MAX_DELAY_MS + 1)

    results["add+expire"] = timed(add_and_expire)
    assert counter.n == n
    return results


# -- driver -------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="timers per measurement")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--parked",
        action="store_true",
        help="also measure produce latency with 10/1,000/10,000 parked fetches (bench/purgatory_bench.py)",
    )
    args = parser.parse_args()

    rng = random.Random(args.seed)
    delays = [rng.randint(1, MAX_DELAY_MS) for _ in range(args.n)]

    benches = [
        ("kafkalite SystemTimer", bench_system_timer),
        ("asyncio call_later", bench_call_later),
        ("heapq lazy deletion", bench_heapq),
    ]
    phases = ["add", "cancel", "add+expire"]
    print(
        f"N = {args.n:,} timers, delays uniform in 1..{MAX_DELAY_MS} ms (ops/s, higher is better)"
    )
    print(f"{'implementation':<24}" + "".join(f"{p:>14}" for p in phases))
    wall = time.perf_counter()
    for name, bench in benches:
        # A fresh stdlib loop per implementation, so no state leaks between them.
        with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
            results = runner.run(bench(delays))
        row = "".join(f"{args.n / results[p]:>14,.0f}" for p in phases)
        print(f"{name:<24}{row}", flush=True)
    print(f"(total {time.perf_counter() - wall:.1f} s)")
    if args.parked:
        import subprocess
        import sys
        from pathlib import Path

        print(
            "\nProduce latency with parked delayed fetches (embedded broker, over TCP):", flush=True
        )
        subprocess.run(
            [sys.executable, str(Path(__file__).with_name("purgatory_bench.py"))], check=True
        )


if __name__ == "__main__":
    main()
