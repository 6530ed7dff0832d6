"""Every API the broker advertises, at every version it advertises, answers like Kafka.

In the spirit of franz-go's ``broker_sweep_test``: for each API key in the API table
(so APIs added to the table are swept without touching this file) and each version
in its range, a request with minimal valid content (one existing topic and
partition, an existing group, a live transactional id) is built with kio from
Kafka's schemas and sent over TCP. The response must carry the request's
correlation id, decode with kio for that version using the whole frame, contain
only error codes Kafka can return for that API (:data:`KAFKA_ERRORS`, from each
API's response schema and ``KafkaApis``/its coordinator), and leave the
connection usable. UNKNOWN_SERVER_ERROR is in no list: for a valid request it
means a handler failed.

An API without a builder gets kio's zero-valued request; one the sweep cannot
build at all is listed in :data:`CANNOT_BUILD` with the reason (asserted: the list
stays exact). An advertised API without an error list fails the sweep.
"""

from __future__ import annotations

import enum
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

import pytest
from kio.index import UnknownAPIKey
from kio.schema.errors import ErrorCode

from kafkalite.protocol import messages
from kafkalite.protocol.headers import skip_tagged_fields
from kafkalite.protocol.records import build_batch
from kafkalite.server.apis import build_broker_api_table
from tests.server.raw_client import RawClient

TABLE = build_broker_api_table(None)
#: APIs the sweep cannot build a request for, with why (asserted exact)
CANNOT_BUILD: dict[int, str] = {
    key: "ZooKeeper-mode controller request Kafka 4 removed: kio has no schema for it; "
    "tests/server/test_forged_controller_requests.py sends it with kafkalite's own codec"
    for key in (4, 5, 6, 7)
}
CASES = [
    (spec.key, v)
    for spec in sorted(TABLE.values(), key=lambda s: s.key)
    if spec.key not in CANNOT_BUILD
    for v in range(spec.min_version, spec.max_version + 1)
]
#: versions advertised below the handled range (Produce v0-2, KAFKA-18659): Kafka 4
#: closes the connection on them
BELOW_RANGE = [
    (spec.key, v)
    for spec in TABLE.values()
    if spec.advertised_min_version is not None
    for v in range(spec.advertised_min_version, spec.min_version)
]


# ---- what Kafka can answer, per API ---------------------------------------------------

COORD = {"coordinator_load_in_progress", "coordinator_not_available", "not_coordinator"}
PARTITION_LEADER = {
    "unknown_topic_or_partition",
    "not_leader_or_follower",
    "leader_not_available",
    "kafka_storage_error",
    "topic_authorization_failed",
}
EPOCHS = {"fenced_leader_epoch", "unknown_leader_epoch"}
TOPIC_ADMIN = {
    "not_controller",
    "request_timed_out",
    "invalid_request",
    "topic_authorization_failed",
    "cluster_authorization_failed",
    "policy_violation",
    "throttling_quota_exceeded",
    "unknown_topic_or_partition",
    "invalid_topic_exception",
}
CONFIGS = {
    "invalid_request",
    "invalid_config",
    "unknown_topic_or_partition",
    "invalid_topic_exception",
    "topic_authorization_failed",
    "cluster_authorization_failed",
    "group_authorization_failed",
    "policy_violation",
    "resource_not_found",
}
TXN = COORD | {
    "concurrent_transactions",
    "invalid_producer_id_mapping",
    "invalid_producer_epoch",
    "producer_fenced",
    "invalid_txn_state",
    "transactional_id_authorization_failed",
    "transaction_abortable",
}
GROUP = COORD | {"group_authorization_failed", "invalid_group_id"}
MEMBER = GROUP | {
    "unknown_member_id",
    "illegal_generation",
    "rebalance_in_progress",
    "fenced_instance_id",
    "group_id_not_found",
}
SHARE_STATE = COORD | {
    "cluster_authorization_failed",
    "invalid_request",
    "group_id_not_found",
    "unknown_topic_or_partition",
    "fenced_leader_epoch",
    "fenced_state_epoch",
    "kafka_storage_error",
    "unknown_server_error",
}
SHARE = COORD | {
    "group_authorization_failed",
    "topic_authorization_failed",
    "invalid_request",
    "unknown_member_id",
    "fenced_member_epoch",
    "group_id_not_found",
    "group_max_size_reached",
    "unknown_topic_or_partition",
    "unknown_topic_id",
    "not_leader_or_follower",
    "share_session_not_found",
    "invalid_share_session_epoch",
    "share_session_limit_reached",
    "invalid_record_state",
    "unsupported_version",
    "kafka_storage_error",
    "fenced_state_epoch",
    "leader_not_available",
    "invalid_group_id",
    "non_empty_group",
}
CONTROLLER_TO_BROKER = {
    "stale_controller_epoch",
    "stale_broker_epoch",
    "cluster_authorization_failed",
    "kafka_storage_error",
    "fenced_leader_epoch",
    "unknown_topic_or_partition",
    "inconsistent_topic_id",
}

#: api key -> the error codes (besides NONE) Kafka's broker can answer it with
KAFKA_ERRORS: dict[int, set[str]] = {
    0: PARTITION_LEADER
    | {
        "corrupt_message",
        "invalid_topic_exception",
        "record_list_too_large",
        "message_too_large",
        "not_enough_replicas",
        "not_enough_replicas_after_append",
        "invalid_required_acks",
        "invalid_timestamp",
        "unsupported_for_message_format",
        "unsupported_compression_type",
        "invalid_record",
        "out_of_order_sequence_number",
        "duplicate_sequence_number",
        "unknown_producer_id",
        "invalid_producer_epoch",
        "producer_fenced",
        "invalid_txn_state",
        "invalid_producer_id_mapping",
        "concurrent_transactions",
        "transaction_abortable",
        "cluster_authorization_failed",
        "transactional_id_authorization_failed",
        "unknown_topic_id",
        "request_timed_out",
        "network_exception",
    },
    1: PARTITION_LEADER
    | EPOCHS
    | {
        "offset_out_of_range",
        "replica_not_available",
        "cluster_authorization_failed",
        "fetch_session_id_not_found",
        "invalid_fetch_session_epoch",
        "fetch_session_topic_id_error",
        "unknown_topic_id",
        "inconsistent_topic_id",
        "offset_moved_to_tiered_storage",
        "corrupt_message",
        "unsupported_compression_type",
        "offset_not_available",
        "invalid_request",
    },
    2: PARTITION_LEADER
    | EPOCHS
    | {
        "unsupported_for_message_format",
        "offset_not_available",
        "replica_not_available",
        "invalid_request",
        "unsupported_version",
    },
    3: {
        "unknown_topic_or_partition",
        "leader_not_available",
        "replica_not_available",
        "listener_not_found",
        "invalid_topic_exception",
        "topic_authorization_failed",
        "invalid_replication_factor",
        "invalid_partitions",
        "policy_violation",
        "throttling_quota_exceeded",
        "unknown_topic_id",
        "invalid_request",
    },
    4: CONTROLLER_TO_BROKER,
    5: CONTROLLER_TO_BROKER,
    6: CONTROLLER_TO_BROKER,
    7: {
        "not_controller",
        "stale_broker_epoch",
        "cluster_authorization_failed",
        "broker_not_available",
    },
    8: MEMBER
    | {
        "offset_metadata_too_large",
        "invalid_commit_offset_size",
        "topic_authorization_failed",
        "unknown_topic_or_partition",
        "unknown_topic_id",
        "stale_member_epoch",
        "request_timed_out",
        "invalid_request",
    },
    9: GROUP
    | {
        "topic_authorization_failed",
        "unknown_topic_or_partition",
        "unknown_topic_id",
        "unstable_offset_commit",
        "group_id_not_found",
        "unknown_member_id",
        "stale_member_epoch",
    },
    10: COORD
    | {
        "group_authorization_failed",
        "transactional_id_authorization_failed",
        "cluster_authorization_failed",
        "invalid_request",
        "unsupported_version",
    },
    11: MEMBER
    | {
        "inconsistent_group_protocol",
        "invalid_session_timeout",
        "group_max_size_reached",
        "member_id_required",
        "unreleased_instance_id",
        "unsupported_version",
    },
    12: MEMBER,
    13: MEMBER,
    14: MEMBER | {"inconsistent_group_protocol"},
    15: GROUP | {"group_id_not_found"},
    16: COORD,
    17: {"unsupported_sasl_mechanism", "illegal_sasl_state"},
    18: {"unsupported_version", "invalid_request"},
    19: TOPIC_ADMIN
    | {
        "topic_already_exists",
        "invalid_partitions",
        "invalid_replication_factor",
        "invalid_replica_assignment",
        "invalid_config",
        "unsupported_version",
    },
    20: TOPIC_ADMIN | {"topic_deletion_disabled", "unknown_topic_id", "unsupported_version"},
    21: PARTITION_LEADER | {"offset_out_of_range", "request_timed_out", "policy_violation"},
    22: COORD
    | {
        "transactional_id_authorization_failed",
        "cluster_authorization_failed",
        "invalid_producer_epoch",
        "producer_fenced",
        "concurrent_transactions",
        "invalid_transaction_timeout",
        "invalid_request",
    },
    23: PARTITION_LEADER | EPOCHS | {"cluster_authorization_failed", "unknown_topic_id"},
    24: TXN
    | {
        "topic_authorization_failed",
        "cluster_authorization_failed",
        "operation_not_attempted",
        "unknown_topic_or_partition",
    },
    25: TXN | {"group_authorization_failed"},
    26: TXN | {"invalid_request"},
    27: PARTITION_LEADER
    | {
        "corrupt_message",
        "invalid_producer_epoch",
        "message_too_large",
        "record_list_too_large",
        "not_enough_replicas",
        "not_enough_replicas_after_append",
        "invalid_required_acks",
        "transaction_coordinator_fenced",
        "request_timed_out",
        "cluster_authorization_failed",
    },
    28: TXN
    | MEMBER
    | {
        "invalid_commit_offset_size",
        "offset_metadata_too_large",
        "topic_authorization_failed",
        "unknown_topic_or_partition",
        "unsupported_for_message_format",
    },
    29: {"security_disabled", "cluster_authorization_failed", "invalid_request"},
    30: {"security_disabled", "cluster_authorization_failed", "invalid_request"},
    31: {"security_disabled", "cluster_authorization_failed", "invalid_request"},
    32: CONFIGS,
    33: CONFIGS,
    34: {
        "cluster_authorization_failed",
        "log_dir_not_found",
        "kafka_storage_error",
        "replica_not_available",
        "unknown_topic_or_partition",
        "invalid_request",
    },
    35: {"cluster_authorization_failed", "kafka_storage_error"},
    36: {"sasl_authentication_failed", "illegal_sasl_state", "unsupported_sasl_mechanism"},
    37: TOPIC_ADMIN
    | {
        "invalid_partitions",
        "invalid_replica_assignment",
        "invalid_replication_factor",
        "reassignment_in_progress",
    },
    42: GROUP | {"group_id_not_found", "non_empty_group"},
    43: {
        "cluster_authorization_failed",
        "election_not_needed",
        "eligible_leaders_not_available",
        "preferred_leader_not_available",
        "unknown_topic_or_partition",
        "invalid_request",
        "not_controller",
        "request_timed_out",
    },
    44: CONFIGS,
    45: {
        "cluster_authorization_failed",
        "no_reassignment_in_progress",
        "invalid_replica_assignment",
        "invalid_replication_factor",
        "unknown_topic_or_partition",
        "not_controller",
        "request_timed_out",
        "invalid_request",
    },
    46: {"cluster_authorization_failed", "not_controller", "request_timed_out"},
    47: GROUP
    | {
        "group_id_not_found",
        "non_empty_group",
        "group_subscribed_to_topic",
        "topic_authorization_failed",
        "unknown_topic_or_partition",
    },
    48: {"cluster_authorization_failed", "invalid_request", "unsupported_version"},
    49: {"cluster_authorization_failed", "invalid_request", "unsupported_version"},
    50: {"cluster_authorization_failed", "resource_not_found", "duplicate_resource"},
    51: {
        "cluster_authorization_failed",
        "resource_not_found",
        "duplicate_resource",
        "unacceptable_credential",
        "unsupported_sasl_mechanism",
        "invalid_request",
    },
    57: {
        "cluster_authorization_failed",
        "invalid_update_version",
        "feature_update_failed",
        "invalid_request",
        "not_controller",
    },
    60: {"unsupported_endpoint_type", "mismatched_endpoint_type", "invalid_request"},
    61: PARTITION_LEADER | {"invalid_request"},
    65: COORD | {"transactional_id_not_found", "transactional_id_authorization_failed"},
    66: COORD | {"invalid_request"},
    68: COORD
    | {
        "group_authorization_failed",
        "topic_authorization_failed",
        "invalid_request",
        "unknown_member_id",
        "fenced_member_epoch",
        "unsupported_assignor",
        "unreleased_instance_id",
        "group_max_size_reached",
        "group_id_not_found",
        "invalid_regular_expression",
        "unsupported_version",
    },
    69: GROUP | {"group_id_not_found", "topic_authorization_failed", "invalid_request"},
    71: {"invalid_request", "unknown_subscription_id", "cluster_authorization_failed"},
    72: {
        "invalid_request",
        "invalid_record",
        "unknown_subscription_id",
        "unsupported_compression_type",
        "telemetry_too_large",
        "throttling_quota_exceeded",
        "cluster_authorization_failed",
    },
    74: {"cluster_authorization_failed", "invalid_request", "unsupported_version"},
    75: {
        "unknown_topic_or_partition",
        "topic_authorization_failed",
        "invalid_request",
        "leader_not_available",
        "replica_not_available",
    },
    76: SHARE,
    77: SHARE,
    78: SHARE,
    79: SHARE,
    90: SHARE,
    91: SHARE,
    92: SHARE,
    # the share-state coordinator's inter-broker APIs (Kafka's ShareCoordinatorService)
    83: SHARE_STATE,
    84: SHARE_STATE,
    85: SHARE_STATE,
    86: SHARE_STATE,
    87: SHARE_STATE,
}


# ---- the environment the requests name ----------------------------------------------


@dataclass(frozen=True)
class Env:
    topic: str
    topic_id: uuid.UUID
    group: str
    broker_id: int
    txn_id: str
    producer_id: int
    producer_epoch: int


def _partitions(env: Env, **fields_: Any) -> list[dict[str, Any]]:
    return [{"partition_index": 0, "partition": 0, **fields_}]


def _records() -> bytes:
    return bytes(build_batch([(b"k", b"sweep", [("h", b"v")], 1_700_000_000_000)]))


def _produce(v: int, e: Env) -> dict[str, Any]:
    parts = [{"index": 0, "records": _records()}]
    return {
        "acks": 1,
        "timeout": 5000,
        "topic_data": [{"name": e.topic, "topic_id": e.topic_id, "partition_data": parts}],
    }


def _fetch(v: int, e: Env) -> dict[str, Any]:
    part = {
        "partition": 0,
        "current_leader_epoch": -1,
        "fetch_offset": 0,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": 1 << 20,
    }
    return {
        "replica_id": -1,
        "replica_state": {"replica_id": -1, "replica_epoch": -1},
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "session_epoch": -1,
        "topics": [{"topic": e.topic, "topic_id": e.topic_id, "partitions": [part]}],
    }


def _offset_commit(v: int, e: Env) -> dict[str, Any]:
    part = {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1}
    return {
        "group_id": e.group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "retention_time": -1,
        "topics": [{"name": e.topic, "topic_id": e.topic_id, "partitions": [part]}],
    }


def _offset_fetch(v: int, e: Env) -> dict[str, Any]:
    topics = [{"name": e.topic, "topic_id": e.topic_id, "partition_indexes": [0]}]
    if v < 8:
        return {"group_id": e.group, "topics": topics}
    return {"groups": [{"group_id": e.group, "member_epoch": -1, "topics": topics}]}


def _txn_topics(e: Env) -> list[dict[str, Any]]:
    return [{"name": e.topic, "partitions": [0]}]


def _add_partitions_to_txn(v: int, e: Env) -> dict[str, Any]:
    if v < 4:
        return {
            "v3_and_below_transactional_id": e.txn_id,
            "v3_and_below_producer_id": e.producer_id,
            "v3_and_below_producer_epoch": e.producer_epoch,
            "v3_and_below_topics": _txn_topics(e),
        }
    txn = {
        "transactional_id": e.txn_id,
        "producer_id": e.producer_id,
        "producer_epoch": e.producer_epoch,
        "verify_only": False,
        "topics": _txn_topics(e),
    }
    return {"transactions": [txn]}


def _txn(e: Env, **more: Any) -> dict[str, Any]:
    return {
        "transactional_id": e.txn_id,
        "producer_id": e.producer_id,
        "producer_epoch": e.producer_epoch,
        **more,
    }


def _topic_config(e: Env, **op: Any) -> dict[str, Any]:
    cfg = {"name": "retention.ms", "value": "604800000", **op}
    return {"resource_type": 2, "resource_name": e.topic, "configs": [cfg]}


def _consumer_group_heartbeat(v: int, e: Env) -> dict[str, Any]:
    return {
        "group_id": f"sweep-848-v{v}",
        "member_id": "" if v == 0 else str(uuid.uuid4()),
        "member_epoch": 0,
        "rebalance_timeout": 10000,
        "subscribed_topic_names": [e.topic],
        "topic_partitions": [],
    }


def _share_group_heartbeat(v: int, e: Env) -> dict[str, Any]:
    return {
        "group_id": f"sweep-share-v{v}",
        "member_id": str(uuid.uuid4()),
        "member_epoch": 0,
        "subscribed_topic_names": [e.topic],
    }


#: api key -> (version, env) -> the request's fields (kio names; absent ones dropped)
BUILDERS: dict[int, Callable[[int, Env], dict[str, Any]]] = {
    0: _produce,
    1: _fetch,
    2: lambda v, e: {
        "replica_id": -1,
        "timeout": 5000,
        "topics": [
            {"name": e.topic, "partitions": _partitions(e, timestamp=-1, current_leader_epoch=-1)}
        ],
    },
    3: lambda v, e: {"topics": [{"name": e.topic}], "allow_auto_topic_creation": False},
    8: _offset_commit,
    9: _offset_fetch,
    10: lambda v, e: {"key": e.group, "key_type": 0, "coordinator_keys": [e.group]},
    11: lambda v, e: {
        "group_id": f"sweep-join-v{v}",
        "session_timeout": 10000,
        "rebalance_timeout": 10000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    },
    12: lambda v, e: {"group_id": e.group, "generation_id": 0, "member_id": "sweep-member"},
    13: lambda v, e: {
        "group_id": e.group,
        "member_id": "sweep-member",
        "members": [{"member_id": "sweep-member"}],
    },
    14: lambda v, e: {
        "group_id": e.group,
        "generation_id": 0,
        "member_id": "sweep-member",
        "protocol_type": "consumer",
        "protocol_name": "range",
    },
    15: lambda v, e: {"groups": [e.group]},
    16: lambda v, e: {},
    17: lambda v, e: {"mechanism": "PLAIN"},
    18: lambda v, e: {"client_software_name": "sweep", "client_software_version": "1"},
    19: lambda v, e: {
        "topics": [{"name": f"sweep-new-v{v}", "num_partitions": 1, "replication_factor": 1}],
        "timeout": 5000,
        "validate_only": True,
    },
    20: lambda v, e: {
        "topic_names": ["sweep-absent"],
        "topics": [{"name": "sweep-absent"}],
        "timeout": 5000,
    },
    21: lambda v, e: {
        "topics": [{"name": e.topic, "partitions": _partitions(e, offset=0)}],
        "timeout": 5000,
    },
    22: lambda v, e: {
        "transactional_id": None,
        "transaction_timeout": 60000,
        "producer_id": -1,
        "producer_epoch": -1,
    },
    23: lambda v, e: {
        "replica_id": -1,
        "topics": [
            {"topic": e.topic, "partitions": [{"partition": 0, "current_leader_epoch": -1}]}
        ],
    },
    24: _add_partitions_to_txn,
    25: lambda v, e: _txn(e, group_id=e.group),
    26: lambda v, e: _txn(e, committed=False),
    27: lambda v, e: {"markers": []},
    28: lambda v, e: _txn(
        e,
        group_id=e.group,
        generation_id=-1,
        member_id="",
        topics=[
            {
                "name": e.topic,
                "partitions": _partitions(e, committed_offset=0, committed_leader_epoch=-1),
            }
        ],
    ),
    29: lambda v, e: {
        "resource_type_filter": 1,
        "pattern_type_filter": 1,
        "operation": 1,
        "permission_type": 1,
    },
    30: lambda v, e: {"creations": []},
    31: lambda v, e: {"filters": []},
    32: lambda v, e: {
        "resources": [{"resource_type": 2, "resource_name": e.topic, "configuration_keys": None}]
    },
    33: lambda v, e: {"resources": [_topic_config(e)], "validate_only": True},
    34: lambda v, e: {"dirs": []},
    35: lambda v, e: {"topics": [{"topic": e.topic, "partitions": [0]}]},
    36: lambda v, e: {"auth_bytes": b""},
    37: lambda v, e: {
        "topics": [{"name": e.topic, "count": 1, "assignments": None}],
        "timeout": 5000,
        "validate_only": True,
    },
    42: lambda v, e: {"groups_names": ["sweep-absent-group"]},
    43: lambda v, e: {
        "election_type": 0,
        "topic_partitions": [{"topic": e.topic, "partitions": [0]}],
        "timeout": 5000,
    },
    44: lambda v, e: {"resources": [_topic_config(e, config_operation=0)], "validate_only": True},
    45: lambda v, e: {
        "timeout": 5000,
        "topics": [
            {"name": e.topic, "partitions": [{"partition_index": 0, "replicas": [e.broker_id]}]}
        ],
    },
    46: lambda v, e: {"timeout": 5000, "topics": None},
    47: lambda v, e: {
        "group_id": e.group,
        "topics": [{"name": e.topic, "partitions": [{"partition_index": 0}]}],
    },
    48: lambda v, e: {"components": [], "strict": False},
    49: lambda v, e: {"entries": [], "validate_only": True},
    50: lambda v, e: {"users": None},
    51: lambda v, e: {"deletions": [], "upsertions": []},
    57: lambda v, e: {"timeout": 5000, "feature_updates": [], "validate_only": True},
    60: lambda v, e: {"endpoint_type": 1},
    61: lambda v, e: {"topics": [{"name": e.topic, "partition_indexes": [0]}]},
    65: lambda v, e: {"transactional_ids": [e.txn_id]},
    66: lambda v, e: {"duration_filter": -1},
    68: _consumer_group_heartbeat,
    69: lambda v, e: {"group_ids": [e.group]},
    74: lambda v, e: {"resource_types": []},
    75: lambda v, e: {"topics": [{"name": e.topic}], "response_partition_limit": 2000},
    76: _share_group_heartbeat,
    77: lambda v, e: {"group_ids": ["sweep-share-v1"]},
    90: lambda v, e: {"groups": [{"group_id": "sweep-share-v1", "topics": None}]},
    92: lambda v, e: {"group_id": "sweep-share-absent", "topics": []},
    83: lambda v, e: _share_state(e, state_epoch=0, start_offset=0),
    84: lambda v, e: _share_state(e, leader_epoch=-1),
    85: lambda v, e: _share_state(
        e,
        state_epoch=0,
        leader_epoch=-1,
        start_offset=0,
        state_batches=[],
        **({"delivery_complete_count": 0} if v >= 1 else {}),
    ),
    86: lambda v, e: _share_state(e),
    87: lambda v, e: _share_state(e, leader_epoch=-1),
}


def _share_state(e: Env, **partition: Any) -> dict[str, Any]:
    """A share-state request for partition 0 of the sweep's topic in an absent share
    group (GROUP_ID_NOT_FOUND: kafkalite keeps share state with the group)."""
    return {
        "group_id": "sweep-share-absent",
        "topics": [{"topic_id": e.topic_id, "partitions": [{"partition": 0, **partition}]}],
    }


def _leave_consumer_group(c: RawClient, v: int, req: Any, resp: Any) -> None:
    """A KIP-848 member the sweep made leaves, so no group lingers on the shared broker."""
    if resp.error_code == ErrorCode.none:
        leave = {"group_id": req.group_id, "member_id": resp.member_id, "member_epoch": -1}
        c.call(68, v, messages.build(messages.request_type(68, v), leave))


def _leave_classic_group(c: RawClient, v: int, req: Any, resp: Any) -> None:
    """JoinGroup v0-3 admits a member at once (no MEMBER_ID_REQUIRED round)."""
    if resp.error_code == ErrorCode.none:
        leave = {"group_id": req.group_id, "member_id": resp.member_id}
        c.call(13, 0, messages.build(messages.request_type(13, 0), leave))


def _leave_share_group(c: RawClient, v: int, req: Any, resp: Any) -> None:
    if resp.error_code == ErrorCode.none:
        leave = {"group_id": req.group_id, "member_id": req.member_id, "member_epoch": -1}
        c.call(76, v, messages.build(messages.request_type(76, v), leave))


#: api key -> what undoes the state a request left behind
CLEANUP: dict[int, Callable[[RawClient, int, Any, Any], None]] = {
    11: _leave_classic_group,
    68: _leave_consumer_group,
    76: _leave_share_group,
}


@pytest.fixture(scope="module")
def env(kafka_broker) -> Iterator[Env]:
    topic, group = "sweep-topic", "sweep-group"
    kafka_broker.create_topic(topic, partitions=1)
    kb = kafka_broker.kafka
    topic_id = kb.metadata_cache.get_topic(topic).topic_id
    c = RawClient.to(kafka_broker.bootstrap_servers)
    try:
        e = Env(topic, topic_id, group, kb.broker_id, "sweep-txn", -1, -1)
        produced = c.call(0, 9, messages.build(messages.request_type(0, 9), _produce(9, e)))
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
        _until_coordinator_ready(
            c,
            8,
            8,
            _offset_commit(8, e),
            lambda r: r.topics[0].partitions[0].error_code,
            find={"key_type": 0, "coordinator_keys": [group]},
        )
        init = _init_transactional_id(c, e.txn_id)
        yield Env(
            topic,
            topic_id,
            group,
            kb.broker_id,
            e.txn_id,
            int(init.producer_id),
            int(init.producer_epoch),
        )
    finally:
        c.close()


def _init_transactional_id(c: RawClient, txn_id: str) -> Any:
    body = {
        "transactional_id": txn_id,
        "transaction_timeout": 60000,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    find = {"key_type": 1, "coordinator_keys": [txn_id]}
    return _until_coordinator_ready(c, 22, 4, body, lambda r: r.error_code, find=find)


def _until_coordinator_ready(
    c: RawClient,
    api_key: int,
    version: int,
    body: dict[str, Any],
    error: Callable[[Any], ErrorCode],
    *,
    find: dict[str, Any],
) -> Any:
    """Send ``body`` until its coordinator (created on first FindCoordinator) has loaded."""
    c.call(10, 4, messages.build(messages.request_type(10, 4), find))
    retriable = ("coordinator_load_in_progress", "coordinator_not_available", "not_coordinator")
    for _ in range(200):
        r = c.call(api_key, version, messages.build(messages.request_type(api_key, version), body))
        code = error(r)
        if code == ErrorCode.none:
            return r
        assert code.name in (*retriable, "concurrent_transactions")
        time.sleep(0.05)
    raise AssertionError(f"api {api_key} never succeeded: {code.name}")


# ---- the sweep ----------------------------------------------------------------------


def _error_codes(entity: Any) -> Iterator[ErrorCode]:
    """Every error code anywhere in a decoded kio response."""
    if isinstance(entity, ErrorCode):
        yield entity
    elif is_dataclass(entity) and not isinstance(entity, type):
        for f in fields(entity):
            yield from _error_codes(getattr(entity, f.name))
    elif isinstance(entity, tuple | list):
        for item in entity:
            yield from _error_codes(item)
    elif isinstance(entity, enum.Enum):
        return


def _request(api_key: int, version: int, env: Env) -> Any:
    builder = BUILDERS.get(api_key, lambda v, e: {})
    return messages.build(messages.request_type(api_key, version), builder(version, env))


def _api_versions(c: RawClient) -> Any:
    return c.call(18, 3, messages.build(messages.request_type(18, 3), BUILDERS[18](3, None)))  # type: ignore[arg-type]


def test_the_sweep_covers_what_the_broker_advertises(kafka_bootstrap):
    """ApiVersions advertises exactly the API table the sweep is parametrized from,
    and every advertised API has Kafka's error list and a request the sweep builds."""
    c = RawClient.to(kafka_bootstrap)
    try:
        advertised = {
            int(k.api_key): (int(k.min_version), int(k.max_version))
            for k in _api_versions(c).api_keys
        }
    finally:
        c.close()
    expected = {
        k: (
            s.min_version if s.advertised_min_version is None else s.advertised_min_version,
            s.max_version,
        )
        for k, s in TABLE.items()
    }
    assert advertised == expected
    assert sorted(k for k in advertised if k not in KAFKA_ERRORS) == [], "add Kafka's error codes"
    assert set(CANNOT_BUILD) <= set(advertised), "CANNOT_BUILD lists an API not advertised"
    for key in advertised:
        lo, hi = TABLE[key].min_version, TABLE[key].max_version
        if key in CANNOT_BUILD:  # still true: else take it off the list
            with pytest.raises(UnknownAPIKey):
                messages.request_type(key, lo)
            continue
        for v in range(lo, hi + 1):
            messages.request_type(key, v)  # kio has the schema of every advertised version


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=[f"key{k}-v{v}" for k, v in CASES])
def test_every_advertised_version_is_answered_like_kafka(kafka_bootstrap, env, api_key, version):
    req = _request(api_key, version, env)
    c = RawClient.to(kafka_bootstrap)
    try:
        cid = 0x5EE0000 + api_key * 100 + version
        c.send(api_key, version, req, correlation_id=cid)
        frame = c.read_frame()
        (got_cid,) = struct.unpack_from(">i", frame, 0)
        assert got_cid == cid
        cls = messages.response_type(api_key, version)
        # ApiVersions' response header is never flexible (KIP-511)
        flexible = cls.__flexible__ and api_key != 18  # type: ignore[attr-defined]
        pos = skip_tagged_fields(frame, 4) if flexible else 4
        resp, size = messages._reader(cls)(frame, pos)
        assert pos + size == len(frame), f"{len(frame) - pos - size} bytes after the response"
        codes = {code.name for code in _error_codes(resp)} - {"none"}
        unexpected = codes - KAFKA_ERRORS[api_key]
        assert not unexpected, f"{TABLE[api_key].name} v{version} answered {sorted(unexpected)}"
        if api_key in CLEANUP:
            CLEANUP[api_key](c, version, req, resp)
        assert _api_versions(c).error_code == ErrorCode.none  # the connection is still usable
    finally:
        c.close()


@pytest.mark.parametrize(
    ("api_key", "version"), BELOW_RANGE, ids=[f"key{k}-v{v}" for k, v in BELOW_RANGE]
)
def test_versions_advertised_below_the_handled_range_close_the_connection(
    kafka_bootstrap, env, api_key, version
):
    """Kafka 4 advertises Produce from v0 but closes the connection on v0-2
    (KAFKA-18659); kio has no schema below v3, whose body is v2's behind a
    transactional id, so the v2 body is the v3 one without it."""
    assert api_key == 0
    body = messages.encode(_request(0, 3, env))[2:]  # drop the null transactional_id
    header = struct.pack(">hhih", api_key, version, 1, 5) + b"sweep"
    c = RawClient.to(kafka_bootstrap)
    try:
        c.send_raw(struct.pack(">i", len(header) + len(body)) + header + body)
        assert c.is_closed()
    finally:
        c.close()
