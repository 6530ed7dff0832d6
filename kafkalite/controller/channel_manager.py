"""ControllerChannelManager: the active controller's TCP connections to the brokers.

As in Kafka, each live broker gets one ordered request queue, one connection to
its inter-broker listener (from its /brokers/ids/<id> registration) and one
sender (Kafka's RequestSendThread, here an asyncio task). The sender sends a
request, waits for its response, and only then sends the next, so a broker
applies controller requests in the order they were queued. An unreachable
broker is retried every ``retry_backoff_ms`` (100 ms, like Kafka) with the same
request until it answers or is removed because it is no longer registered.

The controller sees this class only through the ``BrokerChannel`` protocol
(``leader_and_isr`` / ``update_metadata`` / ``stop_replica``), which turns the
controller's partition-state dicts into LeaderAndIsr v7, UpdateMetadata v8 and
StopReplica v4 requests. Those calls only enqueue: a controller event never
waits for a broker, so a dead broker cannot stall the event queue.

Every request is signed for its target broker with the cluster's inter-broker
secret (an HMAC over the body in a request-header tag, see
:mod:`kafkalite.protocol.inter_broker.authenticator`): brokers obey no controller
request without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkalite.common.structs import I32
from kafkalite.protocol import inter_broker as ib
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.kafka_uuid import ZERO_UUID

log = logging.getLogger(__name__)

LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4

#: (broker id, decoded response) -> None; runs on the sender task, must not block
ResponseCallback = Callable[[int, Any], None]

CLUSTER_AUTHORIZATION_FAILED = int(ErrorCode.cluster_authorization_failed)


@dataclass(frozen=True, slots=True)
class BrokerNode:
    """Where the controller reaches a broker, and which incarnation it is."""

    id: int
    host: str
    port: int
    #: Kafka's broker epoch: the czxid of /brokers/ids/<id> (-1 when unknown)
    epoch: int = -1
    tls: bool = False


def parse_endpoints(info: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    """(listener, host, port) for each endpoint of a /brokers/ids/<id> registration."""
    out = []
    for e in info.get("endpoints") or []:
        try:
            name, rest = str(e).split("://", 1)
            host, port = rest.rsplit(":", 1)
            out.append((name, host.strip("[]"), int(port)))
        except ValueError:
            log.warning("ignoring malformed broker endpoint %r", e)
    if not out and info.get("host") and info.get("port"):
        out.append(("PLAINTEXT", str(info["host"]), int(info["port"])))
    return out


def inter_broker_endpoint(
    info: Mapping[str, Any], listener_name: str | None
) -> tuple[str, int] | None:
    """The endpoint of the inter-broker listener, else the first one registered."""
    found = _inter_broker_listener(info, listener_name)
    return (found[1], found[2]) if found is not None else None


def _inter_broker_listener(
    info: Mapping[str, Any], listener_name: str | None
) -> tuple[str, str, int] | None:
    endpoints = parse_endpoints(info)
    for e in endpoints:
        if e[0] == listener_name:
            return e
    return endpoints[0] if endpoints else None


def _controller_target_listener(
    info: Mapping[str, Any], control_plane: str | None, inter_broker: str | None
) -> tuple[str, str, int] | None:
    """The endpoint the controller sends its requests to: the control-plane listener
    (KIP-291) when the broker registered one, else the inter-broker one."""
    if control_plane is not None:
        for e in parse_endpoints(info):
            if e[0] == control_plane:
                return e
    return _inter_broker_listener(info, inter_broker)


def _security_protocol(info: Mapping[str, Any], listener: str) -> str:
    protocols = info.get("listener_security_protocol_map") or {}
    return str(
        protocols.get(listener, listener if listener in ib.SECURITY_PROTOCOLS else "PLAINTEXT")
    )


@dataclass(slots=True)
class _QueuedRequest:
    api_key: int
    version: int
    body: bytes
    callback: ResponseCallback | None


class RequestSendTask:
    """One broker's queue, connection and sender task (Kafka's RequestSendThread)."""

    def __init__(
        self,
        node: BrokerNode,
        *,
        client_id: str,
        request_timeout_s: float,
        retry_backoff_s: float,
        ssl_context: ssl.SSLContext | None = None,
        secret: Callable[[], bytes | None] = lambda: None,
    ) -> None:
        self.node = node
        self._secret = secret
        self.ssl_context = ssl_context
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.retry_backoff_s = retry_backoff_s
        self.queue: asyncio.Queue[_QueuedRequest] = asyncio.Queue()
        self.sent = 0
        #: what this incarnation of the broker was last sent per partition by
        #: UpdateMetadata, and for which live broker set (see update_metadata)
        self.metadata_sent: dict[tuple[str, int], tuple[Any, ...]] = {}
        self.metadata_live: frozenset[int] | None = None
        self._correlation = itertools.count(1)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"controller-to-broker-{node.id}"
        )

    def enqueue(self, request: _QueuedRequest) -> None:
        self.queue.put_nowait(request)

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _run(self) -> None:
        try:
            while True:
                req = await self.queue.get()
                response = await self._send_until_answered(req)
                self.sent += 1
                if getattr(response, "error_code", 0) == CLUSTER_AUTHORIZATION_FAILED:
                    log.warning(
                        "controller: broker %d refused %s (error 31): the brokers do not "
                        "share one inter-broker secret (one metadata store?)",
                        self.node.id,
                        ib.CONTROLLER_APIS[req.api_key].name,
                    )
                if req.callback is not None:
                    try:
                        req.callback(self.node.id, response)
                    except Exception:
                        log.exception(
                            "controller: response callback for broker %d failed", self.node.id
                        )
        finally:
            self._disconnect()

    async def _send_until_answered(self, req: _QueuedRequest) -> Any:
        failures = 0
        while True:
            try:
                # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a
                # cancellation that races with the inner failure, and this loop
                # would then retry forever after stop()
                async with asyncio.timeout(self.request_timeout_s):
                    return await self._round_trip(req)
            except (OSError, EOFError, TimeoutError, ib.InterBrokerCodecError) as e:
                self._disconnect()
                failures += 1
                level = logging.WARNING if failures == 1 else logging.DEBUG
                log.log(
                    level,
                    "controller: request %s v%d to broker %d at %s:%d failed (%r); retrying every %d ms",
                    ib.CONTROLLER_APIS[req.api_key].name,
                    req.version,
                    self.node.id,
                    self.node.host,
                    self.node.port,
                    e,
                    int(self.retry_backoff_s * 1000),
                )
                await asyncio.sleep(self.retry_backoff_s)

    async def _round_trip(self, req: _QueuedRequest) -> Any:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(
                self.node.host, self.node.port, ssl=self.ssl_context
            )
        assert self._reader is not None
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        secret = self._secret()
        mac = (
            None
            if secret is None
            else ib.authenticator(secret, req.api_key, req.version, self.node.id, req.body)
        )
        header = ib.request_header(req.api_key, req.version, correlation_id, self.client_id, mac)
        self._writer.write(ib.frame_with_body(header, req.body))
        await self._writer.drain()
        try:
            (size,) = I32.unpack(await self._reader.readexactly(4))
            frame = await self._reader.readexactly(size)
        except asyncio.IncompleteReadError as e:
            raise EOFError("connection closed by the broker") from e
        got, response = ib.parse_response_frame(req.api_key, req.version, frame)
        if got != correlation_id:
            raise ib.InterBrokerCodecError(f"correlation id {got}, expected {correlation_id}")
        return response

    def _disconnect(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


class ControllerChannelManager:
    """Controller → broker requests over TCP, FIFO per broker (the ``BrokerChannel``)."""

    def __init__(
        self,
        controller_id: int,
        *,
        listener_name: str | None = None,
        control_plane_listener_name: str | None = None,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        ssl_context: ssl.SSLContext | None = None,
        secret: bytes | None = None,
    ) -> None:
        self.controller_id = controller_id
        #: the cluster's inter-broker secret; requests go unsigned (and are refused)
        #: without it. Read at each send, so a sender retrying picks up a new value.
        self.secret = secret
        #: the inter-broker listener: LeaderAndIsr's live leaders are advertised on it
        self.listener_name = listener_name
        #: where the requests go (KIP-291); the inter-broker listener when unset
        self.control_plane_listener_name = control_plane_listener_name
        #: the broker's client-side TLS (its keystore as client certificate)
        self._ssl_context = ssl_context
        self.request_timeout_s = request_timeout_ms / 1000
        self.retry_backoff_s = retry_backoff_ms / 1000
        self._senders: dict[int, RequestSendTask] = {}
        self._stopping: set[asyncio.Task[None]] = set()

    # ---- brokers ------------------------------------------------------------
    def update_brokers(
        self, live: Mapping[int, Mapping[str, Any]], epochs: Mapping[int, int] | None = None
    ) -> None:
        """Follow the live broker set: add new brokers, drop dead ones, and
        reconnect to a broker that re-registered (new epoch or endpoint) with a
        fresh queue, since requests meant for its previous incarnation are moot."""
        nodes: dict[int, BrokerNode] = {}
        for broker_id, info in live.items():
            found = _controller_target_listener(
                info, self.control_plane_listener_name, self.listener_name
            )
            if found is None:
                log.warning("controller: broker %d registered no endpoint", broker_id)
                continue
            name, host, port = found
            tls = _security_protocol(info, name) in ("SSL", "SASL_SSL")
            nodes[broker_id] = BrokerNode(
                broker_id, host, port, (epochs or {}).get(broker_id, -1), tls
            )
        for broker_id in list(self._senders):
            if nodes.get(broker_id) != self._senders[broker_id].node:
                self._remove(broker_id)
        for broker_id, node in nodes.items():
            if broker_id not in self._senders:
                self._senders[broker_id] = RequestSendTask(
                    node,
                    client_id=str(self.controller_id),
                    request_timeout_s=self.request_timeout_s,
                    retry_backoff_s=self.retry_backoff_s,
                    ssl_context=self._client_ssl_context() if node.tls else None,
                    secret=lambda: self.secret,
                )

    def _client_ssl_context(self) -> ssl.SSLContext:
        """TLS to an SSL listener: the broker's own client context (which presents its
        keystore), else the system's defaults."""
        if self._ssl_context is None:
            self._ssl_context = ssl.create_default_context()
        return self._ssl_context

    def _remove(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id)
        task = asyncio.get_running_loop().create_task(sender.stop())
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    def node(self, broker_id: int) -> BrokerNode | None:
        sender = self._senders.get(broker_id)
        return sender.node if sender is not None else None

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self._senders)

    def queue_size(self, broker_id: int) -> int:
        sender = self._senders.get(broker_id)
        return sender.queue.qsize() if sender is not None else 0

    def requests_sent(self, broker_id: int) -> int:
        """Requests this broker has answered since its sender started."""
        sender = self._senders.get(broker_id)
        return sender.sent if sender is not None else 0

    async def shutdown(self) -> None:
        """Drop every queue and connection (controller resignation or broker stop).

        ``update_brokers`` starts afresh after this, when the broker is elected again."""
        senders, self._senders = list(self._senders.values()), {}
        for s in senders:
            await s.stop()
        for t in list(self._stopping):
            with contextlib.suppress(asyncio.CancelledError):
                await t

    # ---- sending ------------------------------------------------------------
    def send_request(
        self,
        broker_id: int,
        api_key: int,
        version: int,
        request: Any,
        callback: ResponseCallback | None = None,
    ) -> bool:
        """Queue a request for a live broker; False (and a warning) for an unknown one."""
        sender = self._senders.get(broker_id)
        if sender is None:
            log.warning(
                "controller: dropping %s for broker %d, which is not live",
                ib.CONTROLLER_APIS[api_key].name,
                broker_id,
            )
            return False
        body = ib.encode_request(api_key, version, request)
        sender.enqueue(_QueuedRequest(api_key, version, body, callback))
        return True

    def _broker_epoch(self, broker_id: int) -> int:
        node = self.node(broker_id)
        return node.epoch if node is not None else -1

    # ---- BrokerChannel ------------------------------------------------------
    async def leader_and_isr(
        self,
        broker_id: int,
        controller_id: int,
        controller_epoch: int,
        states: list[dict[str, Any]],
        live_brokers: list[dict[str, Any]],
        callback: ResponseCallback | None = None,
    ) -> None:
        req = leader_and_isr_request(
            controller_id,
            controller_epoch,
            self._broker_epoch(broker_id),
            states,
            live_brokers,
            self.listener_name,
        )
        self.send_request(broker_id, ib.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, req, callback)

    async def update_metadata(
        self,
        broker_id: int,
        controller_id: int,
        controller_epoch: int,
        states: list[dict[str, Any]],
        live_brokers: list[dict[str, Any]],
        deleted_topics: list[str],
    ) -> None:
        sender = self._senders.get(broker_id)
        if sender is not None:
            states = _metadata_changes(sender, states, live_brokers, deleted_topics)
        req = update_metadata_request(
            controller_id,
            controller_epoch,
            self._broker_epoch(broker_id),
            states,
            live_brokers,
            deleted_topics,
        )
        self.send_request(broker_id, ib.UPDATE_METADATA, UPDATE_METADATA_VERSION, req)

    async def stop_replica(
        self,
        broker_id: int,
        controller_id: int,
        controller_epoch: int,
        partitions: list[tuple[str, int]],
        delete: bool,
        callback: ResponseCallback | None = None,
    ) -> None:
        req = stop_replica_request(
            controller_id, controller_epoch, self._broker_epoch(broker_id), partitions, delete
        )
        self.send_request(broker_id, ib.STOP_REPLICA, STOP_REPLICA_VERSION, req, callback)


def _metadata_changes(
    sender: RequestSendTask,
    states: list[dict[str, Any]],
    live_brokers: list[dict[str, Any]],
    deleted_topics: list[str],
) -> list[dict[str, Any]]:
    """The partition states this broker incarnation has not been sent yet.

    The controller hands every partition to every UpdateMetadata; encoding them all
    for each event makes creating N topics cost O(N^2). Like Kafka's controller, send
    only what changed: everything to a new incarnation (its sender starts empty) or
    when the live broker set changed (offline replicas depend on it), then deltas.
    Partitions of deleted topics always go (with leader -2) and are forgotten.
    """
    live = frozenset(int(b["id"]) for b in live_brokers)
    seen = sender.metadata_sent
    if sender.metadata_live != live:
        seen.clear()
        sender.metadata_live = live
    deleted = set(deleted_topics)
    out = []
    for s in states:
        key = (s["topic"], s["partition"])
        if s["topic"] in deleted:
            seen.pop(key, None)
            out.append(s)
            continue
        sig = (
            s.get("topic_id"),
            s["leader"],
            s["leader_epoch"],
            tuple(s["isr"]),
            tuple(s["replicas"]),
            tuple(s.get("offline_replicas", ())),
            s["controller_epoch"],
            s.get("partition_epoch", 0),
        )
        if seen.get(key) != sig:
            seen[key] = sig
            out.append(s)
    return out


# ---- controller state dicts -> requests ------------------------------------------


def leader_and_isr_request(
    controller_id: int,
    controller_epoch: int,
    broker_epoch: int,
    states: Iterable[Mapping[str, Any]],
    live_brokers: Iterable[Mapping[str, Any]],
    listener_name: str | None,
) -> ib.LeaderAndIsrRequest:
    topics: dict[str, ib.LeaderAndIsrTopicState] = {}
    leaders: set[int] = set()
    for s in states:
        t = topics.get(s["topic"])
        if t is None:
            t = topics[s["topic"]] = ib.LeaderAndIsrTopicState(
                s["topic"], [], s.get("topic_id") or ZERO_UUID
            )
        t.partition_states.append(
            ib.LeaderAndIsrPartitionState(
                partition_index=s["partition"],
                controller_epoch=s["controller_epoch"],
                leader=s["leader"],
                leader_epoch=s["leader_epoch"],
                isr=list(s["isr"]),
                partition_epoch=s.get("partition_epoch", 0),
                replicas=list(s["replicas"]),
                adding_replicas=list(s.get("adding_replicas", ())),
                removing_replicas=list(s.get("removing_replicas", ())),
                is_new=bool(s.get("is_new", False)),
            )
        )
        leaders.add(s["leader"])
    live_leaders = []
    for b in live_brokers:
        ep = inter_broker_endpoint(b, listener_name)
        if int(b["id"]) in leaders and ep is not None:
            live_leaders.append(ib.LeaderAndIsrLiveLeader(int(b["id"]), ep[0], ep[1]))
    return ib.LeaderAndIsrRequest(
        controller_id, controller_epoch, list(topics.values()), live_leaders, broker_epoch
    )


def update_metadata_request(
    controller_id: int,
    controller_epoch: int,
    broker_epoch: int,
    states: Iterable[Mapping[str, Any]],
    live_brokers: Iterable[Mapping[str, Any]],
    deleted_topics: Iterable[str] = (),
) -> ib.UpdateMetadataRequest:
    """Partitions of ``deleted_topics`` go out with leader -2, Kafka's "being deleted"."""
    deleted = set(deleted_topics)
    brokers = []
    for b in live_brokers:
        endpoints = [
            ib.UpdateMetadataEndpoint(
                port, host, name, ib.SECURITY_PROTOCOLS.get(_security_protocol(b, name), 0)
            )
            for name, host, port in parse_endpoints(b)
        ]
        brokers.append(ib.UpdateMetadataBroker(int(b["id"]), endpoints, b.get("rack")))
    live_ids = {b.id for b in brokers}
    topics: dict[str, ib.UpdateMetadataTopicState] = {}
    for s in states:
        t = topics.get(s["topic"])
        if t is None:
            t = topics[s["topic"]] = ib.UpdateMetadataTopicState(
                s["topic"], [], s.get("topic_id") or ZERO_UUID
            )
        replicas = list(s["replicas"])
        t.partition_states.append(
            ib.UpdateMetadataPartitionState(
                partition_index=s["partition"],
                controller_epoch=s["controller_epoch"],
                leader=ib.LEADER_DURING_DELETE if s["topic"] in deleted else s["leader"],
                leader_epoch=s["leader_epoch"],
                isr=list(s["isr"]),
                zk_version=s.get("partition_epoch", 0),
                replicas=replicas,
                offline_replicas=[
                    r for r in replicas if r not in live_ids or r in s.get("offline_replicas", ())
                ],
            )
        )
    missing = deleted - set(topics)
    if missing:
        log.debug("controller: no partition states to mark deleted for %s", sorted(missing))
    return ib.UpdateMetadataRequest(
        controller_id, controller_epoch, list(topics.values()), brokers, broker_epoch
    )


def stop_replica_request(
    controller_id: int,
    controller_epoch: int,
    broker_epoch: int,
    partitions: Iterable[tuple[str, int]],
    delete: bool,
) -> ib.StopReplicaRequest:
    """Leader epoch -2 ("being deleted") for deletions, -1 ("no epoch") otherwise."""
    epoch = ib.EPOCH_DURING_DELETE if delete else ib.NO_EPOCH
    topics: dict[str, ib.StopReplicaTopicState] = {}
    for topic, partition in partitions:
        t = topics.get(topic)
        if t is None:
            t = topics[topic] = ib.StopReplicaTopicState(topic, [])
        t.partition_states.append(ib.StopReplicaPartitionState(partition, epoch, delete))
    return ib.StopReplicaRequest(
        controller_id, controller_epoch, list(topics.values()), broker_epoch, delete
    )
