"""Fetch request parser for versions 4–18, without kio.

Every consumer and follower sends Fetch in a loop, and at low rates each one is
answered at once, so its handling is paid per poll. kio's native reader decodes
a Fetch fast (about 1 us for one partition), but into per-version frozen
dataclasses that lack the fields an older version does not have, so the handler
read them back through ``getattr`` with defaults and turned ``max_wait`` from a
``timedelta`` back into milliseconds. This module walks the body in one pass
into NamedTuples that carry every field at every version (Kafka's default where
the version lacks it), with kio's field names, so fault-injection rules and
predicates read them as before. Decoding costs about as much as kio's (a little
more for v4–12, the same from v13, where kio builds a UUID per topic id); the
handler that reads the result got cheaper by more than that.

Version differences (Kafka's FetchRequest.json): v5 adds log_start_offset, v7
sessions and forgotten topics, v9 current_leader_epoch, v11 rack_id, v12 is
flexible and adds last_fetched_epoch and the cluster_id tag (0), v13 names
topics by id, v15 moves replica_id into the replica_state tag (1).

``tests/protocol/test_fetch_request.py`` checks it against kio's encoder for
every version.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, NamedTuple

from kafkalite.common import structs
from kafkalite.protocol.headers import MalformedRequest, skip_tagged_fields
from kafkalite.protocol.varint import VarintError, decode_unsigned_varint

MIN_VERSION = 4
MAX_VERSION = 18
FIRST_FLEXIBLE = 12
#: fetch versions that name topics by id instead of by name
FIRST_TOPIC_ID = 13
#: replica_id leaves the body for the replica_state tagged field
FIRST_REPLICA_STATE = 15
#: Kafka's generated readers refuse longer strings
MAX_STRING_BYTES = 0x7FFF

# request prefix: [replica_id] max_wait_ms min_bytes max_bytes isolation_level [session_id epoch]
_HEAD_V4 = struct.Struct(">iiiib")
_HEAD_V7 = struct.Struct(">iiiibii")
_HEAD_V15 = struct.Struct(">iiibii")
# partition: partition [current_leader_epoch] fetch_offset [last_fetched_epoch]
# [log_start_offset] partition_max_bytes
_PART_V4 = struct.Struct(">iqi")
_PART_V5 = struct.Struct(">iqqi")
_PART_V9 = struct.Struct(">iiqqi")
_PART_V12 = struct.Struct(">iiqiqi")
_REPLICA_STATE = struct.Struct(">iq")  # replica_id, replica_epoch

#: topic ids already seen: ``uuid.UUID(bytes=...)`` costs more than the rest of a
#: one-partition request, and a consumer repeats the same ids every poll
_topic_ids: dict[bytes, uuid.UUID] = {}
_MAX_TOPIC_IDS = 10_000

#: builds a NamedTuple from a tuple of its fields without its Python-level ``__new__``
#: (a third of this parser's time when called per partition)
_new: Any = tuple.__new__


class FetchPartition(NamedTuple):
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int


class FetchTopic(NamedTuple):
    """A topic to fetch: ``topic`` before v13, ``topic_id`` from v13 (the other is None)."""

    topic: str | None
    topic_id: uuid.UUID | None
    partitions: list[FetchPartition]


class ForgottenTopic(NamedTuple):
    """Partitions an incremental fetch drops from its session (v7+)."""

    topic: str | None
    topic_id: uuid.UUID | None
    partitions: list[int]


class FetchRequest(NamedTuple):
    """The request body. ``replica_id`` is the body's field before v15 and the
    replica_state tag's from v15 (-1: a consumer); ``max_wait_ms`` is kio's
    ``max_wait`` in milliseconds."""

    replica_id: int
    replica_epoch: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: list[FetchTopic]
    forgotten_topics_data: list[ForgottenTopic]
    rack_id: str
    cluster_id: str | None


def parse_fetch_request(buf: bytes, pos: int, version: int) -> FetchRequest:
    """Decode the body that starts at ``pos`` (after the request header)."""
    try:
        if version >= FIRST_FLEXIBLE:
            return _parse_flexible(buf, pos, version)
        return _parse_legacy(buf, pos, version)
    except (IndexError, struct.error, UnicodeDecodeError, VarintError) as e:
        raise MalformedRequest(f"cannot decode Fetch v{version}: {e!r}") from None


# Both parsers inline the common one-byte case of the array lengths and of the
# per-partition tag sections: a Fetch is parsed per consumer poll, and kio's
# native reader is the bar. Strings go through the two helpers at the end.


def _parse_legacy(buf: bytes, pos: int, version: int) -> FetchRequest:
    """v4–11: int32 array lengths and int16 string lengths, no tagged fields."""
    end = len(buf)
    session_id, session_epoch = 0, -1
    if version >= 7:
        replica_id, max_wait, min_bytes, max_bytes, isolation, session_id, session_epoch = (
            _HEAD_V7.unpack_from(buf, pos)
        )
        pos += 25
    else:
        replica_id, max_wait, min_bytes, max_bytes, isolation = _HEAD_V4.unpack_from(buf, pos)
        pos += 17
    n = structs.I32.unpack_from(buf, pos)[0]
    pos += 4
    if not 0 <= n <= end - pos:
        raise MalformedRequest(f"topics of {n} elements in {end - pos} bytes")
    topics = []
    for _ in range(n):
        name, pos = _string16(buf, pos, end, "topic name")
        n_parts = structs.I32.unpack_from(buf, pos)[0]
        pos += 4
        if not 0 <= n_parts <= end - pos:
            raise MalformedRequest(f"partitions of {n_parts} elements in {end - pos} bytes")
        parts = []
        for _ in range(n_parts):
            if version >= 9:
                p, leader_epoch, offset, start, max_part = _PART_V9.unpack_from(buf, pos)
                pos += 28
            elif version >= 5:
                p, offset, start, max_part = _PART_V5.unpack_from(buf, pos)
                leader_epoch = -1
                pos += 24
            else:
                p, offset, max_part = _PART_V4.unpack_from(buf, pos)
                leader_epoch = start = -1
                pos += 16
            parts.append(_new(FetchPartition, (p, leader_epoch, offset, -1, start, max_part)))
        topics.append(_new(FetchTopic, (name, None, parts)))
    forgotten = []
    rack_id = ""
    if version >= 7:
        n = structs.I32.unpack_from(buf, pos)[0]
        pos += 4
        if not 0 <= n <= end - pos:
            raise MalformedRequest(f"forgotten_topics_data of {n} elements in {end - pos} bytes")
        for _ in range(n):
            name, pos = _string16(buf, pos, end, "topic name")
            n_parts = structs.I32.unpack_from(buf, pos)[0]
            pos += 4
            e = pos + 4 * n_parts
            if n_parts < 0 or e > end:
                raise MalformedRequest("null or overrunning forgotten partitions")
            forgotten.append(
                _new(
                    ForgottenTopic, (name, None, list(struct.unpack_from(f">{n_parts}i", buf, pos)))
                )
            )
            pos = e
        if version >= 11:
            rack_id, pos = _string16(buf, pos, end, "rack_id")
    return _new(
        FetchRequest,
        (
            replica_id,
            -1,
            max_wait,
            min_bytes,
            max_bytes,
            isolation,
            session_id,
            session_epoch,
            topics,
            forgotten,
            rack_id,
            None,
        ),
    )


def _parse_flexible(buf: bytes, pos: int, version: int) -> FetchRequest:
    """v12–18: compact (unsigned varint + 1) lengths and tagged fields everywhere."""
    end = len(buf)
    by_id = version >= FIRST_TOPIC_ID
    if version >= FIRST_REPLICA_STATE:
        replica_id = -1
        max_wait, min_bytes, max_bytes, isolation, session_id, session_epoch = (
            _HEAD_V15.unpack_from(buf, pos)
        )
        pos += 21
    else:
        replica_id, max_wait, min_bytes, max_bytes, isolation, session_id, session_epoch = (
            _HEAD_V7.unpack_from(buf, pos)
        )
        pos += 25
    n = buf[pos]
    pos += 1
    if n & 0x80:
        n, pos = decode_unsigned_varint(buf, pos - 1)
    if not 0 < n <= end - pos + 1:
        raise MalformedRequest(f"topics of {n - 1} elements in {end - pos} bytes")
    topics = []
    for _ in range(n - 1):
        name, topic_id, pos = _topic(buf, pos, end, by_id)
        n_parts = buf[pos]
        pos += 1
        if n_parts & 0x80:
            n_parts, pos = decode_unsigned_varint(buf, pos - 1)
        if not 0 < n_parts <= end - pos + 1:
            raise MalformedRequest(f"partitions of {n_parts - 1} elements in {end - pos} bytes")
        parts = []
        for _ in range(n_parts - 1):
            parts.append(_new(FetchPartition, _PART_V12.unpack_from(buf, pos)))
            pos += 32
            # tag sections inlined: one call less per partition on the per-poll path
            pos = pos + 1 if not buf[pos] else skip_tagged_fields(buf, pos)
        pos = pos + 1 if not buf[pos] else skip_tagged_fields(buf, pos)
        topics.append(_new(FetchTopic, (name, topic_id, parts)))
    n = buf[pos]
    pos += 1
    if n & 0x80:
        n, pos = decode_unsigned_varint(buf, pos - 1)
    if not 0 < n <= end - pos + 1:
        raise MalformedRequest(f"forgotten_topics_data of {n - 1} elements in {end - pos} bytes")
    forgotten = []
    for _ in range(n - 1):
        name, topic_id, pos = _topic(buf, pos, end, by_id)
        n_parts, pos = decode_unsigned_varint(buf, pos)
        e = pos + 4 * (n_parts - 1)
        if n_parts == 0 or e > end:
            raise MalformedRequest("null or overrunning forgotten partitions")
        indexes = list(struct.unpack_from(f">{n_parts - 1}i", buf, pos))
        pos = skip_tagged_fields(buf, e)
        forgotten.append(_new(ForgottenTopic, (name, topic_id, indexes)))
    rack_id, pos = _compact_string(buf, pos, end, "rack_id")
    replica_epoch = -1
    cluster_id = None
    n = buf[pos]
    if n:
        n, pos = decode_unsigned_varint(buf, pos)
        for _ in range(n):
            tag, pos = decode_unsigned_varint(buf, pos)
            size, pos = decode_unsigned_varint(buf, pos)
            e = pos + size
            if e > end:
                raise MalformedRequest("tagged field overruns the frame")
            field = memoryview(buf)[:e]  # a field's reads stay inside its declared size
            if tag == 0:
                size, pos = decode_unsigned_varint(field, pos)
                if size:
                    if pos + size - 1 > e:
                        raise MalformedRequest("cluster_id overruns its tagged field")
                    cluster_id = str(field[pos : pos + size - 1], "utf-8")
            elif tag == 1 and version >= FIRST_REPLICA_STATE:
                replica_id, replica_epoch = _REPLICA_STATE.unpack_from(field, pos)
                skip_tagged_fields(field, pos + 12)
            pos = e
    return _new(
        FetchRequest,
        (
            replica_id,
            replica_epoch,
            max_wait,
            min_bytes,
            max_bytes,
            isolation,
            session_id,
            session_epoch,
            topics,
            forgotten,
            rack_id,
            cluster_id,
        ),
    )


def _topic(buf: bytes, pos: int, end: int, by_id: bool) -> tuple[str | None, uuid.UUID | None, int]:
    """A flexible version's topic: its id (v13+) or its compact name."""
    if by_id:
        e = pos + 16
        if e > end:
            raise MalformedRequest("topic id overruns the frame")
        raw = bytes(buf[pos:e])
        topic_id = _topic_ids.get(raw)
        if topic_id is None:
            if len(_topic_ids) >= _MAX_TOPIC_IDS:
                _topic_ids.clear()
            topic_id = _topic_ids[raw] = uuid.UUID(bytes=raw)
        return None, topic_id, e
    name, pos = _compact_string(buf, pos, end, "topic name")
    return name, None, pos


def _compact_string(buf: bytes, pos: int, end: int, what: str) -> tuple[str, int]:
    """A non-null compact string (unsigned varint length + 1): (value, next position)."""
    size = buf[pos]
    pos += 1
    if size & 0x80:
        size, pos = decode_unsigned_varint(buf, pos - 1)
    e = pos + size - 1
    if size == 0 or e > end or size > MAX_STRING_BYTES + 1:
        raise MalformedRequest(f"null, overrunning or too long {what}")
    return str(buf[pos:e], "utf-8"), e


def _string16(buf: bytes, pos: int, end: int, what: str) -> tuple[str, int]:
    """A non-null int16-length string (the non-flexible versions): (value, next position)."""
    size = structs.I16.unpack_from(buf, pos)[0]
    pos += 2
    e = pos + size
    if size < 0 or e > end:
        raise MalformedRequest(f"null or overrunning {what}")
    return str(buf[pos:e], "utf-8"), e
