"""Fault injection for embedded brokers, in the spirit of franz-go kfake's ``ControlKey``.

A :class:`FaultInjector` sits in front of a broker's request handlers
(``RequestChannel.faults``). Requests matching a :class:`Rule` (API key, version
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
  response (per partition, per topic, per coordinator key, or top level), without
  running the handler: nothing is appended or committed. APIs without a response
  builder here, and acks=0 produce (which has no response), close the connection
  instead, which is how Kafka itself tells such a client something went wrong.
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
import inspect
import logging
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkalite.controller.preferred_election import PREFERRED_ELECTION
from kafkalite.metadata.isr_change import update_leader_and_isr, write_isr_change_notification
from kafkalite.metadata.kafka_zk_client import KafkaZkClient
from kafkalite.network.responses import CloseConnection
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.controller.kafka_controller import KafkaController
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

TopicPartition = tuple[str, int]
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
    """Per-connection bookkeeping, kept in ``Connection.faults``."""

    __slots__ = ("client_id", "tail")

    def __init__(self) -> None:
        self.client_id: str | None = None
        #: resolved once the last delayed/held request of this connection was handled
        self.tail: asyncio.Future[None] | None = None


# --------------------------------------------------------------------------- injector


class FaultInjector:
    """Rules in front of one broker's handlers (``b.faults`` on embedded brokers)."""

    def __init__(self) -> None:
        self._rules: tuple[Rule, ...] = ()
        self._held: set[Rule] = set()
        self._lock = threading.Lock()
        self.broker: KafkaBroker | None = None

    def attach(self, broker: KafkaBroker) -> None:
        """Sit in front of ``broker``'s handlers (again after each restart)."""
        self.broker = broker
        broker.channel.faults = self

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
    def intercept(self, ctx: RequestContext, request: Any, spec: ApiSpec) -> Any:
        """Called by the request channel before each handler; non-None replaces its result."""
        conn = ctx.connection
        st = conn.faults
        if st is None:
            st = conn.faults = _ConnState()
        st.client_id = ctx.client_id
        rule = self._match(ctx, request) if self._rules else None
        if rule is None:
            if st.tail is None:
                return None
            return self._chain(st, None, spec, ctx, request)
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
            body = error_response(
                ctx.api_key, ctx.api_version, request, action.code, self.broker, ctx
            )

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
        conn.close()
        raise CloseConnection("fault injection: connection severed")

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
            if client_id is not None and _client_id(conn) != client_id:
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
        ctrl = _active_controller(self._require_broker())
        tp = (topic, partition)

        async def event() -> tuple[int, int]:
            st, _replicas = _partition_of(ctrl, tp)
            return st.leader, await ctrl.set_partition_leader(tp, st.leader)

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
          leader's replica is stopped and deleted. Follower fetching is not built
          yet, so the catch-up is done here the way the replica fetcher and the
          leader would do it (:func:`_catch_up_follower`): the leader's batches are
          appended as follower, the leader records the follower's position and
          writes the ISR expansion to the state znode, which the controller
          watches. Produce requests for the partition are held on the old leader
          until the move is done (then answered NOT_LEADER_OR_FOLLOWER-style), so
          nothing appended during the move is lost. Both brokers must run in this
          process (``peers``).

        Offsets, records and idempotent producer state (rebuilt from the batch
        headers) survive the move.
        """
        broker = self._require_broker()
        ctrl = _active_controller(broker)
        tp = (topic, partition)
        st, replicas = _partition_of(ctrl, tp)
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
                await _reassign(ctrl, tp, [to_broker, *(r for r in replicas if r != to_broker)])
                await _until(lambda: tp not in ctrl.ctx.partitions_being_reassigned, timeout_s)
            result = await ctrl.elect_leaders([tp], PREFERRED_ELECTION)
            if result is None:
                raise RuntimeError("the controller moved during the election; try again")
            code, message = result[tp]
            if code != 0:
                raise RuntimeError(
                    f"preferred election of {topic}-{partition} failed: {ErrorCode(code).name} {message or ''}"
                )
        else:
            src = _peer(broker, st.leader)
            dst = _peer(broker, to_broker)
            if src is None or dst is None or not src.started:
                raise ValueError(
                    f"brokers {st.leader} and {to_broker} must both run in this process"
                )
            src_faults = src.channel.faults
            hold = (
                src_faults.add(ApiKey.PRODUCE, Delay(None), when=_produces_to(tp), times=None)
                if isinstance(src_faults, FaultInjector)
                else None
            )
            try:
                target = [to_broker, *(r for r in replicas if r != st.leader)]
                await _reassign(ctrl, tp, target)
                # phase A reached both brokers: the follower exists and the leader knows it
                await _until(lambda: _is_follower_of(dst, tp, st.leader), timeout_s)
                await _until(lambda: _leads_with(src, tp, to_broker), timeout_s)
                await _catch_up_follower(src, dst, tp)
                await _until(lambda: tp not in ctrl.ctx.partitions_being_reassigned, timeout_s)
            finally:
                if hold is not None and isinstance(src_faults, FaultInjector):
                    src_faults.remove(hold)
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


def _client_id(conn: Connection) -> str | None:
    st = conn.faults
    return st.client_id if isinstance(st, _ConnState) else None


# --------------------------------------------------------------------------- controller side


def _active_controller(broker: KafkaBroker) -> KafkaController:
    for b in list(broker.peers.values()) or [broker]:
        if b.started and b.controller is not None and b.controller.is_active:
            return b.controller
    raise RuntimeError("no active controller among the brokers of this process")


def _partition_of(ctrl: KafkaController, tp: TopicPartition) -> tuple[Any, list[int]]:
    info = ctrl.partition_info(tp)
    if info is None:
        raise ValueError(f"unknown partition {tp[0]}-{tp[1]}")
    st, replicas = info
    if st.leader < 0:
        raise ValueError(f"{tp[0]}-{tp[1]} is offline")
    return st, list(replicas)


def _peer(broker: KafkaBroker, broker_id: int) -> KafkaBroker | None:
    if broker.broker_id == broker_id:
        return broker
    return broker.peers.get(broker_id)


async def _until(pred: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(f"leader move: condition not met within {timeout_s}s")
        await asyncio.sleep(0.002)


async def _reassign(ctrl: KafkaController, tp: TopicPartition, replicas: list[int]) -> None:
    """AlterPartitionReassignments, as the admin API hands it to the controller."""
    result = await ctrl.alter_partition_reassignments({tp: replicas})
    if result is None:
        raise RuntimeError("the controller moved during the reassignment; try again")
    code, message = result[tp]
    if code != 0:
        raise RuntimeError(
            f"reassignment of {tp[0]}-{tp[1]} to {replicas} failed: {ErrorCode(code).name} {message or ''}"
        )


def _produces_to(tp: TopicPartition) -> Callable[[RequestContext, Any], bool]:
    """A rule predicate: a Produce request carrying records for ``tp``."""

    def match(_ctx: RequestContext, req: Any) -> bool:
        for t in getattr(req, "topic_data", None) or ():
            if t.name == tp[0] and any(int(p.index) == tp[1] for p in t.partition_data):
                return True
        return False

    return match


def _is_follower_of(b: KafkaBroker, tp: TopicPartition, leader: int) -> bool:
    p = b.replica_manager.get_partition(tp)
    return p is not None and p.log is not None and p.leader_id == leader


def _leads_with(b: KafkaBroker, tp: TopicPartition, replica: int) -> bool:
    p = b.replica_manager.get_partition(tp)
    return p is not None and p.is_leader and replica in p.remote_replicas


async def _catch_up_follower(src: KafkaBroker, dst: KafkaBroker, tp: TopicPartition) -> None:
    """What the replica fetcher and the leader do until ``dst`` joins the ISR of ``tp``.

    A stand-in for follower fetching (not built yet): ``dst`` appends the leader's
    batches as a follower and takes the leader's high watermark; the leader records
    the follower's log end offset (its next fetch offset) and, the follower being
    caught up, writes the expanded ISR to the partition's state znode conditionally
    on its version (Kafka's Partition.maybeExpandIsr in ZooKeeper mode) and an ISR
    change notification. The caller holds produce requests for ``tp`` on ``src``.
    """
    leader = src.replica_manager.get_partition(tp)
    follower = dst.replica_manager.get_partition(tp)
    assert leader is not None and leader.log is not None
    assert follower is not None and follower.log is not None
    llog, flog = leader.log, follower.log
    if flog.log_end_offset < llog.log_start_offset or flog.log_end_offset > llog.log_end_offset:
        flog.truncate_fully_and_start_at(llog.log_start_offset)
    while flog.log_end_offset < llog.log_end_offset:
        data = llog.read(flog.log_end_offset, 1 << 20, max_offset=None, min_one_message=True)
        raw = data.records
        raw = raw if isinstance(raw, bytes | bytearray) else raw.read_bytes()
        if not raw or not flog.append_as_follower(raw).num_messages:
            break
    flog.update_high_watermark(min(llog.high_watermark, flog.log_end_offset))
    leader.update_follower_fetch_state(dst.broker_id, flog.log_end_offset, flog.log_start_offset)
    states = await KafkaZkClient(src.store).get_partition_states([tp])
    state, version = states[tp]
    if state.leader != src.broker_id or state.leader_epoch != leader.leader_epoch:
        raise RuntimeError(f"{tp[0]}-{tp[1]} changed leadership during the move; try again")
    isr = [*state.isr, dst.broker_id] if dst.broker_id not in state.isr else list(state.isr)
    written = await update_leader_and_isr(
        src.store,
        tp,
        leader=state.leader,
        leader_epoch=state.leader_epoch,
        isr=isr,
        controller_epoch=state.controller_epoch,
        zk_version=version,
    )
    if written is None:
        raise RuntimeError(f"{tp[0]}-{tp[1]}: the state znode changed during the move; try again")
    leader.isr = isr
    await write_isr_change_notification(src.store, [tp])


# --------------------------------------------------------------------------- error responses


def error_response(
    api_key: int,
    version: int,
    request: Any,
    code: int,
    broker: KafkaBroker | None = None,
    ctx: RequestContext | None = None,
) -> dict[str, Any] | None:
    """A response to ``request`` carrying ``code`` in every error field, or None if unsupported.

    Mirrors the request's topics/partitions (names or topic ids, as the version uses).
    """
    builder = _BUILDERS.get(api_key)
    if builder is None:
        return None
    return builder(request, code, version, broker, ctx.listener if ctx is not None else None)


def _topic_key(t: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for src, dst in (("name", "name"), ("topic", "topic"), ("topic_id", "topic_id")):
        v = getattr(t, src, None)
        if v is not None:
            out[dst] = v
    if "topic" in out:
        out.setdefault("name", out["topic"])
    elif "name" in out:
        out["topic"] = out["name"]
    return out


def _produce(req: Any, code: int, version: int, _b: Any, _l: Any) -> dict[str, Any] | None:
    if int(req.acks) == 0:
        return None  # acks=0 gets no response: closing is the only signal
    return {
        "throttle_time": 0,
        "responses": [
            {
                **_topic_key(t),
                "partition_responses": [
                    {
                        "index": int(p.index),
                        "error_code": code,
                        "base_offset": -1,
                        "log_append_time": -1,
                        "log_start_offset": -1,
                        "record_errors": [],
                        "error_message": "injected fault",
                    }
                    for p in t.partition_data
                ],
            }
            for t in req.topic_data
        ],
    }


_FETCH_SESSION_ERRORS = {
    int(ErrorCode.fetch_session_id_not_found),
    int(ErrorCode.invalid_fetch_session_epoch),
}


def _fetch(req: Any, code: int, version: int, _b: Any, _l: Any) -> dict[str, Any]:
    if code in _FETCH_SESSION_ERRORS:  # session errors are top level, with no partitions
        return {"throttle_time": 0, "error_code": code, "session_id": 0, "responses": []}
    return {
        "throttle_time": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                **_topic_key(t),
                "partitions": [
                    {
                        "partition_index": int(p.partition),
                        "error_code": code,
                        "high_watermark": -1,
                        "last_stable_offset": -1,
                        "log_start_offset": -1,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": b"",
                    }
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }


def _list_offsets(req: Any, code: int, version: int, _b: Any, _l: Any) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "topics": [
            {
                **_topic_key(t),
                "partitions": [
                    {
                        "partition_index": int(p.partition_index),
                        "error_code": code,
                        "timestamp": -1,
                        "offset": -1,
                        "leader_epoch": -1,
                        "old_style_offsets": [],
                    }
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }


def _metadata(
    req: Any, code: int, version: int, broker: KafkaBroker | None, listener: str | None
) -> dict[str, Any]:
    """Real brokers and controller (clients keep working), every topic in error."""
    brokers: list[dict[str, Any]] = []
    topics: list[dict[str, Any]] = []
    cluster_id, controller_id = None, -1
    if broker is not None:
        cache = broker.metadata_cache
        cluster_id, controller_id = broker.cluster_id, cache.controller_id
        for b in cache.brokers.values():
            ep = b.endpoints.get(listener) if listener is not None else None
            if ep is not None:
                brokers.append(
                    {"node_id": b.broker_id, "host": ep[0], "port": ep[1], "rack": b.rack}
                )
        if req.topics is None or (version == 0 and not req.topics):
            topics = [{"name": n} for n in sorted(cache.topics)]
    if req.topics:
        topics = [_topic_key(t) for t in req.topics]
    for t in topics:
        t.update(error_code=code, partitions=[], is_internal=False)
        t.setdefault("name", None)
        t.setdefault("topic_id", uuid.UUID(int=0))
    return {
        "throttle_time": 0,
        "brokers": brokers,
        "cluster_id": cluster_id,
        "controller_id": controller_id,
        "topics": topics,
        "cluster_authorized_operations": -(2**31),
    }


def _find_coordinator(req: Any, code: int, version: int, _b: Any, _l: Any) -> dict[str, Any]:
    keys = getattr(req, "coordinator_keys", None)
    none = {
        "node_id": -1,
        "host": "",
        "port": -1,
        "error_code": code,
        "error_message": "injected fault",
    }
    if keys is None:
        return {"throttle_time": 0, **none}
    return {"throttle_time": 0, "coordinators": [{"key": k, **none} for k in keys]}


def _join_group(req: Any, code: int, version: int, _b: Any, _l: Any) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": code,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None if version >= 7 else "",
        "leader": "",
        "skip_assignment": False,
        "member_id": req.member_id,
        "members": [],
    }


def _top_level(req: Any, code: int, version: int, _b: Any, _l: Any) -> dict[str, Any]:
    """Heartbeat, SyncGroup, InitProducerId: one top-level error field."""
    return {
        "throttle_time": 0,
        "error_code": code,
        "assignment": b"",
        "producer_id": -1,
        "producer_epoch": -1,
    }


def _leave_group(req: Any, code: int, version: int, _b: Any, _l: Any) -> dict[str, Any]:
    members = getattr(req, "members", None) or ()
    return {
        "throttle_time": 0,
        "error_code": code,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": code}
            for m in members
        ],
    }


def _offset_commit(req: Any, code: int, version: int, _b: Any, _l: Any) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "topics": [
            {
                **_topic_key(t),
                "partitions": [
                    {"partition_index": int(p.partition_index), "error_code": code}
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }


def _offset_fetch_topics(topics: Any, code: int) -> list[dict[str, Any]]:
    return [
        {
            **_topic_key(t),
            "partitions": [
                {
                    "partition_index": int(i),
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": None,
                    "error_code": code,
                }
                for i in t.partition_indexes
            ],
        }
        for t in topics or ()
    ]


def _offset_fetch(req: Any, code: int, version: int, _b: Any, _l: Any) -> dict[str, Any]:
    groups = getattr(req, "groups", None)
    if groups is None:
        return {
            "throttle_time": 0,
            "topics": _offset_fetch_topics(req.topics, code),
            "error_code": code,
        }
    return {
        "throttle_time": 0,
        "groups": [
            {
                "group_id": g.group_id,
                "topics": _offset_fetch_topics(g.topics, code),
                "error_code": code,
            }
            for g in groups
        ],
    }


_BUILDERS: dict[int, Callable[[Any, int, int, Any, Any], dict[str, Any] | None]] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.METADATA: _metadata,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _join_group,
    ApiKey.HEARTBEAT: _top_level,
    ApiKey.LEAVE_GROUP: _leave_group,
    ApiKey.SYNC_GROUP: _top_level,
    ApiKey.INIT_PRODUCER_ID: _top_level,
}
