"""KafkaController: election, failover, and the controller's event handlers (seed 002).

Every broker runs one. They all watch /controller; the broker that creates the
ephemeral /controller bumps /controller_epoch by CAS and becomes the active
controller (``onControllerFailover``): it loads the cluster from the store
into a :class:`ControllerContext`, starts the replica and partition state
machines, and from then on reacts to watches on the store. Everything runs as
events on one FIFO queue (:class:`ControllerEventManager`), so no handler runs
concurrently with another; handlers re-read the store rather than trust watch
deltas.

Fencing: /controller_epoch is bumped at every failover; every state-znode
write checks its version (a replaced controller cannot write) and the
partition's controller epoch (a znode written by a newer controller is left
alone); every request to brokers carries the epoch, and brokers reject older
ones. A controller that loses its session, sees another controller in
/controller, or hits :class:`ControllerMovedException` resigns at once: it
forgets its listeners (their events are ignored), its state and its broker
connections, so nothing more is sent with the old epoch.

This class owns the event queue, the watches and the controllership generation,
and handles election, failover, brokers, topics and controlled shutdown. The
event bodies of three areas live in their own modules, each holding the
controller: :mod:`~kafkalite.controller.reassignment` (partition reassignment),
:mod:`~kafkalite.controller.preferred_election` (preferred election, auto
rebalance, ElectLeaders) and :mod:`~kafkalite.controller.zk_notifications`
(ISR change and log dir event notifications).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kafkalite.common.types import TopicPartition
from kafkalite.controller.channel_manager import ControllerChannelManager
from kafkalite.controller.controller_context import (
    ControllerContext,
    PartitionAndReplica,
)
from kafkalite.controller.controller_event_manager import ControllerEvent, ControllerEventManager
from kafkalite.controller.leader_selectors import (
    ControlledShutdownLeaderSelector,
    NoOpLeaderSelector,
    OfflinePartitionLeaderSelector,
)
from kafkalite.controller.partition_state_machine import (
    PartitionState,
    PartitionStateMachine,
    leader_and_isr_of,
)
from kafkalite.controller.preferred_election import ElectionResults, PreferredElectionManager
from kafkalite.controller.reassignment import PartitionReassignmentManager, ReassignmentResults
from kafkalite.controller.replica_state_machine import ReplicaState, ReplicaStateMachine
from kafkalite.controller.request_batch import (
    BrokerChannel,
    ControllerBrokerRequestBatch,
    IllegalBatchStateError,
)
from kafkalite.controller.topic_deletion_manager import TopicDeletionManager
from kafkalite.controller.zk_notifications import ZkNotificationHandler
from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.kafka_zk_client import BrokerInfo, ControllerMovedException, KafkaZkClient
from kafkalite.metadata.store import (
    MetadataStore,
    SessionState,
    WatchCallback,
    WatchedEvent,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.kafka_uuid import ZERO_UUID
from kafkalite.protocol.sasl_client import SaslClientCredentials

log = logging.getLogger(__name__)


UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"


@dataclass(slots=True)
class ControllerConfig:
    """The broker configs the controller follows (seed 002 §11)."""

    #: the broker-level default (dynamic, hence a callable); topics override it
    unclean_leader_election_enable: Callable[[], bool] = lambda: False
    delete_topic_enable: bool = True
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_seconds: float = 300.0
    #: Kafka waits 5 s after failover before the first imbalance check
    auto_leader_rebalance_initial_delay_seconds: float = 5.0

    @classmethod
    def from_broker_config(cls, cfg: Any) -> ControllerConfig:
        """From the broker config (Kafka's names); unclean election is read live."""
        return cls(
            unclean_leader_election_enable=lambda: bool(cfg["unclean.leader.election.enable"]),
            delete_topic_enable=bool(cfg["delete.topic.enable"]),
            auto_leader_rebalance_enable=bool(cfg["auto.leader.rebalance.enable"]),
            leader_imbalance_per_broker_percentage=int(
                cfg["leader.imbalance.per.broker.percentage"]
            ),
            leader_imbalance_check_interval_seconds=float(
                cfg["leader.imbalance.check.interval.seconds"]
            ),
        )


class KafkaController:
    @classmethod
    def for_broker(
        cls,
        broker_id: int,
        store: MetadataStore,
        cfg: Any,
        *,
        ssl_context: ssl.SSLContext | None,
        secret: bytes | None,
        register_broker: Callable[[], Awaitable[Any]],
        sasl: SaslClientCredentials | None = None,
    ) -> KafkaController:
        """A broker's controller, talking to the brokers over TCP (ControllerChannelManager),
        configured from the broker config (Kafka's names)."""
        channel = ControllerChannelManager(
            broker_id,
            listener_name=cfg.inter_broker_listener,
            control_plane_listener_name=cfg["control.plane.listener.name"],
            request_timeout_ms=int(cfg["request.timeout.ms"]),
            ssl_context=ssl_context,
            secret=secret,
            sasl=sasl,
        )
        config = ControllerConfig.from_broker_config(cfg)
        return cls(broker_id, store, channel, config=config, register_broker=register_broker)

    def __init__(
        self,
        broker_id: int,
        store: MetadataStore,
        channel: BrokerChannel,
        *,
        config: ControllerConfig | None = None,
        register_broker: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.store = store
        self.zk = KafkaZkClient(store)
        self.channel_manager = channel
        self.config = config or ControllerConfig()
        self._register_broker = register_broker
        self.ctx = ControllerContext()
        self.active_controller_id = -1
        self.event_manager = ControllerEventManager(on_error=self._on_event_error)
        self.notifications = ZkNotificationHandler(self)
        self.batch = ControllerBrokerRequestBatch(
            broker_id,
            lambda: self.ctx,
            channel,
            is_topic_queued_for_deletion=self.is_topic_queued_for_deletion,
            leader_and_isr_callback=self.notifications.on_leader_and_isr_response,
        )
        self.offline_selector = OfflinePartitionLeaderSelector(
            self.ctx, self._unclean_election_topics
        )
        self.controlled_shutdown_selector = ControlledShutdownLeaderSelector(self.ctx)
        self.noop_selector = NoOpLeaderSelector(self.ctx)
        self.topic_deletion_manager = TopicDeletionManager(
            self, delete_topic_enable=self.config.delete_topic_enable
        )
        self.partition_state_machine = PartitionStateMachine(
            broker_id,
            lambda: self.ctx,
            self.zk,
            self.batch,
            self.offline_selector,
            is_topic_queued_for_deletion=self.is_topic_queued_for_deletion,
        )
        self.replica_state_machine = ReplicaStateMachine(
            broker_id,
            lambda: self.ctx,
            self.zk,
            self.batch,
            is_topic_queued_for_deletion=self.is_topic_queued_for_deletion,
            unclean_topics=self._unclean_election_topics,
            deletion_callback=self._on_stop_replica_deletion_response,
        )
        self.preferred_election = PreferredElectionManager(self)
        self.reassignment = PartitionReassignmentManager(self)
        #: bumped at every failover and resignation; watches of older generations are ignored
        self._generation = 0
        self._watches: dict[str, WatchCallback] = {}
        self._session_lost = False
        self._running = False

    # ---- status ---------------------------------------------------------------------
    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.broker_id and self.ctx.epoch > 0

    @property
    def epoch(self) -> int:
        return self.ctx.epoch

    @property
    def generation(self) -> int:
        """Bumped at every failover and resignation: an event or callback created under an
        older generation belongs to a controllership that is over and must do nothing."""
        return self._generation

    def offline_partitions_count(self) -> int:
        """Kafka's OfflinePartitionsCount metric."""
        return self.partition_state_machine.offline_partition_count() if self.is_active else 0

    def preferred_replica_imbalance_count(self) -> int:
        """Kafka's PreferredReplicaImbalanceCount metric: partitions whose leader is not
        their preferred replica (leaderless ones included), outside topics being deleted."""
        if not self.is_active:
            return 0
        n = 0
        for tp, lic in self.ctx.partition_leadership_info.items():
            ar = self.ctx.partition_replica_assignment(tp)
            if (
                ar
                and lic.leader_and_isr.leader != ar[0]
                and not self.is_topic_queued_for_deletion(tp[0])
            ):
                n += 1
        return n

    @property
    def unclean_leader_elections(self) -> int:
        return self.offline_selector.unclean_elections

    def global_topic_count(self) -> int:
        """Kafka's GlobalTopicCount: topics the controller knows (0 on other brokers)."""
        return len(self.ctx.all_topics) if self.is_active else 0

    def global_partition_count(self) -> int:
        """Kafka's GlobalPartitionCount: partitions with a leader-and-ISR state (0 on other
        brokers)."""
        return len(self.ctx.partition_leadership_info) if self.is_active else 0

    # ---- event queue -----------------------------------------------------------------
    def put(self, fn: Callable[[], Awaitable[Any]], name: str = "Custom") -> asyncio.Future[Any]:
        """Run ``fn`` as a controller event (after everything already queued)."""
        return self.event_manager.put(name, fn)

    def put_nowait(self, name: str, fn: Callable[[], Awaitable[Any]]) -> None:
        """Queue ``fn`` from a callback (watch, broker response, timer) that cannot wait;
        dropped once the controller is shut down."""
        if self._running:
            self.event_manager.put_nowait(name, fn)

    async def _on_event_error(self, ev: ControllerEvent, e: BaseException) -> None:
        if isinstance(e, ControllerMovedException):
            log.warning(
                "controller %d: %s found that the controller moved (%s); resigning",
                self.broker_id,
                ev.name,
                e,
            )
            await self._resign()
        elif isinstance(e, IllegalBatchStateError):
            # a step left requests behind: the controller's view can no longer be
            # trusted; like Kafka, give the role to a fresh election
            log.error("controller %d: %s; resigning", self.broker_id, e)
            self.batch.clear()
            await self._resign()
        else:
            log.error("controller %d: event %s failed", self.broker_id, ev.name, exc_info=e)

    def watch(self, name: str, handler: Callable[[], Awaitable[None]]) -> WatchCallback:
        """A watch callback that queues ``handler`` as an event of this controllership.

        One object per name and generation, so re-arming a watch that has not fired
        yet registers nothing new; after resignation the event is ignored.
        """
        w = self._watches.get(name)
        if w is None:
            generation = self._generation

            async def process() -> None:
                if generation == self._generation and self.is_active:
                    await handler()

            def callback(_event: WatchedEvent) -> None:
                if self._watches.get(name) is callback:
                    del self._watches[name]
                self.put_nowait(name, process)

            w = self._watches[name] = callback
        return w

    def unwatch(self, name: str) -> None:
        """Forget the watch ``name``: when it fires, its event does nothing."""
        self._watches.pop(name, None)

    # ---- life cycle -------------------------------------------------------------------
    async def startup(self) -> None:
        """Start the event queue, listen to the session, and run the first election."""
        self._running = True
        self.store.add_state_listener(self._on_session_state)
        self.event_manager.start()
        await self.put(self._elect, "Startup")

    async def shutdown(self) -> None:
        self._running = False
        self.store.remove_state_listener(self._on_session_state)
        await self.event_manager.close()
        was_active = self.is_active
        await self._on_controller_resignation()
        self.active_controller_id = -1
        if was_active:
            with contextlib.suppress(Exception):
                await self.zk.delete_controller_if_owned(self.broker_id)

    # ---- election (seed 002 §2) --------------------------------------------------------
    def _on_controller_znode(self, _event: WatchedEvent) -> None:
        self.put_nowait("ControllerChange", self._controller_change)

    async def _read_controller_id(self) -> int:
        return await self.zk.get_controller_id(watch=self._on_controller_znode)

    async def _controller_change(self) -> None:
        """/controller changed or vanished: follow it, resign if it is not us, elect if empty."""
        was_active = self.is_active
        self.active_controller_id = await self._read_controller_id()
        if was_active and self.active_controller_id != self.broker_id:
            log.info(
                "broker %d resigns as controller: /controller names %d",
                self.broker_id,
                self.active_controller_id,
            )
            await self._on_controller_resignation()
        if self.active_controller_id == -1:
            await self._elect()

    async def _elect(self) -> None:
        self.active_controller_id = await self._read_controller_id()
        if self.active_controller_id != -1:
            return  # no preemption: a controller exists
        if not await self.zk.register_controller(self.broker_id, int(time.time() * 1000)):
            self.active_controller_id = await self._read_controller_id()
            return
        self.active_controller_id = self.broker_id
        try:
            await self._on_controller_failover()
        except Exception as e:
            if isinstance(e, ControllerMovedException):
                log.warning(
                    "broker %d: failover aborted, the controller moved: %s", self.broker_id, e
                )
            else:
                log.exception("broker %d: failover failed; resigning", self.broker_id)
            await self._resign()

    async def _resign(self) -> None:
        """Give up the role and delete /controller (if ours) so that others elect."""
        await self._on_controller_resignation()
        self.active_controller_id = -1
        with contextlib.suppress(Exception):
            await self.zk.delete_controller_if_owned(self.broker_id)
        with contextlib.suppress(Exception):
            self.active_controller_id = await self._read_controller_id()

    # ---- session expiry ----------------------------------------------------------------
    def _on_session_state(self, state: SessionState) -> None:
        if state is SessionState.LOST:
            self._session_lost = True
            self.put_nowait("Expire", self._expire)
        elif state is SessionState.CONNECTED and self._session_lost:
            self._session_lost = False
            self.put_nowait("RegisterBrokerAndReelect", self._register_broker_and_reelect)

    async def _expire(self) -> None:
        """Our session is gone (with /controller if it was ours): stop at once."""
        was_active = self.is_active
        self.active_controller_id = -1
        if was_active:
            log.warning(
                "broker %d: metadata session expired; resigning as controller", self.broker_id
            )
            await self._on_controller_resignation()

    async def _register_broker_and_reelect(self) -> None:
        if self._register_broker is not None:
            await self._register_broker()
        await self._controller_change()

    # ---- failover / resignation ----------------------------------------------------------
    async def _on_controller_failover(self) -> None:
        self._generation += 1
        self._watches = {}
        epoch, epoch_zk_version = await self.zk.increment_controller_epoch()
        ctx = self.ctx
        ctx.reset()
        ctx.epoch, ctx.epoch_zk_version = epoch, epoch_zk_version
        log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
        await self.zk.create_top_level_paths()
        await self.notifications.initialize_log_dir_event_notifications()
        await self._initialize_controller_context()
        pending_preferred = await self.preferred_election.read_pending()
        await self.reassignment.initialize()
        queued, ineligible = await self._fetch_topic_deletions_in_progress()
        self.topic_deletion_manager.init(queued, ineligible)
        await self.notifications.watch_isr_change_notifications()
        await self.send_update_metadata_request(ctx.live_or_shutting_down_broker_ids, None)
        await self.replica_state_machine.startup()
        await self.partition_state_machine.startup()
        await self.reassignment.maybe_trigger_partition_reassignment(
            set(ctx.partitions_being_reassigned)
        )
        if pending_preferred is not None:
            await self.preferred_election.on_preferred_replica_election(
                pending_preferred, trigger="zk"
            )
        if self.config.auto_leader_rebalance_enable:
            self.preferred_election.schedule_auto_leader_rebalance(
                self.config.auto_leader_rebalance_initial_delay_seconds
            )
        await self.topic_deletion_manager.try_topic_deletion()
        # notifications that arrived before the watch was set
        await self.notifications.on_isr_change_notification()

    async def _on_controller_resignation(self) -> None:
        self._generation += 1
        self._watches = {}
        self.preferred_election.cancel_auto_leader_rebalance()
        self.topic_deletion_manager.reset()
        self.replica_state_machine.shutdown()
        self.partition_state_machine.shutdown()
        self.batch.clear()
        await self.channel_manager.shutdown()
        self.ctx.reset()

    async def _initialize_controller_context(self) -> None:
        ctx = self.ctx
        ids = await self.zk.get_broker_ids(watch=self.watch("BrokerChange", self._broker_change))
        ctx.live_brokers = await self.zk.get_brokers(ids)
        self._update_channel()
        topics = await self.zk.get_all_topics(watch=self.watch("TopicChange", self._topic_change))
        await self._load_topics(topics)
        ctx.partition_leadership_info.clear()
        states = await self.zk.get_partition_states(list(ctx.all_partitions()))
        for tp, (st, version) in states.items():
            ctx.partition_leadership_info[tp] = leader_and_isr_of(st, version)

    async def _load_topics(self, topics: Iterable[str]) -> list[str]:
        """Read assignments (watching each topic znode) into the context; returns the topics read."""
        ctx = self.ctx
        loaded = []
        for topic in topics:
            got = await self.zk.get_topic_assignment(
                topic,
                watch=self.watch(
                    f"PartitionModifications:{topic}",
                    lambda t=topic: self._partition_modifications(t),  # type: ignore[misc]
                ),
            )
            if got is None:
                continue
            assignment, _version = got
            ctx.all_topics.add(topic)
            ctx.topic_ids[topic] = (
                zk_data.topic_id_from_str(assignment.topic_id) if assignment.topic_id else ZERO_UUID
            )
            ctx.assignments[topic] = {p: list(r) for p, r in assignment.partitions.items()}
            loaded.append(topic)
        return loaded

    def _update_channel(self) -> None:
        self.channel_manager.update_brokers(self.ctx.live_brokers)

    async def _fetch_topic_deletions_in_progress(self) -> tuple[set[str], set[str]]:
        ctx = self.ctx
        queued = set(
            await self.zk.get_topic_deletions(
                watch=self.watch("TopicDeletion", self._topic_deletion)
            )
        )
        if not self.config.delete_topic_enable:
            if queued:
                await self.zk.delete_topic_deletions(queued, ctx.epoch_zk_version)
            return set(), set()
        ineligible = {
            t
            for t in queued
            if any(
                not ctx.is_replica_online(r.replica, r.topic_partition)
                for r in ctx.replicas_for_topic(t)
            )
        }
        ineligible |= {tp[0] for tp in ctx.partitions_being_reassigned}
        return queued, ineligible

    # ---- requests ---------------------------------------------------------------------
    async def send_update_metadata_request(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition] | None
    ) -> None:
        """UpdateMetadata now; ``partitions`` None = all, empty = just the broker list."""
        self.batch.new_batch()
        self.batch.add_update_metadata_request_for_brokers(brokers, partitions)
        await self.batch.send_requests_to_brokers(self.ctx.epoch)

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return self.topic_deletion_manager.is_topic_queued_up_for_deletion(topic)

    async def _unclean_election_topics(self, topics: Iterable[str]) -> set[str]:
        """Topics with unclean leader election enabled: /config/topics/<t> over the broker default."""
        default = self.config.unclean_leader_election_enable()
        out = set()
        for t in topics:
            value = (await self.zk.get_topic_config(t)).get(UNCLEAN_LEADER_ELECTION_ENABLE)
            enabled = default if value is None else str(value).strip().lower() == "true"
            if enabled:
                out.add(t)
        return out

    # ---- brokers (seed 002 §9) ---------------------------------------------------------
    async def _broker_change(self) -> None:
        ctx = self.ctx
        ids = await self.zk.get_broker_ids(watch=self.watch("BrokerChange", self._broker_change))
        current = await self.zk.get_brokers(ids)
        known = ctx.live_brokers
        new = sorted(set(current) - set(known))
        dead = sorted(set(known) - set(current))
        bounced = sorted(b for b in set(current) & set(known) if current[b].epoch != known[b].epoch)
        if new or dead or bounced:
            log.info(
                "controller %d: brokers started %s, failed %s, bounced %s",
                self.broker_id,
                new,
                dead,
                bounced,
            )
        if new:
            for b in new:
                ctx.live_brokers[b] = current[b]
            self._update_channel()
            await self._on_broker_startup(new)
        if bounced:
            for b in bounced:
                del ctx.live_brokers[b]
            self._update_channel()
            await self._on_broker_failure(bounced)
            for b in bounced:
                ctx.live_brokers[b] = current[b]
            self._update_channel()
            await self._on_broker_startup(bounced)
        if dead:
            for b in dead:
                del ctx.live_brokers[b]
            self._update_channel()
            await self._on_broker_failure(dead)
        for b, info in current.items():  # registration data may have changed too
            if b in ctx.live_brokers and ctx.live_brokers[b] != info:
                ctx.live_brokers[b] = info

    async def _on_broker_startup(self, new: list[int]) -> None:
        ctx = self.ctx
        for b in new:  # a new incarnation: its log dirs are probed afresh (LeaderAndIsr)
            ctx.replicas_on_offline_dirs.pop(b, None)
        existing = ctx.live_or_shutting_down_broker_ids - set(new)
        # the others learn the new broker list; the new brokers get every partition
        await self.send_update_metadata_request(existing, [])
        await self.send_update_metadata_request(new, None)
        replicas = ctx.replicas_on_brokers(new)
        await self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE)
        await self.partition_state_machine.trigger_online_partition_state_change()
        new_set = set(new)
        resume = {
            tp
            for tp, rctx in ctx.partitions_being_reassigned.items()
            if new_set & set(rctx.new_replicas)
        }
        for tp in sorted(resume):
            await self.reassignment.on_partition_reassignment(
                tp, ctx.partitions_being_reassigned[tp]
            )
        deleting = {r.topic for r in replicas if self.is_topic_queued_for_deletion(r.topic)}
        if deleting:
            await self.topic_deletion_manager.resume_deletion_for_topics(deleting)

    async def _on_broker_failure(self, dead: list[int]) -> None:
        ctx = self.ctx
        for b in dead:
            ctx.replicas_on_offline_dirs.pop(b, None)
        ctx.shutting_down_broker_ids -= set(dead)
        await self.on_replicas_become_offline(ctx.replicas_on_brokers(dead))

    async def on_replicas_become_offline(self, replicas: list[PartitionAndReplica]) -> None:
        """Kafka's onReplicasBecomeOffline, for dead brokers and failed log dirs alike.

        Partitions whose leader is no longer online go Offline and are elected again
        (the offline selector skips offline replicas), the replicas go OfflineReplica
        (StopReplica, out of the ISRs), and replicas of topics being deleted fail
        their deletion.
        """
        ctx = self.ctx
        for_deletion = [r for r in replicas if self.is_topic_queued_for_deletion(r.topic)]
        not_for_deletion = [r for r in replicas if not self.is_topic_queued_for_deletion(r.topic)]
        offline_leader = self._partitions_with_offline_leader()
        psm = self.partition_state_machine
        await psm.handle_state_changes(offline_leader, PartitionState.OFFLINE)
        await psm.trigger_online_partition_state_change()
        await self.replica_state_machine.handle_state_changes(
            not_for_deletion, ReplicaState.OFFLINE
        )
        if for_deletion:
            await self.topic_deletion_manager.fail_replica_deletion(for_deletion)
        # replicas in failed log dirs of live brokers change offline_replicas even when
        # no leader or ISR changed (a follower already out of the ISR): tell everyone
        in_failed_dirs = sorted(
            {r.topic_partition for r in not_for_deletion if r.replica in ctx.live_brokers}
        )
        if not offline_leader or in_failed_dirs:
            await self.send_update_metadata_request(
                ctx.live_or_shutting_down_broker_ids, in_failed_dirs
            )

    def _partitions_with_offline_leader(self) -> list[TopicPartition]:
        """Partitions (of topics not being deleted) whose leader is dead or in a failed log dir."""
        ctx = self.ctx
        return [
            tp
            for tp, lic in ctx.partition_leadership_info.items()
            if not ctx.is_replica_online(lic.leader_and_isr.leader, tp, include_shutting_down=True)
            and not self.is_topic_queued_for_deletion(tp[0])
        ]

    # ---- topics ---------------------------------------------------------------------
    async def _topic_change(self) -> None:
        ctx = self.ctx
        topics = set(
            await self.zk.get_all_topics(watch=self.watch("TopicChange", self._topic_change))
        )
        new = sorted(topics - ctx.all_topics)
        deleted = ctx.all_topics - topics
        if deleted:  # removed behind the deletion manager's back: forget them entirely
            for t in deleted:
                ctx.remove_topic(t)
            psm, rsm = self.partition_state_machine, self.replica_state_machine
            for tp in [tp for tp in psm.partition_state if tp[0] in deleted]:
                del psm.partition_state[tp]
            for r in [r for r in rsm.replica_state if r.topic in deleted]:
                del rsm.replica_state[r]
        if not new:
            return
        loaded = await self._load_topics(new)
        log.info("controller %d: new topics %s", self.broker_id, loaded)
        await self._on_new_partition_creation(
            [tp for t in loaded for tp in ctx.partitions_for_topic(t)]
        )

    async def _partition_modifications(self, topic: str) -> None:
        ctx = self.ctx
        got = await self.zk.get_topic_assignment(
            topic,
            watch=self.watch(
                f"PartitionModifications:{topic}", lambda: self._partition_modifications(topic)
            ),
        )
        if got is None or topic not in ctx.all_topics:
            return
        known = ctx.assignments.get(topic, {})
        added = {p: list(r) for p, r in got[0].partitions.items() if p not in known}
        if not added:
            return
        if self.is_topic_queued_for_deletion(topic):
            # a client's CreatePartitions racing its DeleteTopics: not a broker error
            log.warning(
                "controller %d: skipping adding partitions %s to topic %s, which is being deleted",
                self.broker_id,
                sorted(added),
                topic,
            )
            return
        for p, replicas in added.items():
            ctx.update_partition_replica_assignment((topic, p), replicas)
        log.info(
            "controller %d: new partitions %s of topic %s", self.broker_id, sorted(added), topic
        )
        await self._on_new_partition_creation([(topic, p) for p in sorted(added)])

    async def _on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        psm, rsm = self.partition_state_machine, self.replica_state_machine
        replicas = self.ctx.replicas_for_partitions(partitions)
        await psm.handle_state_changes(partitions, PartitionState.NEW)
        await rsm.handle_state_changes(replicas, ReplicaState.NEW)
        await psm.handle_state_changes(partitions, PartitionState.ONLINE, self.offline_selector)
        await rsm.handle_state_changes(replicas, ReplicaState.ONLINE)

    async def _topic_deletion(self) -> None:
        ctx = self.ctx
        topics = set(
            await self.zk.get_topic_deletions(
                watch=self.watch("TopicDeletion", self._topic_deletion)
            )
        )
        if not topics:
            return
        if not self.config.delete_topic_enable:
            log.info(
                "removing %s from %s: delete.topic.enable is false",
                sorted(topics),
                zk_paths.DELETE_TOPICS,
            )
            await self.zk.delete_topic_deletions(topics, ctx.epoch_zk_version)
            return
        unknown = topics - ctx.all_topics
        if unknown:
            log.warning("ignoring deletion of non-existent topics %s", sorted(unknown))
            await self.zk.delete_topic_deletions(unknown, ctx.epoch_zk_version)
        topics -= unknown
        if not topics:
            return
        tdm = self.topic_deletion_manager
        tdm.topics_to_be_deleted |= topics
        busy = {tp[0] for tp in ctx.partitions_being_reassigned} | {
            tp[0] for tp in ctx.partitions_undergoing_preferred_replica_election
        }
        tdm.mark_topic_ineligible_for_deletion(
            topics & busy, "reassignment or preferred replica election in progress"
        )
        await tdm.resume_deletions()

    def _on_stop_replica_deletion_response(self, broker_id: int, response: Any) -> None:
        """StopReplica(delete=true) answered (channel sender task): handle it as an event."""
        generation = self._generation

        async def process() -> None:
            if generation != self._generation or not self.is_active:
                return
            failed: list[PartitionAndReplica] = []
            done: list[PartitionAndReplica] = []
            for e in response.partition_errors:
                r = PartitionAndReplica(e.topic_name, e.partition_index, broker_id)
                error = e.error_code or response.error_code
                (failed if error else done).append(r)
            tdm = self.topic_deletion_manager
            if failed:
                await tdm.fail_replica_deletion(failed)
            if done:
                await tdm.complete_replica_deletion(done)

        self.put_nowait("TopicDeletionStopReplicaResponseReceived", process)

    # ---- controlled shutdown (seed 002 §9) ----------------------------------------------
    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int = -1
    ) -> tuple[int, list[TopicPartition]]:
        """Queue ``shutdownBroker(broker_id)``; returns (error code, partitions remaining)."""
        if not self.is_active:
            return int(ErrorCode.not_controller), []
        result: tuple[int, list[TopicPartition]] = await self.put(
            lambda: self._shutdown_broker(broker_id, broker_epoch), "ControlledShutdown"
        )
        return result

    async def _shutdown_broker(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[int, list[TopicPartition]]:
        if not self.is_active:
            return int(ErrorCode.not_controller), []
        ctx = self.ctx
        info = ctx.live_brokers.get(broker_id)
        if info is None:
            return int(ErrorCode.broker_not_available), []
        if broker_epoch != -1 and broker_epoch < info.epoch:
            return int(ErrorCode.stale_broker_epoch), []
        ctx.shutting_down_broker_ids.add(broker_id)
        log.info(
            "controller %d: broker %d is shutting down (all shutting down: %s)",
            self.broker_id,
            broker_id,
            sorted(ctx.shutting_down_broker_ids),
        )
        act_on = [
            tp
            for tp in ctx.partitions_on_broker(broker_id)
            if len(ctx.partition_replica_assignment(tp)) > 1
            and tp in ctx.partition_leadership_info
            and not self.is_topic_queued_for_deletion(tp[0])
        ]
        led = [
            tp
            for tp in act_on
            if ctx.partition_leadership_info[tp].leader_and_isr.leader == broker_id
        ]
        followed = [tp for tp in act_on if tp not in set(led)]
        movable = [tp for tp in led if self._has_controlled_shutdown_candidate(tp)]
        if len(movable) < len(led):
            # Expected when the last replicas of a partition stop (a cluster shutting
            # down): one line, not an election failure per partition.
            log.info(
                "controller %d: %d partitions led by shutting-down broker %d have no other "
                "online replica in their ISR; they stay led by it until it stops",
                self.broker_id,
                len(led) - len(movable),
                broker_id,
            )
        await self.partition_state_machine.handle_state_changes(
            movable, PartitionState.ONLINE, self.controlled_shutdown_selector
        )
        await self.replica_state_machine.handle_state_changes(
            [PartitionAndReplica(tp[0], tp[1], broker_id) for tp in followed],
            ReplicaState.OFFLINE,
        )
        return 0, self._replicated_partitions_broker_leads(broker_id)

    def _has_controlled_shutdown_candidate(self, tp: TopicPartition) -> bool:
        """Whether the controlled-shutdown selector can find a leader for ``tp`` (by the cache)."""
        ctx = self.ctx
        isr = ctx.partition_leadership_info[tp].leader_and_isr.isr
        shutting = ctx.shutting_down_broker_ids
        return any(
            r in isr and r not in shutting and ctx.is_replica_online(r, tp)
            for r in ctx.partition_replica_assignment(tp)
        )

    def _replicated_partitions_broker_leads(self, broker_id: int) -> list[TopicPartition]:
        """Partitions ``broker_id`` still leads that have another online replica (Kafka 1.1+)."""
        ctx = self.ctx
        out = []
        for tp, lic in ctx.partition_leadership_info.items():
            if lic.leader_and_isr.leader != broker_id or self.is_topic_queued_for_deletion(tp[0]):
                continue
            ar = ctx.partition_replica_assignment(tp)
            if sum(1 for r in ar if ctx.is_replica_online(r, tp, include_shutting_down=True)) > 1:
                out.append(tp)
        return sorted(out)

    # ---- admin APIs: ElectLeaders (43), Alter/ListPartitionReassignments (45/46) -------
    async def elect_leaders(
        self, partitions: list[TopicPartition] | None, election_type: int
    ) -> ElectionResults | None:
        """Run an admin-triggered election as an event; None if this broker is not the
        controller. See :meth:`PreferredElectionManager.elect_leaders`."""
        if not self.is_active:
            return None
        result: ElectionResults | None = await self.put(
            lambda: self.preferred_election.elect_leaders(partitions, election_type),
            "ReplicaLeaderElection",
        )
        return result

    async def alter_partition_reassignments(
        self, wanted: dict[TopicPartition, list[int] | None]
    ) -> ReassignmentResults | None:
        """Add or cancel reassignments as an event; None if not the controller. See
        :meth:`PartitionReassignmentManager.alter_partition_reassignments`."""
        if not self.is_active:
            return None
        result: ReassignmentResults | None = await self.put(
            lambda: self.reassignment.alter_partition_reassignments(wanted),
            "ApiPartitionReassignment",
        )
        return result

    def list_partition_reassignments(
        self,
    ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]] | None:
        """(replicas, adding, removing) per partition being reassigned; None if not active."""
        if not self.is_active:
            return None
        return self.reassignment.list_partition_reassignments()


__all__ = ["BrokerInfo", "ControllerConfig", "KafkaController"]
