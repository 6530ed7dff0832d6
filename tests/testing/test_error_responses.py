"""Error responses are valid Kafka responses at every version the broker serves.

Every client API's table row has an error-response builder (``ApiSpec.error_response``,
Kafka's ``AbstractRequest.getErrorResponse``); ``kafka_faults.error`` answers with it.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from typing import Any

import pytest

from kafkalite.protocol import messages
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.apis import build_api_table, build_broker_api_table
from kafkalite.testing.faults import error_response
from kafkalite.testing.fuzz.values import ValueBuilder
from tests.server.raw_client import RawClient

_TID = uuid.uuid4()
_PARTS = [{"partition_index": 0, "partition": 0, "index": 0, "fetch_offset": 0, "records": b""}]
_TOPIC = {"name": "t", "topic": "t", "topic_id": _TID, "partitions": _PARTS}

#: one request per API, as a superset dict (fields a version lacks are dropped)
REQUESTS: dict[int, dict[str, Any]] = {
    ApiKey.PRODUCE: {
        "acks": -1,
        "timeout": 1000,
        "topic_data": [{"name": "t", "topic_id": uuid.UUID(int=7), "partition_data": _PARTS}],
    },
    ApiKey.FETCH: {"topics": [_TOPIC], "forgotten_topics_data": []},
    ApiKey.LIST_OFFSETS: {"topics": [_TOPIC]},
    ApiKey.OFFSET_FOR_LEADER_EPOCH: {"replica_id": -1, "topics": [_TOPIC]},
    ApiKey.METADATA: {"topics": [{"name": "t"}]},
    ApiKey.OFFSET_COMMIT: {"group_id": "g", "topics": [_TOPIC]},
    ApiKey.OFFSET_FETCH: {
        "group_id": "g",
        "topics": [{"name": "t", "topic_id": _TID, "partition_indexes": [0, 1]}],
        "groups": [
            {"group_id": "g", "topics": [{"name": "t", "topic_id": _TID, "partition_indexes": [0]}]}
        ],
    },
    ApiKey.FIND_COORDINATOR: {"key": "g", "coordinator_keys": ["g", "h"]},
    ApiKey.JOIN_GROUP: {"group_id": "g", "member_id": "m", "protocols": []},
    ApiKey.HEARTBEAT: {"group_id": "g", "member_id": "m"},
    ApiKey.LEAVE_GROUP: {"group_id": "g", "member_id": "m", "members": [{"member_id": "m"}]},
    ApiKey.SYNC_GROUP: {"group_id": "g", "member_id": "m", "assignments": []},
    ApiKey.INIT_PRODUCER_ID: {"transactional_id": None, "transaction_timeout": 1000},
    ApiKey.API_VERSIONS: {"client_software_name": "t", "client_software_version": "1"},
    ApiKey.CREATE_TOPICS: {
        "topics": [
            {"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": []},
            {"name": "u", "num_partitions": -1, "replication_factor": -1, "assignments": []},
        ],
        "timeout": 1000,
    },
    ApiKey.DELETE_TOPICS: {
        "topic_names": ["t", "u"],
        "topics": [{"name": "t", "topic_id": _TID}, {"name": None, "topic_id": _TID}],
        "timeout": 1000,
    },
    ApiKey.DELETE_RECORDS: {"topics": [_TOPIC], "timeout": 1000},
    ApiKey.DESCRIBE_ACLS: {
        "resource_type_filter": 2,
        "resource_name_filter": "t",
        "pattern_type_filter": 3,
        "principal_filter": None,
        "host_filter": None,
        "operation": 3,
        "permission_type": 3,
    },
    ApiKey.CREATE_ACLS: {
        "creations": [
            {
                "resource_type": 2,
                "resource_name": "t",
                "resource_pattern_type": 3,
                "principal": "User:a",
                "host": "*",
                "operation": 3,
                "permission_type": 3,
            }
        ]
    },
    ApiKey.DELETE_ACLS: {
        "filters": [
            {
                "resource_type_filter": 1,
                "resource_name_filter": None,
                "pattern_type_filter": 1,
                "principal_filter": None,
                "host_filter": None,
                "operation": 1,
                "permission_type": 1,
            }
        ]
    },
    ApiKey.DESCRIBE_CONFIGS: {
        "resources": [
            {"resource_type": 2, "resource_name": "t", "configuration_keys": None},
            {"resource_type": 4, "resource_name": "0", "configuration_keys": ["x"]},
        ]
    },
    ApiKey.ALTER_CONFIGS: {"resources": [{"resource_type": 2, "resource_name": "t"}]},
    ApiKey.INCREMENTAL_ALTER_CONFIGS: {"resources": [{"resource_type": 4, "resource_name": ""}]},
    ApiKey.DESCRIBE_LOG_DIRS: {"topics": [{"topic": "t", "partitions": [0]}]},
    ApiKey.CREATE_PARTITIONS: {
        "topics": [{"name": "t", "count": 2, "assignments": None}],
        "timeout": 1000,
    },
    ApiKey.DESCRIBE_CLUSTER: {},
    ApiKey.DESCRIBE_GROUPS: {"groups": ["g", "h"]},
    ApiKey.LIST_GROUPS: {},
    ApiKey.DELETE_GROUPS: {"groups_names": ["g", "h"]},
    ApiKey.OFFSET_DELETE: {"group_id": "g", "topics": [_TOPIC]},
    ApiKey.CONSUMER_GROUP_HEARTBEAT: {
        "group_id": "g",
        "member_id": "m",
        "member_epoch": 0,
        "rebalance_timeout": 1000,
        "subscribed_topic_names": ["t"],
        "topic_partitions": [],
    },
    ApiKey.CONSUMER_GROUP_DESCRIBE: {
        "group_ids": ["g", "h"],
        "include_authorized_operations": False,
    },
    ApiKey.SHARE_GROUP_HEARTBEAT: {
        "group_id": "g",
        "member_id": "m",
        "member_epoch": 0,
        "subscribed_topic_names": ["t"],
    },
    ApiKey.SHARE_GROUP_DESCRIBE: {"group_ids": ["g", "h"], "include_authorized_operations": False},
    ApiKey.SHARE_FETCH: {
        "group_id": "g",
        "member_id": "m",
        "share_session_epoch": 0,
        "max_wait": 0,
        "min_bytes": 1,
        "max_records": 10,
        "batch_size": 10,
        "topics": [],
        "forgotten_topics_data": [],
    },
    ApiKey.SHARE_ACKNOWLEDGE: {
        "group_id": "g",
        "member_id": "m",
        "share_session_epoch": 1,
        "topics": [],
    },
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: {
        "groups": [{"group_id": "g", "topics": [{"topic_name": "t", "partitions": [0]}]}]
    },
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: {
        "group_id": "g",
        "topics": [{"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 0}]}],
    },
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: {"group_id": "g", "topics": [{"topic_name": "t"}]},
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: {
        "group_id": "g",
        "topics": [
            {
                "topic_id": _TID,
                "partitions": [{"partition": 0, "state_epoch": 0, "start_offset": 0}],
            }
        ],
    },
    ApiKey.READ_SHARE_GROUP_STATE: {
        "group_id": "g",
        "topics": [{"topic_id": _TID, "partitions": [{"partition": 0, "leader_epoch": 0}]}],
    },
    ApiKey.WRITE_SHARE_GROUP_STATE: {
        "group_id": "g",
        "topics": [
            {
                "topic_id": _TID,
                "partitions": [
                    {
                        "partition": 0,
                        "state_epoch": 0,
                        "leader_epoch": 0,
                        "start_offset": 0,
                        "delivery_complete_count": 0,
                        "state_batches": [],
                    }
                ],
            }
        ],
    },
    ApiKey.DELETE_SHARE_GROUP_STATE: {
        "group_id": "g",
        "topics": [{"topic_id": _TID, "partitions": [{"partition": 0}]}],
    },
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: {
        "group_id": "g",
        "topics": [{"topic_id": _TID, "partitions": [{"partition": 0, "leader_epoch": 0}]}],
    },
    ApiKey.ADD_PARTITIONS_TO_TXN: {
        "v3_and_below_transactional_id": "x",
        "v3_and_below_producer_id": 1,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": "t", "partitions": [0, 1]}],
        "transactions": [
            {
                "transactional_id": "x",
                "producer_id": 1,
                "producer_epoch": 0,
                "verify_only": False,
                "topics": [{"name": "t", "partitions": [0]}],
            }
        ],
    },
    ApiKey.ADD_OFFSETS_TO_TXN: {
        "transactional_id": "x",
        "producer_id": 1,
        "producer_epoch": 0,
        "group_id": "g",
    },
    ApiKey.END_TXN: {"transactional_id": "x", "producer_id": 1, "producer_epoch": 0},
    ApiKey.WRITE_TXN_MARKERS: {
        "markers": [
            {
                "producer_id": 1,
                "producer_epoch": 0,
                "transaction_result": True,
                "topics": [{"name": "t", "partition_indexes": [0, 1]}],
                "coordinator_epoch": 0,
            }
        ]
    },
    ApiKey.TXN_OFFSET_COMMIT: {
        "transactional_id": "x",
        "group_id": "g",
        "producer_id": 1,
        "producer_epoch": 0,
        "member_id": "",
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}],
    },
    ApiKey.DESCRIBE_PRODUCERS: {"topics": [{"name": "t", "partition_indexes": [0, 1]}]},
    ApiKey.DESCRIBE_TRANSACTIONS: {"transactional_ids": ["x", "y"]},
    ApiKey.LIST_TRANSACTIONS: {},
    ApiKey.ELECT_LEADERS: {
        "topic_partitions": [{"topic": "t", "partitions": [0, 1]}],
        "timeout": 1000,
    },
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: {
        "timeout": 1000,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [1]}]}],
    },
    ApiKey.LIST_PARTITION_REASSIGNMENTS: {
        "timeout": 1000,
        "topics": [{"name": "t", "partition_indexes": [0]}],
    },
    ApiKey.DESCRIBE_CLIENT_QUOTAS: {
        "components": [{"entity_type": "client-id", "match_type": 2, "match": None}],
        "strict": False,
    },
    ApiKey.ALTER_CLIENT_QUOTAS: {
        "entries": [
            {
                "entity": [{"entity_type": "client-id", "entity_name": "c"}],
                "ops": [{"key": "producer_byte_rate", "value": 1.0, "remove": False}],
            }
        ],
        "validate_only": False,
    },
    ApiKey.SASL_HANDSHAKE: {"mechanism": "PLAIN"},
    ApiKey.SASL_AUTHENTICATE: {"auth_bytes": b"\x00u\x00p"},
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: {"users": [{"name": "alice"}]},
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: {
        "deletions": [{"name": "alice", "mechanism": 1}],
        "upsertions": [],
    },
    ApiKey.UPDATE_FEATURES: {
        "timeout": 1000,
        "feature_updates": [
            {"feature": "group.version", "max_version_level": 1, "allow_downgrade": False}
        ],
    },
    ApiKey.ALTER_REPLICA_LOG_DIRS: {
        "dirs": [{"path": "/d", "topics": [{"name": "t", "partitions": [0, 1]}]}]
    },
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: {"client_instance_id": None},
    ApiKey.PUSH_TELEMETRY: {
        "client_instance_id": None,
        "subscription_id": 1,
        "terminating": False,
        "compression_type": 0,
        "metrics": b"",
    },
    ApiKey.LIST_CONFIG_RESOURCES: {"resource_types": [16]},
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: {
        "topics": [{"name": "t"}, {"name": "u"}],
        "response_partition_limit": 10,
    },
}

_TABLE = build_api_table(None)
CASES = [
    (key, v)
    for key in REQUESTS
    for v in range(_TABLE[key].min_version, _TABLE[key].max_version + 1)
]
#: versions whose response has no field for an error (Kafka's error response is empty)
NO_ERROR_FIELD = {(ApiKey.DESCRIBE_LOG_DIRS, 1), (ApiKey.DESCRIBE_LOG_DIRS, 2)}


def test_every_client_api_has_an_error_response_and_a_request_here() -> None:
    assert set(REQUESTS) == set(_TABLE)
    assert all(spec.error_response is not None for spec in _TABLE.values())


def _as_received(api_key: int, version: int, entity: Any) -> Any:
    """``entity`` as the request channel hands it to the handler: encoded, then decoded
    by the API's own decoder (Produce, Fetch) or kio."""
    body = messages.encode(entity)
    decoder = _TABLE[api_key].decoder
    if decoder is not None:
        return decoder(body, 0, version)
    return messages.decode_request(api_key, version, body, 0)


def _error_codes(obj: Any) -> list[int]:
    """Every error_code field in a decoded kio response, depth first."""
    out: list[int] = []
    if isinstance(obj, tuple):
        for x in obj:
            out += _error_codes(x)
    elif hasattr(obj, "__dataclass_fields__"):
        for name in obj.__dataclass_fields__:
            value = getattr(obj, name)
            if name in ("error_code", "partition_error_code"):
                out.append(int(value))
            else:
                out += _error_codes(value)
    return out


@pytest.mark.parametrize(
    ("api_key", "version"), CASES, ids=[f"{ApiKey(k).name}-v{v}" for k, v in CASES]
)
def test_every_error_field_carries_the_injected_code(api_key: int, version: int) -> None:
    entity = messages.build(messages.request_type(api_key, version), REQUESTS[api_key])
    req = _as_received(api_key, version, entity)
    body = error_response(api_key, version, req, 7)
    assert body is not None
    wire = messages.encode_response(api_key, version, body)
    resp = messages.decode_response(api_key, version, wire, 0)
    codes = _error_codes(resp)
    if (api_key, version) in NO_ERROR_FIELD:
        assert codes == []
        return
    assert 7 in codes
    # Fetch keeps a zero top-level code (partition errors); Metadata v13's top level too
    assert all(c in (0, 7) for c in codes)
    assert codes.count(0) <= 1


def test_fetch_session_errors_are_top_level():
    req = messages.build(messages.request_type(ApiKey.FETCH, 12), REQUESTS[ApiKey.FETCH])
    body = error_response(ApiKey.FETCH, 12, req, 70)  # FETCH_SESSION_ID_NOT_FOUND
    assert body is not None and body["error_code"] == 70 and body["responses"] == []


def test_acks0_produce_and_unknown_apis_have_no_error_response():
    req = messages.build(
        messages.request_type(ApiKey.PRODUCE, 9), {**REQUESTS[ApiKey.PRODUCE], "acks": 0}
    )
    assert error_response(ApiKey.PRODUCE, 9, req, 6) is None
    assert error_response(ApiKey.LEADER_AND_ISR, 7, object(), 6) is None


@pytest.mark.parametrize(
    ("api_key", "version"), CASES, ids=[f"{ApiKey(k).name}-v{v}" for k, v in CASES]
)
def test_error_responses_to_random_requests_encode_with_the_code_everywhere(
    api_key: int, version: int
) -> None:
    """Requests from kio's schemas with edge values (null and empty arrays, long names)."""
    cls = messages.request_type(api_key, version)
    built = 0
    for seed in range(40):
        values = ValueBuilder(random.Random(seed))
        try:
            req = _as_received(api_key, version, values.build(cls))
        except (ValueError, OverflowError, TypeError):  # a value kio's writer refuses
            continue
        built += 1
        body = error_response(api_key, version, req, 7)
        if body is None:  # acks=0 Produce only
            assert api_key == ApiKey.PRODUCE and req.acks == 0
            continue
        wire = messages.encode_response(api_key, version, body)
        codes = _error_codes(messages.decode_response(api_key, version, wire, 0))
        assert all(c in (0, 7) for c in codes)
        assert codes.count(0) <= 1
    assert built >= 10


#: every API the broker advertises to clients (the controller's inter-broker APIs aside)
CLIENT_APIS = sorted(k for k, s in build_broker_api_table(None).items() if not s.inter_broker)


@pytest.mark.parametrize("api_key", CLIENT_APIS, ids=[ApiKey(k).name for k in CLIENT_APIS])
def test_kafka_faults_error_answers_every_advertised_client_api_over_tcp(
    kafka_broker, kafka_faults, monkeypatch, api_key: int
) -> None:
    """``kafka_faults.error(api, code)``: the code comes back over the wire, the handler never runs."""
    table = kafka_broker.kafka.channel.api_table
    spec = table[api_key]
    assert not spec.inter_broker
    ran: list[Any] = []
    monkeypatch.setitem(
        table, api_key, dataclasses.replace(spec, handler=lambda ctx, req: ran.append(req))
    )
    code = int(ErrorCode.kafka_storage_error)
    client_id = f"every-api-{api_key}"
    rule = kafka_faults.error(api_key, code, client_id=client_id)
    version = spec.max_version
    req = messages.build(messages.request_type(api_key, version), REQUESTS[api_key])
    c = RawClient.to(kafka_broker.bootstrap_servers)
    try:
        cid = c.send(api_key, version, req, client_id=client_id)
        got, resp = c.read_response(api_key, version)
    finally:
        c.close()
    assert got == cid
    assert code in _error_codes(resp)
    assert rule.hits == 1
    assert ran == []
