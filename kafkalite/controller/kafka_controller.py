"""KafkaController: election through /controller, one FIFO event queue, topic lifecycle.

Every broker runs one. The broker that creates the ephemeral /controller node
is the active controller: it bumps /controller_epoch, loads the cluster state
from the store, brings partitions online (first live replica of the assignment
that is in the ISR becomes leader) and pushes LeaderAndIsr and UpdateMetadata
to the brokers. All of its work runs as events on one asyncio queue, strictly
FIFO, so no locks are needed; handlers re-read the store instead of trusting
watch deltas.

This first cut covers what a single broker needs (and what several brokers in
one store need for topic metadata): election, epochs, broker registration,
topic creation, partition addition, topic deletion, and offline leader
election on broker failure. Reassignment, preferred election, controlled
shutdown and ISR-change propagation are issue 5's remaining work.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafkalite.controller.leader_selectors import NO_LEADER, offline_partition_leader
from kafkalite.controller.request_batch import ControllerBrokerRequestBatch
from kafkalite.metadata import paths
from kafkalite.metadata.store import (
    BadVersionError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.kafka_uuid import ZERO_UUID, uuid_from_kafka

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

KAFKA_STORAGE_ERROR = int(ErrorCode.kafka_storage_error)


@dataclass(slots=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    version: int = -1  # znode version, for conditional writes


@dataclass(slots=True)
class TopicAssignment:
    topic_id: uuid.UUID
    partitions: dict[int, list[int]]


@dataclass(slots=True)
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = -1
    live_brokers: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: broker epoch (czxid of /brokers/ids/<id>) per live broker
    live_broker_epochs: dict[int, int] = field(default_factory=dict)
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    topics_being_deleted: set[str] = field(default_factory=set)
    #: replicas in a failed log dir, per broker (LeaderAndIsr answered KAFKA_STORAGE_ERROR)
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)

    def is_replica_online(self, broker_id: int, tp: TopicPartition) -> bool:
        return broker_id in self.live_brokers and tp not in self.replicas_on_offline_dirs.get(
            broker_id, ()
        )


class BrokerChannel(Protocol):
    """How the controller talks to brokers (LeaderAndIsr / UpdateMetadata / StopReplica).

    The TCP implementation is ``controller.channel_manager.ControllerChannelManager``.
    """

    def update_brokers(self, live: dict[int, dict[str, Any]], epochs: dict[int, int]) -> None: ...

    async def shutdown(self) -> None: ...

    async def leader_and_isr(
        self,
        broker_id: int,
        controller_id: int,
        controller_epoch: int,
        states: list[dict[str, Any]],
        live_brokers: list[dict[str, Any]],
        callback: Callable[[int, Any], None] | None = None,
    ) -> None: ...

    async def update_metadata(
        self,
        broker_id: int,
        controller_id: int,
        controller_epoch: int,
        states: list[dict[str, Any]],
        live_brokers: list[dict[str, Any]],
        deleted_topics: list[str],
    ) -> None: ...

    async def stop_replica(
        self,
        broker_id: int,
        controller_id: int,
        controller_epoch: int,
        partitions: list[TopicPartition],
        delete: bool,
    ) -> None: ...


class KafkaController:
    def __init__(
        self,
        broker_id: int,
        store: MetadataStore,
        channel: BrokerChannel,
        *,
        unclean_election: Callable[[str], bool] = lambda _t: False,
    ) -> None:
        self.broker_id = broker_id
        self.store = store
        self.channel_manager = channel
        # requests made while an event runs are sent, merged per broker, when it ends
        self.channel = ControllerBrokerRequestBatch(channel)
        self.unclean_election = unclean_election
        self.ctx = ControllerContext()
        self.active_controller_id = -1
        self._queue: asyncio.Queue[
            tuple[Callable[[], Awaitable[Any]], asyncio.Future[Any] | None]
        ] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    # ---- event queue --------------------------------------------------------
    def put(self, fn: Callable[[], Awaitable[Any]]) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((fn, fut))
        return fut

    def _put_nowait(self, fn: Callable[[], Awaitable[Any]]) -> None:
        if not self._closed:
            self._queue.put_nowait((fn, None))

    async def _run(self) -> None:
        while True:
            fn, fut = await self._queue.get()
            error: Exception | None = None
            try:
                result = await fn()
            except Exception as e:
                log.exception("controller event failed")
                error = e
            try:
                await self.channel.send_requests_to_brokers()
            except Exception:
                log.exception("controller: sending the event's broker requests failed")
            if fut is not None and not fut.done():
                if error is not None:
                    fut.set_exception(error)
                else:
                    fut.set_result(result)

    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.broker_id and self.ctx.epoch > 0

    # ---- lifecycle ----------------------------------------------------------
    async def startup(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())
        await self.put(self._elect)

    async def shutdown(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.channel.clear()
        await self.channel_manager.shutdown()
        if self.active_controller_id == self.broker_id:
            with contextlib.suppress(Exception):
                await self.store.delete(paths.CONTROLLER)

    def _on_controller_change(self, _event: Any = None) -> None:
        self._put_nowait(self._elect)

    async def _elect(self) -> None:
        data = json.dumps(
            {"version": 1, "brokerid": self.broker_id, "timestamp": str(int(time.time() * 1000))}
        ).encode()
        try:
            await self.store.create(paths.CONTROLLER, data, ephemeral=True)
            won = True
        except NodeExistsError:
            won = False
        try:
            raw, _ = await self.store.get(paths.CONTROLLER, watch=self._on_controller_change)
            current = int(json.loads(raw)["brokerid"])
        except NoNodeError:
            # vanished between create and get: try again
            self._put_nowait(self._elect)
            return
        except (ValueError, KeyError, TypeError):
            current = -1
        was_active = self.active_controller_id == self.broker_id
        self.active_controller_id = current
        if won and current == self.broker_id:
            await self._bump_epoch()
            await self._on_controller_failover()
        elif was_active and current != self.broker_id:
            log.info("broker %d resigns as controller (now %d)", self.broker_id, current)
            self.ctx = ControllerContext()
            self.channel.clear()
            await self.channel_manager.shutdown()

    async def _bump_epoch(self) -> None:
        while True:
            try:
                raw, stat = await self.store.get(paths.CONTROLLER_EPOCH)
                epoch = int(raw) + 1
                await self.store.set(
                    paths.CONTROLLER_EPOCH, str(epoch).encode(), version=stat.version
                )
                self.ctx.epoch, self.ctx.epoch_zk_version = epoch, stat.version + 1
                return
            except NoNodeError:
                try:
                    await self.store.create(paths.CONTROLLER_EPOCH, b"1")
                    self.ctx.epoch, self.ctx.epoch_zk_version = 1, 0
                    return
                except NodeExistsError:
                    continue
            except BadVersionError:
                continue

    async def _on_controller_failover(self) -> None:
        log.info("broker %d is the controller (epoch %d)", self.broker_id, self.ctx.epoch)
        for p in (paths.BROKER_IDS, paths.BROKER_TOPICS, paths.ADMIN_DELETE_TOPICS):
            with contextlib.suppress(NodeExistsError):
                await self.store.create(p, b"", makepath=True)
        await self._read_brokers()
        await self._read_topics()
        await self._online_all_partitions()
        # replica state machine start-up: every live replica learns its role
        await self._send_leader_and_isr_for_brokers(set(self.ctx.live_brokers))
        await self._send_update_metadata(list(self.ctx.live_brokers))
        await self._resume_deletions()
        await self._on_log_dir_event()

    # ---- brokers ------------------------------------------------------------
    async def _read_brokers(self) -> set[int]:
        ids = await self.store.get_children(
            paths.BROKER_IDS, watch=lambda _e: self._put_nowait(self._on_broker_change)
        )
        live: dict[int, dict[str, Any]] = {}
        epochs: dict[int, int] = {}
        for i in ids:
            try:
                raw, stat = await self.store.get(f"{paths.BROKER_IDS}/{i}")
                live[int(i)] = json.loads(raw)
                epochs[int(i)] = stat.czxid
            except (NoNodeError, ValueError):
                continue
        old = set(self.ctx.live_brokers)
        self.ctx.live_brokers = live
        self.ctx.live_broker_epochs = epochs
        self.channel_manager.update_brokers(live, epochs)
        return old

    async def _on_broker_change(self) -> None:
        if not self.is_active:
            return
        old = await self._read_brokers()
        new = set(self.ctx.live_brokers)
        if new - old:
            log.info("controller: brokers started %s", sorted(new - old))
        if old - new:
            log.info("controller: brokers failed %s", sorted(old - new))
        for b in new ^ old:  # a restarted broker's dirs are probed afresh
            self.ctx.replicas_on_offline_dirs.pop(b, None)
        await self._online_all_partitions()
        if new - old:  # onBrokerStartup: the new brokers learn the partitions they host
            await self._send_leader_and_isr_for_brokers(new - old)
        await self._send_update_metadata(list(self.ctx.live_brokers))

    async def _send_leader_and_isr_for_brokers(self, brokers: set[int]) -> None:
        by_broker: dict[int, list[dict[str, Any]]] = {}
        for tp, st in self.ctx.states.items():
            a = self.ctx.topics.get(tp[0])
            if a is None or tp[0] in self.ctx.topics_being_deleted or st.leader < 0:
                continue
            for r in a.partitions.get(tp[1], []):
                if r in brokers:
                    by_broker.setdefault(r, []).append(self._state_dict(tp))
        for b, states in by_broker.items():
            await self.channel.leader_and_isr(
                b, self.broker_id, self.ctx.epoch, states, self._live_list()
            )

    # ---- topics -------------------------------------------------------------
    async def _read_topics(self) -> None:
        names = await self.store.get_children(
            paths.BROKER_TOPICS, watch=lambda _e: self._put_nowait(self._on_topic_change)
        )
        topics: dict[str, TopicAssignment] = {}
        for name in names:
            a = await self._read_assignment(name)
            if a is not None:
                topics[name] = a
        self.ctx.topics = topics
        self.ctx.states = {k: v for k, v in self.ctx.states.items() if k[0] in topics}
        for name, a in topics.items():
            for p in a.partitions:
                if (name, p) not in self.ctx.states:
                    st = await self._read_state(name, p)
                    if st is not None:
                        self.ctx.states[(name, p)] = st

    async def _read_assignment(self, name: str) -> TopicAssignment | None:
        try:
            raw, _ = await self.store.get(
                paths.topic_path(name),
                watch=lambda _e, n=name: self._put_nowait(lambda: self._on_partition_change(n)),
            )
        except NoNodeError:
            return None
        d = json.loads(raw)
        tid = d.get("topic_id")
        return TopicAssignment(
            uuid_from_kafka(tid) if tid else ZERO_UUID,
            {int(p): [int(r) for r in rs] for p, rs in d.get("partitions", {}).items()},
        )

    async def _read_state(self, topic: str, partition: int) -> PartitionState | None:
        try:
            raw, stat = await self.store.get(paths.partition_state_path(topic, partition))
        except NoNodeError:
            return None
        d = json.loads(raw)
        return PartitionState(
            int(d["leader"]),
            int(d["leader_epoch"]),
            [int(x) for x in d["isr"]],
            int(d["controller_epoch"]),
            stat.version,
        )

    async def _on_topic_change(self) -> None:
        if not self.is_active:
            return
        before = set(self.ctx.topics)
        await self._read_topics()
        new = set(self.ctx.topics) - before
        if new:
            await self._online_all_partitions()
            await self._send_update_metadata(list(self.ctx.live_brokers))

    async def _on_partition_change(self, name: str) -> None:
        if not self.is_active:
            return
        a = await self._read_assignment(name)
        if a is None:
            return
        self.ctx.topics[name] = a
        await self._online_all_partitions()
        await self._send_update_metadata(list(self.ctx.live_brokers))

    async def _online_all_partitions(self) -> None:
        """Give every partition without a live leader one, and tell the replicas."""
        changed: dict[int, list[dict[str, Any]]] = {}
        live = set(self.ctx.live_brokers)
        for name, a in self.ctx.topics.items():
            if name in self.ctx.topics_being_deleted:
                continue
            for p, replicas in a.partitions.items():
                tp = (name, p)
                st = self.ctx.states.get(tp)
                if st is not None and self.ctx.is_replica_online(st.leader, tp):
                    continue
                online = {r for r in live if self.ctx.is_replica_online(r, tp)}
                if st is None:
                    isr = [r for r in replicas if r in online]
                    if not isr:
                        continue
                    new = PartitionState(isr[0], 0, isr, self.ctx.epoch)
                    if not await self._write_state(tp, new, create=True):
                        continue
                else:
                    leader, isr = offline_partition_leader(
                        replicas, st.isr, online, self.unclean_election(name)
                    )
                    if leader == -1 and st.leader == -1:
                        continue
                    new = PartitionState(
                        leader,
                        st.leader_epoch + 1,
                        isr if leader >= 0 else st.isr,
                        self.ctx.epoch,
                        st.version,
                    )
                    if not await self._write_state(tp, new, create=False):
                        continue
                self.ctx.states[tp] = new
                for r in replicas:
                    if r in live:
                        changed.setdefault(r, []).append(self._state_dict(tp))
        for b, states in changed.items():
            await self.channel.leader_and_isr(
                b, self.broker_id, self.ctx.epoch, states, self._live_list()
            )

    async def _write_state(self, tp: TopicPartition, st: PartitionState, *, create: bool) -> bool:
        data = json.dumps(
            {
                "controller_epoch": st.controller_epoch,
                "leader": st.leader,
                "version": 1,
                "leader_epoch": st.leader_epoch,
                "isr": st.isr,
            }
        ).encode()
        path = paths.partition_state_path(*tp)
        try:
            if create:
                await self.store.create(path, data, makepath=True)
                st.version = 0
            else:
                stat = await self.store.set(path, data, version=st.version)
                st.version = stat.version
            return True
        except NodeExistsError:
            cur = await self._read_state(*tp)
            if cur is not None:
                self.ctx.states[tp] = cur
            return False
        except (BadVersionError, NoNodeError):
            log.warning("controller: conditional write of %s-%d state failed; re-reading", *tp)
            cur = await self._read_state(*tp)
            if cur is not None:
                self.ctx.states[tp] = cur
            return False

    def _state_dict(self, tp: TopicPartition) -> dict[str, Any]:
        st = self.ctx.states[tp]
        a = self.ctx.topics[tp[0]]
        return {
            "topic": tp[0],
            "partition": tp[1],
            "topic_id": a.topic_id,
            "leader": st.leader,
            "leader_epoch": st.leader_epoch,
            "isr": st.isr,
            "replicas": a.partitions[tp[1]],
            "offline_replicas": [
                r for r in a.partitions[tp[1]] if tp in self.ctx.replicas_on_offline_dirs.get(r, ())
            ],
            "controller_epoch": st.controller_epoch,
            "partition_epoch": st.version,
        }

    def _live_list(self) -> list[dict[str, Any]]:
        return [{"id": b, **info} for b, info in sorted(self.ctx.live_brokers.items())]

    async def _send_update_metadata(
        self, brokers: list[int], deleted: list[str] | None = None
    ) -> None:
        states = [self._state_dict(tp) for tp in self.ctx.states if tp[0] in self.ctx.topics]
        for b in brokers:
            await self.channel.update_metadata(
                b, self.broker_id, self.ctx.epoch, states, self._live_list(), deleted or []
            )

    # ---- log dir failures (LogDirEventNotification) --------------------------
    async def _on_log_dir_event(self) -> None:
        """Brokers wrote /log_dir_event_notification/log_dir_event_<seq> after a log dir
        failed. As Kafka's onBrokerLogDirFailure: send each a LeaderAndIsr for all its
        replicas; the partitions it answers with KAFKA_STORAGE_ERROR are offline."""
        if not self.is_active:
            return
        with contextlib.suppress(NodeExistsError):
            await self.store.create(paths.LOG_DIR_EVENT_NOTIFICATION, b"", makepath=True)
        names = await self.store.get_children(
            paths.LOG_DIR_EVENT_NOTIFICATION,
            watch=lambda _e: self._put_nowait(self._on_log_dir_event),
        )
        brokers: set[int] = set()
        for name in names:
            path = f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{name}"
            try:
                raw, _ = await self.store.get(path)
                brokers.add(paths.LogDirEventNotification.decode(raw).broker)
            except NoNodeError:
                continue
            except paths.MetadataFormatError:
                log.warning("controller: ignoring malformed %s", path)
            with contextlib.suppress(NoNodeError):
                await self.store.delete(path)
        for b in sorted(brokers & set(self.ctx.live_brokers)):
            log.info("controller: handling log dir failure on broker %d", b)
            states = [
                self._state_dict(tp)
                for tp in self.ctx.states
                if tp[0] not in self.ctx.topics_being_deleted
                and b in self.ctx.topics[tp[0]].partitions.get(tp[1], ())
            ]
            await self.channel_manager.leader_and_isr(
                b,
                self.broker_id,
                self.ctx.epoch,
                states,
                self._live_list(),
                callback=lambda broker, resp: self._put_nowait(
                    lambda: self._on_leader_and_isr_response(broker, resp)
                ),
            )

    async def _on_leader_and_isr_response(self, broker: int, response: Any) -> None:
        """LeaderAndIsrResponseReceived: track the broker's offline replicas; the new ones
        go offline (onReplicasBecomeOffline)."""
        if not self.is_active:
            return
        names = {a.topic_id: n for n, a in self.ctx.topics.items()}
        errors = [(e.topic_name, e) for e in response.partition_errors]
        errors += [
            (names.get(t.topic_id, ""), e) for t in response.topics for e in t.partition_errors
        ]
        offline = {(n, e.partition_index) for n, e in errors if e.error_code == KAFKA_STORAGE_ERROR}
        online = {(n, e.partition_index) for n, e in errors if e.error_code == 0}
        previous = self.ctx.replicas_on_offline_dirs.get(broker, set())
        current = (previous - online) | offline
        if current:
            self.ctx.replicas_on_offline_dirs[broker] = current
        else:
            self.ctx.replicas_on_offline_dirs.pop(broker, None)
        if current - previous:
            await self._on_replicas_offline(broker, current - previous)

    async def _on_replicas_offline(self, broker: int, tps: set[TopicPartition]) -> None:
        """Elect leaders elsewhere for the partitions it led and take it out of the ISRs
        (the last ISR member stays, as Kafka); with no other live ISR replica the
        partition has no leader. Then everyone learns the offline replicas."""
        log.info("controller: replicas of broker %d offline: %s", broker, sorted(tps))
        changed: dict[int, list[dict[str, Any]]] = {}
        for tp in sorted(tps):
            st = self.ctx.states.get(tp)
            a = self.ctx.topics.get(tp[0])
            if st is None or a is None or tp[0] in self.ctx.topics_being_deleted:
                continue
            replicas = a.partitions.get(tp[1], [])
            isr = [r for r in st.isr if r != broker] or list(st.isr)
            leader = st.leader
            if leader == broker:
                online = {r for r in replicas if self.ctx.is_replica_online(r, tp)}
                leader, elected_isr = offline_partition_leader(
                    replicas, isr, online, self.unclean_election(tp[0])
                )
                if leader != NO_LEADER:
                    isr = elected_isr
            new = PartitionState(leader, st.leader_epoch + 1, isr, self.ctx.epoch, st.version)
            if not await self._write_state(tp, new, create=False):
                continue
            self.ctx.states[tp] = new
            for r in replicas:
                if self.ctx.is_replica_online(r, tp):
                    changed.setdefault(r, []).append(self._state_dict(tp))
        for b, states in changed.items():
            await self.channel.leader_and_isr(
                b, self.broker_id, self.ctx.epoch, states, self._live_list()
            )
        await self._send_update_metadata(list(self.ctx.live_brokers))

    # ---- topic deletion (TopicDeletionManager) -------------------------------
    async def _resume_deletions(self) -> None:
        names = await self.store.get_children(
            paths.ADMIN_DELETE_TOPICS, watch=lambda _e: self._put_nowait(self._resume_deletions)
        )
        for name in names:
            await self._delete_topic(name)

    async def _delete_topic(self, name: str) -> None:
        a = self.ctx.topics.get(name)
        self.ctx.topics_being_deleted.add(name)
        # first UpdateMetadata with leader -2 for its partitions, as Kafka's onTopicDeletion
        await self._send_update_metadata(list(self.ctx.live_brokers), [name])
        if a is not None:
            by_broker: dict[int, list[TopicPartition]] = {}
            for p, replicas in a.partitions.items():
                for r in replicas:
                    by_broker.setdefault(r, []).append((name, p))
            for b, tps in by_broker.items():
                if b in self.ctx.live_brokers:
                    await self.channel.stop_replica(b, self.broker_id, self.ctx.epoch, tps, True)
        for path in (paths.topic_path(name), paths.topic_config_path(name)):
            with contextlib.suppress(NoNodeError):
                await self.store.delete(path, recursive=True)
        self.ctx.topics.pop(name, None)
        self.ctx.states = {k: v for k, v in self.ctx.states.items() if k[0] != name}
        with contextlib.suppress(NoNodeError):
            await self.store.delete(f"{paths.ADMIN_DELETE_TOPICS}/{name}")
        self.ctx.topics_being_deleted.discard(name)
        await self._send_update_metadata(list(self.ctx.live_brokers), [name])
