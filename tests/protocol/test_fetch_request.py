"""The straight-line Fetch request parser against kio, for every version the broker serves.

Requests are built and encoded by kio from generated values and must parse to
the same values; unknown tagged fields are skipped at every level, and every
truncation or garbled length is a MalformedRequest (the connection is closed).
"""

from __future__ import annotations

import datetime
import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol import messages
from kafkalite.protocol.fetch_request import (
    MAX_VERSION,
    MIN_VERSION,
    FetchRequest,
    parse_fetch_request,
)
from kafkalite.protocol.headers import MalformedRequest
from kafkalite.protocol.varint import encode_unsigned_varint
from kafkalite.server.apis import build_api_table

VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)
FLEXIBLE = range(12, MAX_VERSION + 1)
ZERO_UUID = uuid.UUID(int=0)

i8 = st.integers(-(2**7), 2**7 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(max_size=30)
topic_ids = st.uuids() | st.just(ZERO_UUID)

partitions = st.fixed_dictionaries(
    {
        "partition": i32,
        "current_leader_epoch": i32,
        "fetch_offset": i64,
        "last_fetched_epoch": i32,
        "log_start_offset": i64,
        "partition_max_bytes": i32,
    }
)
topics = st.fixed_dictionaries(
    {"topic": names, "topic_id": topic_ids, "partitions": st.lists(partitions, max_size=4)}
)
forgotten = st.fixed_dictionaries(
    {"topic": names, "topic_id": topic_ids, "partitions": st.lists(i32, max_size=5)}
)
# every field of every version: messages.build drops what a version lacks
requests = st.fixed_dictionaries(
    {
        "cluster_id": st.none() | names,
        "replica_id": i32,
        "replica_state": st.fixed_dictionaries({"replica_id": i32, "replica_epoch": i64}),
        "max_wait": st.integers(0, 2**31 - 1),
        "min_bytes": i32,
        "max_bytes": i32,
        "isolation_level": i8,
        "session_id": i32,
        "session_epoch": i32,
        "topics": st.lists(topics, max_size=4),
        "forgotten_topics_data": st.lists(forgotten, max_size=3),
        "rack_id": names,
    }
)


def _kio(version: int, body: dict[str, Any]) -> Any:
    return messages.build(messages.request_type(1, version), body)


def _same(ours: FetchRequest, theirs: Any, version: int) -> None:
    """Every field of kio's entity, with Kafka's default where the version lacks it."""
    state = getattr(theirs, "replica_state", None)
    assert ours.replica_id == (theirs.replica_id if state is None else state.replica_id)
    assert ours.replica_epoch == (-1 if state is None else state.replica_epoch)
    assert ours.max_wait_ms == theirs.max_wait // datetime.timedelta(milliseconds=1)
    assert ours.min_bytes == theirs.min_bytes
    assert ours.max_bytes == theirs.max_bytes
    assert ours.isolation_level == theirs.isolation_level
    assert ours.session_id == getattr(theirs, "session_id", 0)
    assert ours.session_epoch == getattr(theirs, "session_epoch", -1)
    assert ours.rack_id == getattr(theirs, "rack_id", "")
    assert ours.cluster_id == getattr(theirs, "cluster_id", None)
    by_id = version >= 13
    assert len(ours.topics) == len(theirs.topics)
    for t, kt in zip(ours.topics, theirs.topics, strict=True):
        if by_id:  # kio reads the zero uuid as None; Kafka's ZERO_UUID is a (unknown) topic id
            assert (t.topic, t.topic_id) == (None, kt.topic_id or ZERO_UUID)
        else:
            assert (t.topic, t.topic_id) == (kt.topic, None)
        assert len(t.partitions) == len(kt.partitions)
        for p, kp in zip(t.partitions, kt.partitions, strict=True):
            assert p.partition == kp.partition
            assert p.current_leader_epoch == getattr(kp, "current_leader_epoch", -1)
            assert p.fetch_offset == kp.fetch_offset
            assert p.last_fetched_epoch == getattr(kp, "last_fetched_epoch", -1)
            assert p.log_start_offset == getattr(kp, "log_start_offset", -1)
            assert p.partition_max_bytes == kp.partition_max_bytes
    kforgotten = getattr(theirs, "forgotten_topics_data", ())
    assert len(ours.forgotten_topics_data) == len(kforgotten)
    for f, kf in zip(ours.forgotten_topics_data, kforgotten, strict=True):
        if by_id:
            assert (f.topic, f.topic_id) == (None, kf.topic_id or ZERO_UUID)
        else:
            assert (f.topic, f.topic_id) == (kf.topic, None)
        assert f.partitions == list(kf.partitions)


def test_parses_every_version_the_broker_advertises() -> None:
    spec = build_api_table(None)[1]
    assert MIN_VERSION <= spec.min_version and spec.max_version <= MAX_VERSION
    assert spec.decoder is parse_fetch_request


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=120, deadline=None)
@given(body=requests)
def test_parser_matches_kio_encoder(version: int, body: dict[str, Any]) -> None:
    entity = _kio(version, body)
    raw = messages.encode(entity)
    ours = parse_fetch_request(raw, 0, version)
    _same(ours, entity, version)
    _same(ours, messages.decode_request(1, version, raw, 0), version)


def test_body_is_read_from_its_offset_in_the_frame() -> None:
    body = {"max_wait": 500, "min_bytes": 1, "topics": [{"topic": "t", "partitions": []}]}
    raw = messages.encode(_kio(12, body))
    req = parse_fetch_request(b"header bytes" + raw, 12, 12)
    assert req.max_wait_ms == 500 and req.topics[0].topic == "t"


# ---------------------------------------------------------------- tagged fields


def _compact(s: str) -> bytes:
    b = s.encode()
    return encode_unsigned_varint(len(b) + 1) + b


UNKNOWN = [(7, b"zz"), (9, b"")]  # tags no Fetch version defines


def _tags(fields: list[tuple[int, bytes]]) -> bytes:
    return encode_unsigned_varint(len(fields)) + b"".join(
        encode_unsigned_varint(t) + encode_unsigned_varint(len(v)) + v for t, v in fields
    )


def _flexible_request(
    version: int,
    extra: list[tuple[int, bytes]],
    request_tags: list[tuple[int, bytes]] | None = None,
) -> bytes:
    """A v12+ request written field by field from the schema, with ``extra`` tagged
    fields in every tag section (request, replica_state, topic, partition, forgotten).
    ``request_tags`` replaces the request's own tag section."""
    out = bytearray()
    if version < 15:
        out += struct.pack(">i", 5)  # replica_id
    out += struct.pack(">iiibii", 250, 1, 1 << 20, 1, 77, 3)
    out += encode_unsigned_varint(2)  # one topic
    out += uuid.UUID(int=42).bytes if version >= 13 else _compact("orders")
    out += encode_unsigned_varint(2)  # one partition
    out += struct.pack(">iiqiqi", 4, 6, 1000, 5, 10, 65536) + _tags(extra)
    out += _tags(extra)
    out += encode_unsigned_varint(2)  # one forgotten topic
    out += uuid.UUID(int=43).bytes if version >= 13 else _compact("gone")
    out += encode_unsigned_varint(3) + struct.pack(">ii", 1, 2) + _tags(extra)
    out += _compact("rack-a")
    if request_tags is None:
        request_tags = [(0, _compact("cluster-x"))]
        if version >= 15:
            request_tags.append((1, struct.pack(">iq", 5, 9) + _tags(extra)))
        request_tags += extra
    out += _tags(request_tags)
    return bytes(out)


@pytest.mark.parametrize("version", FLEXIBLE)
def test_parser_skips_unknown_tagged_fields(version: int) -> None:
    plain = _flexible_request(version, [])
    body = {
        "cluster_id": "cluster-x",
        "replica_id": 5,
        "replica_state": {"replica_id": 5, "replica_epoch": 9},
        "max_wait": 250,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 1,
        "session_id": 77,
        "session_epoch": 3,
        "topics": [
            {
                "topic": "orders",
                "topic_id": uuid.UUID(int=42),
                "partitions": [
                    {
                        "partition": 4,
                        "current_leader_epoch": 6,
                        "fetch_offset": 1000,
                        "last_fetched_epoch": 5,
                        "log_start_offset": 10,
                        "partition_max_bytes": 65536,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [
            {"topic": "gone", "topic_id": uuid.UUID(int=43), "partitions": [1, 2]}
        ],
        "rack_id": "rack-a",
    }
    entity = _kio(version, body)
    assert plain == messages.encode(entity)  # the hand-written request is the real layout
    for raw in (plain, _flexible_request(version, UNKNOWN)):
        _same(parse_fetch_request(raw, 0, version), entity, version)


def test_replica_state_tag_is_unknown_before_v15() -> None:
    raw = _flexible_request(14, [(1, struct.pack(">iq", 99, 9) + b"\x00")])
    req = parse_fetch_request(raw, 0, 14)
    assert (req.replica_id, req.replica_epoch) == (5, -1)


# ---------------------------------------------------------------- bad input


def _full(version: int) -> bytes:
    body = {
        "cluster_id": "c",
        "replica_id": 3,
        "replica_state": {"replica_id": 3, "replica_epoch": 2},
        "max_wait": 500,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 1,
        "session_id": 8,
        "session_epoch": 2,
        "topics": [
            {
                "topic": name,
                "topic_id": uuid.UUID(int=i + 1),
                "partitions": [
                    {"partition": p, "fetch_offset": 10, "partition_max_bytes": 99} for p in (0, 1)
                ],
            }
            for i, name in enumerate(["orders", "payments"])
        ],
        "forgotten_topics_data": [
            {"topic": "old", "topic_id": uuid.UUID(int=9), "partitions": [7]}
        ],
        "rack_id": "r1",
    }
    return messages.encode(_kio(version, body))


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_is_malformed(version: int) -> None:
    raw = _full(version)
    parse_fetch_request(raw, 0, version)
    for cut in range(len(raw)):
        with pytest.raises(MalformedRequest):
            parse_fetch_request(raw[:cut], 0, version)


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_topic_name_that_is_not_utf8_is_malformed(version: int) -> None:
    raw = _full(version)
    at = raw.index(b"orders")
    with pytest.raises(MalformedRequest):
        parse_fetch_request(raw[:at] + b"\xff\xfe" + raw[at + 2 :], 0, version)


def _empty(version: int) -> bytes:
    """No topics, no forgotten topics, empty rack_id, no tagged fields."""
    raw = messages.encode(_kio(version, {"max_wait": 0, "min_bytes": 1}))
    assert raw.endswith(b"\x00\x00\x00\x00" if version < 12 else b"\x01\x01\x01\x00")
    return raw


def _with_topic_count(version: int, count: bytes) -> bytes:
    """A request whose topics array length is ``count`` (it follows the fixed fields)."""
    raw = _full(version) if version < 12 else _flexible_request(version, [])
    at = 25 if version < 15 else 21
    old = 4 if version < 12 else 1
    return raw[:at] + count + raw[at + old :]


@pytest.mark.parametrize(
    ("version", "raw"),
    [
        # a null or negative topics array
        (11, _with_topic_count(11, struct.pack(">i", -1))),
        (11, _with_topic_count(11, struct.pack(">i", -2))),
        (12, _with_topic_count(12, b"\x00")),  # compact length 0: null
        # a varint that never ends
        (12, _with_topic_count(12, b"\xff" * 6)),
        # more topics than the frame holds
        (7, _with_topic_count(7, struct.pack(">i", 2**31 - 1))),
        # a null forgotten_topics_data, the last field of v7..v10 (or before rack_id)
        (7, _empty(7)[:-4] + struct.pack(">i", -1)),
        (12, _empty(12)[:-3] + b"\x00\x01\x00"),
        # a tagged field longer than the frame
        (16, _flexible_request(16, [], request_tags=[(7, b"")])[:-1] + b"\x50"),
        # replica_state shorter than its replica_id and epoch
        (15, _flexible_request(15, [], request_tags=[(1, b"\x00\x00\x00\x05")])),
        # a cluster_id longer than its tagged field (the next field's bytes are not its)
        (12, _flexible_request(12, [], request_tags=[(0, b"\x05ab"), (7, b"cdefgh")])),
    ],
)
def test_garbled_lengths_are_malformed(version: int, raw: bytes) -> None:
    with pytest.raises(MalformedRequest):
        parse_fetch_request(raw, 0, version)


def test_compact_topic_name_longer_than_32767_bytes_is_malformed() -> None:
    # Kafka's generated readers refuse it ("string field topic had invalid length")
    def with_name(name: str) -> bytes:
        body = {"max_wait": 0, "min_bytes": 1, "topics": [{"topic": name, "partitions": []}]}
        return messages.encode(_kio(12, body))

    assert parse_fetch_request(with_name("t" * 32767), 0, 12).topics[0].topic == "t" * 32767
    with pytest.raises(MalformedRequest):
        parse_fetch_request(with_name("t" * 32768), 0, 12)
