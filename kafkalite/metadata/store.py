"""The ZooKeeper-like metadata store API shared by every backend.

The controller and brokers only ever see :class:`MetadataStore`; whether it is the
in-process :mod:`~kafkalite.metadata.embedded_store` store or a real ZooKeeper ensemble
(:mod:`~kafkalite.metadata.zookeeper`) is invisible to them. The data model is
ZooKeeper's: a tree of znodes holding bytes, each with a :class:`Stat`; persistent,
ephemeral (tied to a session) and sequential nodes; one-shot watches; atomic multi-op.
"""

from __future__ import annotations

import abc
import asyncio
import enum
import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeAlias

from kafkalite.timer import loop_slices

__all__ = [
    "ANY_VERSION",
    "BadVersionError",
    "CallbackDispatcher",
    "CheckOp",
    "ConnectionLossError",
    "CreateOp",
    "DeleteOp",
    "EventType",
    "MetadataStore",
    "MetadataStoreError",
    "MultiResult",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "Op",
    "SessionExpiredError",
    "SessionState",
    "SetDataOp",
    "Stat",
    "StateListener",
    "StoreClosedError",
    "WatchCallback",
    "WatchedEvent",
    "data_bytes",
    "join_path",
    "split_path",
    "validate_path",
]

log = logging.getLogger(__name__)

#: ``version=-1`` means "whatever the current version is", as in ZooKeeper.
ANY_VERSION = -1


# --------------------------------------------------------------------------- errors


class MetadataStoreError(Exception):
    """Base class of every store error.

    ``path`` is the znode the failure is about (when known). ``op_index`` is set when
    the error comes out of :meth:`MetadataStore.multi`: the index of the op that failed.
    """

    def __init__(self, message: str = "", *, path: str | None = None) -> None:
        super().__init__(message or (path or ""))
        self.path = path
        self.op_index: int | None = None


class NoNodeError(MetadataStoreError):
    """The znode (or, for create, its parent) does not exist."""


class NodeExistsError(MetadataStoreError):
    """The znode to create already exists."""


class BadVersionError(MetadataStoreError):
    """A conditional write or check named a version the znode no longer has."""


class NotEmptyError(MetadataStoreError):
    """A non-recursive delete hit a znode that still has children."""


class NoChildrenForEphemeralsError(MetadataStoreError):
    """Ephemeral znodes cannot have children."""


class SessionExpiredError(MetadataStoreError):
    """The session is gone; its ephemerals were deleted and its watches dropped."""


class ConnectionLossError(MetadataStoreError):
    """The outcome of the request is unknown: the connection to the store dropped.

    The session may still be alive; the caller decides whether to retry (a retried
    create may then see :class:`NodeExistsError` for its own earlier success).
    """


class StoreClosedError(MetadataStoreError):
    """The store was closed by its owner."""


# --------------------------------------------------------------------------- values


class EventType(enum.Enum):
    """What a one-shot watch reports."""

    CREATED = "CREATED"
    DELETED = "DELETED"
    CHANGED = "CHANGED"
    CHILD = "CHILD"


@dataclass(frozen=True, slots=True)
class WatchedEvent:
    type: EventType
    path: str


class SessionState(enum.Enum):
    """Connection/session states reported to state listeners (Curator/kazoo style).

    SUSPENDED: the connection dropped, the session may still be alive (ephemerals
    still exist); writes are unsafe until CONNECTED again. LOST (alias EXPIRED): the
    session is gone with its ephemerals and watches; the store opens a new session by
    itself and reports CONNECTED again, after which the owner must re-register
    ephemerals and watches.
    """

    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"
    EXPIRED = "LOST"


@dataclass(frozen=True, slots=True)
class Stat:
    """A znode's metadata, with ZooKeeper's meaning for every field.

    ``version`` counts data changes, ``cversion`` child changes; ``ephemeral_owner`` is
    the owning session id (0 for persistent nodes); times are epoch milliseconds.
    """

    czxid: int
    mzxid: int
    pzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int

    @property
    def ephemeral(self) -> bool:
        return self.ephemeral_owner != 0


@dataclass(frozen=True, slots=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True, slots=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class DeleteOp:
    path: str
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class CheckOp:
    """Asserts the znode exists and (unless ``version`` is -1) has that version."""

    path: str
    version: int = ANY_VERSION


Op: TypeAlias = CreateOp | SetDataOp | DeleteOp | CheckOp
#: Per-op results of a committed multi: created path, new Stat, or None (delete/check).
MultiResult: TypeAlias = str | Stat | None

WatchCallback: TypeAlias = Callable[[WatchedEvent], Awaitable[None] | None]
StateListener: TypeAlias = Callable[[SessionState], Awaitable[None] | None]


# --------------------------------------------------------------------------- paths


def validate_path(path: str, *, sequential: bool = False) -> str:
    """Check a znode path the way ZooKeeper does and return it.

    A sequential create may end in "/" (the name is then just the counter).
    """
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"znode path must be a str starting with '/': {path!r}")
    if path == "/":
        return path
    body = path[1:]
    if sequential and body.endswith("/"):
        body += "x"  # the counter will be the last component
    for part in body.split("/"):
        if part in ("", ".", ".."):
            raise ValueError(f"invalid znode path: {path!r}")
        if "\x00" in part:
            raise ValueError(f"znode path contains NUL: {path!r}")
    return path


def split_path(path: str) -> tuple[str, str]:
    """``"/a/b"`` -> ``("/a", "b")``; ``"/a"`` -> ``("/", "a")``."""
    parent, _, name = path.rpartition("/")
    return (parent or "/"), name


def join_path(parent: str, name: str) -> str:
    return f"/{name}" if parent == "/" else f"{parent}/{name}"


def data_bytes(data: object) -> bytes:
    """Znode data must be bytes-like; a str is refused rather than guessed at."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"znode data must be bytes, not {type(data).__name__}")


# --------------------------------------------------------------------------- callbacks


class CallbackDispatcher:
    """Delivers watch events and state changes to callbacks one at a time, in order.

    ZooKeeper clients have a single event thread; this is its asyncio equivalent. A
    callback may be a plain function or return an awaitable (then it is awaited before
    the next one runs, which keeps ordering strict). Callbacks never run inside the
    store call that caused them. A coroutine callback that waits for another event of
    the same store would deadlock: hand such work to a task or queue instead.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._queue: deque[tuple[Callable[[Any], Any], Any]] = deque()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def submit(self, callback: Callable[[Any], Any], arg: Any) -> None:
        """Queue ``callback(arg)``; must be called on the loop's thread."""
        if self._closed or self.loop.is_closed():
            return
        self._queue.append((callback, arg))
        if self._task is None or self._task.done():
            self._task = self.loop.create_task(self._drain(), name="metadata-callbacks")

    def submit_threadsafe(self, callback: Callable[[Any], Any], arg: Any) -> None:
        """Queue from a foreign thread (kazoo's); silently drops if the loop is gone."""
        try:
            self.loop.call_soon_threadsafe(self.submit, callback, arg)
        except RuntimeError:
            pass

    async def _drain(self) -> None:
        while self._queue and not self._closed:
            callback, arg = self._queue.popleft()
            try:
                result = callback(arg)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("metadata store callback %r failed on %r", callback, arg)

    def close(self) -> None:
        """Drop pending callbacks; one already running finishes on its own."""
        self._closed = True
        self._queue.clear()


# --------------------------------------------------------------------------- the API


class MetadataStore(abc.ABC):
    """One client session on a ZooKeeper-like store.

    Every method is a coroutine and must be awaited on the store's event loop. Paths
    are absolute ("/brokers/ids/1"). Watches are one-shot: registering the same callback
    twice on the same path and kind yields one event. A failed read (NoNodeError)
    registers nothing, except :meth:`exists`, which watches for creation.
    """

    @property
    @abc.abstractmethod
    def session_id(self) -> int | None:
        """Current session id (changes after expiry); None when not connected."""

    @property
    @abc.abstractmethod
    def state(self) -> SessionState:
        """Last known session state."""

    @abc.abstractmethod
    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        makepath: bool = False,
    ) -> str:
        """Create a znode and return its actual path (with the sequence suffix if any).

        ``sequential`` appends a 10-digit zero-padded counter taken from the parent's
        cversion, like ZooKeeper. ``makepath`` creates missing parents as empty
        persistent znodes (not atomically with the create).
        """

    @abc.abstractmethod
    async def get(self, path: str, *, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        """Data and Stat; ``watch`` fires once on CHANGED or DELETED."""

    @abc.abstractmethod
    async def set(self, path: str, data: bytes, *, version: int = ANY_VERSION) -> Stat:
        """Replace the data if the version matches (-1: unconditional)."""

    @abc.abstractmethod
    async def delete(
        self, path: str, *, version: int = ANY_VERSION, recursive: bool = False
    ) -> None:
        """Delete a znode; ``recursive`` deletes the subtree (version checks the top)."""

    @abc.abstractmethod
    async def exists(self, path: str, *, watch: WatchCallback | None = None) -> Stat | None:
        """Stat or None; ``watch`` fires once on CREATED, CHANGED or DELETED."""

    @abc.abstractmethod
    async def get_children(self, path: str, *, watch: WatchCallback | None = None) -> list[str]:
        """Child names, sorted; ``watch`` fires once on CHILD or DELETED."""

    @abc.abstractmethod
    async def multi(self, ops: Sequence[Op]) -> list[MultiResult]:
        """Apply all ops atomically or none.

        On failure raises the failing op's error with ``op_index`` set; nothing changed.
        """

    @abc.abstractmethod
    def add_state_listener(self, listener: StateListener) -> None:
        """Call ``listener(state)`` on every session state change, via the dispatcher."""

    @abc.abstractmethod
    def remove_state_listener(self, listener: StateListener) -> None: ...

    @abc.abstractmethod
    async def close(self) -> None:
        """End the session (its ephemerals go away) and release resources. Idempotent."""

    # ---- conveniences built on the primitives

    async def ensure_path(self, path: str) -> None:
        """Create ``path`` and its parents as persistent empty znodes if missing."""
        validate_path(path)
        if path == "/":
            return
        if await self.exists(path) is not None:
            return
        try:
            await self.create(path, makepath=True)
        except NodeExistsError:
            pass

    async def get_or_none(
        self, path: str, *, watch: WatchCallback | None = None
    ) -> tuple[bytes, Stat] | None:
        """Like :meth:`get`, None when missing.

        With a watch, a missing znode gets an exists-watch instead, so the caller
        hears about its creation; that is what handlers of optional znodes want.
        """
        try:
            return await self.get(path, watch=watch)
        except NoNodeError:
            if watch is None:
                return None
        # Missing: watch for creation, but it may have appeared in between.
        if await self.exists(path, watch=watch) is None:
            return None
        try:
            return await self.get(path, watch=watch)
        except NoNodeError:
            return None

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        """Data and Stat of each path (None where missing), in order, without watches.

        The controller reads thousands of partition-state znodes at a time; backends
        that talk to a server override this to pipeline the reads.
        """
        out: list[tuple[bytes, Stat] | None] = []
        for path in paths:
            try:
                out.append(await self.get(path))
            except NoNodeError:
                out.append(None)
            await loop_slices.pause()
        return out

    async def __aenter__(self) -> MetadataStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
