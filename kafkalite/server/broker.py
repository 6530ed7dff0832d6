"""KafkaBroker: wires one broker together and runs its start-up and shutdown.

Start-up order: log dirs and meta.properties → metadata store → cluster id →
inter-broker secret (before any listener accepts a controller request) →
dynamic configs and topic configs → logs (with recovery) → replica manager,
group coordinator, controller (created, not started) → the API table, bound
to them → listeners (so ephemeral ports are known) → broker registration
(/brokers/ids/<id>) → controller start-up → wait until the controller's
UpdateMetadata has reached this broker's cache. Shutdown reverses it and
writes the clean-shutdown marker so the next start skips recovery.

The services that need the store or the loaded logs are created in
:meth:`start`, in dependency order, and the API table is built from them just
before the listeners open: no handler can run earlier, so every handler is
bound to live objects once and never looks anything up through the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from kafkalite.controller.channel_manager import ControllerChannelManager
from kafkalite.controller.controlled_shutdown import controlled_shutdown
from kafkalite.controller.kafka_controller import ControllerConfig, KafkaController
from kafkalite.coordinator.group import GroupCoordinator
from kafkalite.coordinator.group.group_metadata_manager import GroupConfig
from kafkalite.coordinator.transaction.producer_id_manager import ProducerIdManager
from kafkalite.log.cleaner import CleanerConfig
from kafkalite.log.errors import KafkaStorageError
from kafkalite.log.log_manager import LogManager
from kafkalite.log.meta_properties import (
    check_log_dirs,
    ensure_meta_properties,
    read_meta_properties,
    resolve_broker_id,
)
from kafkalite.metadata import zk_data
from kafkalite.metadata.factory import open_store
from kafkalite.metadata.inter_broker_secret import get_or_create_inter_broker_secret
from kafkalite.metadata.kafka_zk_client import KafkaZkClient
from kafkalite.metadata.store import MetadataStore, SessionState
from kafkalite.protocol.kafka_uuid import uuid_to_kafka
from kafkalite.replica.replica_manager import ReplicaManager, ReplicaManagerConfig
from kafkalite.server import gc_tuning
from kafkalite.server.admin_manager import AdminManager
from kafkalite.server.apis import BrokerServices, build_broker_api_table
from kafkalite.server.apis.controller_requests import ControllerRequestChannel
from kafkalite.server.append_sequencer import AppendSequencer
from kafkalite.server.config import BrokerConfig, Endpoint
from kafkalite.server.controller_identity import ControllerRequestGate
from kafkalite.server.dynamic_broker_config import DynamicBrokerConfig
from kafkalite.server.fetch_session import FetchSessionCache
from kafkalite.server.metadata_cache import MetadataCache
from kafkalite.server.metrics import BrokerMetrics, MetricsHttpServer
from kafkalite.server.socket_server import SocketServer
from kafkalite.server.tls import build_client_ssl_context, build_ssl_context

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
        self.metadata_cache = MetadataCache(self.broker_id)
        self.dynamic_config = DynamicBrokerConfig(config)
        self.fetch_sessions = FetchSessionCache(
            int(config["max.incremental.fetch.session.cache.slots"]),
            int(config["min.incremental.fetch.session.eviction.ms"]),
        )
        self.append_sequencer = AppendSequencer()  # produce appends checked in slices
        # the API table is bound in start(), once the services it calls exist
        self.channel = ControllerRequestChannel(
            build_broker_api_table(None), max_request_size=int(config["socket.request.max.bytes"])
        )
        ssl = any(e.security_protocol == "SSL" for e in config.listeners)
        tls = build_ssl_context(config) if ssl else None
        self.socket_server = SocketServer.from_config(config, self.channel, ssl_context=tls)
        #: this broker as a TLS client of other brokers (presents its keystore)
        self.client_tls = (
            build_client_ssl_context(config)
            if tls is not None or config["ssl.truststore.location"]
            else None
        )
        # created by start(), in this order
        self.store: MetadataStore = None  # type: ignore[assignment]
        self.producer_ids: ProducerIdManager = None  # type: ignore[assignment]
        self.admin: AdminManager = None  # type: ignore[assignment]
        self.log_manager: LogManager = None  # type: ignore[assignment]
        self.replica_manager: ReplicaManager = None  # type: ignore[assignment]
        self.group_coordinator: GroupCoordinator = None  # type: ignore[assignment]
        self.controller: KafkaController = None  # type: ignore[assignment]
        self.controller_gate = ControllerRequestGate(
            control_plane_listener=config.control_plane_listener,
            inter_broker_listener=config.inter_broker_listener,
            store=lambda: self.store,
            watched_controller_id=lambda: (
                None if self.controller is None else self.controller.active_controller_id
            ),
        )
        self.channel.gate = self.controller_gate
        self.metrics = BrokerMetrics()
        self.metrics.register_purgatories(self._purgatories)
        self.metrics.register_controller(lambda: self.controller)
        port = config["kafkalite.metrics.port"]
        self.metrics_server: MetricsHttpServer | None = (
            None
            if port is None
            else MetricsHttpServer(self.metrics, str(config["kafkalite.metrics.host"]), int(port))
        )
        self._tasks: list[asyncio.Task[Any]] = []
        self.started = False
        self.advertised: list[Endpoint] = []
        self._log_dirs = list(config.log_dirs)
        #: log dirs that failed before the logs were loaded, with the reason
        self.offline_log_dirs_at_start: dict[Path, str] = {}

    # ---- lifecycle ----------------------------------------------------------
    async def start(self) -> None:
        cfg, cache = self.config, self.metadata_cache
        # a dir that cannot be created or whose meta.properties is unreadable starts offline
        self._log_dirs, self.offline_log_dirs_at_start = check_log_dirs(cfg.log_dirs)
        if not self._log_dirs:
            raise KafkaStorageError(
                "every log dir failed at start-up: "
                + "; ".join(f"{d}: {e}" for d, e in self.offline_log_dirs_at_start.items())
            )
        self.store = await open_store(cfg, ensemble=self.ensemble)
        zk = KafkaZkClient(self.store)
        await zk.create_top_level_paths()
        proposed = cfg["cluster.id"] or uuid_to_kafka(uuid.uuid4())
        self.cluster_id = cache.cluster_id = await zk.get_or_create_cluster_id(proposed)
        self.broker_id = cache.broker_id = await self._resolve_broker_id(zk)
        self.inter_broker_secret = await get_or_create_inter_broker_secret(self.store)
        self.controller_gate.authenticate_as(self.broker_id, self.inter_broker_secret)
        self.producer_ids = ProducerIdManager(self.broker_id, self.store)
        await self.dynamic_config.load(self.store, self.broker_id)
        admin = self.admin = AdminManager(self.store, cfg, cache, self.dynamic_config)
        await admin.load_topic_configs()
        self.log_manager = LogManager(
            cfg.log_dirs,
            self.dynamic_config.default_log_config,
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
            topic_configs={t: admin.log_config(t) for t in admin.topic_configs},
            initial_offline_dirs=self.offline_log_dirs_at_start,
        )
        self.log_manager.startup()
        rm = self.replica_manager = ReplicaManager(
            ReplicaManagerConfig(
                broker_id=self.broker_id,
                request_timeout_ms=int(cfg["request.timeout.ms"]),
                fetch_purge_interval=int(cfg["fetch.purgatory.purge.interval.requests"]),
                produce_purge_interval=int(cfg["producer.purgatory.purge.interval.requests"]),
                delete_records_purge_interval=int(
                    cfg["delete.records.purgatory.purge.interval.requests"]
                ),
                topic_min_isr=lambda t: admin.log_config(t).min_insync_replicas,
                log_config_for=admin.log_config,
                ensure_topic_configs=admin.ensure_topic_configs,
            ),
            self.log_manager,
            cache,
        )
        self.log_manager.on_dir_offline.append(self._on_log_dir_failure)
        rm.on_replicas_deleted.append(admin.forget_topic_configs)
        rm.on_replicas_deleted.append(lambda _topics: gc_tuning.unfreeze_after_release())
        admin.topic_config_listeners.append(self._apply_topic_config)
        self.dynamic_config.reconfigurables.append(self._apply_topic_configs)
        self.group_coordinator = GroupCoordinator(
            GroupConfig.from_broker_config(cfg),
            self.clock_ms,
            cache,
            rm,
            partial(admin.create_topics, validate_only=False, timeout_ms=10000),
        )
        self.group_coordinator.startup()
        self.controller = self._create_controller()
        self.channel.api_table = build_broker_api_table(
            BrokerServices(
                self.broker_id,
                cfg,
                self.clock_ms,
                cache,
                self.log_manager,
                rm,
                admin,
                self.dynamic_config,
                self.group_coordinator,
                self.producer_ids,
                self.controller,
                self.controller_gate,
                lambda: self.broker_epoch,
                self.fetch_sessions,
                self.append_sequencer,
                self.channel.api_versions_list,
            )
        )
        await self.socket_server.start()
        if self.metrics_server is not None:
            await self.metrics_server.start()
        self.advertised = [self._resolve_port(ep) for ep in cfg.advertised]
        self.peers[self.broker_id] = self
        await self._register_broker()
        await self.controller.startup()
        await cache.wait_for(lambda: self.broker_id in cache.brokers, 10.0)
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

    def _create_controller(self) -> KafkaController:
        cfg = self.config
        return KafkaController(
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
                unclean_leader_election_enable=lambda: bool(cfg["unclean.leader.election.enable"]),
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
        if self.group_coordinator is not None:
            await self.group_coordinator.shutdown()
        if self.replica_manager is not None:
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
        if gc is not None:
            out += [p for p in (gc.join_purgatory, gc.heartbeat_purgatory) if p is not None]
        return out

    def _apply_topic_config(self, topic: str) -> None:
        """A topic's effective config changed: its logs and partitions follow."""
        self.replica_manager.update_topic_config(topic, self.admin.log_config(topic))

    def _apply_topic_configs(self) -> None:
        """The broker's dynamic defaults changed: every topic's effective config may have."""
        for topic in list(self.metadata_cache.topics):
            self._apply_topic_config(topic)

    def _on_log_dir_failure(self, log_dir: Path) -> None:
        """Kafka's LogDirFailureHandler: stop serving the dir's replicas, tell the controller.

        Runs on the next loop iteration, like Kafka's handler thread: the failing I/O
        may sit inside a loop over the partitions (the dir's logs already refuse I/O
        with KAFKA_STORAGE_ERROR meanwhile).
        """
        asyncio.get_running_loop().call_soon(self._handle_log_dir_failure, log_dir)

    def _handle_log_dir_failure(self, log_dir: Path) -> None:
        self.replica_manager.handle_log_dir_failure(log_dir)
        if self.started:  # not while starting (the controller reads every state) or stopping
            self._tasks.append(
                asyncio.get_running_loop().create_task(self._propagate_log_dir_event())
            )

    async def _propagate_log_dir_event(self) -> None:
        try:
            await KafkaZkClient(self.store).propagate_log_dir_event(self.broker_id)
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
            port = self.socket_server.bound[ep.listener][1]
            return Endpoint(ep.listener, ep.host, port, ep.security_protocol)
        return ep

    async def _resolve_broker_id(self, zk: KafkaZkClient) -> int:
        configured: int | None = self.config.broker_id
        if configured is not None and configured < 0:
            configured = None
            if all(read_meta_properties(d) is None for d in self._log_dirs):
                if not self.config["broker.id.generation.enable"]:
                    raise ValueError(
                        "broker.id is not set and broker.id.generation.enable is false"
                    )
                seq = await zk.generate_broker_sequence_id()
                configured = seq + int(self.config["reserved.broker.max.id"])
        broker_id = resolve_broker_id(self._log_dirs, configured)
        ensure_meta_properties(
            self._log_dirs,
            broker_id,
            self.cluster_id,
            on_write_error=lambda d, e: self.offline_log_dirs_at_start.setdefault(d, str(e)),
        )
        return broker_id

    async def _register_broker(self) -> None:
        """Register /brokers/ids/<id>; also called by the controller after a session
        expiry (the old registration went with the old session): a new broker epoch."""
        reg = zk_data.BrokerRegistration(
            endpoints=tuple(
                zk_data.EndPoint(e.listener, e.host or None, e.port, e.security_protocol)
                for e in self.advertised
            ),
            timestamp=self.clock_ms(),
            rack=self.config["broker.rack"],
        )
        self.broker_epoch = await KafkaZkClient(self.store).register_broker(self.broker_id, reg)
        log.info("broker %d registered (broker epoch %d)", self.broker_id, self.broker_epoch)
