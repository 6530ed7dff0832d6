"""KafkaBroker: wires one broker together and runs its start-up and shutdown.

Start-up order: log dirs and meta.properties → metadata store → cluster id →
inter-broker secret (before any listener accepts a controller request) → logs
(with recovery) → listeners (so ephemeral ports are known) → broker
registration (/brokers/ids/<id>) → controller → wait until the controller's
UpdateMetadata has reached this broker's cache. Shutdown reverses it and
writes the clean-shutdown marker so the next start skips recovery.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafkalite.controller.channel_manager import ControllerChannelManager
from kafkalite.controller.controlled_shutdown import controlled_shutdown
from kafkalite.controller.kafka_controller import ControllerConfig, KafkaController
from kafkalite.coordinator.group import GroupCoordinator
from kafkalite.coordinator.transaction.producer_id_manager import ProducerIdManager
from kafkalite.log.cleaner import CleanerConfig
from kafkalite.log.errors import KafkaStorageError
from kafkalite.log.log_config import LogConfig
from kafkalite.log.log_manager import LogManager
from kafkalite.log.meta_properties import (
    check_log_dirs,
    ensure_meta_properties,
    read_meta_properties,
    resolve_broker_id,
)
from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.factory import open_store
from kafkalite.metadata.inter_broker_secret import get_or_create_inter_broker_secret
from kafkalite.metadata.kafka_zk_client import KafkaZkClient
from kafkalite.metadata.store import MetadataStore, NodeExistsError, NoNodeError, SessionState
from kafkalite.network.tls import build_client_ssl_context, build_ssl_context
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.kafka_uuid import uuid_to_kafka
from kafkalite.replica.partition import LeaderAndIsrState
from kafkalite.replica.replica_manager import ReplicaManager, ReplicaManagerConfig
from kafkalite.server import gc_tuning
from kafkalite.server.admin_manager import AdminManager
from kafkalite.server.apis import build_broker_api_table
from kafkalite.server.apis.controller_requests import ControllerRequestChannel
from kafkalite.server.append_sequencer import AppendSequencer
from kafkalite.server.config import BrokerConfig, Endpoint
from kafkalite.server.controller_identity import ControllerRequestGate
from kafkalite.server.fetch_session import FetchSessionCache
from kafkalite.server.metadata_cache import (
    BrokerEndpointInfo,
    MetadataCache,
    PartitionMetadata,
    TopicMetadata,
)
from kafkalite.server.metrics import BrokerMetrics, MetricsHttpServer
from kafkalite.server.socket_server_config import build_socket_server
from kafkalite.server.topic_names import INTERNAL_TOPICS
from kafkalite.timer import loop_slices

log = logging.getLogger(__name__)


class KafkaBroker:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        ensemble: Any = None,
        peers: dict[int, KafkaBroker] | None = None,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.config = config
        self.ensemble = ensemble
        self.peers = peers if peers is not None else {}
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.broker_id = config.broker_id
        #: czxid of our /brokers/ids/<id> registration (Kafka's broker epoch)
        self.broker_epoch = -1
        self.cluster_id: str | None = None
        #: the cluster's key for signing controller requests (read at start-up)
        self.inter_broker_secret: bytes | None = None
        self.store: MetadataStore = None  # type: ignore[assignment]
        self.metadata_cache = MetadataCache(self.broker_id)
        self.admin = AdminManager(self)
        #: a Fetch response's byte bound (read once: the fetch path asks on every request)
        self.fetch_max_bytes = int(config["fetch.max.bytes"])
        self.fetch_sessions = FetchSessionCache(
            int(config["max.incremental.fetch.session.cache.slots"]),
            int(config["min.incremental.fetch.session.eviction.ms"]),
        )
        #: AlterConfigs on this broker's id (/config/brokers/<id>) and on the cluster
        #: default "" (/config/brokers/<default>), as stored (strings)
        self.dynamic_broker_configs: dict[str, str] = {}
        self.dynamic_default_configs: dict[str, str] = {}
        self.default_log_config = self._broker_log_defaults()
        self.channel = ControllerRequestChannel(
            build_broker_api_table(self),
            max_request_size=int(config["socket.request.max.bytes"]),
        )
        tls = (
            build_ssl_context(config)
            if any(e.security_protocol == "SSL" for e in config.listeners)
            else None
        )
        self.socket_server = build_socket_server(config, self.channel, ssl_context=tls)
        #: this broker as a TLS client of other brokers (presents its keystore)
        self.client_tls = (
            build_client_ssl_context(config)
            if tls is not None or config["ssl.truststore.location"]
            else None
        )
        self.controller_gate = ControllerRequestGate(
            control_plane_listener=config.control_plane_listener,
            inter_broker_listener=config.inter_broker_listener,
            store=lambda: self.store,
            watched_controller_id=lambda: (
                None if self.controller is None else self.controller.active_controller_id
            ),
        )
        self.channel.gate = self.controller_gate
        self.log_manager: LogManager = None  # type: ignore[assignment]
        self.replica_manager: ReplicaManager = None  # type: ignore[assignment]
        self.controller: KafkaController = None  # type: ignore[assignment]
        self.producer_ids: ProducerIdManager = None  # type: ignore[assignment]
        self.group_coordinator = GroupCoordinator(self)
        self.append_sequencer = AppendSequencer()  # produce appends checked in slices
        self.metrics = BrokerMetrics()
        self.metrics.register_purgatories(self._purgatories)
        self.metrics.register_controller(lambda: self.controller)
        port = config["kafkalite.metrics.port"]
        self.metrics_server: MetricsHttpServer | None = (
            None
            if port is None
            else MetricsHttpServer(self.metrics, str(config["kafkalite.metrics.host"]), int(port))
        )
        self._metadata_waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self.started = False
        self.advertised: list[Endpoint] = []
        self._log_dirs = list(config.log_dirs)
        #: log dirs that failed before the logs were loaded, with the reason
        self.offline_log_dirs_at_start: dict[Path, str] = {}

    def _broker_log_defaults(self) -> LogConfig:
        props: dict[str, Any] = {}
        for k, v in self.config.items():
            if v is None or not self.config.is_explicit(k):
                continue
            props[k] = (
                ",".join(v)
                if isinstance(v, list)
                else (str(v).lower() if isinstance(v, bool) else v)
            )
        return LogConfig.from_broker_properties(props)

    # ---- lifecycle ----------------------------------------------------------
    async def start(self) -> None:
        cfg = self.config
        # a dir that cannot be created or whose meta.properties is unreadable starts offline
        self._log_dirs, self.offline_log_dirs_at_start = check_log_dirs(cfg.log_dirs)
        if not self._log_dirs:
            raise KafkaStorageError(
                "every log dir failed at start-up: "
                + "; ".join(f"{d}: {e}" for d, e in self.offline_log_dirs_at_start.items())
            )
        self.store = await open_store(cfg, ensemble=self.ensemble)
        await KafkaZkClient(self.store).create_top_level_paths()
        self.cluster_id = await self._get_or_create_cluster_id()
        self.broker_id = await self._resolve_broker_id()
        self.metadata_cache.broker_id = self.broker_id
        self.metadata_cache.cluster_id = self.cluster_id
        self.inter_broker_secret = await get_or_create_inter_broker_secret(self.store)
        self.controller_gate.authenticate_as(self.broker_id, self.inter_broker_secret)
        self.producer_ids = ProducerIdManager(self.broker_id, self.store)
        await self._load_dynamic_broker_configs()
        await self.admin.load_topic_configs()
        self.log_manager = LogManager(
            cfg.log_dirs,
            self.default_log_config,
            clock_ms=self.clock_ms,
            retention_check_interval_ms=int(cfg["log.retention.check.interval.ms"]),
            recovery_point_checkpoint_interval_ms=int(
                cfg["log.flush.offset.checkpoint.interval.ms"]
            ),
            log_start_offset_checkpoint_interval_ms=int(
                cfg["log.flush.start.offset.checkpoint.interval.ms"]
            ),
            flush_check_interval_ms=int(cfg["log.flush.scheduler.interval.ms"]),
            high_watermark_checkpoint_interval_ms=int(
                cfg["replica.high.watermark.checkpoint.interval.ms"]
            ),
            recovery_threads_per_data_dir=int(cfg["num.recovery.threads.per.data.dir"]),
            cleaner_config=CleanerConfig.from_properties(cfg),
            # loaded logs get their topic's config at once, not the broker defaults
            topic_configs={t: self.admin.log_config(t) for t in self.admin.topic_configs},
            initial_offline_dirs=self.offline_log_dirs_at_start,
        )
        self.log_manager.startup()
        self.replica_manager = ReplicaManager(
            ReplicaManagerConfig(
                broker_id=self.broker_id,
                request_timeout_ms=int(cfg["request.timeout.ms"]),
                fetch_purge_interval=int(cfg["fetch.purgatory.purge.interval.requests"]),
                produce_purge_interval=int(cfg["producer.purgatory.purge.interval.requests"]),
                delete_records_purge_interval=int(
                    cfg["delete.records.purgatory.purge.interval.requests"]
                ),
                topic_min_isr=lambda t: self.admin.log_config(t).min_insync_replicas,
            ),
            self.log_manager,
        )
        self.log_manager.on_dir_offline.append(self._on_log_dir_failure)
        self.group_coordinator.startup()
        await self.socket_server.start()
        if self.metrics_server is not None:
            await self.metrics_server.start()
        self.advertised = [self._resolve_port(ep) for ep in cfg.advertised]
        self.peers[self.broker_id] = self
        await self._register_broker()
        self.controller = KafkaController(
            self.broker_id,
            self.store,
            ControllerChannelManager(
                self.broker_id,
                listener_name=cfg.inter_broker_listener,
                control_plane_listener_name=cfg["control.plane.listener.name"],
                request_timeout_ms=int(cfg["request.timeout.ms"]),
                ssl_context=self.client_tls,
                secret=self.inter_broker_secret,
            ),
            config=ControllerConfig(
                unclean_leader_election_enable=lambda: bool(
                    self.config["unclean.leader.election.enable"]
                ),
                delete_topic_enable=bool(cfg["delete.topic.enable"]),
                auto_leader_rebalance_enable=bool(cfg["auto.leader.rebalance.enable"]),
                leader_imbalance_per_broker_percentage=int(
                    cfg["leader.imbalance.per.broker.percentage"]
                ),
                leader_imbalance_check_interval_seconds=float(
                    cfg["leader.imbalance.check.interval.seconds"]
                ),
            ),
            register_broker=self._register_broker,
        )
        await self.controller.startup()
        await self._wait_for(lambda: self.broker_id in self.metadata_cache.brokers, 10.0)
        self._tasks.append(asyncio.get_running_loop().create_task(self.log_manager.run()))
        if cfg.pid_file is not None:
            cfg.pid_file.parent.mkdir(parents=True, exist_ok=True)
            cfg.pid_file.write_text(f"{os.getpid()}\n")
        self.started = True
        log.info(
            "kafkalite broker %d started (cluster %s) on %s",
            self.broker_id,
            self.cluster_id,
            ", ".join(str(e) for e in self.advertised),
        )

    async def stop(self) -> None:
        if not self.started and self.store is None:
            return
        if self.started:
            await self._controlled_shutdown()
        self.started = False
        for t in self._tasks:
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self.controller is not None:
            await self.controller.shutdown()
        await self.socket_server.stop()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        if self.replica_manager is not None:
            await self.group_coordinator.shutdown()
            self.replica_manager.shutdown()
        if self.log_manager is not None:
            self.log_manager.shutdown()
        self.peers.pop(self.broker_id, None)
        if self.store is not None:
            with contextlib.suppress(Exception):
                await self.store.close()
        if self.config.pid_file is not None:
            with contextlib.suppress(OSError):
                self.config.pid_file.unlink()
        log.info("kafkalite broker %d stopped", self.broker_id)

    def _purgatories(self) -> list[Any]:
        rm, gc = self.replica_manager, self.group_coordinator
        out: list[Any] = []
        if rm is not None:
            out += [rm.produce_purgatory, rm.fetch_purgatory, rm.delete_records_purgatory]
        out += [p for p in (gc.join_purgatory, gc.heartbeat_purgatory) if p is not None]
        return out

    def _on_log_dir_failure(self, log_dir: Path) -> None:
        """Kafka's LogDirFailureHandler: stop serving the dir's replicas, tell the controller.

        Runs on the next loop iteration, like Kafka's handler thread: the failing I/O
        may sit inside a loop over the partitions (the dir's logs already refuse I/O
        with KAFKA_STORAGE_ERROR meanwhile).
        """
        asyncio.get_running_loop().call_soon(self._handle_log_dir_failure, log_dir)

    def _handle_log_dir_failure(self, log_dir: Path) -> None:
        if self.replica_manager is None:
            return
        self.replica_manager.handle_log_dir_failure(log_dir)
        if self.started:  # not while starting (the controller reads every state) or stopping
            self._tasks.append(
                asyncio.get_running_loop().create_task(self._propagate_log_dir_event())
            )

    async def _propagate_log_dir_event(self) -> None:
        """/log_dir_event_notification/log_dir_event_<seq>: the controller asks us which
        replicas are offline (LeaderAndIsr answered with KAFKA_STORAGE_ERROR)."""
        try:
            await self.store.create(
                zk_paths.log_dir_event_notification_path(),
                zk_data.LogDirEventNotification(self.broker_id).encode(),
                sequential=True,
                makepath=True,
            )
        except Exception:
            log.exception(
                "broker %d: could not notify the controller of a log dir failure", self.broker_id
            )

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away first (controlled.shutdown.*).

        Skipped without a live metadata session: the broker is then no longer
        registered, and no controller would act on its request.
        """
        cfg = self.config
        if not cfg["controlled.shutdown.enable"] or self.controller is None:
            return
        if self.store.state is not SessionState.CONNECTED or self.store.session_id is None:
            log.warning(
                "broker %d: no metadata session; skipping controlled shutdown", self.broker_id
            )
            return
        await controlled_shutdown(
            self.store,
            self.broker_id,
            self.broker_epoch,
            listener_name=cfg.inter_broker_listener,
            max_retries=int(cfg["controlled.shutdown.max.retries"]),
            retry_backoff_ms=int(cfg["controlled.shutdown.retry.backoff.ms"]),
            request_timeout_ms=int(cfg["request.timeout.ms"]),
            ssl_context=self.client_tls,
            secret=self.inter_broker_secret,
        )

    def bound_port(self, listener: str | None = None) -> int:
        name = listener or self.config.listeners[0].listener
        return self.socket_server.bound[name][1]

    def _resolve_port(self, ep: Endpoint) -> Endpoint:
        if ep.port == 0:
            return Endpoint(
                ep.listener, ep.host, self.socket_server.bound[ep.listener][1], ep.security_protocol
            )
        return ep

    async def _get_or_create_cluster_id(self) -> str:
        got = await self.store.get_or_none(zk_paths.CLUSTER_ID)
        if got is None:
            cid = self.config["cluster.id"] or uuid_to_kafka(uuid.uuid4())
            with contextlib.suppress(NodeExistsError):
                await self.store.create(
                    zk_paths.CLUSTER_ID, zk_data.ClusterId(cid).encode(), makepath=True
                )
            got = await self.store.get(zk_paths.CLUSTER_ID)
        return zk_data.ClusterId.decode(got[0]).id

    async def _resolve_broker_id(self) -> int:
        async def generate() -> int:
            if not self.config["broker.id.generation.enable"]:
                raise ValueError("broker.id is not set and broker.id.generation.enable is false")
            try:
                stat = await self.store.set(zk_paths.BROKER_SEQUENCE_ID, b"")
            except NoNodeError:
                with contextlib.suppress(NodeExistsError):
                    await self.store.create(zk_paths.BROKER_SEQUENCE_ID, b"", makepath=True)
                stat = await self.store.set(zk_paths.BROKER_SEQUENCE_ID, b"")
            return int(stat.version) + int(self.config["reserved.broker.max.id"])

        dirs = self._log_dirs
        configured: int | None = self.config.broker_id
        if configured is not None and configured < 0:
            configured = None
            if all(read_meta_properties(d) is None for d in dirs):
                configured = await generate()
        broker_id = resolve_broker_id(dirs, configured)
        ensure_meta_properties(
            dirs,
            broker_id,
            self.cluster_id,
            on_write_error=lambda d, e: self.offline_log_dirs_at_start.setdefault(d, str(e)),
        )
        return broker_id

    async def _register_broker(self) -> None:
        """Create the ephemeral /brokers/ids/<id>; its czxid is the broker epoch.

        Also called by the controller after a session expiry (the old registration
        went with the old session), which gives the broker a new epoch.
        """
        reg = zk_data.BrokerRegistration(
            endpoints=tuple(
                zk_data.EndPoint(e.listener, e.host or None, e.port, e.security_protocol)
                for e in self.advertised
            ),
            timestamp=self.clock_ms(),
            rack=self.config["broker.rack"],
        )
        path = zk_paths.broker_path(self.broker_id)
        try:
            await self.store.create(path, reg.encode(), ephemeral=True, makepath=True)
        except NodeExistsError:
            stat = await self.store.exists(path)
            if stat is None or stat.ephemeral_owner != self.store.session_id:
                raise RuntimeError(
                    f"broker.id {self.broker_id} is already registered in the metadata store by a live broker"
                ) from None
        stat = await self.store.exists(path)
        self.broker_epoch = stat.czxid if stat is not None else -1
        log.info("broker %d registered (broker epoch %d)", self.broker_id, self.broker_epoch)

    def _dynamic_config_path(self, per_broker: bool) -> str:
        return zk_paths.config_entity_path(
            "brokers", str(self.broker_id) if per_broker else "<default>"
        )

    async def _load_dynamic_broker_configs(self) -> None:
        layers: list[dict[str, str]] = []
        for per_broker in (True, False):
            try:
                raw, _ = await self.store.get(self._dynamic_config_path(per_broker))
                stored = dict(zk_data.EntityConfig.decode(raw).config)
            except (NoNodeError, zk_data.MetadataFormatError):
                stored = {}
            layer = {}
            for k, v in stored.items():
                try:
                    self.config.coerce_dynamic({k: v})
                    layer[k] = v
                except ValueError as e:
                    log.warning("ignoring stored dynamic broker config %s: %s", k, e)
            layers.append(layer)
        self.dynamic_broker_configs, self.dynamic_default_configs = layers
        self.config.apply_dynamic(*layers)
        self.default_log_config = self._broker_log_defaults()

    async def set_dynamic_broker_configs(
        self, configs: dict[str, str], *, per_broker: bool = True
    ) -> None:
        """Replace this broker's (or the cluster-default) dynamic configs.

        The caller validated them (BrokerConfig.with_dynamic); they are stored first,
        then applied, so a failed write changes nothing.
        """
        broker_layer = dict(configs) if per_broker else self.dynamic_broker_configs
        default_layer = self.dynamic_default_configs if per_broker else dict(configs)
        self.config.with_dynamic(broker_layer, default_layer)  # raises before any change
        data = zk_data.EntityConfig(configs).encode()
        path = self._dynamic_config_path(per_broker)
        try:
            await self.store.set(path, data)
        except NoNodeError:
            await self.store.create(path, data, makepath=True)
        self.dynamic_broker_configs, self.dynamic_default_configs = broker_layer, default_layer
        self.config.apply_dynamic(broker_layer, default_layer)
        self.default_log_config = self._broker_log_defaults()
        for topic in list(self.metadata_cache.topics):
            self.on_topic_config_changed(topic)

    def on_topic_config_changed(self, topic: str) -> None:
        if self.log_manager is None:
            return
        cfg = self.admin.log_config(topic)
        self.log_manager.update_config(topic, cfg)
        for (t, _p), part in self.replica_manager.partitions.items():
            if t == topic:
                part.min_insync_replicas = cfg.min_insync_replicas

    def is_controller_reachable(self) -> bool:
        return self.metadata_cache.controller_id >= 0

    # ---- controller requests (LeaderAndIsr, UpdateMetadata, StopReplica) ----
    async def handle_leader_and_isr(
        self, controller_id: int, controller_epoch: int, states: list[dict[str, Any]]
    ) -> dict[tuple[str, int], int]:
        if controller_epoch < self.metadata_cache.controller_epoch:
            return {(s["topic"], s["partition"]): ErrorCode.stale_controller_epoch for s in states}
        self.metadata_cache.controller_epoch = controller_epoch
        for s in states:
            if s["topic"] not in self.admin.topic_configs:
                with contextlib.suppress(NoNodeError, ValueError):
                    raw, _ = await self.store.get(zk_paths.topic_config_path(s["topic"]))
                    self.admin.topic_configs[s["topic"]] = dict(
                        zk_data.EntityConfig.decode(raw).config
                    )
        parsed: dict[tuple[str, int], tuple[Any, LeaderAndIsrState]] = {}
        for s in states:
            parsed[(s["topic"], s["partition"])] = (
                s["topic_id"],
                LeaderAndIsrState(
                    leader=s["leader"],
                    leader_epoch=s["leader_epoch"],
                    isr=list(s["isr"]),
                    replicas=list(s["replicas"]),
                    partition_epoch=s.get("partition_epoch", 0),
                    controller_epoch=controller_epoch,
                    is_new=bool(s.get("is_new", False)),
                ),
            )
            await loop_slices.pause()
        return await self.replica_manager.become_leader_or_follower(parsed, self.admin.log_config)

    async def handle_update_metadata(
        self,
        controller_id: int,
        controller_epoch: int,
        states: list[dict[str, Any]],
        live_brokers: list[dict[str, Any]],
        deleted_topics: list[str],
    ) -> None:
        """Build the changed topics aside (the loop runs between slices of a big
        request), then apply everything in one step, as Kafka swaps in a new metadata
        snapshot: a client never sees half of a topic's partitions."""
        cache = self.metadata_cache
        if controller_epoch < cache.controller_epoch:
            return
        brokers = []
        for b in live_brokers:
            eps = {}
            for e in b.get("endpoints", []):
                name, rest = e.split("://", 1)
                host, port = rest.rsplit(":", 1)
                eps[name] = (host.strip("[]"), int(port))
            brokers.append(BrokerEndpointInfo(int(b["id"]), eps, b.get("rack")))
        deleted = set(deleted_topics)
        staged: dict[str, TopicMetadata] = {}
        for s in states:
            name = s["topic"]
            t = staged.get(name)
            if t is None:
                t = cache.staged_topic(
                    name, s["topic_id"], name in INTERNAL_TOPICS, fresh=name in deleted
                )
                staged[name] = t
            t.partitions[s["partition"]] = PartitionMetadata(
                s["partition"],
                s["leader"],
                s["leader_epoch"],
                list(s["replicas"]),
                list(s["isr"]),
                list(s.get("offline_replicas") or ()),
            )
            await loop_slices.pause()
        if controller_epoch < cache.controller_epoch:
            return  # a newer controller's update came in meanwhile
        cache.controller_epoch = controller_epoch
        cache.controller_id = controller_id
        cache.update_brokers(brokers)
        for name in deleted_topics:
            cache.remove_topic(name)
        for t in staged.values():
            cache.put_topic(t)
        self._notify_metadata_waiters()

    async def handle_stop_replica(
        self, controller_epoch: int, partitions: list[tuple[str, int]], delete: bool
    ) -> dict[tuple[str, int], int]:
        if controller_epoch < self.metadata_cache.controller_epoch:
            return {tp: ErrorCode.stale_controller_epoch for tp in partitions}
        errors = await self.replica_manager.stop_replicas(partitions, delete=delete)
        if delete:
            # forget a topic's config only with its last replica here: a reassignment
            # deletes one partition's replica while the broker keeps the others
            hosted = {t for t, _p in self.replica_manager.partitions}
            for t in {tp[0] for tp in partitions} - hosted:
                self.admin.topic_configs.pop(t, None)
            gc_tuning.unfreeze_after_release()
        return errors

    # ---- waiting for metadata ----------------------------------------------
    def _notify_metadata_waiters(self) -> None:
        still = []
        for pred, fut in self._metadata_waiters:
            if fut.done():
                continue
            if pred():
                fut.set_result(None)
            else:
                still.append((pred, fut))
        self._metadata_waiters = still

    async def _wait_for(self, pred: Callable[[], bool], timeout_s: float) -> bool:
        if pred():
            return True
        if timeout_s <= 0:
            return False
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._metadata_waiters.append((pred, fut))
        try:
            await asyncio.wait_for(fut, timeout_s)
            return True
        except TimeoutError:
            return False

    def _topic_online(self, name: str) -> bool:
        t = self.metadata_cache.get_topic(name)
        return (
            t is not None
            and bool(t.partitions)
            and all(p.leader >= 0 for p in t.partitions.values())
        )

    async def wait_for_topics(self, names: list[str], timeout_s: float) -> bool:
        return await self._wait_for(lambda: all(self._topic_online(n) for n in names), timeout_s)

    async def wait_for_topics_gone(self, names: list[str], timeout_s: float) -> set[str]:
        await self._wait_for(
            lambda: all(n not in self.metadata_cache.topics for n in names), timeout_s
        )
        return {n for n in names if n not in self.metadata_cache.topics}

    async def wait_for_partitions(self, topic: str, count: int, timeout_s: float) -> bool:
        def ok() -> bool:
            t = self.metadata_cache.get_topic(topic)
            return (
                t is not None
                and len(t.partitions) >= count
                and all(p.leader >= 0 for p in t.partitions.values())
            )

        return await self._wait_for(ok, timeout_s)
