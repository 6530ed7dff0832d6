"""The ACL matrix (docs/security.md, "Authorization"): every client API the broker
serves, over TCP with kio-built requests on an mTLS connection, for a principal

- with no ACL for the resource the row is about (its other resources granted): the
  row's authorization error;
- with the right ACL (LITERAL): not that error;
- with the right ACL and a DENY of ALL on the resource: the error (DENY wins);
- with the right ACL as a PREFIXED pattern (``mx-``): not the error;
- as a super user (``super.users``), with no ACL at all: not the error.

One broker for the whole table; the ACLs are replaced between cells through
DeleteAcls/CreateAcls on the super user's PLAINTEXT connection.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from kafkalite.protocol import messages
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import build_batch
from tests.security.acl_env import AclBroker, call
from tests.security.pki import needs_openssl

pytestmark = needs_openssl

TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
LITERAL, PREFIXED = 3, 4
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
ALLOW, DENY = 3, 2

T, G, X = "mx-topic", "mx-group", "mx-txn"
TOPIC_AUTH = int(ErrorCode.topic_authorization_failed)
GROUP_AUTH = int(ErrorCode.group_authorization_failed)
CLUSTER_AUTH = int(ErrorCode.cluster_authorization_failed)
TXN_AUTH = int(ErrorCode.transactional_id_authorization_failed)

#: every ACL (null name, principal and host filters match anything)
ANY_FILTER = {
    "resource_type_filter": 1,
    "resource_name_filter": None,
    "pattern_type_filter": 1,
    "principal_filter": None,
    "host_filter": None,
    "operation": 1,
    "permission_type": 1,
}

Grant = tuple[int, str, int]  # resource type, name, operation


@dataclass
class Row:
    api: str
    key: int
    version: int
    body: dict[str, Any]
    #: what the request needs; the first is the one the row tests
    grants: list[Grant]
    denied: int
    error: Callable[[Any], int]
    others: list[Grant] = field(default_factory=list)
    #: read the error from the response frame (kio cannot decode every response:
    #: DescribeTransactions' start time of -1)
    raw: Callable[[bytes], int] | None = None

    def __str__(self) -> str:
        return self.api


def _first(*path: Any) -> Callable[[Any], int]:
    def get(resp: Any) -> int:
        obj = resp
        for p in path:
            obj = obj[p] if isinstance(p, int) else getattr(obj, p)
        return int(obj)

    return get


_PARTS = [{"partition": 0, "partition_index": 0, "index": 0, "fetch_offset": 0}]
_RECORDS = build_batch([(b"k", b"v")])
_TOPIC_PART = _first("topics", 0, "partitions", 0, "error_code")

ROWS = [
    Row(
        "Produce",
        0,
        9,
        {
            "acks": 1,
            "timeout": 5000,
            "topic_data": [{"name": T, "partition_data": [{"index": 0, "records": _RECORDS}]}],
        },
        [(TOPIC, T, WRITE)],
        TOPIC_AUTH,
        _first("responses", 0, "partition_responses", 0, "error_code"),
    ),
    Row(
        "Produce (transactional)",
        0,
        9,
        {
            "transactional_id": X,
            "acks": 1,
            "timeout": 5000,
            "topic_data": [{"name": T, "partition_data": [{"index": 0, "records": _RECORDS}]}],
        },
        [(TXN, X, WRITE), (TOPIC, T, WRITE)],
        TXN_AUTH,
        _first("responses", 0, "partition_responses", 0, "error_code"),
    ),
    Row(
        "Fetch",
        1,
        12,
        {
            "replica_id": -1,
            "max_wait": 0,
            "max_bytes": 1 << 20,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": T,
                    "partitions": [
                        {
                            "partition": 0,
                            "fetch_offset": 0,
                            "partition_max_bytes": 1 << 20,
                            "current_leader_epoch": -1,
                            "log_start_offset": -1,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
        },
        [(TOPIC, T, READ)],
        TOPIC_AUTH,
        _first("responses", 0, "partitions", 0, "error_code"),
    ),
    Row(
        "ListOffsets",
        2,
        7,
        {
            "replica_id": -1,
            "topics": [
                {
                    "name": T,
                    "partitions": [
                        {"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}
                    ],
                }
            ],
        },
        [(TOPIC, T, DESCRIBE)],
        TOPIC_AUTH,
        _TOPIC_PART,
    ),
    Row(
        "Metadata",
        3,
        12,
        {"topics": [{"name": T}], "allow_auto_topic_creation": False},
        [(TOPIC, T, DESCRIBE)],
        TOPIC_AUTH,
        _first("topics", 0, "error_code"),
    ),
    Row(
        "Metadata (auto-create)",
        3,
        12,
        {"topics": [{"name": "mx-auto"}], "allow_auto_topic_creation": True},
        [(TOPIC, "mx-auto", CREATE), (TOPIC, "mx-auto", DESCRIBE)],
        TOPIC_AUTH,
        _first("topics", 0, "error_code"),
    ),
    Row(
        "OffsetCommit",
        8,
        8,
        {
            "group_id": G,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [{"name": T, "partitions": [{"partition_index": 0, "committed_offset": 0}]}],
        },
        [(GROUP, G, READ), (TOPIC, T, READ)],
        GROUP_AUTH,
        _TOPIC_PART,
    ),
    Row(
        "OffsetCommit (topic)",
        8,
        8,
        {
            "group_id": G,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [{"name": T, "partitions": [{"partition_index": 0, "committed_offset": 0}]}],
        },
        [(TOPIC, T, READ), (GROUP, G, READ)],
        TOPIC_AUTH,
        _TOPIC_PART,
    ),
    Row(
        "OffsetFetch",
        9,
        7,
        {"group_id": G, "topics": [{"name": T, "partition_indexes": [0]}]},
        [(GROUP, G, DESCRIBE), (TOPIC, T, DESCRIBE)],
        GROUP_AUTH,
        _first("error_code"),
    ),
    Row(
        "OffsetFetch (topic)",
        9,
        7,
        {"group_id": G, "topics": [{"name": T, "partition_indexes": [0]}]},
        [(TOPIC, T, DESCRIBE), (GROUP, G, DESCRIBE)],
        TOPIC_AUTH,
        _TOPIC_PART,
    ),
    Row(
        "OffsetFetch v8 (batched)",
        9,
        8,
        {"groups": [{"group_id": G, "topics": [{"name": T, "partition_indexes": [0]}]}]},
        [(GROUP, G, DESCRIBE), (TOPIC, T, DESCRIBE)],
        GROUP_AUTH,
        _first("groups", 0, "error_code"),
    ),
    Row(
        "FindCoordinator (group)",
        10,
        3,
        {"key": G, "key_type": 0},
        [(GROUP, G, DESCRIBE)],
        GROUP_AUTH,
        _first("error_code"),
    ),
    Row(
        "FindCoordinator (transaction)",
        10,
        4,
        {"key_type": 1, "coordinator_keys": [X]},
        [(TXN, X, DESCRIBE)],
        TXN_AUTH,
        _first("coordinators", 0, "error_code"),
    ),
    Row(
        "JoinGroup",
        11,
        7,
        {
            "group_id": G,
            "session_timeout": 10000,
            "rebalance_timeout": 10000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
        [(GROUP, G, READ)],
        GROUP_AUTH,
        _first("error_code"),
    ),
    Row(
        "Heartbeat",
        12,
        4,
        {"group_id": G, "generation_id": 1, "member_id": "m"},
        [(GROUP, G, READ)],
        GROUP_AUTH,
        _first("error_code"),
    ),
    Row(
        "LeaveGroup",
        13,
        4,
        {"group_id": G, "members": [{"member_id": "m"}]},
        [(GROUP, G, READ)],
        GROUP_AUTH,
        _first("error_code"),
    ),
    Row(
        "SyncGroup",
        14,
        5,
        {
            "group_id": G,
            "generation_id": 1,
            "member_id": "m",
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [],
        },
        [(GROUP, G, READ)],
        GROUP_AUTH,
        _first("error_code"),
    ),
    Row(
        "DescribeGroups",
        15,
        5,
        {"groups": [G], "include_authorized_operations": True},
        [(GROUP, G, DESCRIBE)],
        GROUP_AUTH,
        _first("groups", 0, "error_code"),
    ),
    Row(
        "CreateTopics (validate only)",
        19,
        5,
        {
            "topics": [
                {
                    "name": "mx-new",
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout": 5000,
            "validate_only": True,
        },
        [(TOPIC, "mx-new", CREATE)],
        TOPIC_AUTH,
        _first("topics", 0, "error_code"),
    ),
    Row(
        "DeleteTopics (absent topic)",
        20,
        5,
        {"topic_names": ["mx-absent"], "timeout": 5000},
        [(TOPIC, "mx-absent", DELETE)],
        TOPIC_AUTH,
        _first("responses", 0, "error_code"),
    ),
    Row(
        "DeleteRecords",
        21,
        2,
        {
            "topics": [{"name": T, "partitions": [{"partition_index": 0, "offset": 0}]}],
            "timeout": 5000,
        },
        [(TOPIC, T, DELETE)],
        TOPIC_AUTH,
        _TOPIC_PART,
    ),
    Row(
        "InitProducerId (transactional)",
        22,
        4,
        {
            "transactional_id": X,
            "transaction_timeout": 10000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
        [(TXN, X, WRITE)],
        TXN_AUTH,
        _first("error_code"),
    ),
    Row(
        "InitProducerId (idempotent: Write on a topic)",
        22,
        4,
        {
            "transactional_id": None,
            "transaction_timeout": 10000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
        [(TOPIC, T, WRITE)],
        CLUSTER_AUTH,
        _first("error_code"),
    ),
    Row(
        "InitProducerId (idempotent: IdempotentWrite)",
        22,
        4,
        {
            "transactional_id": None,
            "transaction_timeout": 10000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
        [(CLUSTER, "kafka-cluster", IDEMPOTENT_WRITE)],
        CLUSTER_AUTH,
        _first("error_code"),
    ),
    Row(
        "OffsetForLeaderEpoch",
        23,
        4,
        {
            "replica_id": -1,
            "topics": [
                {
                    "topic": T,
                    "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}],
                }
            ],
        },
        [(TOPIC, T, DESCRIBE)],
        TOPIC_AUTH,
        _TOPIC_PART,
    ),
    Row(
        "AddPartitionsToTxn",
        24,
        3,
        {
            "v3_and_below_transactional_id": X,
            "v3_and_below_producer_id": 1,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": T, "partitions": [0]}],
        },
        [(TXN, X, WRITE), (TOPIC, T, WRITE)],
        TXN_AUTH,
        _first(
            "results_by_topic_v3_and_below", 0, "results_by_partition", 0, "partition_error_code"
        ),
    ),
    Row(
        "AddPartitionsToTxn (topic)",
        24,
        3,
        {
            "v3_and_below_transactional_id": X,
            "v3_and_below_producer_id": 1,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": T, "partitions": [0]}],
        },
        [(TOPIC, T, WRITE), (TXN, X, WRITE)],
        TOPIC_AUTH,
        _first(
            "results_by_topic_v3_and_below", 0, "results_by_partition", 0, "partition_error_code"
        ),
    ),
    Row(
        "AddPartitionsToTxn v4 (brokers only)",
        24,
        4,
        {
            "transactions": [
                {
                    "transactional_id": X,
                    "producer_id": 1,
                    "producer_epoch": 0,
                    "verify_only": True,
                    "topics": [{"name": T, "partitions": [0]}],
                }
            ]
        },
        [(CLUSTER, "kafka-cluster", CLUSTER_ACTION)],
        CLUSTER_AUTH,
        _first("error_code"),
    ),
    Row(
        "AddOffsetsToTxn",
        25,
        3,
        {"transactional_id": X, "producer_id": 1, "producer_epoch": 0, "group_id": G},
        [(TXN, X, WRITE), (GROUP, G, READ)],
        TXN_AUTH,
        _first("error_code"),
    ),
    Row(
        "AddOffsetsToTxn (group)",
        25,
        3,
        {"transactional_id": X, "producer_id": 1, "producer_epoch": 0, "group_id": G},
        [(GROUP, G, READ), (TXN, X, WRITE)],
        GROUP_AUTH,
        _first("error_code"),
    ),
    Row(
        "EndTxn",
        26,
        3,
        {"transactional_id": X, "producer_id": 1, "producer_epoch": 0, "committed": True},
        [(TXN, X, WRITE)],
        TXN_AUTH,
        _first("error_code"),
    ),
    Row(
        "WriteTxnMarkers",
        27,
        1,
        {
            "markers": [
                {
                    "producer_id": 1,
                    "producer_epoch": 0,
                    "transaction_result": True,
                    "topics": [{"name": "mx-none", "partition_indexes": [0]}],
                    "coordinator_epoch": 0,
                }
            ]
        },
        [(CLUSTER, "kafka-cluster", CLUSTER_ACTION)],
        CLUSTER_AUTH,
        _first("markers", 0, "topics", 0, "partitions", 0, "error_code"),
    ),
    Row(
        "TxnOffsetCommit",
        28,
        3,
        {
            "transactional_id": X,
            "group_id": G,
            "producer_id": 1,
            "producer_epoch": 0,
            "generation_id": -1,
            "member_id": "",
            "topics": [{"name": T, "partitions": [{"partition_index": 0, "committed_offset": 0}]}],
        },
        [(TXN, X, WRITE), (GROUP, G, READ), (TOPIC, T, READ)],
        TXN_AUTH,
        _TOPIC_PART,
    ),
    Row(
        "TxnOffsetCommit (group)",
        28,
        3,
        {
            "transactional_id": X,
            "group_id": G,
            "producer_id": 1,
            "producer_epoch": 0,
            "generation_id": -1,
            "member_id": "",
            "topics": [{"name": T, "partitions": [{"partition_index": 0, "committed_offset": 0}]}],
        },
        [(GROUP, G, READ), (TXN, X, WRITE), (TOPIC, T, READ)],
        GROUP_AUTH,
        _TOPIC_PART,
    ),
    Row(
        "TxnOffsetCommit (topic)",
        28,
        3,
        {
            "transactional_id": X,
            "group_id": G,
            "producer_id": 1,
            "producer_epoch": 0,
            "generation_id": -1,
            "member_id": "",
            "topics": [{"name": T, "partitions": [{"partition_index": 0, "committed_offset": 0}]}],
        },
        [(TOPIC, T, READ), (GROUP, G, READ), (TXN, X, WRITE)],
        TOPIC_AUTH,
        _TOPIC_PART,
    ),
    Row(
        "DescribeAcls",
        29,
        3,
        ANY_FILTER,
        [(CLUSTER, "kafka-cluster", DESCRIBE)],
        CLUSTER_AUTH,
        _first("error_code"),
    ),
    Row(
        "CreateAcls",
        30,
        3,
        {
            "creations": [
                {
                    "resource_type": TOPIC,
                    "resource_name": "zz",
                    "resource_pattern_type": LITERAL,
                    "principal": "User:nobody",
                    "host": "*",
                    "operation": READ,
                    "permission_type": ALLOW,
                }
            ]
        },
        [(CLUSTER, "kafka-cluster", ALTER)],
        CLUSTER_AUTH,
        _first("results", 0, "error_code"),
    ),
    Row(
        "DeleteAcls",
        31,
        3,
        {
            "filters": [
                {
                    "resource_type_filter": TOPIC,
                    "resource_name_filter": "zz",
                    "pattern_type_filter": LITERAL,
                    "operation": 1,
                    "permission_type": 1,
                }
            ]
        },
        [(CLUSTER, "kafka-cluster", ALTER)],
        CLUSTER_AUTH,
        _first("filter_results", 0, "error_code"),
    ),
    Row(
        "DescribeConfigs (topic)",
        32,
        4,
        {"resources": [{"resource_type": 2, "resource_name": T, "configuration_keys": None}]},
        [(TOPIC, T, DESCRIBE_CONFIGS)],
        TOPIC_AUTH,
        _first("results", 0, "error_code"),
    ),
    Row(
        "DescribeConfigs (broker)",
        32,
        4,
        {"resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None}]},
        [(CLUSTER, "kafka-cluster", DESCRIBE_CONFIGS)],
        CLUSTER_AUTH,
        _first("results", 0, "error_code"),
    ),
    Row(
        "AlterConfigs (validate only)",
        33,
        2,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": T,
                    "configs": [{"name": "retention.ms", "value": "100000"}],
                }
            ],
            "validate_only": True,
        },
        [(TOPIC, T, ALTER_CONFIGS)],
        TOPIC_AUTH,
        _first("responses", 0, "error_code"),
    ),
    Row(
        "DescribeLogDirs",
        35,
        4,
        {"topics": None},
        [(CLUSTER, "kafka-cluster", DESCRIBE)],
        CLUSTER_AUTH,
        _first("error_code"),
    ),
    Row(
        "CreatePartitions (validate only)",
        37,
        3,
        {
            "topics": [{"name": T, "count": 2, "assignments": None}],
            "timeout": 5000,
            "validate_only": True,
        },
        [(TOPIC, T, ALTER)],
        TOPIC_AUTH,
        _first("results", 0, "error_code"),
    ),
    Row(
        "DeleteGroups",
        42,
        2,
        {"groups_names": ["mx-nogroup"]},
        [(GROUP, "mx-nogroup", DELETE)],
        GROUP_AUTH,
        _first("results", 0, "error_code"),
    ),
    Row(
        "ElectLeaders",
        43,
        2,
        {
            "election_type": 0,
            "topic_partitions": [{"topic": T, "partitions": [0]}],
            "timeout": 5000,
        },
        [(CLUSTER, "kafka-cluster", ALTER)],
        CLUSTER_AUTH,
        _first("error_code"),
    ),
    Row(
        "IncrementalAlterConfigs (broker, validate only)",
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": 4,
                    "resource_name": "",
                    "configs": [
                        {"name": "log.cleaner.threads", "config_operation": 0, "value": "1"}
                    ],
                }
            ],
            "validate_only": True,
        },
        [(CLUSTER, "kafka-cluster", ALTER_CONFIGS)],
        CLUSTER_AUTH,
        _first("responses", 0, "error_code"),
    ),
    Row(
        "AlterPartitionReassignments",
        45,
        0,
        {"timeout": 5000, "topics": []},
        [(CLUSTER, "kafka-cluster", ALTER)],
        CLUSTER_AUTH,
        _first("error_code"),
    ),
    Row(
        "ListPartitionReassignments",
        46,
        0,
        {"timeout": 5000, "topics": None},
        [(CLUSTER, "kafka-cluster", DESCRIBE)],
        CLUSTER_AUTH,
        _first("error_code"),
    ),
    Row(
        "OffsetDelete",
        47,
        0,
        {"group_id": G, "topics": [{"name": T, "partitions": [{"partition_index": 0}]}]},
        [(GROUP, G, DELETE), (TOPIC, T, READ)],
        GROUP_AUTH,
        _first("error_code"),
    ),
    Row(
        "DescribeClientQuotas",
        48,
        1,
        {
            "components": [{"entity_type": "client-id", "match_type": 2, "match": None}],
            "strict": False,
        },
        [(CLUSTER, "kafka-cluster", DESCRIBE_CONFIGS)],
        CLUSTER_AUTH,
        _first("error_code"),
    ),
    Row(
        "AlterClientQuotas (validate only)",
        49,
        1,
        {
            "entries": [
                {
                    "entity": [{"entity_type": "client-id", "entity_name": "c"}],
                    "ops": [{"key": "producer_byte_rate", "value": 1.0, "remove": False}],
                }
            ],
            "validate_only": True,
        },
        [(CLUSTER, "kafka-cluster", ALTER_CONFIGS)],
        CLUSTER_AUTH,
        _first("entries", 0, "error_code"),
    ),
    Row(
        "DescribeProducers",
        61,
        0,
        {"topics": [{"name": T, "partition_indexes": [0]}]},
        [(TOPIC, T, READ)],
        TOPIC_AUTH,
        _TOPIC_PART,
    ),
    Row(
        "DescribeTransactions",
        65,
        0,
        {"transactional_ids": [X]},
        [(TXN, X, DESCRIBE)],
        TXN_AUTH,
        _first("transaction_states", 0, "error_code"),
        # flexible: correlation id, header tags, throttle time, compact array length,
        # then the first state's error code
        raw=lambda frame: struct.unpack_from(">h", frame, 10)[0],
    ),
    Row(
        "ConsumerGroupHeartbeat",
        68,
        0,
        {
            "group_id": "mx-cg",
            "member_id": str(uuid.uuid4()),
            "member_epoch": 0,
            "rebalance_timeout": 5000,
            "subscribed_topic_names": [T],
            "topic_partitions": [],
        },
        [(GROUP, "mx-cg", READ), (TOPIC, T, DESCRIBE)],
        GROUP_AUTH,
        _first("error_code"),
    ),
    Row(
        "ConsumerGroupHeartbeat (topic)",
        68,
        0,
        {
            "group_id": "mx-cg",
            "member_id": str(uuid.uuid4()),
            "member_epoch": 0,
            "rebalance_timeout": 5000,
            "subscribed_topic_names": [T],
            "topic_partitions": [],
        },
        [(TOPIC, T, DESCRIBE), (GROUP, "mx-cg", READ)],
        TOPIC_AUTH,
        _first("error_code"),
    ),
    Row(
        "ConsumerGroupDescribe",
        69,
        0,
        {"group_ids": [G], "include_authorized_operations": True},
        [(GROUP, G, DESCRIBE)],
        GROUP_AUTH,
        _first("groups", 0, "error_code"),
    ),
]


def _acl(
    rtype: int,
    name: str,
    op: int,
    perm: int = ALLOW,
    pattern: int = LITERAL,
    principal: str = "User:alice",
) -> dict[str, Any]:
    return {
        "resource_type": rtype,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": principal,
        "host": "*",
        "operation": op,
        "permission_type": perm,
    }


def set_acls(admin: Any, acls: list[dict[str, Any]]) -> None:
    """Replace every ACL by ``acls`` (through the super user's connection)."""
    r = call(admin, 31, 3, {"filters": [ANY_FILTER]})
    assert r.filter_results[0].error_code == 0
    if acls:
        r = call(admin, 30, 3, {"creations": acls})
        assert [c.error_code for c in r.results] == [0] * len(acls), r


def _prefix(name: str) -> str:
    return "kafka-cluster" if name == "kafka-cluster" else name[:3]


CELLS = ["no ACL", "ALLOW", "DENY over ALLOW", "PREFIXED ALLOW", "super user"]


@pytest.fixture(scope="module")
def conns(secure: AclBroker) -> Any:
    secure.broker.create_topic(T)
    admin, alice, root = secure.raw(None), secure.raw("alice"), secure.raw("root")
    # the coordinators' topics first, so that every allowed cell finds its coordinator
    secure.wait_for_coordinators(admin, G, X)
    yield admin, alice, root
    set_acls(admin, [])
    for c in (admin, alice, root):
        c.close()


def _cell_acls(row: Row, cell: str) -> list[dict[str, Any]]:
    primary, rest = row.grants[0], row.grants[1:]
    acls = [_acl(*g) for g in rest + row.others]
    if cell == "ALLOW":
        acls.append(_acl(*primary))
    elif cell == "DENY over ALLOW":
        acls += [_acl(*primary), _acl(primary[0], primary[1], ALL, DENY)]
    elif cell == "PREFIXED ALLOW":
        if primary[0] == CLUSTER:  # the cluster has one name: LITERAL only
            acls.append(_acl(*primary))
        else:
            acls.append(_acl(primary[0], _prefix(primary[1]), primary[2], pattern=PREFIXED))
    return acls


@pytest.mark.parametrize("row", ROWS, ids=str)
def test_acl_matrix(conns: Any, row: Row) -> None:
    admin, alice, root = conns
    got = {}
    for cell in CELLS:
        set_acls(admin, [] if cell == "super user" else _cell_acls(row, cell))
        who = root if cell == "super user" else alice
        if row.raw is not None:
            body = messages.build(messages.request_type(row.key, row.version), row.body)
            who.send(row.key, row.version, body)
            got[cell] = row.raw(who.read_frame())
        else:
            got[cell] = row.error(call(who, row.key, row.version, row.body))
    expected_denied = {"no ACL", "DENY over ALLOW"}
    for cell, code in got.items():
        if cell in expected_denied:
            assert code == row.denied, (row.api, cell, got)
        else:
            assert code != row.denied, (row.api, cell, got)
