"""ChangeWatcher: the reload rule shared by quotas, SCRAM credentials, ACLs and
client-metrics subscriptions (their end-to-end propagation tests are in tests/quota,
tests/security and tests/server)."""

from __future__ import annotations

import asyncio

from kafkalite.metadata.change_watcher import ChangeWatcher
from kafkalite.metadata.store import MetadataStoreError


async def test_a_burst_during_a_reload_gives_exactly_one_more_reload() -> None:
    gate = asyncio.Event()
    running = 0
    calls = 0
    overlap = False

    async def reload() -> None:
        nonlocal running, calls, overlap
        calls += 1
        running += 1
        overlap |= running > 1
        await gate.wait()
        running -= 1

    w = ChangeWatcher(reload, "test")
    w.on_change()
    await asyncio.sleep(0)
    for _ in range(5):  # a burst while the first reload runs
        w.on_change()
    gate.set()
    for _ in range(10):
        await asyncio.sleep(0)
    assert calls == 2 and not overlap
    await w.stop()


async def test_a_store_error_is_retried_not_lost() -> None:
    outcomes = [MetadataStoreError("session moved"), None]
    done = asyncio.Event()

    async def reload() -> None:
        e = outcomes.pop(0)
        if e is not None:
            raise e
        done.set()

    w = ChangeWatcher(reload, "test", retry_s=0.01)
    w.on_change()
    await asyncio.wait_for(done.wait(), 5)
    assert outcomes == []
    await w.stop()


async def test_no_reload_after_stop() -> None:
    calls = 0

    async def reload() -> None:
        nonlocal calls
        calls += 1
        await asyncio.sleep(10)

    w = ChangeWatcher(reload, "test")
    w.on_change()
    await asyncio.sleep(0)
    await w.stop()  # cancels the running reload
    w.on_change()
    await asyncio.sleep(0)
    assert calls == 1
