"""The in-process metadata store: ZooKeeper semantics without a ZooKeeper.

:class:`EmbeddedEnsemble` plays the server. Every broker of an in-process cluster
opens its own session on the shared ensemble with :meth:`EmbeddedEnsemble.connect`,
so ephemerals, watches and session expiry behave as they would against ZooKeeper.

Durability: with a ``data_dir``, every committed change to persistent znodes is
appended (and fsynced) to ``kafkalite-metadata.journal`` as one JSON line per
transaction, and the tree is compacted into ``kafkalite-metadata.snapshot`` at
start-up, at close and every ``compact_every`` transactions. Ephemeral znodes are not
persisted (their sessions die with the process) but the parent's creation counter they
bump is, so sequential names never repeat after a restart. The files are plain files,
never directories, so the directory can be a Kafka log dir without confusing Kafka's
own tooling (which treats every sub-directory as a partition).
"""

from __future__ import annotations

import asyncio
import base64
import fcntl
import itertools
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

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
    split_path,
    validate_path,
)
from kafkalite.timer import loop_slices

__all__ = ["EmbeddedEnsemble", "EmbeddedStore", "JOURNAL_FILE", "SNAPSHOT_FILE", "LOCK_FILE"]

log = logging.getLogger(__name__)

JOURNAL_FILE = "kafkalite-metadata.journal"
SNAPSHOT_FILE = "kafkalite-metadata.snapshot"
LOCK_FILE = "kafkalite-metadata.lock"
_SNAPSHOT_FORMAT = "kafkalite-metadata-snapshot"

T = TypeVar("T")


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


# --------------------------------------------------------------------------- the tree


@dataclass(slots=True, eq=False)
class _Node:
    data: bytes
    czxid: int
    mzxid: int
    pzxid: int
    ctime: int
    mtime: int
    version: int = 0
    # Children ever created. ZooKeeper keeps exactly this, uses it as the sequential
    # suffix, and reports cversion as creates + deletes = 2 * creates - live children.
    creates: int = 0
    ephemeral_owner: int = 0
    children: set[str] = field(default_factory=set)

    def stat(self) -> Stat:
        return Stat(
            czxid=self.czxid,
            mzxid=self.mzxid,
            pzxid=self.pzxid,
            ctime=self.ctime,
            mtime=self.mtime,
            version=self.version,
            cversion=2 * self.creates - len(self.children),
            ephemeral_owner=self.ephemeral_owner,
            data_length=len(self.data),
            num_children=len(self.children),
        )


@dataclass(slots=True, eq=False)
class _Session:
    id: int
    timeout_ms: int
    store: EmbeddedStore
    ephemerals: set[str] = field(default_factory=set)
    expiry: asyncio.TimerHandle | None = None
    dead: bool = False


@dataclass(slots=True, eq=False)
class _Txn:
    """Changes of one transaction: undo actions, watch events, journal records."""

    zxid: int
    now: int
    undo: list[Callable[[], None]] = field(default_factory=list)
    events: list[tuple[str, EventType]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)


def _put_data(obj: dict[str, Any], data: bytes) -> dict[str, Any]:
    """Store data readably when it is UTF-8 (it nearly always is JSON), else base64."""
    try:
        obj["d"] = data.decode("utf-8")
    except UnicodeDecodeError:
        obj["b"] = base64.b64encode(data).decode("ascii")
    return obj


def _get_data(obj: dict[str, Any]) -> bytes:
    if "d" in obj:
        return str(obj["d"]).encode("utf-8")
    if "b" in obj:
        return base64.b64decode(obj["b"])
    return b""


# --------------------------------------------------------------------------- persistence


class _Persistence:
    """Snapshot + fsynced append-only journal in one directory, guarded by a lock file."""

    def __init__(self, data_dir: Path, *, fsync: bool) -> None:
        self.dir = data_dir
        self.fsync = fsync
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(self._lock_fd)
            raise MetadataStoreError(
                f"metadata dir {self.dir} is in use by another embedded metadata store"
            ) from e
        self._journal: IO[bytes] | None = None
        self.records_since_snapshot = 0

    @property
    def journal_path(self) -> Path:
        return self.dir / JOURNAL_FILE

    @property
    def snapshot_path(self) -> Path:
        return self.dir / SNAPSHOT_FILE

    def load(self) -> tuple[int, dict[str, _Node], int]:
        """Return (last zxid, nodes, journal transactions replayed)."""
        zxid = 0
        nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0, 0, 0, 0)}
        if self.snapshot_path.exists():
            snap = json.loads(self.snapshot_path.read_bytes())
            if snap.get("format") != _SNAPSHOT_FORMAT:
                raise MetadataStoreError(f"{self.snapshot_path} is not a metadata snapshot")
            zxid = int(snap["zxid"])
            for obj in snap["nodes"]:
                path = obj["path"]
                node = _Node(
                    _get_data(obj),
                    czxid=obj["czxid"],
                    mzxid=obj["mzxid"],
                    pzxid=obj["pzxid"],
                    ctime=obj["ctime"],
                    mtime=obj["mtime"],
                    version=obj["version"],
                    creates=obj["creates"],
                )
                if path != "/":
                    parent, name = split_path(path)
                    if parent not in nodes:
                        raise MetadataStoreError(f"snapshot has {path} without its parent")
                    nodes[parent].children.add(name)
                nodes[path] = node
        replayed = 0
        if self.journal_path.exists():
            lines = self.journal_path.read_bytes().split(b"\n")
            for i, line in enumerate(lines):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    if all(not rest.strip() for rest in lines[i + 1 :]):
                        log.warning("ignoring torn last record of %s", self.journal_path)
                        break
                    raise MetadataStoreError(
                        f"{self.journal_path} is corrupt at record {i + 1}"
                    ) from None
                if entry["zxid"] <= zxid:
                    continue  # already in the snapshot (crash between snapshot and truncate)
                _replay(nodes, entry)
                zxid = entry["zxid"]
                replayed += 1
        return zxid, nodes, replayed

    def append(self, zxid: int, now: int, records: list[dict[str, Any]]) -> None:
        line = json.dumps(
            {"zxid": zxid, "time": now, "ops": records}, separators=(",", ":"), ensure_ascii=False
        ).encode("utf-8")
        journal = self._open_journal()
        start = journal.tell()
        try:
            journal.write(line + b"\n")
            journal.flush()
            if self.fsync:
                os.fsync(journal.fileno())
        except BaseException:
            # Never leave a partial line in the middle of the journal.
            try:
                journal.truncate(start)
                journal.seek(start)
            except OSError:
                pass
            raise
        self.records_since_snapshot += 1

    def _open_journal(self) -> IO[bytes]:
        if self._journal is None:
            self._journal = open(self.journal_path, "ab")  # noqa: SIM115 - kept open
            self._fsync_dir()
        return self._journal

    def write_snapshot(self, zxid: int, nodes: dict[str, _Node]) -> None:
        """Write the persistent tree atomically, then empty the journal."""
        out = []
        for path in sorted(nodes):
            node = nodes[path]
            if node.ephemeral_owner:
                continue
            out.append(
                _put_data(
                    {
                        "path": path,
                        "czxid": node.czxid,
                        "mzxid": node.mzxid,
                        "pzxid": node.pzxid,
                        "ctime": node.ctime,
                        "mtime": node.mtime,
                        "version": node.version,
                        "creates": node.creates,
                    },
                    node.data,
                )
            )
        body = json.dumps(
            {"format": _SNAPSHOT_FORMAT, "version": 1, "zxid": zxid, "nodes": out},
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode("utf-8")
        tmp = self.snapshot_path.with_name(SNAPSHOT_FILE + ".tmp")
        with open(tmp, "wb") as f:
            f.write(body)
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        os.replace(tmp, self.snapshot_path)
        self._fsync_dir()
        # Records up to zxid are now in the snapshot; loading skips them anyway.
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        with open(self.journal_path, "wb") as f:
            if self.fsync:
                os.fsync(f.fileno())
        self.records_since_snapshot = 0

    def _fsync_dir(self) -> None:
        if not self.fsync:
            return
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        finally:
            os.close(self._lock_fd)


def _replay(nodes: dict[str, _Node], entry: dict[str, Any]) -> None:
    zxid, now = entry["zxid"], entry["time"]
    for rec in entry["ops"]:
        op, path = rec["op"], rec["path"]
        try:
            if op == "create":
                parent, name = split_path(path)
                nodes[path] = _Node(_get_data(rec), zxid, zxid, zxid, now, now)
                nodes[parent].children.add(name)
                nodes[parent].creates = rec["creates"]
                nodes[parent].pzxid = zxid
            elif op == "set":
                node = nodes[path]
                node.data = _get_data(rec)
                node.version = rec["version"]
                node.mtime = now
                node.mzxid = zxid
            elif op == "delete":
                parent, name = split_path(path)
                del nodes[path]
                nodes[parent].children.discard(name)
                nodes[parent].pzxid = zxid
            elif op == "creates":
                nodes[path].creates = rec["creates"]
                nodes[path].pzxid = zxid
            else:
                raise MetadataStoreError(f"unknown journal op {op!r}")
        except KeyError as e:
            raise MetadataStoreError(f"journal record {rec!r} (zxid {zxid}) does not apply") from e


# --------------------------------------------------------------------------- the server


class EmbeddedEnsemble:
    """The shared in-process "server": the znode tree, sessions and persistence.

    Not thread-safe: use it from one event loop. ``clock`` returns epoch milliseconds
    for ctime/mtime. ``fsync=False`` trades durability for speed (tests).
    """

    def __init__(
        self,
        data_dir: Path | str | None = None,
        *,
        clock: Callable[[], int] = _wall_clock_ms,
        fsync: bool = True,
        compact_every: int = 10_000,
    ) -> None:
        self._clock = clock
        self._compact_every = compact_every
        self._sessions: dict[int, _Session] = {}
        # Session ids look like ZooKeeper's (time-seeded high bits) and never repeat.
        self._session_ids = itertools.count(((_wall_clock_ms() << 24) & 0x7FFF_FFFF_FF00_0000) | 1)
        self._closed = False
        self._persistence: _Persistence | None = None
        self._zxid = 0
        self._nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0, 0, 0, 0)}
        if data_dir is not None:
            self._persistence = _Persistence(Path(data_dir), fsync=fsync)
            try:
                self._zxid, self._nodes, replayed = self._persistence.load()
                if replayed or not self._persistence.snapshot_path.exists():
                    self._persistence.write_snapshot(self._zxid, self._nodes)
            except BaseException:
                self._persistence.close()
                raise

    @property
    def data_dir(self) -> Path | None:
        return self._persistence.dir if self._persistence else None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def last_zxid(self) -> int:
        return self._zxid

    def connect(
        self, session_timeout_ms: int = 18000, *, close_ensemble_on_close: bool = False
    ) -> EmbeddedStore:
        """Open a new session; must be called with the event loop running.

        ``close_ensemble_on_close`` makes the store own the ensemble (single broker).
        """
        self._check_open()
        if session_timeout_ms <= 0:
            raise ValueError("session_timeout_ms must be positive")
        store = EmbeddedStore(self, session_timeout_ms, asyncio.get_running_loop())
        store._owns_ensemble = close_ensemble_on_close
        return store

    def close(self) -> None:
        """Close every session (dropping ephemerals), compact and release the data dir."""
        if self._closed:
            return
        for session in list(self._sessions.values()):
            session.store._shutdown()
            self._end_session(session, notify=False)
        self._closed = True
        if self._persistence is not None:
            try:
                if self._persistence.records_since_snapshot:
                    self._persistence.write_snapshot(self._zxid, self._nodes)
            finally:
                self._persistence.close()

    def __enter__(self) -> EmbeddedEnsemble:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def dump(self) -> dict[str, bytes]:
        """Every znode's data by path (debugging and tests)."""
        return {path: node.data for path, node in sorted(self._nodes.items())}

    # ---- sessions

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the embedded metadata ensemble is closed")

    def _new_session(self, store: EmbeddedStore) -> _Session:
        self._check_open()
        session = _Session(next(self._session_ids), store.session_timeout_ms, store)
        self._sessions[session.id] = session
        return session

    def _end_session(self, session: _Session, *, notify: bool) -> None:
        """Expire or close a session: delete its ephemerals, firing others' watches."""
        if session.dead:
            return
        session.dead = True
        if session.expiry is not None:
            session.expiry.cancel()
            session.expiry = None
        self._sessions.pop(session.id, None)
        if session.ephemerals and not self._closed:

            def drop(txn: _Txn) -> None:
                for path in sorted(session.ephemerals, reverse=True):
                    if path in self._nodes:
                        self._remove_node(txn, path)

            self._transact(drop)  # deleting ephemerals writes no journal record
        session.ephemerals.clear()
        if notify:
            session.store._session_expired(session)

    def _expire_session(self, session: _Session) -> None:
        log.info("metadata session 0x%x expired", session.id)
        self._end_session(session, notify=True)

    # ---- transactions

    def _transact(self, fn: Callable[[_Txn], T]) -> T:
        self._check_open()
        txn = _Txn(self._zxid + 1, self._clock())
        try:
            result = fn(txn)
            if self._persistence is not None and txn.records:
                self._persistence.append(txn.zxid, txn.now, txn.records)
        except BaseException:
            for undo in reversed(txn.undo):
                undo()
            raise
        if txn.undo:
            self._zxid = txn.zxid
        self._fire(txn.events)
        if (
            self._persistence is not None
            and self._persistence.records_since_snapshot >= self._compact_every
        ):
            try:
                self._persistence.write_snapshot(self._zxid, self._nodes)
            except OSError:
                # The transaction is committed (journaled); compaction can wait.
                log.exception("metadata snapshot failed; will retry later")
        return result

    def _fire(self, events: list[tuple[str, EventType]]) -> None:
        if not events:
            return
        stores = [s.store for s in self._sessions.values()]
        for path, etype in events:
            for store in stores:
                store._trigger(path, etype)

    def _create(
        self,
        txn: _Txn,
        session: _Session,
        path: str,
        data: bytes,
        *,
        ephemeral: bool,
        sequential: bool,
    ) -> str:
        validate_path(path, sequential=sequential)
        if path == "/":
            raise NodeExistsError(path=path)
        parent_path, name = split_path(path)
        parent = self._nodes.get(parent_path)
        if parent is None:
            raise NoNodeError(f"parent of {path} does not exist", path=path)
        if parent.ephemeral_owner:
            raise NoChildrenForEphemeralsError(path=path)
        if sequential:
            name = f"{name}{parent.creates:010d}"
            path = join_path(parent_path, name)
        if name in parent.children:
            raise NodeExistsError(path=path)
        node = _Node(
            data,
            txn.zxid,
            txn.zxid,
            txn.zxid,
            txn.now,
            txn.now,
            ephemeral_owner=session.id if ephemeral else 0,
        )
        old = (parent.creates, parent.pzxid)
        self._nodes[path] = node
        parent.children.add(name)
        parent.creates += 1
        parent.pzxid = txn.zxid
        if ephemeral:
            session.ephemerals.add(path)

        def undo() -> None:
            del self._nodes[path]
            parent.children.discard(name)
            parent.creates, parent.pzxid = old
            session.ephemerals.discard(path)

        txn.undo.append(undo)
        txn.events.append((path, EventType.CREATED))
        txn.events.append((parent_path, EventType.CHILD))
        if ephemeral:
            # Not the node, but the counter: sequential names must never repeat.
            txn.records.append({"op": "creates", "path": parent_path, "creates": parent.creates})
        else:
            txn.records.append(
                _put_data({"op": "create", "path": path, "creates": parent.creates}, data)
            )
        return path

    def _set(self, txn: _Txn, path: str, data: bytes, version: int) -> Stat:
        validate_path(path)
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(path=path)
        if version != ANY_VERSION and version != node.version:
            raise BadVersionError(f"{path}: version {node.version}, expected {version}", path=path)
        old = (node.data, node.version, node.mtime, node.mzxid)
        node.data = data
        node.version += 1
        node.mtime = txn.now
        node.mzxid = txn.zxid

        def undo() -> None:
            node.data, node.version, node.mtime, node.mzxid = old

        txn.undo.append(undo)
        txn.events.append((path, EventType.CHANGED))
        if not node.ephemeral_owner:
            txn.records.append(
                _put_data({"op": "set", "path": path, "version": node.version}, data)
            )
        return node.stat()

    def _check(self, path: str, version: int) -> None:
        validate_path(path)
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(path=path)
        if version != ANY_VERSION and version != node.version:
            raise BadVersionError(f"{path}: version {node.version}, expected {version}", path=path)

    def _delete(self, txn: _Txn, path: str, version: int, *, recursive: bool) -> None:
        validate_path(path)
        if path == "/":
            raise ValueError("the root znode cannot be deleted")
        self._check(path, version)
        node = self._nodes[path]
        if node.children and not recursive:
            raise NotEmptyError(path=path)
        for victim in self._post_order(path):
            self._remove_node(txn, victim)

    def _post_order(self, path: str) -> Iterator[str]:
        for name in sorted(self._nodes[path].children):
            yield from self._post_order(join_path(path, name))
        yield path

    def _remove_node(self, txn: _Txn, path: str) -> None:
        parent_path, name = split_path(path)
        parent = self._nodes[parent_path]
        node = self._nodes.pop(path)
        parent.children.discard(name)
        old_pzxid = parent.pzxid
        parent.pzxid = txn.zxid
        owner = self._sessions.get(node.ephemeral_owner) if node.ephemeral_owner else None
        if owner is not None:
            owner.ephemerals.discard(path)

        def undo() -> None:
            self._nodes[path] = node
            parent.children.add(name)
            parent.pzxid = old_pzxid
            if owner is not None:
                owner.ephemerals.add(path)

        txn.undo.append(undo)
        txn.events.append((path, EventType.DELETED))
        txn.events.append((parent_path, EventType.CHILD))
        if not node.ephemeral_owner:
            txn.records.append({"op": "delete", "path": path})


# --------------------------------------------------------------------------- the client


class EmbeddedStore(MetadataStore):
    """One session on an :class:`EmbeddedEnsemble`.

    Fault injection: :meth:`pause` simulates a network partition (SUSPENDED; requests
    fail with ConnectionLossError; the session expires server-side after the timeout),
    :meth:`resume` reconnects (LOST then CONNECTED with a new session if it expired in
    the meantime), :meth:`expire` expires the session now.
    """

    def __init__(
        self, ensemble: EmbeddedEnsemble, session_timeout_ms: int, loop: asyncio.AbstractEventLoop
    ) -> None:
        self._ensemble = ensemble
        self.session_timeout_ms = session_timeout_ms
        self._loop = loop
        self._dispatcher = CallbackDispatcher(loop)
        self._listeners: dict[StateListener, None] = {}
        self._data_watches: dict[str, dict[WatchCallback, None]] = {}
        self._child_watches: dict[str, dict[WatchCallback, None]] = {}
        self._paused = False
        # Events that happen during a partition reach the client when it reconnects
        # (ZooKeeper re-arms watches on reconnect and fires what it missed).
        self._held: list[tuple[WatchCallback, WatchedEvent]] = []
        self._closed = False
        self._owns_ensemble = False
        self._session: _Session = ensemble._new_session(self)
        self._state = SessionState.CONNECTED

    # ---- properties

    @property
    def ensemble(self) -> EmbeddedEnsemble:
        return self._ensemble

    @property
    def session_id(self) -> int | None:
        if self._closed or self._paused or self._session.dead:
            return None
        return self._session.id

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def closed(self) -> bool:
        return self._closed

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
        await loop_slices.pause()
        session = self._live_session()
        data = data_bytes(data)
        ens = self._ensemble

        def run(txn: _Txn) -> str:
            if makepath:
                validate_path(path, sequential=sequential)
                parent = split_path(path)[0]
                missing: list[str] = []
                while parent not in ens._nodes:
                    missing.append(parent)
                    parent = split_path(parent)[0]
                for p in reversed(missing):
                    ens._create(txn, session, p, b"", ephemeral=False, sequential=False)
            return ens._create(txn, session, path, data, ephemeral=ephemeral, sequential=sequential)

        return ens._transact(run)

    async def get(self, path: str, *, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        self._live_session()
        validate_path(path)
        node = self._ensemble._nodes.get(path)
        if node is None:
            raise NoNodeError(path=path)
        if watch is not None:
            self._data_watches.setdefault(path, {})[watch] = None
        return node.data, node.stat()

    async def set(self, path: str, data: bytes, *, version: int = ANY_VERSION) -> Stat:
        await loop_slices.pause()
        self._live_session()
        data = data_bytes(data)
        return self._ensemble._transact(lambda txn: self._ensemble._set(txn, path, data, version))

    async def delete(
        self, path: str, *, version: int = ANY_VERSION, recursive: bool = False
    ) -> None:
        await loop_slices.pause()
        self._live_session()
        self._ensemble._transact(
            lambda txn: self._ensemble._delete(txn, path, version, recursive=recursive)
        )

    async def exists(self, path: str, *, watch: WatchCallback | None = None) -> Stat | None:
        self._live_session()
        validate_path(path)
        node = self._ensemble._nodes.get(path)
        if watch is not None:
            self._data_watches.setdefault(path, {})[watch] = None
        return None if node is None else node.stat()

    async def get_children(self, path: str, *, watch: WatchCallback | None = None) -> list[str]:
        self._live_session()
        validate_path(path)
        node = self._ensemble._nodes.get(path)
        if node is None:
            raise NoNodeError(path=path)
        if watch is not None:
            self._child_watches.setdefault(path, {})[watch] = None
        return sorted(node.children)

    async def multi(self, ops: Sequence[Op]) -> list[MultiResult]:
        await loop_slices.pause()
        session = self._live_session()
        ens = self._ensemble
        ops = list(ops)

        def run(txn: _Txn) -> list[MultiResult]:
            results: list[MultiResult] = []
            for i, op in enumerate(ops):
                try:
                    if isinstance(op, CreateOp):
                        results.append(
                            ens._create(
                                txn,
                                session,
                                op.path,
                                data_bytes(op.data),
                                ephemeral=op.ephemeral,
                                sequential=op.sequential,
                            )
                        )
                    elif isinstance(op, SetDataOp):
                        results.append(ens._set(txn, op.path, data_bytes(op.data), op.version))
                    elif isinstance(op, DeleteOp):
                        ens._delete(txn, op.path, op.version, recursive=False)
                        results.append(None)
                    elif isinstance(op, CheckOp):
                        ens._check(op.path, op.version)
                        results.append(None)
                    else:
                        raise TypeError(f"not a metadata op: {op!r}")
                except MetadataStoreError as e:
                    e.op_index = i
                    raise
            return results

        return ens._transact(run)

    def add_state_listener(self, listener: StateListener) -> None:
        self._listeners[listener] = None

    def remove_state_listener(self, listener: StateListener) -> None:
        self._listeners.pop(listener, None)

    async def close(self) -> None:
        if self._closed:
            return
        self._shutdown()
        if not self._ensemble.closed:
            self._ensemble._end_session(self._session, notify=False)
        if self._owns_ensemble:
            self._ensemble.close()

    # ---- fault injection

    def pause(self) -> None:
        """Drop the "connection": SUSPENDED now, session expiry after the timeout."""
        self._check_not_closed()
        if self._paused:
            return
        self._paused = True
        self._set_state(SessionState.SUSPENDED)
        session = self._session
        if not session.dead:
            session.expiry = self._loop.call_later(
                self.session_timeout_ms / 1000, self._ensemble._expire_session, session
            )

    def resume(self) -> None:
        """Reconnect; reports LOST + CONNECTED (new session) if the old one expired."""
        self._check_not_closed()
        if not self._paused:
            return
        self._paused = False
        if self._session.dead:
            self._renew_session()
        else:
            if self._session.expiry is not None:
                self._session.expiry.cancel()
                self._session.expiry = None
            self._set_state(SessionState.CONNECTED)
            held, self._held = self._held, []
            for callback, event in held:
                self._dispatcher.submit(callback, event)

    async def expire(self) -> None:
        """Expire the session now, as the server would after a timeout."""
        self._check_not_closed()
        self._ensemble._expire_session(self._session)

    @property
    def paused(self) -> bool:
        return self._paused

    # ---- internals

    def _check_not_closed(self) -> None:
        if self._closed:
            raise StoreClosedError("metadata store is closed")
        self._ensemble._check_open()

    def _live_session(self) -> _Session:
        self._check_not_closed()
        if self._paused:
            raise ConnectionLossError("metadata store connection is down (paused)")
        if self._session.dead:  # pragma: no cover - renewed synchronously on expiry
            raise SessionExpiredError("metadata session expired")
        return self._session

    def _set_state(self, state: SessionState) -> None:
        self._state = state
        for listener in list(self._listeners):
            self._dispatcher.submit(listener, state)

    def _session_expired(self, session: _Session) -> None:
        """Called by the ensemble; the client "hears" of it unless partitioned."""
        if self._closed or session is not self._session:
            return
        self._data_watches.clear()
        self._child_watches.clear()
        if not self._paused:
            self._renew_session()

    def _renew_session(self) -> None:
        self._held.clear()
        self._data_watches.clear()
        self._child_watches.clear()
        self._set_state(SessionState.LOST)
        self._session = self._ensemble._new_session(self)
        self._set_state(SessionState.CONNECTED)

    def _trigger(self, path: str, etype: EventType) -> None:
        if etype is EventType.CHILD:
            callbacks = list(self._child_watches.pop(path, ()))
        elif etype is EventType.DELETED:
            callbacks = list(self._data_watches.pop(path, ()))
            callbacks += self._child_watches.pop(path, ())
        else:
            callbacks = list(self._data_watches.pop(path, ()))
        if callbacks and not self._loop.is_closed():
            event = WatchedEvent(etype, path)
            for callback in callbacks:
                if self._paused:
                    self._held.append((callback, event))
                else:
                    self._dispatcher.submit(callback, event)

    def _shutdown(self) -> None:
        self._closed = True
        self._dispatcher.close()
        self._data_watches.clear()
        self._child_watches.clear()
        self._listeners.clear()
        self._held.clear()
        if self._session.expiry is not None:
            self._session.expiry.cancel()
            self._session.expiry = None
