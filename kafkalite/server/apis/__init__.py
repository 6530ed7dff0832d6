"""One module per API family; :func:`build_broker_api_table` binds their handlers.

Version ranges follow Apache Kafka 4.x, bounded by what kio can decode.

Every handler is ``handler(collaborators, ctx, request)``: the handlers of one
module share their first argument, the narrow set of services that family
uses (a frozen dataclass such as :class:`ProduceDeps`, or the one service it
needs), built here from :class:`BrokerServices` and bound with
``functools.partial`` once, when the broker has created them all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from kafkalite.network.api_spec import ApiSpec, ErrorResponseBuilder
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.fetch_request import parse_fetch_request
from kafkalite.protocol.fetch_response import MAX_VERSION as FETCH_MAX
from kafkalite.protocol.produce import MAX_VERSION as PRODUCE_MAX
from kafkalite.protocol.produce import parse_produce_request
from kafkalite.server.apis import (
    acls,
    api_versions,
    client_quotas,
    cluster,
    configs,
    controller_requests,
    delete_records,
    describe_topic_partitions,
    features,
    fetch,
    groups,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
    sasl,
    share,
    share_state,
    telemetry,
    topics,
    transactions,
)
from kafkalite.server.apis.acls import (
    AclDeps,
    handle_create_acls,
    handle_delete_acls,
    handle_describe_acls,
)
from kafkalite.server.apis.api_versions import handle_api_versions
from kafkalite.server.apis.client_quotas import (
    ClientQuotaDeps,
    handle_alter_client_quotas,
    handle_describe_client_quotas,
)
from kafkalite.server.apis.cluster import (
    ClusterDeps,
    handle_alter_replica_log_dirs,
    handle_describe_cluster,
    handle_describe_log_dirs,
)
from kafkalite.server.apis.configs import (
    ConfigDeps,
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from kafkalite.server.apis.controller_requests import (
    ControllerRequestDeps,
    handle_alter_partition_reassignments,
    handle_controlled_shutdown,
    handle_elect_leaders,
    handle_leader_and_isr,
    handle_list_partition_reassignments,
    handle_stop_replica,
    handle_update_metadata,
)
from kafkalite.server.apis.delete_records import handle_delete_records
from kafkalite.server.apis.describe_topic_partitions import (
    DescribeTopicPartitionsDeps,
    handle_describe_topic_partitions,
)
from kafkalite.server.apis.features import handle_update_features
from kafkalite.server.apis.fetch import FetchDeps, handle_fetch
from kafkalite.server.apis.groups import (
    OFFSET_DELETE,
    GroupDeps,
    handle_consumer_group_describe,
    handle_consumer_group_heartbeat,
    handle_delete_groups,
    handle_describe_groups,
    handle_find_coordinator,
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_list_groups,
    handle_offset_commit,
    handle_offset_delete,
    handle_offset_fetch,
    handle_sync_group,
)
from kafkalite.server.apis.init_producer_id import InitProducerIdDeps, handle_init_producer_id
from kafkalite.server.apis.list_offsets import handle_list_offsets
from kafkalite.server.apis.metadata import MetadataDeps, handle_metadata
from kafkalite.server.apis.offset_for_leader_epoch import handle_offset_for_leader_epoch
from kafkalite.server.apis.produce import ProduceDeps, handle_produce
from kafkalite.server.apis.sasl import (
    SaslDeps,
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
    handle_sasl_authenticate,
    handle_sasl_handshake,
)
from kafkalite.server.apis.share import (
    ShareDeps,
    handle_alter_share_group_offsets,
    handle_delete_share_group_offsets,
    handle_describe_share_group_offsets,
    handle_share_acknowledge,
    handle_share_fetch,
    handle_share_group_describe,
    handle_share_group_heartbeat,
)
from kafkalite.server.apis.share_state import (
    handle_delete_share_group_state,
    handle_initialize_share_group_state,
    handle_read_share_group_state,
    handle_read_share_group_state_summary,
    handle_write_share_group_state,
)
from kafkalite.server.apis.telemetry import (
    TelemetryDeps,
    handle_get_telemetry_subscriptions,
    handle_list_config_resources,
    handle_push_telemetry,
)
from kafkalite.server.apis.topics import (
    TopicDeps,
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
)
from kafkalite.server.apis.transactions import (
    TxnDeps,
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_describe_producers,
    handle_describe_transactions,
    handle_end_txn,
    handle_list_transactions,
    handle_txn_offset_commit,
    handle_write_txn_markers,
)
from kafkalite.server.authorization import AuthHelper, authorize_api, controller_api_allowed
from kafkalite.server.controller_identity import CLUSTER_AUTHORIZATION_FAILED, Rejection
from kafkalite.server.quota_enforcement import enforce

if TYPE_CHECKING:
    from kafkalite.controller.kafka_controller import KafkaController
    from kafkalite.coordinator.group.group_coordinator import GroupCoordinator
    from kafkalite.coordinator.transaction.producer_id_manager import ProducerIdManager
    from kafkalite.coordinator.transaction.txn_coordinator import TransactionCoordinator
    from kafkalite.log.log_manager import LogManager
    from kafkalite.quota.managers import QuotaManagers
    from kafkalite.quota.quota_store import ClientQuotaStore
    from kafkalite.replica.replica_manager import ReplicaManager
    from kafkalite.security.authorizer.authorizer import AclAuthorizer
    from kafkalite.security.credentials import ScramCredentialStore
    from kafkalite.server.admin_manager import AdminManager
    from kafkalite.server.append_sequencer import AppendSequencer
    from kafkalite.server.client_metrics import ClientMetricsManager
    from kafkalite.server.config import BrokerConfig
    from kafkalite.server.controller_identity import ControllerRequestGate
    from kafkalite.server.dynamic_broker_config import DynamicBrokerConfig
    from kafkalite.server.fetch_session import FetchSessionCache
    from kafkalite.server.metadata_cache import MetadataCache
    from kafkalite.server.txn_verifier import TxnVerifier


@dataclass(frozen=True, slots=True)
class BrokerServices:
    """Every service a handler may use: the broker's parts, once they all exist.

    Only this module reads it, to give each API family its own narrow slice
    (:func:`_collaborators`); handlers never see it.
    """

    broker_id: int
    config: BrokerConfig
    clock_ms: Callable[[], int]
    metadata_cache: MetadataCache
    log_manager: LogManager
    replica_manager: ReplicaManager
    admin: AdminManager
    dynamic_config: DynamicBrokerConfig
    group_coordinator: GroupCoordinator
    producer_ids: ProducerIdManager
    controller: KafkaController
    controller_gate: ControllerRequestGate
    #: the broker epoch, read per request (a new registration changes it)
    broker_epoch: Callable[[], int]
    fetch_sessions: FetchSessionCache
    append_sequencer: AppendSequencer
    #: the advertised API versions (the request channel's, for ApiVersions)
    api_versions: Callable[[], list[dict[str, int]]]
    #: client quotas (docs/quotas.md) and their store
    quotas: QuotaManagers
    quota_store: ClientQuotaStore
    transaction_coordinator: TransactionCoordinator
    txn_verifier: TxnVerifier | None = None
    #: KIP-714 client telemetry (subscriptions, pushed metrics)
    client_metrics: ClientMetricsManager | None = None
    #: SCRAM credentials in /config/users (DescribeUserScramCredentials, AlterUser...)
    credential_store: ScramCredentialStore | None = None
    #: ``authorizer.class.name`` set: the ACL authorizer (None: everything allowed)
    authorizer: AclAuthorizer | None = None


def _collaborators(s: BrokerServices | None) -> dict[str, Any] | None:
    """Per handler module, the first argument of its handlers (None without services:
    the table is then only read for its keys and versions)."""
    if s is None:
        return None
    cache, rm = s.metadata_cache, s.replica_manager
    client_metrics = _client_metrics(s)
    auth = AuthHelper(s.authorizer, cache)
    # the hot paths test for None: no authorizer costs one attribute read
    authz = auth if s.authorizer is not None else None
    return {
        produce.__name__: ProduceDeps(
            s.clock_ms, cache, rm, s.append_sequencer, s.txn_verifier, authz
        ),
        fetch.__name__: FetchDeps(
            s.clock_ms,
            cache,
            rm,
            s.log_manager,
            s.fetch_sessions,
            int(s.config["fetch.max.bytes"]),
            s.quotas,
            authz,
        ),
        list_offsets.__name__: rm,
        offset_for_leader_epoch.__name__: rm,
        delete_records.__name__: rm,
        metadata.__name__: MetadataDeps(cache, s.config, s.admin, auth),
        acls.__name__: AclDeps(s.authorizer, auth),
        api_versions.__name__: s.api_versions,
        features.__name__: None,
        telemetry.__name__: TelemetryDeps(client_metrics, cache),
        describe_topic_partitions.__name__: DescribeTopicPartitionsDeps(cache, s.config),
        topics.__name__: TopicDeps(s.config, cache, s.admin, s.quotas),
        client_quotas.__name__: ClientQuotaDeps(s.quotas.configs, s.quota_store),
        sasl.__name__: SaslDeps(s.credential_store),
        init_producer_id.__name__: InitProducerIdDeps(s.producer_ids, s.transaction_coordinator),
        configs.__name__: ConfigDeps(
            s.broker_id,
            s.config,
            cache,
            s.admin,
            s.dynamic_config,
            group_coordinator=s.group_coordinator,
            client_metrics=client_metrics,
        ),
        cluster.__name__: ClusterDeps(cache, s.log_manager, rm, s.config),
        groups.__name__: GroupDeps(
            s.group_coordinator,
            cache,
            s.clock_ms,
            _txn_coordinator_finder(s.transaction_coordinator),
        ),
        share.__name__: ShareDeps(s.group_coordinator, cache),
        share_state.__name__: ShareDeps(s.group_coordinator, cache),
        transactions.__name__: TxnDeps(
            s.transaction_coordinator,
            s.group_coordinator,
            rm,
            cache,
            int(s.config["request.timeout.ms"]),
            s.txn_verifier,
        ),
        controller_requests.__name__: ControllerRequestDeps(
            s.broker_id, s.broker_epoch, s.controller_gate, cache, rm, s.controller
        ),
    }


def _client_metrics(s: BrokerServices) -> ClientMetricsManager:
    from kafkalite.server.client_metrics import ClientMetricsManager

    if s.client_metrics is not None:
        return s.client_metrics
    return ClientMetricsManager(s.clock_ms, int(s.config["telemetry.max.bytes"]))


def _txn_coordinator_finder(tc: TransactionCoordinator) -> Callable[[str], Awaitable[int]]:
    async def find(transactional_id: str) -> int:
        await tc.ensure_state_topic()
        return tc.coordinator_for(transactional_id)

    return find


# key, min, max, handler, serial, notes
_TABLE: list[tuple[Any, int, int, Any, bool, str]] = [
    (
        ApiKey.PRODUCE,
        3,
        PRODUCE_MAX,
        handle_produce,
        False,
        "advertised from v0 like Kafka 4 (KAFKA-18659); v0-2 requests close the connection; "
        "v10+ leader hints (KIP-951); v13 topic ids; v12+ adds a transaction's partitions "
        "implicitly (transactions V2)",
    ),
    (
        ApiKey.FETCH,
        4,
        FETCH_MAX,
        handle_fetch,
        False,
        "zero-copy sendfile; incremental sessions; v16+ leader hints (KIP-951)",
    ),
    (
        ApiKey.LIST_OFFSETS,
        1,
        11,
        handle_list_offsets,
        False,
        "earliest, latest, timestamp, max-timestamp; tiered lookups answer -1 (no tiered storage)",
    ),
    (ApiKey.METADATA, 0, 13, handle_metadata, True, "auto topic creation"),
    (ApiKey.API_VERSIONS, 0, 4, handle_api_versions, False, "v0 fallback for too-new versions"),
    (ApiKey.CREATE_TOPICS, 2, 7, handle_create_topics, True, ""),
    (ApiKey.DELETE_TOPICS, 1, 6, handle_delete_topics, True, ""),
    (ApiKey.DELETE_RECORDS, 0, 2, handle_delete_records, False, ""),
    (
        ApiKey.INIT_PRODUCER_ID,
        0,
        6,
        handle_init_producer_id,
        True,
        "idempotent and transactional producers (epoch bumps, fencing, KIP-360); "
        "v6 two-phase commit (KIP-939) is INVALID_REQUEST (transaction.two.phase.commit.enable "
        "off)",
    ),
    (
        ApiKey.ADD_PARTITIONS_TO_TXN,
        0,
        5,
        handle_add_partitions_to_txn,
        True,
        "v4+ batched, from brokers: verify-only (KIP-890 part 1) or the implicit add of transactions V2",
    ),
    (ApiKey.ADD_OFFSETS_TO_TXN, 0, 4, handle_add_offsets_to_txn, True, ""),
    (
        ApiKey.END_TXN,
        0,
        5,
        handle_end_txn,
        True,
        "v5: transactions V2 (KIP-890 part 2), the epoch bumps on every end",
    ),
    (
        ApiKey.WRITE_TXN_MARKERS,
        1,
        2,
        handle_write_txn_markers,
        False,
        "sent by the transaction coordinator to partition leaders",
    ),
    (
        ApiKey.TXN_OFFSET_COMMIT,
        0,
        5,
        handle_txn_offset_commit,
        True,
        "offsets visible on commit; v5 adds the offsets partition to the transaction",
    ),
    (ApiKey.DESCRIBE_PRODUCERS, 0, 0, handle_describe_producers, False, ""),
    (ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, handle_describe_transactions, False, ""),
    (
        ApiKey.LIST_TRANSACTIONS,
        0,
        2,
        handle_list_transactions,
        False,
        "state, producer id, duration and transactional id pattern filters",
    ),
    (ApiKey.DESCRIBE_ACLS, 1, 3, handle_describe_acls, False, "LITERAL and PREFIXED filters"),
    (ApiKey.CREATE_ACLS, 1, 3, handle_create_acls, True, "stored in /kafka-acl (Kafka's layout)"),
    (ApiKey.DELETE_ACLS, 1, 3, handle_delete_acls, True, ""),
    (
        ApiKey.DESCRIBE_CONFIGS,
        1,
        4,
        handle_describe_configs,
        False,
        "topic, broker, group and client-metrics resources",
    ),
    (
        ApiKey.ALTER_CONFIGS,
        0,
        2,
        handle_alter_configs,
        True,
        "topic, broker, group and client-metrics resources",
    ),
    (
        ApiKey.ALTER_REPLICA_LOG_DIRS,
        1,
        2,
        handle_alter_replica_log_dirs,
        True,
        "moves a replica between log.dirs on a live broker (future log, then swap)",
    ),
    (ApiKey.DESCRIBE_LOG_DIRS, 1, 5, handle_describe_log_dirs, False, "no cordoned dirs"),
    (ApiKey.CREATE_PARTITIONS, 0, 3, handle_create_partitions, True, ""),
    (ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, handle_incremental_alter_configs, True, ""),
    (ApiKey.DESCRIBE_CLUSTER, 0, 2, handle_describe_cluster, False, "no fenced brokers"),
    (ApiKey.OFFSET_COMMIT, 2, 10, handle_offset_commit, False, "v10 addresses topics by id"),
    (ApiKey.OFFSET_FETCH, 1, 10, handle_offset_fetch, False, "batched groups v8+; v10 topic ids"),
    (
        ApiKey.FIND_COORDINATOR,
        0,
        6,
        handle_find_coordinator,
        False,
        "creates __consumer_offsets and __transaction_state on first use",
    ),
    (
        ApiKey.JOIN_GROUP,
        2,
        9,
        handle_join_group,
        True,
        "classic protocol, KIP-394 member ids, static members",
    ),
    (ApiKey.HEARTBEAT, 0, 4, handle_heartbeat, False, ""),
    (ApiKey.LEAVE_GROUP, 0, 5, handle_leave_group, False, "batched members v3+"),
    (ApiKey.SYNC_GROUP, 0, 5, handle_sync_group, True, ""),
    (ApiKey.DESCRIBE_GROUPS, 0, 6, handle_describe_groups, False, ""),
    (ApiKey.LIST_GROUPS, 0, 5, handle_list_groups, False, "states filter v4+, types filter v5"),
    (ApiKey.DELETE_GROUPS, 0, 2, handle_delete_groups, False, ""),
    (OFFSET_DELETE, 0, 0, handle_offset_delete, False, ""),
    (
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        2,
        4,
        handle_offset_for_leader_epoch,
        False,
        "leaders only; followers truncate by it (KIP-279), consumers detect truncation (KIP-320)",
    ),
    (
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        0,
        1,
        handle_consumer_group_heartbeat,
        True,
        "KIP-848 consumer protocol; uniform and range server assignors; v1 regex",
    ),
    (ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, handle_consumer_group_describe, False, "KIP-848"),
    (
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        1,
        handle_share_group_heartbeat,
        True,
        "KIP-932 share groups; simple assignor",
    ),
    (ApiKey.SHARE_GROUP_DESCRIBE, 1, 1, handle_share_group_describe, False, "KIP-932"),
    (
        ApiKey.SHARE_FETCH,
        1,
        2,
        handle_share_fetch,
        False,
        "share sessions, record locks, long polling; v2 renew acknowledgements",
    ),
    (ApiKey.SHARE_ACKNOWLEDGE, 1, 2, handle_share_acknowledge, False, "KIP-932"),
    (
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        0,
        1,
        handle_describe_share_group_offsets,
        False,
        "share-partition start offsets and lag",
    ),
    (
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        0,
        0,
        handle_alter_share_group_offsets,
        True,
        "empty groups",
    ),
    (ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0, handle_delete_share_group_offsets, True, ""),
    (
        ApiKey.INITIALIZE_SHARE_GROUP_STATE,
        0,
        0,
        handle_initialize_share_group_state,
        False,
        "share-state coordinator (inter-broker); state kept in __consumer_offsets",
    ),
    (
        ApiKey.READ_SHARE_GROUP_STATE,
        0,
        0,
        handle_read_share_group_state,
        False,
        "partition leaders load share partitions; fences older leader epochs",
    ),
    (
        ApiKey.WRITE_SHARE_GROUP_STATE,
        0,
        1,
        handle_write_share_group_state,
        False,
        "full snapshots from the leader; leader/state epoch fencing",
    ),
    (
        ApiKey.DELETE_SHARE_GROUP_STATE,
        0,
        0,
        handle_delete_share_group_state,
        False,
        "share-state coordinator (inter-broker)",
    ),
    (
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
        0,
        1,
        handle_read_share_group_state_summary,
        False,
        "share-state coordinator (inter-broker)",
    ),
    (
        ApiKey.ELECT_LEADERS,
        0,
        2,
        handle_elect_leaders,
        True,
        "preferred and unclean; on the controller",
    ),
    (
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        0,
        1,
        handle_alter_partition_reassignments,
        True,
        "on the controller; cancellation unsupported (INVALID_REPLICA_ASSIGNMENT); "
        "v1 allow_replication_factor_change",
    ),
    (
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        0,
        0,
        handle_list_partition_reassignments,
        True,
        "on the controller",
    ),
    (
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        0,
        1,
        handle_describe_client_quotas,
        False,
        "user (the SASL or mTLS principal) and client-id entities",
    ),
    (
        ApiKey.ALTER_CLIENT_QUOTAS,
        0,
        1,
        handle_alter_client_quotas,
        True,
        "stored in /config/users, /config/clients; applied on every broker",
    ),
    (
        ApiKey.SASL_HANDSHAKE,
        0,
        1,
        handle_sasl_handshake,
        True,
        "PLAIN, SCRAM-SHA-256/512, OAUTHBEARER on SASL listeners; v0: raw tokens follow",
    ),
    (
        ApiKey.SASL_AUTHENTICATE,
        0,
        2,
        handle_sasl_authenticate,
        True,
        "v1+: session lifetime (KIP-368 re-authentication)",
    ),
    (
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        0,
        0,
        handle_describe_user_scram_credentials,
        False,
        "mechanism and iterations, never the keys",
    ),
    (
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        0,
        handle_alter_user_scram_credentials,
        True,
        "salted in /config/users/<user> as Kafka's ZooKeeper mode; applied on every broker",
    ),
    (
        ApiKey.UPDATE_FEATURES,
        0,
        2,
        handle_update_features,
        True,
        "levels fixed by the implementation (transaction.version 2, group.version 1); "
        "only the current level is accepted",
    ),
    (
        ApiKey.DESCRIBE_TOPIC_PARTITIONS,
        0,
        0,
        handle_describe_topic_partitions,
        False,
        "cursor pagination (max.request.partition.size.limit); no ELR (empty lists)",
    ),
    (
        ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
        0,
        0,
        handle_get_telemetry_subscriptions,
        False,
        "KIP-714; subscriptions are CLIENT_METRICS config resources",
    ),
    (
        ApiKey.PUSH_TELEMETRY,
        0,
        0,
        handle_push_telemetry,
        False,
        "OTLP metrics decoded and served on /metrics by client id and instance id",
    ),
    (
        ApiKey.LIST_CONFIG_RESOURCES,
        0,
        1,
        handle_list_config_resources,
        False,
        "v0 client metrics subscriptions; v1 topics, brokers, broker loggers, client metrics",
    ),
]


def _bind(handler: Callable[..., Any], bound: dict[str, Any] | None) -> Callable[[Any, Any], Any]:
    """``handler(ctx, request)`` with its module's collaborators bound once (a module
    missing from :func:`_collaborators` fails here, when the broker starts)."""
    return partial(handler, None if bound is None else bound[handler.__module__])


# straight-line decoders for the hot path (kio for every other API)
# Fetch frames are always bytes (only a large Produce is handed a view of the buffer)
_DECODERS: dict[ApiKey, Callable[..., Any]] = {
    ApiKey.PRODUCE: parse_produce_request,
    ApiKey.FETCH: parse_fetch_request,
}

# each client API's error response (Kafka's AbstractRequest.getErrorResponse), next to
# its handler: a new API adds a row above, a handler and one of these
_ERROR_RESPONSES: dict[int, ErrorResponseBuilder] = {
    ApiKey.PRODUCE: produce.produce_error_response,
    ApiKey.FETCH: fetch.fetch_error_response,
    ApiKey.LIST_OFFSETS: list_offsets.list_offsets_error_response,
    ApiKey.METADATA: metadata.metadata_error_response,
    ApiKey.API_VERSIONS: api_versions.api_versions_error_response,
    ApiKey.CREATE_TOPICS: topics.create_topics_error_response,
    ApiKey.DELETE_TOPICS: topics.delete_topics_error_response,
    ApiKey.DELETE_RECORDS: delete_records.delete_records_error_response,
    ApiKey.INIT_PRODUCER_ID: init_producer_id.init_producer_id_error_response,
    ApiKey.ADD_PARTITIONS_TO_TXN: transactions.add_partitions_to_txn_error_response,
    ApiKey.ADD_OFFSETS_TO_TXN: transactions.add_offsets_to_txn_error_response,
    ApiKey.END_TXN: transactions.end_txn_error_response,
    ApiKey.WRITE_TXN_MARKERS: transactions.write_txn_markers_error_response,
    ApiKey.TXN_OFFSET_COMMIT: transactions.txn_offset_commit_error_response,
    ApiKey.DESCRIBE_PRODUCERS: transactions.describe_producers_error_response,
    ApiKey.DESCRIBE_TRANSACTIONS: transactions.describe_transactions_error_response,
    ApiKey.LIST_TRANSACTIONS: transactions.list_transactions_error_response,
    ApiKey.DESCRIBE_ACLS: acls.describe_acls_error_response,
    ApiKey.CREATE_ACLS: acls.create_acls_error_response,
    ApiKey.DELETE_ACLS: acls.delete_acls_error_response,
    ApiKey.DESCRIBE_CONFIGS: configs.describe_configs_error_response,
    ApiKey.ALTER_CONFIGS: configs.alter_configs_error_response,
    ApiKey.ALTER_REPLICA_LOG_DIRS: cluster.alter_replica_log_dirs_error_response,
    ApiKey.DESCRIBE_LOG_DIRS: cluster.describe_log_dirs_error_response,
    ApiKey.CREATE_PARTITIONS: topics.create_partitions_error_response,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.alter_configs_error_response,
    ApiKey.DESCRIBE_CLUSTER: cluster.describe_cluster_error_response,
    ApiKey.OFFSET_COMMIT: groups.offset_commit_error_response,
    ApiKey.OFFSET_FETCH: groups.offset_fetch_error_response,
    ApiKey.FIND_COORDINATOR: groups.find_coordinator_error_response,
    ApiKey.JOIN_GROUP: groups.join_group_error_response,
    ApiKey.HEARTBEAT: groups.heartbeat_error_response,
    ApiKey.LEAVE_GROUP: groups.leave_group_error_response,
    ApiKey.SYNC_GROUP: groups.sync_group_error_response,
    ApiKey.DESCRIBE_GROUPS: groups.describe_groups_error_response,
    ApiKey.LIST_GROUPS: groups.list_groups_error_response,
    ApiKey.DELETE_GROUPS: groups.delete_groups_error_response,
    OFFSET_DELETE: groups.offset_delete_error_response,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch.offset_for_leader_epoch_error_response,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: groups.consumer_group_heartbeat_error_response,
    ApiKey.CONSUMER_GROUP_DESCRIBE: groups.consumer_group_describe_error_response,
    ApiKey.SHARE_GROUP_HEARTBEAT: share.share_group_heartbeat_error_response,
    ApiKey.SHARE_GROUP_DESCRIBE: share.share_group_describe_error_response,
    ApiKey.SHARE_FETCH: share.share_fetch_error_response,
    ApiKey.SHARE_ACKNOWLEDGE: share.share_acknowledge_error_response,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: share.describe_share_group_offsets_error_response,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: share.alter_share_group_offsets_error_response,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: share.delete_share_group_offsets_error_response,
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (share_state.initialize_share_group_state_error_response),
    ApiKey.READ_SHARE_GROUP_STATE: share_state.read_share_group_state_error_response,
    ApiKey.WRITE_SHARE_GROUP_STATE: share_state.write_share_group_state_error_response,
    ApiKey.DELETE_SHARE_GROUP_STATE: share_state.delete_share_group_state_error_response,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (
        share_state.read_share_group_state_summary_error_response
    ),
    ApiKey.ELECT_LEADERS: controller_requests.elect_leaders_error_response,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (
        controller_requests.alter_partition_reassignments_error_response
    ),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (
        controller_requests.list_partition_reassignments_error_response
    ),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: client_quotas.describe_client_quotas_error_response,
    ApiKey.ALTER_CLIENT_QUOTAS: client_quotas.alter_client_quotas_error_response,
    ApiKey.SASL_HANDSHAKE: sasl.sasl_handshake_error_response,
    ApiKey.SASL_AUTHENTICATE: sasl.sasl_authenticate_error_response,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: sasl.describe_user_scram_credentials_error_response,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: sasl.alter_user_scram_credentials_error_response,
    ApiKey.UPDATE_FEATURES: features.update_features_error_response,
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: telemetry.get_telemetry_subscriptions_error_response,
    ApiKey.PUSH_TELEMETRY: telemetry.push_telemetry_error_response,
    ApiKey.LIST_CONFIG_RESOURCES: telemetry.list_config_resources_error_response,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (
        describe_topic_partitions.describe_topic_partitions_error_response
    ),
}


#: the SASL exchange happens before a client has a quota identity (Kafka's authenticator
#: answers it, not KafkaApis)
_UNTHROTTLED = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


def build_api_table(services: BrokerServices | None) -> dict[int, ApiSpec]:
    bound = _collaborators(services)
    table = {}
    auth = None
    if services is not None and services.authorizer is not None:
        auth = AuthHelper(services.authorizer, services.metadata_cache)
    for key, lo, hi, handler, serial, notes in _TABLE:
        bound_handler = _bind(handler, bound)
        if auth is not None:
            # KafkaApis' ACL checks (docs/security.md); none without an authorizer
            bound_handler = authorize_api(auth, int(key), bound_handler, _ERROR_RESPONSES[key])
        if services is not None and key not in _UNTHROTTLED:
            # client quotas: throttle_time_ms in the response, the connection muted
            bound_handler = enforce(services.quotas, int(key), bound_handler)
        table[int(key)] = ApiSpec(
            int(key),
            key.name.title().replace("_", ""),
            lo,
            hi,
            bound_handler,
            serial,
            notes,
            advertised_min_version=0 if key == ApiKey.PRODUCE else None,
            decoder=_DECODERS.get(key),
            error_response=_ERROR_RESPONSES[key],
        )
    return table


# Inter-broker controller APIs (Kafka 3.x ranges). kio has no schemas for them, so
# they are decoded by ControllerRequestChannel (kafkalite.protocol.inter_broker) and
# kept out of build_api_table, whose entries every kio-based tool can handle.
_CONTROLLER_TABLE: list[tuple[Any, int, int, Any, bool, str]] = [
    (ApiKey.LEADER_AND_ISR, 0, 7, handle_leader_and_isr, True, "inter-broker, from the controller"),
    (ApiKey.STOP_REPLICA, 0, 4, handle_stop_replica, True, "inter-broker, from the controller"),
    (
        ApiKey.UPDATE_METADATA,
        0,
        8,
        handle_update_metadata,
        True,
        "inter-broker, from the controller",
    ),
    (
        ApiKey.CONTROLLED_SHUTDOWN,
        0,
        3,
        handle_controlled_shutdown,
        True,
        "inter-broker, to the controller",
    ),
]


def build_controller_api_table(services: BrokerServices | None) -> dict[int, ApiSpec]:
    """LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown (advertised in
    ApiVersions, as Kafka's ZooKeeper-mode brokers do)."""
    bound = _collaborators(services)
    auth = None
    if services is not None and services.authorizer is not None:
        auth = AuthHelper(services.authorizer, services.metadata_cache)
    return {
        int(key): ApiSpec(
            int(key),
            key.name.title().replace("_", ""),
            lo,
            hi,
            _bind(handler, bound) if auth is None else _cluster_action(auth, _bind(handler, bound)),
            serial,
            notes,
            inter_broker=True,
        )
        for key, lo, hi, handler, serial, notes in _CONTROLLER_TABLE
    }


#: ControllerRequestChannel's RequestContext.extra key for a refused request
_REFUSED = "controller_request_unauthenticated"


def _cluster_action(
    auth: AuthHelper, handler: Callable[[Any, Any], Any]
) -> Callable[[Any, Any], Any]:
    """A controller request also needs ClusterAction for its principal (Kafka's ZooKeeper
    mode), on top of the inter-broker authenticator: refused like an unsigned one."""

    def checked(ctx: Any, req: Any) -> Any:
        if _REFUSED not in ctx.extra and not controller_api_allowed(auth, ctx):
            ctx.extra[_REFUSED] = Rejection(
                CLUSTER_AUTHORIZATION_FAILED, f"{ctx.principal} is not authorized for ClusterAction"
            )
        return handler(ctx, req)

    return checked


def build_broker_api_table(services: BrokerServices | None) -> dict[int, ApiSpec]:
    """Everything a broker handles and advertises: client APIs and controller APIs.

    docs/compatibility.md is generated from this same table.
    """
    return build_api_table(services) | build_controller_api_table(services)
