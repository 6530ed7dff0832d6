"""One module per API family; :func:`build_api_table` binds them to a broker.

Version ranges follow Apache Kafka 4.x, bounded by what kio can decode.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from kafkalite.network.api_spec import ApiSpec, ErrorResponseBuilder
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.fetch_request import parse_fetch_request
from kafkalite.protocol.fetch_response import MAX_VERSION as FETCH_MAX
from kafkalite.protocol.produce import parse_produce_request
from kafkalite.server.apis.api_versions import api_versions_error_response, handle_api_versions
from kafkalite.server.apis.cluster import (
    describe_cluster_error_response,
    describe_log_dirs_error_response,
    handle_describe_cluster,
    handle_describe_log_dirs,
)
from kafkalite.server.apis.configs import (
    alter_configs_error_response,
    describe_configs_error_response,
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from kafkalite.server.apis.controller_requests import (
    alter_partition_reassignments_error_response,
    elect_leaders_error_response,
    handle_alter_partition_reassignments,
    handle_controlled_shutdown,
    handle_elect_leaders,
    handle_leader_and_isr,
    handle_list_partition_reassignments,
    handle_stop_replica,
    handle_update_metadata,
    list_partition_reassignments_error_response,
)
from kafkalite.server.apis.delete_records import (
    delete_records_error_response,
    handle_delete_records,
)
from kafkalite.server.apis.fetch import fetch_error_response, handle_fetch
from kafkalite.server.apis.groups import (
    OFFSET_DELETE,
    delete_groups_error_response,
    describe_groups_error_response,
    find_coordinator_error_response,
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
    heartbeat_error_response,
    join_group_error_response,
    leave_group_error_response,
    list_groups_error_response,
    offset_commit_error_response,
    offset_delete_error_response,
    offset_fetch_error_response,
    sync_group_error_response,
)
from kafkalite.server.apis.init_producer_id import (
    handle_init_producer_id,
    init_producer_id_error_response,
)
from kafkalite.server.apis.list_offsets import handle_list_offsets, list_offsets_error_response
from kafkalite.server.apis.metadata import handle_metadata, metadata_error_response
from kafkalite.server.apis.produce import handle_produce, produce_error_response
from kafkalite.server.apis.topics import (
    create_partitions_error_response,
    create_topics_error_response,
    delete_topics_error_response,
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
)

if TYPE_CHECKING:
    from kafkalite.server.broker import KafkaBroker

# key, min, max, handler, serial, notes
_TABLE: list[tuple[Any, int, int, Any, bool, str]] = [
    (
        ApiKey.PRODUCE,
        3,
        11,
        handle_produce,
        False,
        "advertised from v0 like Kafka 4 (KAFKA-18659); v0-2 requests close the connection",
    ),
    (ApiKey.FETCH, 4, FETCH_MAX, handle_fetch, False, "zero-copy sendfile; incremental sessions"),
    (
        ApiKey.LIST_OFFSETS,
        1,
        10,
        handle_list_offsets,
        False,
        "earliest, latest, timestamp, max-timestamp",
    ),
    (ApiKey.METADATA, 0, 13, handle_metadata, True, "auto topic creation"),
    (ApiKey.API_VERSIONS, 0, 4, handle_api_versions, False, "v0 fallback for too-new versions"),
    (ApiKey.CREATE_TOPICS, 2, 7, handle_create_topics, True, ""),
    (ApiKey.DELETE_TOPICS, 1, 6, handle_delete_topics, True, ""),
    (ApiKey.DELETE_RECORDS, 0, 2, handle_delete_records, False, ""),
    (
        ApiKey.INIT_PRODUCER_ID,
        0,
        5,
        handle_init_producer_id,
        True,
        "idempotent producers; transactional ids get COORDINATOR_NOT_AVAILABLE",
    ),
    (ApiKey.DESCRIBE_CONFIGS, 1, 4, handle_describe_configs, False, "topic and broker resources"),
    (ApiKey.ALTER_CONFIGS, 0, 2, handle_alter_configs, True, "topic and broker resources"),
    (ApiKey.DESCRIBE_LOG_DIRS, 1, 4, handle_describe_log_dirs, False, ""),
    (ApiKey.CREATE_PARTITIONS, 0, 3, handle_create_partitions, True, ""),
    (ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, handle_incremental_alter_configs, True, ""),
    (ApiKey.DESCRIBE_CLUSTER, 0, 1, handle_describe_cluster, False, ""),
    (ApiKey.OFFSET_COMMIT, 2, 10, handle_offset_commit, False, "v10 addresses topics by id"),
    (ApiKey.OFFSET_FETCH, 1, 10, handle_offset_fetch, False, "batched groups v8+; v10 topic ids"),
    (
        ApiKey.FIND_COORDINATOR,
        0,
        6,
        handle_find_coordinator,
        False,
        "creates __consumer_offsets; transaction keys get COORDINATOR_NOT_AVAILABLE",
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
        0,
        handle_alter_partition_reassignments,
        True,
        "on the controller; cancellation unsupported (INVALID_REPLICA_ASSIGNMENT)",
    ),
    (
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        0,
        0,
        handle_list_partition_reassignments,
        True,
        "on the controller",
    ),
]


# straight-line decoders for the hot path (kio for every other API)
# Fetch frames are always bytes (only a large Produce is handed a view of the buffer)
_DECODERS: dict[ApiKey, Callable[..., Any]] = {
    ApiKey.PRODUCE: parse_produce_request,
    ApiKey.FETCH: parse_fetch_request,
}

# each client API's error response (Kafka's AbstractRequest.getErrorResponse), next to
# its handler: a new API adds a row above, a handler and one of these
_ERROR_RESPONSES: dict[int, ErrorResponseBuilder] = {
    ApiKey.PRODUCE: produce_error_response,
    ApiKey.FETCH: fetch_error_response,
    ApiKey.LIST_OFFSETS: list_offsets_error_response,
    ApiKey.METADATA: metadata_error_response,
    ApiKey.API_VERSIONS: api_versions_error_response,
    ApiKey.CREATE_TOPICS: create_topics_error_response,
    ApiKey.DELETE_TOPICS: delete_topics_error_response,
    ApiKey.DELETE_RECORDS: delete_records_error_response,
    ApiKey.INIT_PRODUCER_ID: init_producer_id_error_response,
    ApiKey.DESCRIBE_CONFIGS: describe_configs_error_response,
    ApiKey.ALTER_CONFIGS: alter_configs_error_response,
    ApiKey.DESCRIBE_LOG_DIRS: describe_log_dirs_error_response,
    ApiKey.CREATE_PARTITIONS: create_partitions_error_response,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: alter_configs_error_response,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster_error_response,
    ApiKey.OFFSET_COMMIT: offset_commit_error_response,
    ApiKey.OFFSET_FETCH: offset_fetch_error_response,
    ApiKey.FIND_COORDINATOR: find_coordinator_error_response,
    ApiKey.JOIN_GROUP: join_group_error_response,
    ApiKey.HEARTBEAT: heartbeat_error_response,
    ApiKey.LEAVE_GROUP: leave_group_error_response,
    ApiKey.SYNC_GROUP: sync_group_error_response,
    ApiKey.DESCRIBE_GROUPS: describe_groups_error_response,
    ApiKey.LIST_GROUPS: list_groups_error_response,
    ApiKey.DELETE_GROUPS: delete_groups_error_response,
    OFFSET_DELETE: offset_delete_error_response,
    ApiKey.ELECT_LEADERS: elect_leaders_error_response,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: alter_partition_reassignments_error_response,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: list_partition_reassignments_error_response,
}


def build_api_table(broker: KafkaBroker | None) -> dict[int, ApiSpec]:
    table = {}
    for key, lo, hi, handler, serial, notes in _TABLE:
        table[int(key)] = ApiSpec(
            int(key),
            key.name.title().replace("_", ""),
            lo,
            hi,
            partial(handler, broker),
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


def build_controller_api_table(broker: KafkaBroker | None) -> dict[int, ApiSpec]:
    """LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown (advertised in
    ApiVersions, as Kafka's ZooKeeper-mode brokers do)."""
    return {
        int(key): ApiSpec(
            int(key),
            key.name.title().replace("_", ""),
            lo,
            hi,
            partial(handler, broker),
            serial,
            notes,
            inter_broker=True,
        )
        for key, lo, hi, handler, serial, notes in _CONTROLLER_TABLE
    }


def build_broker_api_table(broker: KafkaBroker | None) -> dict[int, ApiSpec]:
    """Everything a broker handles and advertises: client APIs and controller APIs.

    docs/compatibility.md is generated from this same table.
    """
    return build_api_table(broker) | build_controller_api_table(broker)
