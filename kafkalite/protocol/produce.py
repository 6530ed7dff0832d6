"""Produce request parser and response writer for versions 3–13, without kio.

Produce is the broker's hottest request: with ``linger.ms=0`` a client sends
one per record. kio builds a frozen dataclass per topic and partition on the
way in and the handler's dict is turned into kio entities again on the way
out; together that was about half the broker's CPU per request. This module
walks the body in one straight pass and writes the response with ``struct``
directly. Record data stays a ``memoryview`` of the request frame.

``tests/protocol/test_produce_codec.py`` checks both against kio's decoder
and encoder, byte for byte, for generated requests and responses of every
version.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence

from kafkalite.common import structs
from kafkalite.protocol.headers import MalformedRequest, skip_tagged_fields
from kafkalite.protocol.varint import (
    VarintError,
    decode_unsigned_varint,
    encode_unsigned_varint,
    write_unsigned_varint,
)

MIN_VERSION = 3
MAX_VERSION = 13
FIRST_FLEXIBLE = 9
#: v13 addresses topics by id (KIP-516) instead of by name
FIRST_TOPIC_ID = 13
#: Kafka's generated readers refuse longer strings
MAX_STRING_BYTES = 0x7FFF
#: error messages in a response are cut to this many characters (at most 4000 bytes)
_MAX_MESSAGE_CHARS = 1000

_ACKS_TIMEOUT = struct.Struct(">hi")
_PART_V3 = struct.Struct(">ihqq")  # index, error, base offset, log append time
_PART_V5 = struct.Struct(">ihqqq")  # ... log start offset


class PartitionProduceData:
    """One partition's records: a view into the request frame (None if null)."""

    __slots__ = ("index", "records")

    def __init__(self, index: int, records: memoryview | None) -> None:
        self.index = index
        self.records = records


class TopicProduceData:
    """A topic's partitions; v13+ name it by ``topic_id`` (``name`` is then "" until the
    handler resolves it)."""

    __slots__ = ("name", "partition_data", "topic_id")

    def __init__(
        self,
        name: str,
        partition_data: list[PartitionProduceData],
        topic_id: uuid.UUID | None = None,
    ) -> None:
        self.name = name
        self.partition_data = partition_data
        self.topic_id = topic_id


class ProduceRequest:
    """The request body, with kio's field names (fault-injection rules read them too)."""

    __slots__ = ("transactional_id", "acks", "timeout_ms", "topic_data")

    def __init__(
        self,
        transactional_id: str | None,
        acks: int,
        timeout_ms: int,
        topic_data: list[TopicProduceData],
    ) -> None:
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.topic_data = topic_data


def parse_produce_request(buf: bytes | memoryview, pos: int, version: int) -> ProduceRequest:
    """Decode the body that starts at ``pos`` (after the request header)."""
    try:
        return _parse(buf, pos, version, version >= FIRST_FLEXIBLE)
    except (IndexError, struct.error, UnicodeDecodeError, VarintError) as e:
        raise MalformedRequest(f"cannot decode Produce v{version}: {e!r}") from None


def _parse(buf: bytes | memoryview, pos: int, version: int, flexible: bool) -> ProduceRequest:
    end = len(buf)
    mv = memoryview(buf)
    # transactional_id: nullable string
    if flexible:
        n, pos = decode_unsigned_varint(buf, pos)
        n -= 1
    else:
        n = structs.I16.unpack_from(buf, pos)[0]
        pos += 2
    txn: str | None = None
    if n >= 0:
        if pos + n > end or n > MAX_STRING_BYTES:
            raise MalformedRequest(f"transactional_id of {n} bytes")
        txn = str(buf[pos : pos + n], "utf-8")
        pos += n
    elif n < -1:
        raise MalformedRequest("negative transactional_id length")
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
    pos += 6
    topics: list[TopicProduceData] = []
    if flexible:
        n_topics, pos = decode_unsigned_varint(buf, pos)
        n_topics -= 1
    else:
        n_topics = structs.I32.unpack_from(buf, pos)[0]
        pos += 4
    if not 0 <= n_topics <= end - pos:  # null, negative, or more topics than bytes (as Kafka)
        raise MalformedRequest(f"topic_data of {n_topics} elements in {end - pos} bytes")
    by_id = version >= FIRST_TOPIC_ID
    for _ in range(n_topics):
        topic_id = None
        if by_id:
            if pos + 16 > end:
                raise MalformedRequest("topic_id overruns the frame")
            topic_id = uuid.UUID(bytes=bytes(buf[pos : pos + 16]))
            pos += 16
            name = ""
        else:
            if flexible:
                n, pos = decode_unsigned_varint(buf, pos)
                n -= 1
            else:
                n = structs.I16.unpack_from(buf, pos)[0]
                pos += 2
            if n < 0 or pos + n > end or n > MAX_STRING_BYTES:
                raise MalformedRequest(f"topic name of {n} bytes")
            name = str(buf[pos : pos + n], "utf-8")
            pos += n
        if flexible:
            n_parts, pos = decode_unsigned_varint(buf, pos)
            n_parts -= 1
        else:
            n_parts = structs.I32.unpack_from(buf, pos)[0]
            pos += 4
        if not 0 <= n_parts <= end - pos:
            raise MalformedRequest(f"partition_data of {n_parts} elements in {end - pos} bytes")
        parts: list[PartitionProduceData] = []
        for _ in range(n_parts):
            index = structs.I32.unpack_from(buf, pos)[0]
            pos += 4
            if flexible:
                size, pos = decode_unsigned_varint(buf, pos)
                size -= 1
            else:
                size = structs.I32.unpack_from(buf, pos)[0]
                pos += 4
            if size < 0:
                if size != -1:
                    raise MalformedRequest("negative records length")
                records = None
            else:
                if pos + size > end:
                    raise MalformedRequest("records overrun the frame")
                records = mv[pos : pos + size]
                pos += size
            if flexible:
                pos = skip_tagged_fields(buf, pos)
            parts.append(PartitionProduceData(index, records))
        if flexible:
            pos = skip_tagged_fields(buf, pos)
        topics.append(TopicProduceData(name, parts, topic_id))
    if flexible:
        pos = skip_tagged_fields(buf, pos)
    if pos > end:
        raise MalformedRequest("Produce request overruns the frame")
    return ProduceRequest(txn, acks, timeout_ms, topics)


# --------------------------------------------------------------------------- response

#: (index, error_code, base_offset, log_append_time_ms, log_start_offset,
#:  record_errors [(batch_index, message | None)], error_message | None)
PartitionResponse = tuple[int, int, int, int, int, Sequence[tuple[int, str | None]], str | None]


def _write_string(out: bytearray, s: str | None, flexible: bool) -> None:
    if s is None:
        out += b"\x00" if flexible else b"\xff\xff"
        return
    b = s.encode()
    if flexible:
        write_unsigned_varint(out, len(b) + 1)
    else:
        out += structs.I16.pack(len(b))
    out += b


def _write_message(out: bytearray, s: str | None, flexible: bool) -> None:
    """An error message, cut if long: it may quote request data, and over 32767
    bytes a legacy string cannot be written at all."""
    if s is not None and len(s) > _MAX_MESSAGE_CHARS:
        s = s[: _MAX_MESSAGE_CHARS - 3] + "..."
    _write_string(out, s, flexible)


def encode_produce_response(
    version: int,
    responses: Sequence[tuple[str | uuid.UUID, Sequence[PartitionResponse]]],
    throttle_time_ms: int = 0,
    *,
    current_leaders: Mapping[tuple[str | uuid.UUID, int], tuple[int, int]] | None = None,
    node_endpoints: Sequence[tuple[int, str, int, str | None]] = (),
) -> bytes:
    """The response body for ``responses``: ``[(topic, [PartitionResponse, ...]), ...]``,
    each topic its name, or from v13 its id. From v10 (KIP-951) ``current_leaders``
    ((topic, index) -> (leader id, leader epoch)) and ``node_endpoints`` ((id, host,
    port, rack)) go in the tagged fields."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"produce response v{version} not supported by this writer")
    flexible = version >= FIRST_FLEXIBLE
    v5 = version >= 5
    v8 = version >= 8
    out = bytearray()
    if flexible:
        write_unsigned_varint(out, len(responses) + 1)
    else:
        out += structs.I32.pack(len(responses))
    for name, parts in responses:
        if isinstance(name, uuid.UUID):
            out += name.bytes
        else:
            _write_string(out, name, flexible)
        if flexible:
            write_unsigned_varint(out, len(parts) + 1)
        else:
            out += structs.I32.pack(len(parts))
        for index, error, base, append_time, start, record_errors, message in parts:
            if v5:
                out += _PART_V5.pack(index, error, base, append_time, start)
            else:
                out += _PART_V3.pack(index, error, base, append_time)
            if v8:
                if flexible:
                    write_unsigned_varint(out, len(record_errors) + 1)
                else:
                    out += structs.I32.pack(len(record_errors))
                for batch_index, batch_message in record_errors:
                    out += structs.I32.pack(batch_index)
                    _write_message(out, batch_message, flexible)
                    if flexible:
                        out.append(0)
                _write_message(out, message, flexible)
            if flexible:
                leader = current_leaders.get((name, index)) if current_leaders else None
                if leader is None:
                    out.append(0)  # current_leader stays at its default
                else:
                    out.append(1)
                    out += _tag(
                        0, structs.I32.pack(leader[0]) + structs.I32.pack(leader[1]) + b"\x00"
                    )
        if flexible:
            out.append(0)
    out += structs.I32.pack(throttle_time_ms)
    if flexible:
        if node_endpoints:
            nodes = bytearray(encode_unsigned_varint(len(node_endpoints) + 1))
            for node_id, host, port, rack in node_endpoints:
                nodes += structs.I32.pack(node_id)
                _write_string(nodes, host, True)
                nodes += structs.I32.pack(port)
                _write_string(nodes, rack, True)
                nodes.append(0)
            out.append(1)
            out += _tag(0, bytes(nodes))
        else:
            out.append(0)
    return bytes(out)


def _tag(tag: int, payload: bytes) -> bytes:
    return encode_unsigned_varint(tag) + encode_unsigned_varint(len(payload)) + payload
