"""Injected error responses are valid Kafka responses at every version the broker serves."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkalite.protocol import messages
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.server.apis import build_api_table
from kafkalite.testing.faults import error_response

_TID = uuid.uuid4()
_PARTS = [{"partition_index": 0, "partition": 0, "index": 0, "fetch_offset": 0, "records": b""}]
_TOPIC = {"name": "t", "topic": "t", "topic_id": _TID, "partitions": _PARTS}

#: one request per API, as a superset dict (fields a version lacks are dropped)
REQUESTS: dict[int, dict[str, Any]] = {
    ApiKey.PRODUCE: {
        "acks": -1,
        "timeout": 1000,
        "topic_data": [{"name": "t", "partition_data": _PARTS}],
    },
    ApiKey.FETCH: {"topics": [_TOPIC], "forgotten_topics_data": []},
    ApiKey.LIST_OFFSETS: {"topics": [_TOPIC]},
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
}

_TABLE = build_api_table(None)
CASES = [
    (key, v)
    for key in REQUESTS
    for v in range(_TABLE[key].min_version, _TABLE[key].max_version + 1)
]


def _error_codes(obj: Any) -> list[int]:
    """Every error_code field in a decoded kio response, depth first."""
    out: list[int] = []
    if isinstance(obj, tuple):
        for x in obj:
            out += _error_codes(x)
    elif hasattr(obj, "__dataclass_fields__"):
        for name in obj.__dataclass_fields__:
            value = getattr(obj, name)
            if name == "error_code":
                out.append(int(value))
            else:
                out += _error_codes(value)
    return out


@pytest.mark.parametrize(
    ("api_key", "version"), CASES, ids=[f"{ApiKey(k).name}-v{v}" for k, v in CASES]
)
def test_every_error_field_carries_the_injected_code(api_key: int, version: int) -> None:
    req = messages.build(messages.request_type(api_key, version), REQUESTS[api_key])
    body = error_response(api_key, version, req, 7)
    assert body is not None
    wire = messages.encode_response(api_key, version, body)
    resp = messages.decode_response(api_key, version, wire, 0)
    codes = _error_codes(resp)
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
