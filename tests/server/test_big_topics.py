"""Creating and deleting a topic of many partitions on a real broker.

Found by the fuzz bench: a CreatePartitions grew a topic to 4,097 partitions, and
deleting it held the broker's event loop for 21-23 s (every partition's deletion
rewrote every checkpoint of its log dir); creating as many held it for seconds.
The work is now O(partitions) and done in slices, the loop running in between;
``loop_slices.SLICE_S = 0`` makes every slice one step, so the interleaving is
deterministic here (no timing is measured).
"""

from __future__ import annotations

import asyncio
import struct
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkalite.log import checkpoint as checkpoint_module
from kafkalite.log import log_manager as log_manager_module
from kafkalite.log.checkpoint import (
    CLEANER_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
)
from kafkalite.testing import AsyncBroker
from kafkalite.timer import loop_slices

PARTITIONS = 120


async def _api_versions_until(
    port: int, done: Callable[[], bool], seen: Callable[[], int]
) -> list[int]:
    """ApiVersions v0 round trips on one connection until ``done()``; ``seen()`` at each answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    out = []
    corr = 0
    try:
        while not done():
            corr += 1
            writer.write(struct.pack(">ihhih", 10, 18, 0, corr, -1))
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            await reader.readexactly(size)
            out.append(seen())
    finally:
        writer.close()
    return out


def _hosted(b: AsyncBroker, topic: str) -> int:
    assert b.broker is not None
    return sum(1 for lg in b.broker.log_manager.all_logs() if lg.topic == topic)


async def test_deleting_a_topic_writes_each_checkpoint_once_not_once_per_partition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with AsyncBroker(tmp_path) as b:
        await b.create_topic("big", PARTITIONS)
        writes: Counter[str] = Counter()
        real = checkpoint_module.atomic_write

        def counting(path: Path, data: bytes, **kw: object) -> None:
            writes[path.name] += 1
            real(path, data, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(checkpoint_module, "atomic_write", counting)
        monkeypatch.setattr(log_manager_module, "atomic_write", counting)
        await b.delete_topic("big")  # answered once Metadata no longer shows it
        while _hosted(b, "big"):  # StopReplica(delete) comes after
            await asyncio.sleep(0.01)
        for name in (
            RECOVERY_POINT_CHECKPOINT_FILE,
            LOG_START_OFFSET_CHECKPOINT_FILE,
            CLEANER_CHECKPOINT_FILE,
        ):
            assert writes[name] == 1, writes


async def test_other_clients_are_served_while_a_big_topic_is_created_and_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop_slices, "SLICE_S", 0.0)
    async with AsyncBroker(tmp_path) as b:
        loop = asyncio.get_running_loop()
        creating = loop.create_task(b.create_topic("big", PARTITIONS))
        seen = await _api_versions_until(b.port, creating.done, lambda: _hosted(b, "big"))
        await creating
        # answered while the LeaderAndIsr was half applied: the loop ran between partitions
        assert any(0 < n < PARTITIONS for n in seen), seen
        deleting = loop.create_task(b.delete_topic("big"))
        seen = await _api_versions_until(
            b.port, lambda: deleting.done() and not _hosted(b, "big"), lambda: _hosted(b, "big")
        )
        await deleting
        assert any(0 < n < PARTITIONS for n in seen), seen


async def test_metadata_never_shows_part_of_a_topic_while_its_update_is_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """UpdateMetadata is built aside in slices and applied in one step (Kafka swaps in a
    new metadata snapshot): a client must not see a topic with some of its partitions,
    or a producer would hash keys over the wrong partition count."""
    monkeypatch.setattr(loop_slices, "SLICE_S", 0.0)
    async with AsyncBroker(tmp_path) as b:
        assert b.broker is not None
        cache = b.broker.metadata_cache
        counts: list[int] = []

        async def watch(done: Callable[[], bool]) -> None:
            while not done():
                t = cache.get_topic("big")
                counts.append(0 if t is None else len(t.partitions))
                await asyncio.sleep(0)

        creating = asyncio.get_running_loop().create_task(b.create_topic("big", PARTITIONS))
        await watch(creating.done)
        await creating
        assert set(counts) == {0, PARTITIONS} or set(counts) == {PARTITIONS}, Counter(counts)
        assert len(counts) > 10  # the watcher did run while the topic was being created
