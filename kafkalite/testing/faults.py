"""Fault injection for embedded brokers, in the spirit of franz-go kfake's ``ControlKey``.

A :class:`FaultInjector` sits in front of a broker's request handlers as the
request channel's interceptor (``RequestChannel.interceptor``, the one hook the
production server has for this). Requests matching a :class:`Rule` (API key, version
range, client id, predicate; a number of times or forever) are dropped, delayed,
answered with an error code, or have their connection severed. It can also sever
live connections and move partition leadership. This is how a test drives a
client's retry, reconnect and metadata-refresh code against a real broker.

Semantics (they follow Kafka's one-request-at-a-time connections):

- ``delay(ms)`` runs the real handler after ``ms``. Later requests on the same
  connection wait behind it, as a Kafka broker does not read a connection's next
  request before answering the current one, so their order (and an idempotent
  producer's sequence numbers) is kept. ``delay(None)`` holds requests until the
  rule is removed (``remove``/``clear``), then handles them in order.
- ``drop(close_after_ms)`` never answers: the request is not handled, neither are
  later requests on that connection, and the connection is closed after
  ``close_after_ms``. A silent connection that stayed open forever would pin the
  broker's in-order writer; set ``close_after_ms`` above the client's request
  timeout to exercise its timeout path, below it for its disconnect path.
- ``error(code)`` answers at once with ``code`` in every error field of the
  response (per partition, per topic, per group or resource, or top level), without
  running the handler: nothing is appended or committed. The response is the API
  table's error response (``ApiSpec.error_response``, one per client API, next to
  its handler); Metadata keeps the real brokers and controller so clients stay
  connected. acks=0 produce (which has no response) closes the connection instead,
  which is how Kafka itself tells such a client something went wrong.
  With ``after_handling=True`` the handler runs first and only its response is
  replaced (a Kafka REQUEST_TIMED_OUT after the append); ``drop`` takes the same
  flag (the response is lost). These are the cases that make a retry duplicate
  unless the producer is idempotent.
- ``sever()`` closes the connection when the request arrives; the request is not
  handled and responses still queued on that connection are lost.

Controller-to-broker requests (LeaderAndIsr, UpdateMetadata, StopReplica,
ControlledShutdown) bypass the injector. Rules may be added and removed from any
thread; everything else runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkalite.common.types import TopicPartition
from kafkalite.controller.preferred_election import PREFERRED_ELECTION
from kafkalite.network.request_channel import Intercepted
from kafkalite.network.responses import CloseConnection
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing.leadership import (
    active_controller,
    partition_of,
    reassign,
    set_partition_leader,
    until,
)

if TYPE_CHECKING:
    from kafkalite.network.api_spec import ApiSpec, RequestContext
    from kafkalite.network.connection import Connection
    from kafkalite.server.broker import KafkaBroker

__all__ = [
    "Delay",
    "Drop",
    "Error",
    "FaultInjector",
    "Rule",
    "Sever",
    "api_key_of",
    "error_code_of",
    "error_response",
]

log = logging.getLogger(__name__)

#: an API key (``ApiKey.PRODUCE``, ``0``), its name (``"Produce"``, ``"LIST_OFFSETS"``), or None for any
ApiSelector = int | str | None


# --------------------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class Drop:
    """Never answer; close the connection after ``close_after_ms``.

    ``after_handling``: the request is handled (appended, committed) and only its
    response is lost, the case that makes a non-idempotent retry duplicate.
    """

    close_after_ms: float = 1000.0
    after_handling: bool = False


@dataclass(frozen=True, slots=True)
class Delay:
    """Handle the request after ``ms`` (None: when the rule is removed)."""

    ms: float | None


@dataclass(frozen=True, slots=True)
class Error:
    """Answer with this error code everywhere in the response.

    ``after_handling``: run the real handler first (its effects happen) and send the
    error instead of its response, as a Kafka REQUEST_TIMED_OUT after the append.
    """

    code: int
    after_handling: bool = False


@dataclass(frozen=True, slots=True)
class Sever:
    """Close the connection."""


Action = Drop | Delay | Error | Sever


def api_key_of(api: ApiSelector) -> int | None:
    """``"FindCoordinator"``, ``"find_coordinator"``, ``ApiKey.FIND_COORDINATOR`` and 10 are one key."""
    if api is None or isinstance(api, int):
        return None if api is None else int(api)
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", api.strip()).replace("-", "_").upper()
    try:
        return int(ApiKey[name])
    except KeyError:
        raise ValueError(f"unknown Kafka API {api!r}") from None


def error_code_of(code: int | str) -> int:
    """An error code from its number or its name (``"NOT_LEADER_OR_FOLLOWER"``)."""
    if isinstance(code, str):
        try:
            return int(ErrorCode[code.strip().lower()])
        except KeyError:
            raise ValueError(f"unknown Kafka error code {code!r}") from None
    return int(ErrorCode(int(code)))


# --------------------------------------------------------------------------- rules


@dataclass(eq=False)
class Rule:
    """Which requests a fault applies to, and how many more times (None: forever)."""

    action: Action
    api_key: int | None = None
    versions: tuple[int, int] | None = None
    client_id: str | None = None
    when: Callable[[RequestContext, Any], bool] | None = None
    times: int | None = 1
    #: requests this rule has applied to so far
    hits: int = 0
    _released: bool = field(default=False, repr=False)
    _waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = field(
        default_factory=list, repr=False
    )

    def matches(self, ctx: RequestContext, request: Any) -> bool:
        if self.api_key is not None and ctx.api_key != self.api_key:
            return False
        if self.versions is not None and not (
            self.versions[0] <= ctx.api_version <= self.versions[1]
        ):
            return False
        if self.client_id is not None and ctx.client_id != self.client_id:
            return False
        return self.when is None or bool(self.when(ctx, request))

    def _release(self) -> None:
        """Let requests held by ``delay(None)`` go (callable from any thread)."""
        self._released = True
        waiters, self._waiters = self._waiters, []
        for loop, fut in waiters:
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(_resolve, fut)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class _ConnState:
    """Per-connection bookkeeping (the injector's, keyed by connection)."""

    __slots__ = ("client_id", "tail")

    def __init__(self) -> None:
        self.client_id: str | None = None
        #: resolved once the last delayed/held request of this connection was handled
        self.tail: asyncio.Future[None] | None = None


# --------------------------------------------------------------------------- injector


class FaultInjector:
    """Rules in front of one broker's handlers (``b.faults`` on embedded brokers).

    It is the broker's request interceptor (a :data:`RequestInterceptor`, called
    with each request): :meth:`attach` sets it as ``broker.channel.interceptor``.
    """

    def __init__(self) -> None:
        self._rules: tuple[Rule, ...] = ()
        self._held: set[Rule] = set()
        self._lock = threading.Lock()
        self.broker: KafkaBroker | None = None
        #: connections seen (on the broker's loop only); closed ones are forgotten
        #: whenever a new one arrives
        self._conns: dict[Connection, _ConnState] = {}

    def attach(self, broker: KafkaBroker) -> None:
        """Sit in front of ``broker``'s handlers (again after each restart)."""
        self.broker = broker
        self._conns = {}
        broker.channel.interceptor = self

    # ---- rules ------------------------------------------------------------------
    @property
    def rules(self) -> tuple[Rule, ...]:
        return self._rules

    def add(
        self,
        api: ApiSelector,
        action: Action,
        *,
        versions: tuple[int, int] | int | None = None,
        client_id: str | None = None,
        when: Callable[[RequestContext, Any], bool] | None = None,
        times: int | None = 1,
    ) -> Rule:
        """Apply ``action`` to the next ``times`` matching requests (None: until removed)."""
        if times is not None and times <= 0:
            raise ValueError("times must be positive (or None for forever)")
        if isinstance(versions, int):
            versions = (versions, versions)
        rule = Rule(action, api_key_of(api), versions, client_id, when, times)
        with self._lock:
            self._rules = (*self._rules, rule)
        return rule

    def drop(
        self,
        api: ApiSelector = None,
        *,
        close_after_ms: float = 1000.0,
        after_handling: bool = False,
        **match: Any,
    ) -> Rule:
        return self.add(api, Drop(close_after_ms, after_handling), **match)

    def delay(self, api: ApiSelector, ms: float | None, **match: Any) -> Rule:
        return self.add(api, Delay(ms), **match)

    def error(
        self, api: ApiSelector, code: int | str, *, after_handling: bool = False, **match: Any
    ) -> Rule:
        return self.add(api, Error(error_code_of(code), after_handling), **match)

    def sever(self, api: ApiSelector = None, **match: Any) -> Rule:
        return self.add(api, Sever(), **match)

    def remove(self, rule: Rule) -> None:
        """Stop applying ``rule``; requests it holds are handled now."""
        with self._lock:
            self._rules = tuple(r for r in self._rules if r is not rule)
            self._held.discard(rule)
        rule._release()

    def clear(self) -> None:
        """Remove every rule and release every held request."""
        with self._lock:
            rules = set(self._rules) | self._held
            self._rules = ()
            self._held = set()
        for r in rules:
            r._release()

    # ---- the request hook ---------------------------------------------------------
    def __call__(self, ctx: RequestContext, request: Any, spec: ApiSpec) -> Intercepted | None:
        """The request channel's interceptor: None passes the request to its handler."""
        conn = ctx.connection
        st = self._conns.get(conn)
        if st is None:
            self._conns = {c: s for c, s in self._conns.items() if not c.closed}
            st = self._conns[conn] = _ConnState()
        st.client_id = ctx.client_id
        rule = self._match(ctx, request) if self._rules else None
        if rule is None:
            if st.tail is None:
                return None
            return Intercepted(self._chain(st, None, spec, ctx, request))
        return Intercepted(self._apply(rule, st, ctx, request, spec))

    def _apply(
        self, rule: Rule, st: _ConnState, ctx: RequestContext, request: Any, spec: ApiSpec
    ) -> Any:
        """What the request gets instead of its handler's result (a handler result)."""
        action = rule.action
        log.debug(
            "fault injection: %s for api %d v%d from %s",
            action,
            ctx.api_key,
            ctx.api_version,
            ctx.client_id,
        )
        if isinstance(action, Delay):
            if action.ms is None:
                return self._chain(st, lambda: self._hold(rule), spec, ctx, request)
            secs = action.ms / 1000
            return self._chain(st, lambda: asyncio.sleep(secs), spec, ctx, request)
        if isinstance(action, Error):
            body = self._error_response(spec, ctx, request, action.code)

            def answer(_result: Any = None) -> Any:
                if body is None:
                    raise CloseConnection(
                        f"fault injection: error {action.code} for api {ctx.api_key} closes the connection"
                    )
                return body

            if action.after_handling:
                return self._chain(st, None, spec, ctx, request, then=answer)
            return answer()
        if isinstance(action, Drop):
            ms = action.close_after_ms
            if action.after_handling:
                handled = self._chain(
                    st, None, spec, ctx, request, then=lambda _r: _close_after(ms)
                )
            else:
                handled = _close_after(ms)
            # later requests on this connection are never handled: they wait behind it
            st.tail = asyncio.get_running_loop().create_future()
            return handled
        ctx.connection.close()  # at once: responses still queued are lost
        raise CloseConnection("fault injection: connection severed")

    def _error_response(
        self, spec: ApiSpec, ctx: RequestContext, request: Any, code: int
    ) -> dict[str, Any] | None:
        builder = spec.error_response
        if builder is None:
            return None
        body = builder(request, ctx.api_version, code)
        if body is not None and ctx.api_key == ApiKey.METADATA and self.broker is not None:
            _keep_cluster(body, request, ctx.api_version, code, self.broker, ctx.listener)
        return body

    def _match(self, ctx: RequestContext, request: Any) -> Rule | None:
        for rule in self._rules:
            if not rule.matches(ctx, request):
                continue
            if rule.times is not None:
                with self._lock:
                    if rule.times <= 0:
                        continue
                    rule.times -= 1
                    if rule.times == 0:
                        self._rules = tuple(r for r in self._rules if r is not rule)
            rule.hits += 1
            return rule
        return None

    def _chain(
        self,
        st: _ConnState,
        wait: Callable[[], Awaitable[Any]] | None,
        spec: ApiSpec,
        ctx: RequestContext,
        request: Any,
        then: Callable[[Any], Any] | None = None,
    ) -> Awaitable[Any]:
        """Handle the request after the connection's previous delayed request (and ``wait``).

        ``then`` maps the handler's result to what is sent (an awaitable is awaited).
        """
        prev = st.tail
        mark: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        st.tail = mark

        async def run() -> Any:
            try:
                if prev is not None and not prev.done():
                    await asyncio.wait((prev,))
                if wait is not None:
                    await wait()
                result = spec.handler(ctx, request)  # its synchronous part, in arrival order
            finally:
                _resolve(mark)
                if st.tail is mark:
                    st.tail = None
            if inspect.isawaitable(result):
                result = await result
            if then is not None:
                result = then(result)
                if inspect.isawaitable(result):
                    result = await result
            return result

        return run()

    async def _hold(self, rule: Rule) -> None:
        if rule._released:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        rule._waiters.append((loop, fut))
        with self._lock:
            self._held.add(rule)
        if rule._released:  # removed while we registered
            return
        await fut

    # ---- connections --------------------------------------------------------------
    def sever_connections(self, client_id: str | None = None) -> int:
        """Close live client connections (those of ``client_id`` only, if given); returns how many.

        Call on the broker's loop. A connection's client id is the one of its latest request.
        """
        broker = self._require_broker()
        n = 0
        for conn in list(broker.channel.connections):
            st = self._conns.get(conn)
            if client_id is not None and (st is None or st.client_id != client_id):
                continue
            conn.close()
            n += 1
        return n

    # ---- leadership ---------------------------------------------------------------
    async def bump_leader_epoch(
        self, topic: str, partition: int, *, timeout_s: float = 10.0
    ) -> int:
        """Re-elect the same leader with a new leader epoch; returns the epoch.

        The active controller writes the new epoch and sends LeaderAndIsr and
        UpdateMetadata, as for any leader election. Clients holding the old epoch get
        FENCED_LEADER_EPOCH on Fetch/ListOffsets/OffsetForLeaderEpoch and refresh
        metadata; producers notice nothing. Works on a single broker too.
        """
        ctrl = active_controller(self._require_broker())
        tp = (topic, partition)

        async def event() -> tuple[int, int]:
            st, _replicas = partition_of(ctrl, tp)
            return st.leader, await set_partition_leader(ctrl, tp, st.leader)

        leader, epoch = await ctrl.put(event)
        await self._await_leader(tp, leader, epoch, timeout_s)
        return epoch

    async def move_leader(
        self, topic: str, partition: int, to_broker: int, *, timeout_s: float = 10.0
    ) -> int:
        """Make ``to_broker`` the partition's leader through the active controller; returns the new leader epoch.

        This goes through the controller paths an operator would use with Kafka's tools:

        - ``to_broker`` is a replica in the ISR: a preferred replica election
          (ElectLeaders). If it is not the preferred replica (first in the
          assignment) yet, a reassignment to the same replicas with ``to_broker``
          first (AlterPartitionReassignments) makes it so; it completes at once,
          every target replica being in sync.
        - otherwise: a reassignment (AlterPartitionReassignments) to ``to_broker``
          plus the other current replicas, without the current leader. The
          controller runs phase A (``to_broker`` starts as a follower), then, once
          the new replica is in the ISR, phase B: ``to_broker`` is elected, the old
          leader's replica is stopped and deleted. The new replica catches up by
          fetching from the leader (the replica fetcher), and the leader writes the
          ISR expansion to the state znode, which the controller watches: no data
          is copied by hand, and producers keep writing during the move.

        Offsets, records and idempotent producer state (rebuilt from the batch
        headers) survive the move.
        """
        broker = self._require_broker()
        ctrl = active_controller(broker)
        tp = (topic, partition)
        st, replicas = partition_of(ctrl, tp)
        if to_broker not in ctrl.ctx.live_broker_ids:
            raise ValueError(f"broker {to_broker} is not alive")
        if to_broker in replicas:
            if to_broker not in st.isr:
                raise ValueError(
                    f"broker {to_broker} is not in the ISR {list(st.isr)} of {topic}-{partition}"
                )
            if st.leader == to_broker:
                return int(st.leader_epoch)
            if replicas[0] != to_broker:
                await reassign(ctrl, tp, [to_broker, *(r for r in replicas if r != to_broker)])
                await until(lambda: tp not in ctrl.ctx.partitions_being_reassigned, timeout_s)
            result = await ctrl.elect_leaders([tp], PREFERRED_ELECTION)
            if result is None:
                raise RuntimeError("the controller moved during the election; try again")
            code, message = result[tp]
            if code != 0:
                raise RuntimeError(
                    f"preferred election of {topic}-{partition} failed: {ErrorCode(code).name} {message or ''}"
                )
        else:
            # the real path: the new replica fetches from the leader until the leader
            # adds it to the ISR, then the controller finishes the reassignment
            target = [to_broker, *(r for r in replicas if r != st.leader)]
            await reassign(ctrl, tp, target)

            def moved() -> bool:
                lic = ctrl.ctx.partition_leadership_info.get(tp)
                return (
                    tp not in ctrl.ctx.partitions_being_reassigned
                    and lic is not None
                    and lic.leader_and_isr.leader == to_broker
                )

            await until(moved, timeout_s)
        lic = ctrl.ctx.partition_leadership_info[tp]
        leader, epoch = lic.leader_and_isr.leader, lic.leader_and_isr.leader_epoch
        if leader != to_broker:
            raise RuntimeError(f"{topic}-{partition} is led by {leader}, not {to_broker}")
        await self._await_leader(tp, leader, epoch, timeout_s)
        return int(epoch)

    async def _await_leader(
        self, tp: TopicPartition, leader: int, epoch: int, timeout_s: float
    ) -> None:
        """Until every in-process broker's metadata and the leader's replica show the change."""
        broker = self._require_broker()
        deadline = time.monotonic() + timeout_s

        def done() -> bool:
            for b in list(broker.peers.values()) or [broker]:
                if not b.started:
                    continue
                t = b.metadata_cache.get_topic(tp[0])
                p = t.partitions.get(tp[1]) if t is not None else None
                if p is None or p.leader != leader or p.leader_epoch < epoch:
                    return False
            lb = broker.peers.get(leader, broker if broker.broker_id == leader else None)
            part = lb.replica_manager.get_partition(tp) if lb is not None else None
            return part is not None and part.leader_id == leader and part.leader_epoch >= epoch

        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"leader of {tp[0]}-{tp[1]} did not become {leader}@{epoch}")
            await asyncio.sleep(0.002)

    def _require_broker(self) -> KafkaBroker:
        if self.broker is None:
            raise RuntimeError("fault injector is not attached to a broker")
        return self.broker


async def _close_after(ms: float) -> Any:
    await asyncio.sleep(ms / 1000)
    raise CloseConnection("fault injection: dropped request, closing the connection")


def _keep_cluster(
    body: dict[str, Any], request: Any, version: int, code: int, broker: KafkaBroker, listener: str
) -> None:
    """A Metadata error response with the real brokers and controller, so clients stay
    connected; a request for all topics gets every topic in error."""
    cache = broker.metadata_cache
    brokers = []
    for b in cache.brokers.values():
        ep = b.endpoints.get(listener)
        if ep is not None:
            brokers.append({"node_id": b.broker_id, "host": ep[0], "port": ep[1], "rack": b.rack})
    body.update(brokers=brokers, cluster_id=broker.cluster_id, controller_id=cache.controller_id)
    if request.topics is None or (version == 0 and not request.topics):
        body["topics"] = [
            {
                "name": n,
                "topic_id": uuid.UUID(int=0),
                "error_code": code,
                "is_internal": False,
                "partitions": [],
            }
            for n in sorted(cache.topics)
        ]


@functools.cache
def _client_api_table() -> dict[int, ApiSpec]:
    from kafkalite.server.apis import build_api_table

    return build_api_table(None)


def error_response(
    api_key: int,
    version: int,
    request: Any,
    code: int,
    broker: KafkaBroker | None = None,
    listener: str | None = None,
) -> dict[str, Any] | None:
    """What ``error(api, code)`` answers ``request`` with; None: no response (the
    connection is closed), as for acks=0 Produce and APIs without an error response."""
    table = broker.channel.api_table if broker is not None else _client_api_table()
    spec = table.get(api_key)
    if spec is None or spec.error_response is None:
        return None
    body = spec.error_response(request, version, code)
    if body is not None and api_key == ApiKey.METADATA and broker is not None:
        _keep_cluster(body, request, version, code, broker, listener or "")
    return body
