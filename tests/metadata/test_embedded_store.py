"""Embedded-only behaviour: delivery timing, fault injection and persistence."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from metadata_helpers import Recorder, wait_for

from kafkalite.metadata import (
    ConnectionLossError,
    CreateOp,
    EmbeddedEnsemble,
    EventType,
    MetadataStoreError,
    NodeExistsError,
    SessionState,
    StoreClosedError,
    WatchedEvent,
)
from kafkalite.metadata.embedded_store import JOURNAL_FILE, LOCK_FILE, SNAPSHOT_FILE

# --------------------------------------------------------------------------- delivery


async def test_callbacks_never_run_inside_the_mutating_call() -> None:
    with EmbeddedEnsemble() as ens:
        store = ens.connect()
        await store.create("/n")
        rec = Recorder()
        await store.get("/n", watch=rec)
        await store.set("/n", b"1")  # no suspension point inside: nothing ran yet
        assert rec.items == []
        await rec.wait(1)
        assert rec.events == [WatchedEvent(EventType.CHANGED, "/n")]


async def test_failing_callback_does_not_stop_delivery() -> None:
    with EmbeddedEnsemble() as ens:
        store = ens.connect()
        await store.create("/n")

        def broken(event: WatchedEvent) -> None:
            raise RuntimeError("boom")

        rec = Recorder()
        await store.get("/n", watch=broken)
        await store.get("/n", watch=rec)
        await store.set("/n", b"1")
        await rec.wait(1)


async def test_clock_sets_ctime_and_mtime() -> None:
    now = [1_000]
    with EmbeddedEnsemble(clock=lambda: now[0]) as ens:
        store = ens.connect()
        await store.create("/t")
        now[0] = 2_000
        stat = await store.set("/t", b"x")
        assert (stat.ctime, stat.mtime) == (1_000, 2_000)


# --------------------------------------------------------------------------- fault injection


async def test_pause_and_resume_within_timeout_keeps_session() -> None:
    with EmbeddedEnsemble() as ens:
        a, b = ens.connect(session_timeout_ms=10_000), ens.connect()
        states = Recorder()
        a.add_state_listener(states)
        await a.create("/eph", ephemeral=True)
        missed = Recorder()
        await a.get("/eph", watch=missed)
        session = a.session_id
        a.pause()
        assert a.session_id is None and a.state is SessionState.SUSPENDED
        with pytest.raises(ConnectionLossError):
            await a.get("/eph")
        assert await b.exists("/eph") is not None
        await b.set("/eph", b"changed during the partition")
        await asyncio.sleep(0.01)
        assert missed.items == []  # held until the client reconnects
        a.resume()
        await states.wait(2)
        assert states.items == [SessionState.SUSPENDED, SessionState.CONNECTED]
        assert a.session_id == session
        assert await a.exists("/eph") is not None
        assert (await missed.wait(1)) == [WatchedEvent(EventType.CHANGED, "/eph")]


async def test_partition_longer_than_timeout_expires_session() -> None:
    with EmbeddedEnsemble() as ens:
        a, b = ens.connect(session_timeout_ms=50), ens.connect()
        states = Recorder()
        a.add_state_listener(states)
        await a.create("/eph", ephemeral=True)
        own = Recorder()
        await a.exists("/eph", watch=own)
        gone = Recorder()
        await b.exists("/eph", watch=gone)
        old = a.session_id
        a.pause()
        await gone.wait(1)  # the server expired it after 50 ms
        assert await b.exists("/eph") is None
        # The partitioned client hears about it only when it reconnects.
        assert states.items == [SessionState.SUSPENDED]
        a.resume()
        await states.wait(3)
        assert states.items[1:] == [SessionState.LOST, SessionState.CONNECTED]
        assert a.session_id != old
        await asyncio.sleep(0.01)
        assert own.items == []  # watches of the dead session are dropped


async def test_expire_while_paused_reports_lost_on_resume() -> None:
    with EmbeddedEnsemble() as ens:
        a = ens.connect()
        states = Recorder()
        a.add_state_listener(states)
        a.pause()
        await a.expire()
        await asyncio.sleep(0.01)
        assert states.items == [SessionState.SUSPENDED]
        a.resume()
        await states.wait(3)
        assert states.items == [
            SessionState.SUSPENDED,
            SessionState.LOST,
            SessionState.CONNECTED,
        ]


async def test_async_state_listener_and_removal() -> None:
    with EmbeddedEnsemble() as ens:
        a = ens.connect()
        seen: list[SessionState] = []

        async def listener(state: SessionState) -> None:
            await asyncio.sleep(0)
            seen.append(state)

        a.add_state_listener(listener)
        await a.expire()
        await wait_for(lambda: len(seen) == 2)
        a.remove_state_listener(listener)
        await a.expire()
        await asyncio.sleep(0.01)
        assert seen == [SessionState.LOST, SessionState.CONNECTED]


async def test_ensemble_close_closes_stores() -> None:
    ens = EmbeddedEnsemble()
    store = ens.connect()
    ens.close()
    with pytest.raises(StoreClosedError):
        await store.get("/")
    with pytest.raises(StoreClosedError):
        ens.connect()
    await store.close()


# --------------------------------------------------------------------------- persistence


async def _populate(data_dir: Path) -> None:
    ens = EmbeddedEnsemble(data_dir)
    store = ens.connect()
    await store.create("/brokers/topics/t", b'{"partitions":{"0":[1]}}', makepath=True)
    await store.set("/brokers/topics/t", b'{"partitions":{"0":[1,2]}}')
    await store.create("/brokers/ids/1", b"broker", ephemeral=True, makepath=True)
    await store.create("/bin", bytes(range(256)))
    await store.create("/isr/change_", sequential=True, makepath=True)
    await store.create("/isr/change_", ephemeral=True, sequential=True)
    await store.multi([CreateOp("/m1"), CreateOp("/m2", b"two")])
    await store.create("/tmp/x", makepath=True)
    await store.delete("/tmp", recursive=True)
    ens.close()


async def test_persistent_nodes_survive_restart(tmp_path: Path) -> None:
    await _populate(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} <= {JOURNAL_FILE, SNAPSHOT_FILE, LOCK_FILE}
    assert all(p.is_file() for p in tmp_path.iterdir())
    with EmbeddedEnsemble(tmp_path) as ens:
        store = ens.connect()
        data, stat = await store.get("/brokers/topics/t")
        assert data == b'{"partitions":{"0":[1,2]}}' and stat.version == 1
        assert (await store.get("/bin"))[0] == bytes(range(256))
        assert (await store.get("/m2"))[0] == b"two"
        assert await store.exists("/tmp") is None
        # Ephemerals are not persisted; their parents are.
        assert await store.get_children("/brokers/ids") == []
        # The sequence counter counts the ephemeral child too: no name is reused.
        assert await store.get_children("/isr") == ["change_0000000000"]
        assert await store.create("/isr/change_", sequential=True) == "/isr/change_0000000002"
        assert ens.last_zxid > 0


async def test_recovery_from_journal_without_clean_close(tmp_path: Path) -> None:
    live = tmp_path / "live"
    crashed = tmp_path / "crashed"
    ens = EmbeddedEnsemble(live)
    store = ens.connect()
    await store.create("/a", b"1")
    await store.set("/a", b"2")
    await store.create("/a/b", b"3")
    # "Crash": copy the files while the ensemble is still open (no compaction ran).
    crashed.mkdir()
    for name in (JOURNAL_FILE, SNAPSHOT_FILE):
        shutil.copy(live / name, crashed / name)
    assert len((crashed / JOURNAL_FILE).read_bytes().splitlines()) == 3
    ens.close()
    with EmbeddedEnsemble(crashed) as recovered:
        s = recovered.connect()
        data, stat = await s.get("/a")
        assert (data, stat.version, stat.num_children) == (b"2", 1, 1)
        assert (await s.get("/a/b"))[0] == b"3"
        # Recovery compacts: the snapshot now holds everything.
        assert (crashed / JOURNAL_FILE).read_bytes() == b""


async def test_torn_last_journal_record_is_ignored(tmp_path: Path) -> None:
    ens = EmbeddedEnsemble(tmp_path)
    store = ens.connect()
    await store.create("/kept", b"k")
    journal = (tmp_path / JOURNAL_FILE).read_bytes()
    ens.close()
    (tmp_path / SNAPSHOT_FILE).unlink()
    (tmp_path / JOURNAL_FILE).write_bytes(journal + b'{"zxid":99,"time":1,"ops":[{"op":"cre')
    with EmbeddedEnsemble(tmp_path) as ens2:
        assert (await ens2.connect().get("/kept"))[0] == b"k"


async def test_corrupt_journal_middle_is_an_error(tmp_path: Path) -> None:
    (tmp_path / JOURNAL_FILE).write_bytes(b"garbage\n" + json.dumps({"zxid": 1}).encode() + b"\n")
    with pytest.raises(MetadataStoreError, match="corrupt"):
        EmbeddedEnsemble(tmp_path)


async def test_data_dir_is_locked(tmp_path: Path) -> None:
    with EmbeddedEnsemble(tmp_path):
        with pytest.raises(MetadataStoreError, match="in use"):
            EmbeddedEnsemble(tmp_path)
    EmbeddedEnsemble(tmp_path).close()  # released on close


async def test_periodic_compaction(tmp_path: Path) -> None:
    ens = EmbeddedEnsemble(tmp_path, compact_every=5)
    store = ens.connect()
    for i in range(12):
        await store.create(f"/n{i}", str(i).encode())
    assert len((tmp_path / JOURNAL_FILE).read_bytes().splitlines()) == 2
    snapshot = json.loads((tmp_path / SNAPSHOT_FILE).read_bytes())
    assert len(snapshot["nodes"]) == 11  # root + n0..n9
    ens.close()
    with EmbeddedEnsemble(tmp_path) as ens2:
        s = ens2.connect()
        assert len(await s.get_children("/")) == 12
        assert (await s.get("/n11"))[0] == b"11"


async def test_failed_transaction_is_not_journaled(tmp_path: Path) -> None:
    with EmbeddedEnsemble(tmp_path) as ens:
        store = ens.connect()
        await store.create("/x")
        before = (tmp_path / JOURNAL_FILE).read_bytes()
        with pytest.raises(NodeExistsError):
            await store.multi([CreateOp("/y"), CreateOp("/x")])
        assert (tmp_path / JOURNAL_FILE).read_bytes() == before
