"""Fetch response writer for versions 4–18 that never copies record data.

kio would need the records as ``bytes``; a fetch of a 1 MiB batch would then
read the segment into memory and copy it again into the response. This writer
emits the response as a list of byte chunks and "record data" objects (anything
with a ``size`` attribute, e.g. a file range sent with ``sendfile``). Only the
framing around the records is built in Python. ``tests/protocol`` proves it is
byte-identical to kio's encoding for every version.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkalite.common import structs
from kafkalite.protocol.varint import encode_unsigned_varint

MIN_VERSION = 4
MAX_VERSION = 18

_HEAD_V7 = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_PART_V4 = struct.Struct(">ihqq")  # partition, error, hw, lso
_PART_V5 = struct.Struct(">ihqqq")  # ... log_start_offset
# ... then aborted_transactions null [and preferred_read_replica]
_PART_V4_NULL_ABORTED = struct.Struct(">ihqqi")
_PART_V5_NULL_ABORTED = struct.Struct(">ihqqqi")
_PART_V11_NULL_ABORTED = struct.Struct(">ihqqqii")
_PART_V12_NULL_ABORTED = struct.Struct(">ihqqqbi")
_ABORTED = struct.Struct(">qq")


@dataclass(slots=True)
class FetchPartitionData:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    #: bytes, or an object with ``.size`` (written by the connection, e.g. a FileRange)
    records: Any = None
    # flexible-version tagged fields
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end_offset)
    current_leader: tuple[int, int] | None = None  # (leader_id, leader_epoch)


@dataclass(slots=True)
class FetchTopicData:
    topic: str
    topic_id: uuid.UUID
    partitions: list[FetchPartitionData] = field(default_factory=list)


_BYTES = (bytes, bytearray, memoryview)


def _write_len(buf: bytearray, n: int, flexible: bool) -> None:
    """An array or records length: int32, or (flexible) unsigned varint of n + 1."""
    if not flexible:
        buf += structs.I32.pack(n)
    elif n < 0x7F:
        buf.append(n + 1)
    else:
        buf += encode_unsigned_varint(n + 1)


def encode_fetch_response(
    version: int,
    responses: Sequence[FetchTopicData],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
    node_endpoints: Sequence[tuple[int, str, int, str | None]] = (),
) -> list[Any]:
    """Return the response body as a list of chunks (bytes and record-data objects).

    Written per partition with one ``struct`` call in the common case (no aborted
    transactions list): a consumer's poll is usually one or two partitions, and the
    framing around them was a fifth of handling a fetch.
    """
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"fetch response v{version} not supported by this writer")
    flexible = version >= 12
    by_id = version >= 13
    # partition fields up to log_start_offset, and with aborted_transactions null
    # (and preferred_read_replica) when the version allows it in the same call
    if version >= 12:
        common, fixed = _PART_V12_NULL_ABORTED, _PART_V5
    elif version >= 11:
        common, fixed = _PART_V11_NULL_ABORTED, _PART_V5
    elif version >= 5:
        common, fixed = _PART_V5_NULL_ABORTED, _PART_V5
    else:
        common, fixed = _PART_V4_NULL_ABORTED, _PART_V4
    null = 0 if flexible else -1  # a null aborted_transactions array
    parts: list[Any] = []
    buf = bytearray(
        _HEAD_V7.pack(throttle_time_ms, error_code, session_id)
        if version >= 7
        else structs.I32.pack(throttle_time_ms)
    )
    _write_len(buf, len(responses), flexible)
    for t in responses:
        if by_id:
            buf += t.topic_id.bytes
        else:
            name = t.topic.encode()
            if flexible:
                _write_len(buf, len(name), True)
            else:
                buf += structs.I16.pack(len(name))
            buf += name
        _write_len(buf, len(t.partitions), flexible)
        for p in t.partitions:
            aborted = p.aborted_transactions
            if aborted is None:
                if version >= 11:
                    buf += common.pack(
                        p.partition_index,
                        p.error_code,
                        p.high_watermark,
                        p.last_stable_offset,
                        p.log_start_offset,
                        null,
                        p.preferred_read_replica,
                    )
                elif version >= 5:
                    buf += common.pack(
                        p.partition_index,
                        p.error_code,
                        p.high_watermark,
                        p.last_stable_offset,
                        p.log_start_offset,
                        null,
                    )
                else:
                    buf += common.pack(
                        p.partition_index,
                        p.error_code,
                        p.high_watermark,
                        p.last_stable_offset,
                        null,
                    )
            else:
                if version >= 5:
                    buf += fixed.pack(
                        p.partition_index,
                        p.error_code,
                        p.high_watermark,
                        p.last_stable_offset,
                        p.log_start_offset,
                    )
                else:
                    buf += fixed.pack(
                        p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset
                    )
                _write_len(buf, len(aborted), flexible)
                for pid, first in aborted:
                    buf += _ABORTED.pack(pid, first)
                    if flexible:
                        buf.append(0)
                if version >= 11:
                    buf += structs.I32.pack(p.preferred_read_replica)
            records = p.records
            if records is None:
                size = -1
            elif isinstance(records, _BYTES):
                size = len(records)
            else:
                size = int(records.size)
            _write_len(buf, size, flexible)
            if size > 0:
                parts.append(bytes(buf))
                buf = bytearray()
                parts.append(records)
            if flexible:
                if p.diverging_epoch is None and p.current_leader is None:
                    buf.append(0)
                else:
                    tags: list[bytes] = []
                    if p.diverging_epoch is not None:
                        e, off = p.diverging_epoch
                        tags.append(_tag(0, structs.I32.pack(e) + structs.I64.pack(off) + b"\x00"))
                    if p.current_leader is not None:
                        lid, lep = p.current_leader
                        tags.append(
                            _tag(1, structs.I32.pack(lid) + structs.I32.pack(lep) + b"\x00")
                        )
                    buf += encode_unsigned_varint(len(tags))
                    for tg in tags:
                        buf += tg
        if flexible:
            buf.append(0)
    if flexible:
        if version >= 16 and node_endpoints:
            body = bytearray(encode_unsigned_varint(len(node_endpoints) + 1))
            for node_id, host, port, rack in node_endpoints:
                h = host.encode()
                body += (
                    structs.I32.pack(node_id)
                    + encode_unsigned_varint(len(h) + 1)
                    + h
                    + structs.I32.pack(port)
                )
                if rack is None:
                    body += b"\x00"
                else:
                    r = rack.encode()
                    body += encode_unsigned_varint(len(r) + 1) + r
                body += b"\x00"
            buf += b"\x01" + _tag(0, bytes(body))
        else:
            buf.append(0)
    parts.append(bytes(buf))
    return parts


def _tag(tag: int, payload: bytes) -> bytes:
    return encode_unsigned_varint(tag) + encode_unsigned_varint(len(payload)) + payload


def flatten(parts: list[Any]) -> bytes:
    """Join a response into bytes (tests, and the TLS copy path)."""
    out = bytearray()
    for p in parts:
        if isinstance(p, bytes | bytearray | memoryview):
            out += p
        else:
            out += p.read_bytes()
    return bytes(out)
