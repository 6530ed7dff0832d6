"""One behaviour suite, run against the embedded store and a real Apache ZooKeeper.

If a test here passes on ZooKeeper it pins down real ZooKeeper semantics; the embedded
store must then behave the same, because the controller cannot tell them apart.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from metadata_helpers import Backend, Recorder, barrier, wait_for

from kafkalite.metadata import (
    BadVersionError,
    CheckOp,
    CreateOp,
    DeleteOp,
    EventType,
    MetadataStore,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionState,
    SetDataOp,
    Stat,
    StoreClosedError,
    WatchedEvent,
)

# --------------------------------------------------------------------------- basics


async def test_create_get_and_stat(store: MetadataStore) -> None:
    assert store.state is SessionState.CONNECTED and store.session_id
    assert await store.create("/a", b"hello") == "/a"
    data, stat = await store.get("/a")
    assert data == b"hello"
    assert isinstance(stat, Stat)
    assert (stat.version, stat.cversion, stat.num_children) == (0, 0, 0)
    assert stat.data_length == 5
    assert stat.ephemeral_owner == 0 and not stat.ephemeral
    assert stat.ctime > 0 and stat.mtime == stat.ctime
    assert stat.czxid == stat.mzxid > 0
    assert await store.create("/a/empty") == "/a/empty"
    assert (await store.get("/a/empty"))[0] == b""


async def test_set_bumps_version_and_conditional_set(store: MetadataStore) -> None:
    await store.create("/v", b"0")
    s1 = await store.set("/v", b"1")
    assert s1.version == 1 and s1.mzxid > s1.czxid
    s2 = await store.set("/v", b"2", version=1)
    assert s2.version == 2
    with pytest.raises(BadVersionError):
        await store.set("/v", b"x", version=1)
    data, stat = await store.get("/v")
    assert (data, stat.version) == (b"2", 2)
    with pytest.raises(NoNodeError):
        await store.set("/missing", b"x")


async def test_create_existing_and_missing_parent(store: MetadataStore) -> None:
    await store.create("/dup", b"first")
    with pytest.raises(NodeExistsError):
        await store.create("/dup", b"second")
    assert (await store.get("/dup"))[0] == b"first"
    with pytest.raises(NoNodeError):
        await store.create("/no/parent")
    assert await store.create("/deep/er/path", b"x", makepath=True) == "/deep/er/path"
    assert await store.get_children("/deep") == ["er"]
    assert (await store.get("/deep/er"))[0] == b""


async def test_ensure_path_and_get_or_none(store: MetadataStore) -> None:
    await store.ensure_path("/e/f/g")
    await store.ensure_path("/e/f/g")
    assert await store.exists("/e/f/g") is not None
    assert await store.get_or_none("/e/nope") is None
    await store.set("/e/f", b"v")
    got = await store.get_or_none("/e/f")
    assert got is not None and got[0] == b"v"
    # With a watch, a missing znode is watched for creation.
    rec = Recorder()
    assert await store.get_or_none("/e/later", watch=rec) is None
    await store.create("/e/later", b"now")
    assert (await rec.wait(1)) == [WatchedEvent(EventType.CREATED, "/e/later")]


async def test_exists_and_get_children_sorted(store: MetadataStore) -> None:
    assert await store.exists("/p") is None
    await store.create("/p")
    for name in ["c", "a", "b"]:
        await store.create(f"/p/{name}")
    assert await store.get_children("/p") == ["a", "b", "c"]
    stat = await store.exists("/p")
    assert stat is not None and stat.num_children == 3 and stat.cversion == 3
    await store.delete("/p/b")
    stat = await store.exists("/p")
    assert stat is not None and stat.num_children == 2 and stat.cversion == 4
    with pytest.raises(NoNodeError):
        await store.get_children("/nope")
    with pytest.raises(NoNodeError):
        await store.get("/nope")


async def test_delete_versions_children_and_recursive(store: MetadataStore) -> None:
    await store.create("/d", b"x")
    await store.set("/d", b"y")
    with pytest.raises(BadVersionError):
        await store.delete("/d", version=0)
    await store.create("/d/c1/g", makepath=True)
    await store.create("/d/c2")
    with pytest.raises(NotEmptyError):
        await store.delete("/d")
    with pytest.raises(BadVersionError):
        await store.delete("/d", version=7, recursive=True)
    assert await store.get_children("/d") == ["c1", "c2"]
    await store.delete("/d", version=1, recursive=True)
    assert await store.exists("/d") is None
    assert await store.exists("/d/c1/g") is None
    with pytest.raises(NoNodeError):
        await store.delete("/d")
    with pytest.raises(NoNodeError):
        await store.delete("/d", recursive=True)


async def test_invalid_paths_and_data(store: MetadataStore) -> None:
    for bad in ["", "x", "/a/", "/a//b", "/a/./b", "/a/../b"]:
        with pytest.raises(ValueError):
            await store.create(bad)
    with pytest.raises(ValueError):
        await store.delete("/")
    with pytest.raises(TypeError):
        await store.create("/s", "not bytes")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- sequential

SEQ = re.compile(r"^/q/item-(\d{10})$")


async def test_sequential_names_are_10_digit_and_monotonic(store: MetadataStore) -> None:
    await store.create("/q")
    await store.create("/r")
    names = [await store.create("/q/item-", b"", sequential=True) for _ in range(3)]
    numbers = []
    for name in names:
        m = SEQ.match(name)
        assert m, name
        numbers.append(int(m.group(1)))
    assert numbers == sorted(numbers) and len(set(numbers)) == 3
    # The counter is the number of children ever created under the parent (ZooKeeper
    # reports cversion = creates + deletes): deleting never lets a number come back,
    # and other parents have their own counter.
    await store.delete(names[-1])
    await store.create("/q/plain")
    await store.delete("/q/plain")
    again = await store.create("/q/item-", sequential=True)
    assert again == "/q/item-0000000004"
    assert await store.create("/r/item-", sequential=True) == "/r/item-0000000000"
    stat = await store.exists("/q")
    assert stat is not None and (stat.cversion, stat.num_children) == (7, 3)
    created = (stat.cversion + stat.num_children) // 2
    assert await store.create("/q/", sequential=True) == f"/q/{created:010d}"


async def test_ephemeral_sequential(backend: Backend) -> None:
    a = await backend.connect()
    await a.create("/elect")
    path = await a.create("/elect/n_", ephemeral=True, sequential=True)
    assert re.fullmatch(r"/elect/n_\d{10}", path)
    stat = await a.exists(path)
    assert stat is not None and stat.ephemeral_owner == a.session_id


# --------------------------------------------------------------------------- ephemerals, sessions


async def test_ephemeral_owner_and_no_children(backend: Backend) -> None:
    a = await backend.connect()
    b = await backend.connect()
    assert a.session_id and b.session_id and a.session_id != b.session_id
    await a.create("/brokers/ids/1", b"{}", ephemeral=True, makepath=True)
    stat = await b.exists("/brokers/ids/1")
    assert stat is not None and stat.ephemeral and stat.ephemeral_owner == a.session_id
    parent = await b.exists("/brokers/ids")
    assert parent is not None and parent.ephemeral_owner == 0
    with pytest.raises(NoChildrenForEphemeralsError):
        await a.create("/brokers/ids/1/child")
    with pytest.raises(NoChildrenForEphemeralsError):
        await b.create("/brokers/ids/1/child/x", makepath=True)


async def test_ephemerals_vanish_on_session_expiry(backend: Backend) -> None:
    a = await backend.connect()
    b = await backend.connect()
    states = Recorder()
    a.add_state_listener(states)
    await a.create("/controller", b'{"brokerid":1}', ephemeral=True)
    await a.create("/persistent", b"stays")
    deleted = Recorder()
    children = Recorder()
    await b.exists("/controller", watch=deleted)
    await b.get_children("/", watch=children)
    old_session = a.session_id

    await backend.expire(a)

    assert (await deleted.wait(1)) == [WatchedEvent(EventType.DELETED, "/controller")]
    await children.wait(1)
    assert await b.exists("/controller") is None
    assert (await b.get("/persistent"))[0] == b"stays"
    # The owner is told (LOST) and gets a new session by itself (CONNECTED).
    await wait_for(lambda: states.items[-1:] == [SessionState.CONNECTED])
    assert SessionState.LOST in states.items
    assert SessionState.EXPIRED is SessionState.LOST
    assert a.session_id is not None and a.session_id != old_session
    assert a.state is SessionState.CONNECTED
    # ... and re-registers, as a broker does after expiry.
    await a.create("/controller", b'{"brokerid":1}', ephemeral=True)
    stat = await b.exists("/controller")
    assert stat is not None and stat.ephemeral_owner == a.session_id


async def test_close_deletes_ephemerals(backend: Backend) -> None:
    a = await backend.connect()
    b = await backend.connect()
    await a.create("/eph", ephemeral=True)
    rec = Recorder()
    await b.exists("/eph", watch=rec)
    await a.close()
    assert (await rec.wait(1))[0].type is EventType.DELETED
    assert await b.exists("/eph") is None
    with pytest.raises(StoreClosedError):
        await a.get("/")
    await a.close()  # idempotent


# --------------------------------------------------------------------------- watches


async def test_data_watch_fires_once_on_change(store: MetadataStore) -> None:
    await store.create("/w", b"0")
    rec = Recorder()
    await store.get("/w", watch=rec)
    await store.set("/w", b"1")
    await store.set("/w", b"2")
    await barrier(store)
    assert rec.events == [WatchedEvent(EventType.CHANGED, "/w")]


async def test_data_watch_fires_on_delete_and_child_watch_too(store: MetadataStore) -> None:
    await store.create("/w")
    data_rec, child_rec = Recorder(), Recorder()
    await store.get("/w", watch=data_rec)
    await store.get_children("/w", watch=child_rec)
    await store.delete("/w")
    await barrier(store)
    assert data_rec.events == [WatchedEvent(EventType.DELETED, "/w")]
    assert child_rec.events == [WatchedEvent(EventType.DELETED, "/w")]


async def test_exists_watch_on_missing_fires_created(store: MetadataStore) -> None:
    rec = Recorder()
    assert await store.exists("/later", watch=rec) is None
    await store.create("/later")
    await store.set("/later", b"x")
    await barrier(store)
    assert rec.events == [WatchedEvent(EventType.CREATED, "/later")]


async def test_failed_get_sets_no_watch(store: MetadataStore) -> None:
    rec = Recorder()
    with pytest.raises(NoNodeError):
        await store.get("/ghost", watch=rec)
    with pytest.raises(NoNodeError):
        await store.get_children("/ghost", watch=rec)
    await store.create("/ghost/kid", makepath=True)
    await barrier(store)
    assert rec.events == []


async def test_child_watch_fires_once(store: MetadataStore) -> None:
    await store.create("/kids")
    rec = Recorder()
    assert await store.get_children("/kids", watch=rec) == []
    await store.create("/kids/a")
    await store.create("/kids/b")
    await store.set("/kids", b"data changes are not child changes")
    await barrier(store)
    assert rec.events == [WatchedEvent(EventType.CHILD, "/kids")]
    # Re-registering picks up the next change only.
    assert await store.get_children("/kids", watch=rec) == ["a", "b"]
    await store.delete("/kids/a")
    await barrier(store)
    assert rec.events == [WatchedEvent(EventType.CHILD, "/kids")] * 2


async def test_same_callback_registered_twice_fires_once(store: MetadataStore) -> None:
    await store.create("/twice")
    rec = Recorder()
    await store.get("/twice", watch=rec)
    await store.exists("/twice", watch=rec)
    await store.get("/twice", watch=rec)
    await store.set("/twice", b"x")
    await barrier(store)
    assert rec.events == [WatchedEvent(EventType.CHANGED, "/twice")]


async def test_watches_across_sessions_and_async_callbacks(backend: Backend) -> None:
    a = await backend.connect()
    b = await backend.connect()
    await a.create("/x", b"0")
    got: list[tuple[WatchedEvent, bytes]] = []
    done = asyncio.Event()

    async def on_event(event: WatchedEvent) -> None:
        await asyncio.sleep(0)
        # Callbacks may call back into the store.
        data, _ = await b.get(event.path)
        got.append((event, data))
        done.set()

    await b.get("/x", watch=on_event)
    await a.set("/x", b"1")
    await asyncio.wait_for(done.wait(), 10)
    assert got == [(WatchedEvent(EventType.CHANGED, "/x"), b"1")]


async def test_events_are_delivered_in_order(store: MetadataStore) -> None:
    rec = Recorder()
    for name in "abcde":
        await store.create(f"/{name}")
        await store.get(f"/{name}", watch=rec)
    for name in "cbeda":
        await store.set(f"/{name}", b"!")
    await rec.wait(5)
    assert [e.path for e in rec.events] == ["/c", "/b", "/e", "/d", "/a"]


# --------------------------------------------------------------------------- multi


async def test_multi_commits_all(store: MetadataStore) -> None:
    await store.create("/m", b"0")
    await store.create("/gone")
    results = await store.multi(
        [
            CreateOp("/m/new", b"n"),
            CreateOp("/m/seq-", sequential=True),
            SetDataOp("/m", b"1", version=0),
            CheckOp("/m", version=1),
            CheckOp("/m/new"),
            DeleteOp("/gone"),
        ]
    )
    assert results[0] == "/m/new"
    assert isinstance(results[1], str) and re.fullmatch(r"/m/seq-\d{10}", results[1])
    assert isinstance(results[2], Stat) and results[2].version == 1
    assert results[3:] == [None, None, None]
    assert (await store.get("/m"))[0] == b"1"
    assert await store.exists("/gone") is None
    assert await store.multi([]) == []


@pytest.mark.parametrize(
    ("failing", "error", "index"),
    [
        (CheckOp("/m", version=5), BadVersionError, 3),
        (CreateOp("/m/exists"), NodeExistsError, 3),
        (DeleteOp("/nothing"), NoNodeError, 3),
        (DeleteOp("/m"), NotEmptyError, 3),
        (SetDataOp("/m", b"x", version=9), BadVersionError, 3),
    ],
)
async def test_multi_is_all_or_nothing(
    store: MetadataStore, failing: object, error: type[Exception], index: int
) -> None:
    await store.create("/m", b"orig")
    await store.create("/m/exists")
    await store.create("/m/doomed")
    before = await store.exists("/m")
    watch = Recorder()
    await store.get("/m", watch=watch)
    with pytest.raises(error) as info:
        await store.multi(
            [
                CreateOp("/m/a"),
                SetDataOp("/m", b"changed"),
                DeleteOp("/m/doomed"),
                failing,  # type: ignore[list-item]
                CreateOp("/m/b"),
            ]
        )
    assert getattr(info.value, "op_index", None) == index
    assert await store.get_children("/m") == ["doomed", "exists"]
    data, stat = await store.get("/m")
    assert data == b"orig"
    assert stat == before
    await barrier(store)
    assert watch.events == []


async def test_multi_ephemeral_create_and_interdependent_ops(backend: Backend) -> None:
    a = await backend.connect()
    results = await a.multi(
        [
            CreateOp("/t"),
            CreateOp("/t/partitions"),
            CreateOp("/t/partitions/0", b"state"),
            CreateOp("/t/owner", ephemeral=True),
        ]
    )
    assert results == ["/t", "/t/partitions", "/t/partitions/0", "/t/owner"]
    stat = await a.exists("/t/owner")
    assert stat is not None and stat.ephemeral_owner == a.session_id
