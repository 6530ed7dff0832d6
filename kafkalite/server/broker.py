"""KafkaBroker: wires one broker together and runs its start-up and shutdown.

Start-up: log dirs and meta.properties → metadata store → cluster id → inter-broker
secret → dynamic and topic configs → logs (with recovery) → replica manager, group
coordinator, controller (created) → the API table, bound to them → listeners →
registration (/brokers/ids/<id>) → controller start-up → wait for the controller's
UpdateMetadata. Shutdown reverses it (and writes the clean-shutdown marker). The
API table is built only once every service it binds exists (docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from kafkalite.controller.controlled_shutdown import controlled_shutdown
from kafkalite.controller.kafka_controller import KafkaController
from kafkalite.coordinator.group import GroupCoordinator
from kafkalite.coordinator.group.group_configs import GroupConfigs
from kafkalite.coordinator.group.group_metadata_manager import GroupConfig
from kafkalite.coordinator.transaction.producer_id_manager import ProducerIdManager
from kafkalite.coordinator.transaction.txn_coordinator import TransactionCoordinator, TxnConfig
from kafkalite.log.log_manager import LogManager
from kafkalite.metadata.factory import open_store
from kafkalite.metadata.inter_broker_secret import get_or_create_inter_broker_secret
from kafkalite.metadata.kafka_zk_client import KafkaZkClient
from kafkalite.metadata.store import MetadataStore
from kafkalite.network.tls import build_client_ssl_context, build_ssl_context
from kafkalite.quota.managers import QuotaManagers
from kafkalite.quota.quota_store import ClientQuotaStore
from kafkalite.replica.replica_manager import ReplicaManager, ReplicaManagerConfig
from kafkalite.security.authorizer.authorizer import AclAuthorizer, parse_super_users
from kafkalite.security.credentials import ScramCredentialStore
from kafkalite.security.sasl.authenticator import SaslServerContext
from kafkalite.security.sasl.oauthbearer import OAuthValidator
from kafkalite.server import gc_tuning
from kafkalite.server.admin_manager import AdminManager
from kafkalite.server.apis import BrokerServices, build_broker_api_table
from kafkalite.server.apis.controller_requests import ControllerRequestChannel
from kafkalite.server.append_sequencer import AppendSequencer
from kafkalite.server.broker_identity import broker_registration, resolve_identity, usable_log_dirs
from kafkalite.server.client_metrics import ClientMetricsManager, ClientTelemetryCollector
from kafkalite.server.config import BrokerConfig, Endpoint
from kafkalite.server.console import ConsoleDeps, ConsoleServer
from kafkalite.server.console.cluster import ClusterReader
from kafkalite.server.controller_identity import ControllerRequestGate
from kafkalite.server.dynamic_broker_config import DynamicBrokerConfig
from kafkalite.server.fetch_session import FetchSessionCache
from kafkalite.server.metadata_cache import MetadataCache
from kafkalite.server.metrics import BrokerMetrics, MetricsHttpServer
from kafkalite.server.quota_enforcement import quota_config
from kafkalite.server.sasl_config import inter_broker_sasl_credentials, sasl_listener_configs
from kafkalite.server.share_state_sender import ShareStateSender
from kafkalite.server.socket_server_config import build_socket_server
from kafkalite.server.startup_checks import check_ports_free
from kafkalite.server.txn_marker_sender import TxnMarkerSender
from kafkalite.server.txn_verifier import TxnVerifier

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
        #: client quotas, loaded from /config/users and /config/clients in start()
        self.quotas = QuotaManagers.create(quota_config(config), self.clock_ms)
        self.quota_store = ClientQuotaStore(self.quotas.configs)
        #: ``authorizer.class.name`` set: the ACL authorizer (docs/security.md)
        self.authorizer: AclAuthorizer | None = None
        if config["authorizer.class.name"]:
            self.authorizer = AclAuthorizer(
                parse_super_users(str(config["super.users"] or "")),
                bool(config["allow.everyone.if.no.acl.found"]),
            )
        self.fetch_sessions = FetchSessionCache(
            int(config["max.incremental.fetch.session.cache.slots"]),
            int(config["min.incremental.fetch.session.eviction.ms"]),
        )
        self.append_sequencer = AppendSequencer()  # produce appends checked in slices
        # the API table is bound in start(), once the services it calls exist
        self.channel = ControllerRequestChannel(
            build_broker_api_table(None), max_request_size=int(config["socket.request.max.bytes"])
        )
        self.channel.record_metrics = bool(config["kafkalite.request.metrics.enabled"])
        ssl = any(e.security_protocol in ("SSL", "SASL_SSL") for e in config.listeners)
        tls = build_ssl_context(config) if ssl else None
        #: SCRAM credentials (/config/users), loaded and watched from start()
        self.credential_store = ScramCredentialStore()
        #: per SASL listener, what its connections' authenticators share
        self.sasl_contexts = {
            name: SaslServerContext(
                c,
                self.credential_store.cache,
                OAuthValidator(c.oauth) if "OAUTHBEARER" in c.mechanisms else None,
            )
            for name, c in sasl_listener_configs(config).items()
        }
        #: what this broker authenticates with on a SASL inter-broker listener
        self.inter_broker_sasl = inter_broker_sasl_credentials(config)
        self.socket_server = build_socket_server(
            config,
            self.channel,
            ssl_context=tls,
            sasl={n: c.new_authenticator for n, c in self.sasl_contexts.items()},
        )
        # KIP-612's per-address connection_creation_rate, set with AlterClientQuotas
        self.socket_server.quotas.ip_rate = self.quotas.configs.ip_rate
        #: this broker as a TLS client of other brokers (presents its keystore)
        as_client = tls is not None or config["ssl.truststore.location"]
        self.client_tls = build_client_ssl_context(config) if as_client else None
        # created by start(), in this order
        self.store: MetadataStore = None  # type: ignore[assignment]
        self.producer_ids: ProducerIdManager = None  # type: ignore[assignment]
        self.admin: AdminManager = None  # type: ignore[assignment]
        self.log_manager: LogManager = None  # type: ignore[assignment]
        self.replica_manager: ReplicaManager = None  # type: ignore[assignment]
        self.group_coordinator: GroupCoordinator = None  # type: ignore[assignment]
        self.transaction_coordinator: TransactionCoordinator = None  # type: ignore[assignment]
        self.txn_marker_sender: TxnMarkerSender | None = None
        self.share_state_sender: ShareStateSender | None = None
        self.txn_verifier: TxnVerifier | None = None
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
        self.metrics.register_replica_manager(lambda: self.replica_manager)
        self.metrics.register_transactions(
            lambda: self.transaction_coordinator,
            lambda: self.replica_manager,
            lambda: self.txn_verifier,
        )
        self.metrics.register_quotas(self.quotas)
        # KIP-714 client telemetry: its own collector, apart from the broker's metrics
        self.client_metrics = ClientMetricsManager(
            self.clock_ms, int(config["telemetry.max.bytes"])
        )
        self.metrics.register(ClientTelemetryCollector(lambda: self.client_metrics))
        self.metrics.register_broker(
            lambda: self.channel,
            lambda: self.replica_manager,
            lambda: self.metadata_cache.topics,
            lambda: self.log_manager,
            lambda: self.group_coordinator,
        )
        self.metrics_server = MetricsHttpServer.from_config(self.metrics, config)
        self.console: ConsoleServer | None = None
        if config["kafkalite.console.port"] is not None:
            self.console = ConsoleServer(
                str(config["kafkalite.console.host"]),
                int(config["kafkalite.console.port"]),
                read_only=bool(config["kafkalite.console.read.only"]),
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
        check_ports_free(cfg)  # before anything is written to disk
        self._log_dirs, self.offline_log_dirs_at_start = usable_log_dirs(cfg)
        self.store = await open_store(cfg, ensemble=self.ensemble)
        zk = KafkaZkClient(self.store)
        await zk.create_top_level_paths()
        self.cluster_id, self.broker_id = await resolve_identity(
            zk, cfg, self._log_dirs, self.offline_log_dirs_at_start
        )
        cache.cluster_id, cache.broker_id = self.cluster_id, self.broker_id
        self.inter_broker_secret = await get_or_create_inter_broker_secret(self.store)
        self.controller_gate.authenticate_as(self.broker_id, self.inter_broker_secret)
        self.producer_ids = ProducerIdManager(self.broker_id, self.store)
        await self.dynamic_config.load(self.store, self.broker_id)
        await self.client_metrics.load(self.store)
        await self.quota_store.start(self.store)
        await self.credential_store.start(self.store)
        for sasl in self.sasl_contexts.values():
            if sasl.oauth is not None:
                await sasl.oauth.start()
        if self.authorizer is not None:
            await self.authorizer.start(self.store)
        admin = self.admin = AdminManager(self.store, cfg, cache, self.dynamic_config)
        await admin.load_topic_configs()
        self.log_manager = LogManager.from_broker_config(
            cfg,
            self.dynamic_config.default_log_config,
            clock_ms=self.clock_ms,
            # loaded logs get their topic's config at once, not the broker defaults
            topic_configs={t: admin.log_config(t) for t in admin.topic_configs},
            initial_offline_dirs=self.offline_log_dirs_at_start,
        )
        self.log_manager.startup()
        rm = self.replica_manager = ReplicaManager(
            ReplicaManagerConfig.from_broker_config(
                cfg, self.broker_id, admin.log_config, admin.ensure_topic_configs
            ),
            self.log_manager,
            cache,
            store=self.store,
            broker_endpoint=self._inter_broker_endpoint,
            fetcher_ssl_context=self._fetcher_tls,
            broker_rack=self._broker_rack,
            inter_broker_secret=lambda: self.inter_broker_secret,
            partition_known=cache.has_partition,
            fetcher_sasl=lambda: self.inter_broker_sasl,
        )
        self.log_manager.on_dir_offline.append(self._on_log_dir_failure)
        rm.on_replicas_deleted.append(admin.forget_topic_configs)
        rm.on_replicas_deleted.append(lambda _topics: gc_tuning.unfreeze_after_release())
        admin.topic_config_listeners.append(
            lambda t: rm.update_topic_config(t, admin.log_config(t))
        )
        self.dynamic_config.reconfigurables.append(admin.broker_defaults_changed)
        self.group_coordinator = GroupCoordinator(
            GroupConfig.from_broker_config(cfg),
            self.clock_ms,
            cache,
            rm,
            partial(admin.create_topics, validate_only=False, timeout_ms=10000),
        )
        self.group_coordinator.group_config_store = GroupConfigs(self.store)
        await self.group_coordinator.group_config_store.load()
        self.group_coordinator.startup()
        self.channel.close_listeners.append(
            self.group_coordinator.share.partitions.connection_closed
        )
        self.share_state_sender = ShareStateSender(
            self.group_coordinator,
            cache,
            cfg.inter_broker_listener,
            ssl_context=self.client_tls,
            request_timeout_ms=int(cfg["request.timeout.ms"]),
            sasl=self.inter_broker_sasl,
        )
        self.group_coordinator.share.partitions.remote = self.share_state_sender
        self.txn_marker_sender = TxnMarkerSender(
            cache,
            cfg.inter_broker_listener,
            ssl_context=self.client_tls,
            request_timeout_ms=int(cfg["request.timeout.ms"]),
            sasl=self.inter_broker_sasl,
        )
        self.transaction_coordinator = TransactionCoordinator(
            TxnConfig.from_broker_config(cfg),
            self.clock_ms,
            cache,
            rm,
            partial(admin.create_topics, validate_only=False, timeout_ms=10000),
            self.producer_ids,
            self.txn_marker_sender,
        )
        self.transaction_coordinator.startup()
        self.txn_verifier = TxnVerifier(
            self.broker_id,
            self.transaction_coordinator,
            cache,
            cfg.inter_broker_listener,
            ssl_context=self.client_tls,
            request_timeout_ms=int(cfg["request.timeout.ms"]),
            enabled=bool(cfg["transaction.partition.verification.enable"]),
            sasl=self.inter_broker_sasl,
        )
        self.controller = KafkaController.for_broker(
            self.broker_id,
            self.store,
            cfg,
            ssl_context=self.client_tls,
            secret=self.inter_broker_secret,
            register_broker=self._register_broker,
            sasl=inter_broker_sasl_credentials(cfg, cfg.control_plane_listener),
        )
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
                self.quotas,
                self.quota_store,
                self.transaction_coordinator,
                self.txn_verifier,
                credential_store=self.credential_store,
                client_metrics=self.client_metrics,
                authorizer=self.authorizer,
            )
        )
        await self.socket_server.start()
        if self.metrics.loop_monitor is not None:
            self.metrics.loop_monitor.start()
        if self.metrics_server is not None:
            await self.metrics_server.start()
        self.advertised = [self._resolve_port(ep) for ep in cfg.advertised]
        self.peers[self.broker_id] = self
        await self._register_broker()
        rm.startup()
        await self.controller.startup()
        await cache.wait_for(lambda: self.broker_id in cache.brokers, 10.0)
        self._tasks.append(asyncio.get_running_loop().create_task(self.log_manager.run()))
        if self.console is not None:
            await self.console.start(self._console_deps())
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
        if self.replica_manager is not None:
            await self.replica_manager.stop_replication()
        if self.controller is not None:
            await self.controller.shutdown()
        await self.quota_store.stop()
        await self.credential_store.stop()
        for sasl in self.sasl_contexts.values():
            if sasl.oauth is not None:
                await sasl.oauth.stop()
        await self.client_metrics.stop()
        if self.authorizer is not None:
            await self.authorizer.stop()
        await self.socket_server.stop()
        if self.metrics.loop_monitor is not None:
            await self.metrics.loop_monitor.stop()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        if self.console is not None:
            await self.console.stop()
        if self.transaction_coordinator is not None:
            await self.transaction_coordinator.shutdown()
        if self.txn_marker_sender is not None:
            await self.txn_marker_sender.close()
        if self.share_state_sender is not None:
            await self.share_state_sender.close()
        if self.txn_verifier is not None:
            await self.txn_verifier.close()
        if self.group_coordinator is not None:
            if self.group_coordinator.group_config_store is not None:
                await self.group_coordinator.group_config_store.stop()
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

    def _console_deps(self) -> ConsoleDeps:
        return ConsoleDeps(
            self.broker_id,
            self.config,
            self.clock_ms,
            self.metadata_cache,
            self.log_manager,
            self.replica_manager,
            self.admin,
            self.group_coordinator,
            self.channel,
            self.metrics.registry,
            time.time(),
            ClusterReader(
                self.broker_id,
                self._inter_broker_endpoint,
                self.client_tls,
                self.inter_broker_sasl,
            ),
        )

    def _inter_broker_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        """A live broker's inter-broker listener, as the last UpdateMetadata described it."""
        info = self.metadata_cache.brokers.get(broker_id)
        if info is None:
            return None
        return info.endpoints.get(self.config.inter_broker_listener)

    def _broker_rack(self, broker_id: int) -> str | None:
        if broker_id == self.broker_id:
            return self.config["broker.rack"]  # type: ignore[no-any-return]
        info = self.metadata_cache.brokers.get(broker_id)
        return None if info is None else info.rack

    def _fetcher_tls(self) -> Any:
        """The followers' TLS client context when the inter-broker listener uses TLS."""
        name = self.config.inter_broker_listener
        ep = next((e for e in self.config.advertised if e.listener == name), None)
        if ep is not None and ep.security_protocol in ("SSL", "SASL_SSL"):
            return self.client_tls
        return None

    def _purgatories(self) -> list[Any]:
        rm, gc = self.replica_manager, self.group_coordinator
        out: list[Any] = []
        if rm is not None:
            out += [rm.produce_purgatory, rm.fetch_purgatory, rm.delete_records_purgatory]
        if gc is not None:
            out += [p for p in (gc.join_purgatory, gc.heartbeat_purgatory) if p is not None]
        return out

    def _on_log_dir_failure(self, log_dir: Path) -> None:
        """Kafka's LogDirFailureHandler: stop serving the dir's replicas, tell the controller;
        on the next loop iteration, as the failing I/O may sit in a loop over partitions."""
        asyncio.get_running_loop().call_soon(self._handle_log_dir_failure, log_dir)

    def _handle_log_dir_failure(self, log_dir: Path) -> None:
        self.replica_manager.handle_log_dir_failure(log_dir)
        if self.started:  # not while starting (the controller reads every state) or stopping
            loop = asyncio.get_running_loop()
            self._tasks.append(loop.create_task(self._propagate_log_dir_event()))

    async def _propagate_log_dir_event(self) -> None:
        try:
            await KafkaZkClient(self.store).propagate_log_dir_event(self.broker_id)
        except Exception:
            log.exception("broker %d: could not tell the controller", self.broker_id)

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away first (controlled.shutdown.*)."""
        cfg = self.config
        if not cfg["controlled.shutdown.enable"] or self.controller is None:
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
            sasl=self.inter_broker_sasl,
        )

    def bound_port(self, listener: str | None = None) -> int:
        name = listener or self.config.listeners[0].listener
        return self.socket_server.bound[name][1]

    def _resolve_port(self, ep: Endpoint) -> Endpoint:
        """An advertised port 0 is the port its listener bound."""
        return ep if ep.port else replace(ep, port=self.socket_server.bound[ep.listener][1])

    async def _register_broker(self) -> None:
        """Register /brokers/ids/<id>; also called by the controller after a session
        expiry (the old registration went with the old session): a new broker epoch."""
        reg = broker_registration(self.advertised, self.clock_ms(), self.config["broker.rack"])
        self.broker_epoch = await KafkaZkClient(self.store).register_broker(self.broker_id, reg)
        log.info("broker %d registered (broker epoch %d)", self.broker_id, self.broker_epoch)
