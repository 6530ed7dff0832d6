"""The straight-line Produce parser and response writer against kio, for every version.

Requests are encoded by kio and parsed by both; responses are encoded by both
from the same values and must be byte-identical.
"""

from __future__ import annotations

import datetime
import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from kafkalite.protocol import messages
from kafkalite.protocol.headers import MalformedRequest
from kafkalite.protocol.produce import (
    FIRST_TOPIC_ID,
    MAX_VERSION,
    MIN_VERSION,
    encode_produce_response,
    parse_produce_request,
)

VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)
ERROR_CODES = sorted(int(e) for e in ErrorCode)

i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(min_size=0, max_size=30)
nullable_text = st.none() | st.text(max_size=40)

partition_data = st.fixed_dictionaries(
    {"index": i32, "records": st.none() | st.binary(max_size=300)}
)
topic_ids = st.uuids()
topic_data = st.fixed_dictionaries(
    {"name": names, "topic_id": topic_ids, "partition_data": st.lists(partition_data, max_size=4)}
)
requests = st.fixed_dictionaries(
    {
        "transactional_id": nullable_text,
        "acks": i16,
        "timeout": st.integers(0, 2**31 - 1),
        "topic_data": st.lists(topic_data, max_size=4),
    }
)

partition_response = st.tuples(
    i32,  # index
    st.sampled_from(ERROR_CODES),
    i64,  # base offset
    st.just(-1) | st.integers(0, 2**41),  # log append time (kio goes through datetime)
    i64,  # log start offset
    st.lists(st.tuples(i32, nullable_text), max_size=3),  # record errors
    nullable_text,  # error message
)
responses = st.lists(
    st.tuples(names, st.lists(partition_response, max_size=4)),
    max_size=4,
)
responses_by_id = st.lists(
    st.tuples(topic_ids, st.lists(partition_response, max_size=4)),
    max_size=4,
)


def _kio_request_bytes(version: int, body: dict[str, Any]) -> bytes:
    return messages.encode(messages.build(messages.request_type(0, version), body))


def _same_request(ours: Any, theirs: Any) -> None:
    assert ours.transactional_id == theirs.transactional_id
    assert ours.acks == int(theirs.acks)
    # exact milliseconds (total_seconds() * 1000 would turn 1001 into 1000.99...)
    assert ours.timeout_ms == theirs.timeout // datetime.timedelta(milliseconds=1)
    assert len(ours.topic_data) == len(theirs.topic_data)
    for t, k in zip(ours.topic_data, theirs.topic_data, strict=True):
        if hasattr(k, "topic_id"):  # v13+
            # kio reads the zero id as None
            assert (t.name, t.topic_id) == ("", k.topic_id or uuid.UUID(int=0))
        else:
            assert (t.name, t.topic_id) == (k.name, None)
        assert len(t.partition_data) == len(k.partition_data)
        for p, kp in zip(t.partition_data, k.partition_data, strict=True):
            assert p.index == int(kp.index)
            if kp.records is None:
                assert p.records is None
            else:
                assert bytes(p.records) == bytes(kp.records)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=150, deadline=None)
@given(body=requests)
def test_parser_matches_kio_decoder(version, body):
    raw = _kio_request_bytes(version, body)
    ours = parse_produce_request(raw, 0, version)
    theirs = messages.decode_request(0, version, raw, 0)
    _same_request(ours, theirs)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=150, deadline=None)
@given(data=st.data(), throttle=st.integers(0, 2**31 - 1))
def test_writer_matches_kio_encoder(version, data, throttle):
    by_id = version >= FIRST_TOPIC_ID
    topics = data.draw(responses_by_id if by_id else responses)
    kio_body = {
        "throttle_time": throttle,
        "responses": [
            {
                ("topic_id" if by_id else "name"): name,
                "partition_responses": [
                    {
                        "index": index,
                        "error_code": error,
                        "base_offset": base,
                        "log_append_time": append_time,
                        "log_start_offset": start,
                        "record_errors": [
                            {"batch_index": i, "batch_index_error_message": m}
                            for i, m in record_errors
                        ],
                        "error_message": message,
                    }
                    for index, error, base, append_time, start, record_errors, message in parts
                ],
            }
            for name, parts in topics
        ],
    }
    assert encode_produce_response(version, topics, throttle) == messages.encode_response(
        0, version, kio_body
    )


@pytest.mark.parametrize("version", range(9, MAX_VERSION + 1))
def test_parser_skips_unknown_tagged_fields(version):
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout": 1500,
        "topic_data": [{"name": "t", "partition_data": [{"index": 3, "records": b"abc"}]}],
    }
    raw = _kio_request_bytes(version, body)
    # the last three bytes are the partition's, the topic's and the request's empty tag sections
    assert raw.endswith(b"\x00\x00\x00")
    tag = b"\x01\x07\x02zz"  # one tagged field: tag 7, two bytes
    tagged = raw[:-3] + tag + tag + tag
    # kio rejects unknown tags; Kafka (and this parser) skip them, as KIP-482 intends
    theirs = messages.decode_request(0, version, raw, 0)
    for buf in (raw, tagged):
        req = parse_produce_request(buf, 0, version)
        _same_request(req, theirs)
        assert bytes(req.topic_data[0].partition_data[0].records) == b"abc"


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_truncated_or_garbled_requests_are_malformed(version):
    body = {
        "transactional_id": "tx",
        "acks": -1,
        "timeout": 1000,
        "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": b"x" * 50}]}],
    }
    raw = _kio_request_bytes(version, body)
    for cut in range(len(raw) - 1):
        with pytest.raises(MalformedRequest):
            parse_produce_request(raw[:cut], 0, version)
    # a topic name that is not UTF-8
    at = raw.index(b"orders")
    with pytest.raises(MalformedRequest):
        parse_produce_request(raw[:at] + b"\xff\xfe" + raw[at + 2 :], 0, version)


def test_records_are_views_into_the_frame():
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout": 1,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"payload"}]}],
    }
    raw = struct.pack(">i", 7) + _kio_request_bytes(7, body)
    rec = parse_produce_request(raw, 4, 7).topic_data[0].partition_data[0].records
    assert isinstance(rec, memoryview) and rec.obj is raw


def _one_topic(version: int, name: str = "orders") -> bytes:
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout": 1000,
        "topic_data": [{"name": name, "partition_data": [{"index": 0, "records": b"x"}]}],
    }
    return _kio_request_bytes(version, body)


@pytest.mark.parametrize(
    ("version", "count"),
    [
        (8, struct.pack(">i", -1)),  # null topic_data: not nullable in any version
        (8, struct.pack(">i", -2)),
        (8, struct.pack(">i", 2**31 - 1)),  # more topics than bytes (Kafka's check)
        (9, b"\x00"),  # compact null
        (9, b"\xff\xff\xff\xff\x0f"),  # 2**32-2 topics
    ],
)
def test_null_negative_or_oversized_topic_count_is_malformed(version, count):
    raw = _one_topic(version)
    at = (2 if version < 9 else 1) + 6  # after transactional_id (null), acks, timeout
    width = 4 if version < 9 else 1
    with pytest.raises(MalformedRequest):
        parse_produce_request(raw[:at] + count + raw[at + width :], 0, version)


@pytest.mark.parametrize("version", [3, 9])
def test_null_partition_count_is_malformed(version):
    raw = _one_topic(version)
    at = raw.index(b"orders") + len(b"orders")
    null = struct.pack(">i", -1) if version < 9 else b"\x00"
    width = 4 if version < 9 else 1
    with pytest.raises(MalformedRequest):
        parse_produce_request(raw[:at] + null + raw[at + width :], 0, version)


def test_topic_name_longer_than_32767_bytes_is_malformed():
    # Kafka's generated readers refuse it ("string field name had invalid length")
    parse_produce_request(_one_topic(9, "t" * 32767), 0, 9)
    with pytest.raises(MalformedRequest):
        parse_produce_request(_one_topic(9, "t" * 32768), 0, 9)
