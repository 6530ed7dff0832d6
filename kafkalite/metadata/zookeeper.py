"""The Apache ZooKeeper backend, through kazoo.

kazoo runs its own connection and callback threads. Requests use kazoo's ``*_async``
methods; completions are handed to the event loop with ``call_soon_threadsafe`` and
resolve asyncio futures there. Watch events and session state changes take the same
road into a :class:`~kafkalite.metadata.store.CallbackDispatcher`, so callbacks run on
the loop, one at a time, in the order kazoo saw them.

Session life cycle: kazoo reconnects by itself. A dropped connection is SUSPENDED;
when ZooKeeper says the session expired we report LOST, kazoo opens a fresh session
and we report CONNECTED; the owner (the broker) then re-creates its ephemerals and
re-registers its watches, exactly as Kafka does after a ZooKeeper session expiry.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Sequence
from typing import Any

from kazoo import exceptions as kz
from kazoo.client import KazooClient
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import KazooState, ZnodeStat
from kazoo.protocol.states import WatchedEvent as KazooWatchedEvent
from kazoo.retry import KazooRetry

from kafkalite.metadata.store import (
    ANY_VERSION,
    BadVersionError,
    CallbackDispatcher,
    CheckOp,
    ConnectionLossError,
    CreateOp,
    DeleteOp,
    EventType,
    MetadataStore,
    MetadataStoreError,
    MultiResult,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    SessionExpiredError,
    SessionState,
    SetDataOp,
    Stat,
    StateListener,
    StoreClosedError,
    WatchCallback,
    WatchedEvent,
    data_bytes,
    join_path,
    validate_path,
)

__all__ = ["ZooKeeperStore", "parse_connect_string"]

#: Above this many znodes a recursive delete is done bottom-up instead of as one multi.
_ATOMIC_DELETE_LIMIT = 1000
#: Reads in flight at once in :meth:`ZooKeeperStore.get_many`.
_PIPELINE_DEPTH = 1000

_ERRORS: dict[type[BaseException], type[MetadataStoreError]] = {
    kz.NoNodeError: NoNodeError,
    kz.NodeExistsError: NodeExistsError,
    kz.BadVersionError: BadVersionError,
    kz.NotEmptyError: NotEmptyError,
    kz.NoChildrenForEphemeralsError: NoChildrenForEphemeralsError,
    kz.ConnectionClosedError: StoreClosedError,
    kz.SessionExpiredError: SessionExpiredError,
    kz.ConnectionLoss: ConnectionLossError,
    kz.ConnectionDropped: ConnectionLossError,
    kz.OperationTimeoutError: ConnectionLossError,
    kz.RequestTimeoutError: ConnectionLossError,
}

_STATES = {
    KazooState.CONNECTED: SessionState.CONNECTED,
    KazooState.SUSPENDED: SessionState.SUSPENDED,
    KazooState.LOST: SessionState.LOST,
}

_EVENTS = {e.value: e for e in EventType}


def parse_connect_string(connect: str) -> tuple[str, str]:
    """Split Kafka's ``zookeeper.connect`` into (hosts, chroot); chroot "" if none."""
    connect = connect.strip()
    if not connect:
        raise ValueError("empty zookeeper.connect")
    hosts, slash, chroot = connect.partition("/")
    if not hosts:
        raise ValueError(f"zookeeper.connect has no hosts: {connect!r}")
    chroot = ("/" + chroot).rstrip("/") if slash else ""
    if chroot:
        validate_path(chroot)
    return hosts, chroot


def _stat(s: ZnodeStat) -> Stat:
    return Stat(
        czxid=s.czxid,
        mzxid=s.mzxid,
        pzxid=s.pzxid,
        ctime=s.ctime,
        mtime=s.mtime,
        version=s.version,
        cversion=s.cversion,
        ephemeral_owner=s.ephemeralOwner,
        data_length=s.dataLength,
        num_children=s.numChildren,
    )


def _refused_address() -> str:
    """A loopback port with nothing listening (connections are refused at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


class _WatchBridge:
    """A kazoo watcher forwarding to one of our callbacks on the loop.

    Equality follows the wrapped callback so kazoo's watcher sets de-duplicate exactly
    as they would for the callback itself.
    """

    __slots__ = ("store", "callback")

    def __init__(self, store: ZooKeeperStore, callback: WatchCallback) -> None:
        self.store = store
        self.callback = callback

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _WatchBridge)
            and other.store is self.store
            and other.callback == self.callback
        )

    def __hash__(self) -> int:
        return hash((id(self.store), self.callback))

    def __call__(self, event: KazooWatchedEvent) -> None:
        etype = _EVENTS.get(event.type)
        # NONE-type events are kazoo's "session gone" wake-ups; LOST reports that.
        if etype is None or self.store._closing:
            return
        self.store._dispatcher_submit(self.callback, WatchedEvent(etype, event.path))


class ZooKeeperStore(MetadataStore):
    """A session on an Apache ZooKeeper ensemble.

    ``connect`` is Kafka's ``zookeeper.connect``: ``host:port[,host:port...][/chroot]``;
    a missing chroot is created. Call :meth:`start` (or use :meth:`open`) on the event
    loop before anything else. While the connection is down, kazoo queues requests
    until it reconnects; requests in flight when it drops fail with ConnectionLossError.
    """

    def __init__(self, connect: str, *, session_timeout_ms: int = 18000) -> None:
        if session_timeout_ms <= 0:
            raise ValueError("session_timeout_ms must be positive")
        self.connect_string = connect
        self.hosts, self.chroot = parse_connect_string(connect)
        self.session_timeout_ms = session_timeout_ms
        self._client: KazooClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dispatcher: CallbackDispatcher | None = None
        self._listeners: dict[StateListener, None] = {}
        self._state = SessionState.LOST
        self._closing = False

    @classmethod
    async def open(
        cls, connect: str, *, session_timeout_ms: int = 18000, timeout: float = 15.0
    ) -> ZooKeeperStore:
        store = cls(connect, session_timeout_ms=session_timeout_ms)
        await store.start(timeout=timeout)
        return store

    async def start(self, timeout: float = 15.0) -> None:
        """Connect (waiting up to ``timeout`` seconds) and create the chroot if missing."""
        if self._client is not None:
            raise RuntimeError("ZooKeeperStore already started")
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._dispatcher = CallbackDispatcher(loop)
        handler = SequentialThreadingHandler()
        client = KazooClient(
            hosts=self.hosts,
            timeout=self.session_timeout_ms / 1000,
            handler=handler,
            connection_retry=KazooRetry(
                max_tries=-1,
                delay=0.05,
                backoff=2,
                max_jitter=0.2,
                max_delay=1.0,
                sleep_func=handler.sleep_func,
            ),
        )
        client.add_listener(self._on_kazoo_state)
        self._client = client
        try:
            await loop.run_in_executor(None, self._start_blocking, timeout)
        except Exception as e:
            self._client = None
            self._dispatcher.close()
            if isinstance(e, handler.timeout_exception):
                raise ConnectionLossError(
                    f"could not connect to ZooKeeper at {self.hosts} within {timeout}s"
                ) from e
            raise _map_error(e, self.chroot or None) from e

    def _start_blocking(self, timeout: float) -> None:
        client = self._client
        assert client is not None
        client.start(timeout=timeout)
        if self.chroot:
            # kazoo prefixes paths with client.chroot at call time, so the chroot is
            # created before it is switched on; no watch exists yet.
            try:
                client.ensure_path(self.chroot)
            except BaseException:
                client.stop()
                client.close()
                raise
            client.chroot = self.chroot

    # ---- properties

    @property
    def client(self) -> KazooClient:
        """The underlying kazoo client (escape hatch for tools)."""
        if self._client is None:
            raise StoreClosedError("ZooKeeperStore is not started")
        return self._client

    @property
    def session_id(self) -> int | None:
        if self._client is None or self._closing:
            return None
        client_id = self._client.client_id
        return None if client_id is None else int(client_id[0])

    @property
    def state(self) -> SessionState:
        return self._state

    # ---- bridging

    def _require(self) -> KazooClient:
        if self._closing:
            raise StoreClosedError("metadata store is closed")
        if self._client is None:
            raise StoreClosedError("ZooKeeperStore is not started")
        return self._client

    def _watch(self, callback: WatchCallback | None) -> _WatchBridge | None:
        return None if callback is None else _WatchBridge(self, callback)

    async def _call(self, async_result: IAsyncResult, path: str | None) -> Any:
        loop = self._loop
        assert loop is not None
        future: asyncio.Future[Any] = loop.create_future()

        def settle(ok: bool, payload: Any) -> None:
            if future.done():
                return
            if ok:
                future.set_result(payload)
            else:
                future.set_exception(_map_error(payload, path))

        def on_done(result: IAsyncResult) -> None:  # kazoo thread
            if result.successful():
                args = (True, result.value)
            else:
                args = (False, result.exception)
            try:
                loop.call_soon_threadsafe(settle, *args)
            except RuntimeError:
                pass  # loop closed: nobody is waiting any more

        async_result.rawlink(on_done)
        return await future

    def _dispatcher_submit(self, callback: Callable[[Any], Any], arg: Any) -> None:
        if self._dispatcher is not None:
            self._dispatcher.submit_threadsafe(callback, arg)

    def _on_kazoo_state(self, kstate: str) -> None:  # kazoo thread
        state = _STATES.get(kstate)  # type: ignore[call-overload]
        if state is None or self._closing or self._loop is None:
            return
        try:
            self._loop.call_soon_threadsafe(self._set_state, state)
        except RuntimeError:
            pass

    def _set_state(self, state: SessionState) -> None:
        if self._closing:
            return
        self._state = state
        assert self._dispatcher is not None
        for listener in list(self._listeners):
            self._dispatcher.submit(listener, state)

    # ---- API

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        makepath: bool = False,
    ) -> str:
        client = self._require()
        validate_path(path, sequential=sequential)
        result = await self._call(
            client.create_async(
                path,
                data_bytes(data),
                ephemeral=ephemeral,
                sequence=sequential,
                makepath=makepath,
            ),
            path,
        )
        return str(result)

    async def get(self, path: str, *, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        client = self._require()
        validate_path(path)
        data, stat = await self._call(client.get_async(path, watch=self._watch(watch)), path)
        return (data or b""), _stat(stat)

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        """Pipelined: every read is in flight at once (ZooKeeper answers in order)."""
        self._require()

        async def one(path: str) -> tuple[bytes, Stat] | None:
            try:
                return await self.get(path)
            except NoNodeError:
                return None

        out: list[tuple[bytes, Stat] | None] = []
        for i in range(0, len(paths), _PIPELINE_DEPTH):
            out += await asyncio.gather(*(one(p) for p in paths[i : i + _PIPELINE_DEPTH]))
        return out

    async def set(self, path: str, data: bytes, *, version: int = ANY_VERSION) -> Stat:
        client = self._require()
        validate_path(path)
        return _stat(await self._call(client.set_async(path, data_bytes(data), version), path))

    async def delete(
        self, path: str, *, version: int = ANY_VERSION, recursive: bool = False
    ) -> None:
        client = self._require()
        validate_path(path)
        if path == "/":
            raise ValueError("the root znode cannot be deleted")
        if not recursive:
            await self._call(client.delete_async(path, version), path)
            return
        for _attempt in range(10):
            victims = await self._subtree_post_order(path)
            if len(victims) > _ATOMIC_DELETE_LIMIT:
                await self._delete_bottom_up(victims, version)
                return
            ops: list[Op] = [DeleteOp(p) for p in victims[:-1]]
            ops.append(DeleteOp(path, version))
            try:
                await self.multi(ops)
                return
            except (NotEmptyError, NoNodeError) as e:
                # The tree changed under us; a missing top means it is gone for good.
                if isinstance(e, NoNodeError) and e.op_index == len(ops) - 1:
                    e.op_index = None
                    raise
            except BadVersionError as e:
                e.op_index = None
                raise
        raise ConnectionLossError(f"{path}: subtree kept changing during recursive delete")

    async def _subtree_post_order(self, path: str) -> list[str]:
        out: list[str] = []

        async def walk(p: str, top: bool) -> None:
            try:
                children = await self.get_children(p)
            except NoNodeError:
                if top:
                    raise
                return
            for name in children:
                await walk(join_path(p, name), False)
            out.append(p)

        await walk(path, True)
        return out

    async def _delete_bottom_up(self, victims: list[str], version: int) -> None:
        client = self._require()
        for p in victims[:-1]:
            try:
                await self._call(client.delete_async(p, ANY_VERSION), p)
            except NoNodeError:
                pass
        top = victims[-1]
        await self._call(client.delete_async(top, version), top)

    async def exists(self, path: str, *, watch: WatchCallback | None = None) -> Stat | None:
        client = self._require()
        validate_path(path)
        stat = await self._call(client.exists_async(path, watch=self._watch(watch)), path)
        return None if stat is None else _stat(stat)

    async def get_children(self, path: str, *, watch: WatchCallback | None = None) -> list[str]:
        client = self._require()
        validate_path(path)
        children = await self._call(client.get_children_async(path, watch=self._watch(watch)), path)
        return sorted(children)

    async def multi(self, ops: Sequence[Op]) -> list[MultiResult]:
        client = self._require()
        ops = list(ops)
        if not ops:
            return []
        txn = client.transaction()
        for op in ops:
            if isinstance(op, CreateOp):
                validate_path(op.path, sequential=op.sequential)
                txn.create(
                    op.path, data_bytes(op.data), ephemeral=op.ephemeral, sequence=op.sequential
                )
            elif isinstance(op, SetDataOp):
                validate_path(op.path)
                txn.set_data(op.path, data_bytes(op.data), op.version)
            elif isinstance(op, DeleteOp):
                validate_path(op.path)
                txn.delete(op.path, op.version)
            elif isinstance(op, CheckOp):
                validate_path(op.path)
                txn.check(op.path, op.version)
            else:
                raise TypeError(f"not a metadata op: {op!r}")
        raw = await self._call(txn.commit_async(), None)
        failures = [
            (i, r)
            for i, r in enumerate(raw)
            if isinstance(r, Exception)
            and not isinstance(r, kz.RolledBackError | kz.RuntimeInconsistency)
        ]
        if failures or any(isinstance(r, Exception) for r in raw):
            i, exc = failures[0] if failures else (0, raw[0])
            error = _map_error(exc, ops[i].path)
            if isinstance(error, MetadataStoreError):
                error.op_index = i
            raise error
        results: list[MultiResult] = []
        for op, r in zip(ops, raw, strict=True):
            if isinstance(op, CreateOp):
                results.append(str(r))
            elif isinstance(op, SetDataOp):
                results.append(_stat(r))
            else:
                results.append(None)
        return results

    def add_state_listener(self, listener: StateListener) -> None:
        self._listeners[listener] = None

    def remove_state_listener(self, listener: StateListener) -> None:
        self._listeners.pop(listener, None)

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._listeners.clear()
        if self._dispatcher is not None:
            self._dispatcher.close()
        client, self._client = self._client, None
        if client is None:
            return
        client.remove_listener(self._on_kazoo_state)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, _stop_client, client)

    # ---- fault injection

    async def expire(self, timeout: float = 10.0) -> None:
        """Make ZooKeeper expire this session now (tests and fault injection).

        The classic trick: a second client attaches to the same session id/password,
        which makes the server drop our connection, then closes the session. While it
        does, our client is pointed at a dead port so it cannot re-attach first. Our
        client then reconnects, is told the session expired (LOST), and kazoo opens a
        new session (CONNECTED). Returns once the old session is closed server-side.
        """
        client = self._require()
        client_id = client.client_id
        if client_id is None:
            raise ConnectionLossError("not connected; nothing to expire")
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._expire_blocking, client, client_id, timeout)

    def _expire_blocking(
        self, client: KazooClient, client_id: tuple[int, bytes], timeout: float
    ) -> None:
        client.set_hosts(_refused_address() + self.chroot)
        try:
            intruder = KazooClient(
                hosts=self.hosts,
                client_id=client_id,
                timeout=self.session_timeout_ms / 1000,
            )
            intruder.start(timeout=timeout)
            _stop_client(intruder)
        finally:
            client.set_hosts(self.hosts + self.chroot)


def _stop_client(client: KazooClient) -> None:
    try:
        client.stop()
    finally:
        client.close()


def _map_error(exc: BaseException, path: str | None) -> BaseException:
    """kazoo's exception -> ours; non-kazoo errors (ValueError, TypeError) pass through."""
    if isinstance(exc, MetadataStoreError) or not isinstance(exc, kz.KazooException):
        return exc
    for kazoo_type, ours in _ERRORS.items():
        if isinstance(exc, kazoo_type):
            error = ours(f"{ours.__name__}: {path}" if path else ours.__name__, path=path)
            break
    else:
        error = MetadataStoreError(f"{type(exc).__name__}: {exc} ({path})", path=path)
    error.__cause__ = exc
    return error
