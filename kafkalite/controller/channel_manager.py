"""ControllerChannelManager: the active controller's TCP connections to the brokers.

As in Kafka, each live broker gets one ordered request queue, one connection to
its inter-broker listener (from its /brokers/ids/<id> registration) and one
sender (Kafka's RequestSendThread, here an asyncio task). The sender sends a
request, waits for its response, and only then sends the next, so a broker
applies controller requests in the order they were queued. An unreachable
broker is retried every ``retry_backoff_ms`` (100 ms, like Kafka) with the same
request until it answers or is removed because it is no longer registered.

The controller sees this class only through the ``BrokerChannel`` protocol
(``leader_and_isr`` / ``update_metadata`` / ``stop_replica``). The request
batch hands it the inter-broker dataclasses of :mod:`kafkalite.protocol.inter_broker`
(topic states) and the live brokers as ``BrokerInfo`` values; this class adds
what only it knows (each target's broker epoch, the leaders' inter-broker
endpoints) and sends LeaderAndIsr v7, UpdateMetadata v8 and StopReplica v4.
Those calls only enqueue: a controller event never waits for a broker, so a
dead broker cannot stall the event queue.

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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkalite.common import structs
from kafkalite.common.types import Endpoint, TopicPartition
from kafkalite.metadata.kafka_zk_client import BrokerInfo
from kafkalite.protocol import inter_broker as ib
from kafkalite.protocol import sasl_client
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.sasl_client import SaslClientCredentials

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
    sasl: bool = False


def inter_broker_endpoint(broker: BrokerInfo, listener_name: str | None) -> Endpoint | None:
    """The endpoint of the inter-broker listener, else the first one registered."""
    for e in broker.endpoints:
        if e.listener == listener_name:
            return e
    return broker.endpoints[0] if broker.endpoints else None


def controller_target_endpoint(
    broker: BrokerInfo, control_plane: str | None, inter_broker: str | None
) -> Endpoint | None:
    """The endpoint the controller sends its requests to: the control-plane listener
    (KIP-291) when the broker registered one, else the inter-broker one."""
    if control_plane is not None:
        for e in broker.endpoints:
            if e.listener == control_plane:
                return e
    return inter_broker_endpoint(broker, inter_broker)


def is_tls(endpoint: Endpoint) -> bool:
    return endpoint.security_protocol in ("SSL", "SASL_SSL")


def is_sasl(endpoint: Endpoint) -> bool:
    return endpoint.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


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
        sasl: SaslClientCredentials | None = None,
    ) -> None:
        self.node = node
        #: the broker's own SASL credentials, for a SASL listener
        self.sasl = sasl
        self._secret = secret
        self.ssl_context = ssl_context
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.retry_backoff_s = retry_backoff_s
        self.queue: asyncio.Queue[_QueuedRequest] = asyncio.Queue()
        self.sent = 0
        #: what this incarnation of the broker was last sent per partition by
        #: UpdateMetadata, and for which live broker set (see update_metadata)
        self.metadata_sent: dict[TopicPartition, tuple[Any, ...]] = {}
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
            self._reader, self._writer = await sasl_client.open_connection(
                self.node.host, self.node.port, ssl=self.ssl_context, sasl=self.sasl
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
            (size,) = structs.I32.unpack(await self._reader.readexactly(4))
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
        sasl: SaslClientCredentials | None = None,
    ) -> None:
        self.controller_id = controller_id
        #: what the controller authenticates with on SASL listeners
        self.sasl = sasl
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
    def update_brokers(self, live: Mapping[int, BrokerInfo]) -> None:
        """Follow the live broker set: add new brokers, drop dead ones, and
        reconnect to a broker that re-registered (new epoch or endpoint) with a
        fresh queue, since requests meant for its previous incarnation are moot."""
        nodes: dict[int, BrokerNode] = {}
        for broker_id, info in live.items():
            ep = controller_target_endpoint(
                info, self.control_plane_listener_name, self.listener_name
            )
            if ep is None:
                log.warning("controller: broker %d registered no endpoint", broker_id)
                continue
            nodes[broker_id] = BrokerNode(
                broker_id, ep.host or "", ep.port, info.epoch, is_tls(ep), is_sasl(ep)
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
                    sasl=self.sasl if node.sasl else None,
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
        topic_states: list[ib.LeaderAndIsrTopicState],
        live_brokers: Sequence[BrokerInfo],
        callback: ResponseCallback | None = None,
    ) -> None:
        req = ib.LeaderAndIsrRequest(
            controller_id,
            controller_epoch,
            topic_states,
            live_leaders(topic_states, live_brokers, self.listener_name),
            self._broker_epoch(broker_id),
        )
        self.send_request(broker_id, ib.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, req, callback)

    async def update_metadata(
        self,
        broker_id: int,
        controller_id: int,
        controller_epoch: int,
        topic_states: list[ib.UpdateMetadataTopicState],
        live_brokers: Sequence[BrokerInfo],
        deleted_topics: list[str],
    ) -> None:
        sender = self._senders.get(broker_id)
        if sender is not None:
            topic_states = _metadata_changes(sender, topic_states, live_brokers, deleted_topics)
        req = update_metadata_request(
            controller_id,
            controller_epoch,
            self._broker_epoch(broker_id),
            topic_states,
            live_brokers,
        )
        self.send_request(broker_id, ib.UPDATE_METADATA, UPDATE_METADATA_VERSION, req)

    async def stop_replica(
        self,
        broker_id: int,
        controller_id: int,
        controller_epoch: int,
        partitions: list[TopicPartition],
        delete: bool,
        callback: ResponseCallback | None = None,
    ) -> None:
        req = stop_replica_request(
            controller_id, controller_epoch, self._broker_epoch(broker_id), partitions, delete
        )
        self.send_request(broker_id, ib.STOP_REPLICA, STOP_REPLICA_VERSION, req, callback)


def _metadata_changes(
    sender: RequestSendTask,
    topic_states: list[ib.UpdateMetadataTopicState],
    live_brokers: Sequence[BrokerInfo],
    deleted_topics: list[str],
) -> list[ib.UpdateMetadataTopicState]:
    """The partition states this broker incarnation has not been sent yet.

    The controller hands every partition to every UpdateMetadata; encoding them all
    for each event makes creating N topics cost O(N^2). Like Kafka's controller, send
    only what changed: everything to a new incarnation (its sender starts empty) or
    when the live broker set changed (offline replicas depend on it), then deltas.
    Partitions of deleted topics always go (with leader -2) and are forgotten.
    """
    live = frozenset(b.id for b in live_brokers)
    seen = sender.metadata_sent
    if sender.metadata_live != live:
        seen.clear()
        sender.metadata_live = live
    deleted = set(deleted_topics)
    out = []
    for t in topic_states:
        topic = t.topic_name
        if topic in deleted:
            for s in t.partition_states:
                seen.pop((topic, s.partition_index), None)
            out.append(t)
            continue
        changed = []
        for s in t.partition_states:
            key = (topic, s.partition_index)
            sig = (
                t.topic_id,
                s.leader,
                s.leader_epoch,
                tuple(s.isr),
                tuple(s.replicas),
                tuple(s.offline_replicas),
                s.controller_epoch,
                s.zk_version,
            )
            if seen.get(key) != sig:
                seen[key] = sig
                changed.append(s)
        if len(changed) == len(t.partition_states):
            out.append(t)
        elif changed:
            out.append(ib.UpdateMetadataTopicState(topic, changed, t.topic_id))
    return out


# ---- what the channel adds to the batch's states ------------------------------------


def live_leaders(
    topic_states: Iterable[ib.LeaderAndIsrTopicState],
    live_brokers: Iterable[BrokerInfo],
    listener_name: str | None,
) -> list[ib.LeaderAndIsrLiveLeader]:
    """The live brokers that lead a partition of the request, at their inter-broker
    endpoint (where followers fetch from)."""
    leaders = {s.leader for t in topic_states for s in t.partition_states}
    out = []
    for b in live_brokers:
        ep = inter_broker_endpoint(b, listener_name)
        if b.id in leaders and ep is not None:
            out.append(ib.LeaderAndIsrLiveLeader(b.id, ep.host or "", ep.port))
    return out


def update_metadata_brokers(live_brokers: Iterable[BrokerInfo]) -> list[ib.UpdateMetadataBroker]:
    return [
        ib.UpdateMetadataBroker(
            b.id,
            [
                ib.UpdateMetadataEndpoint(
                    e.port,
                    e.host or "",
                    e.listener,
                    ib.SECURITY_PROTOCOLS.get(e.security_protocol, 0),
                )
                for e in b.endpoints
            ],
            b.rack,
        )
        for b in live_brokers
    ]


def update_metadata_request(
    controller_id: int,
    controller_epoch: int,
    broker_epoch: int,
    topic_states: list[ib.UpdateMetadataTopicState],
    live_brokers: Iterable[BrokerInfo],
) -> ib.UpdateMetadataRequest:
    return ib.UpdateMetadataRequest(
        controller_id,
        controller_epoch,
        topic_states,
        update_metadata_brokers(live_brokers),
        broker_epoch,
    )


def stop_replica_request(
    controller_id: int,
    controller_epoch: int,
    broker_epoch: int,
    partitions: Iterable[TopicPartition],
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
