"""Fetch response writer for versions 4–16 that never copies record data.

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

MIN_VERSION = 4
MAX_VERSION = 16

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PART_V4 = struct.Struct(">ihqq")  # partition, error, hw, lso
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


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


def _records_size(r: Any) -> int:
    if r is None:
        return -1
    if isinstance(r, bytes | bytearray | memoryview):
        return len(r)
    return int(r.size)


def encode_fetch_response(
    version: int,
    responses: Sequence[FetchTopicData],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
    node_endpoints: Sequence[tuple[int, str, int, str | None]] = (),
) -> list[Any]:
    """Return the response body as a list of chunks (bytes and record-data objects)."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"fetch response v{version} not supported by this writer")
    flexible = version >= 12
    parts: list[Any] = []
    buf = bytearray()
    buf += _I32.pack(throttle_time_ms)
    if version >= 7:
        buf += _I16.pack(error_code)
        buf += _I32.pack(session_id)
    buf += _uvarint(len(responses) + 1) if flexible else _I32.pack(len(responses))
    for t in responses:
        if version >= 13:
            buf += t.topic_id.bytes
        else:
            name = t.topic.encode()
            buf += _uvarint(len(name) + 1) + name if flexible else _I16.pack(len(name)) + name
        parts_list = t.partitions
        buf += _uvarint(len(parts_list) + 1) if flexible else _I32.pack(len(parts_list))
        for p in parts_list:
            buf += _PART_V4.pack(
                p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset
            )
            if version >= 5:
                buf += _I64.pack(p.log_start_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                buf += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                buf += _uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                for pid, first in aborted:
                    buf += _ABORTED.pack(pid, first)
                    if flexible:
                        buf += b"\x00"
            if version >= 11:
                buf += _I32.pack(p.preferred_read_replica)
            size = _records_size(p.records)
            if flexible:
                buf += _uvarint(size + 1)
            else:
                buf += _I32.pack(size)
            if size > 0:
                parts.append(bytes(buf))
                buf = bytearray()
                parts.append(p.records)
            if flexible:
                tags: list[bytes] = []
                if p.diverging_epoch is not None:
                    e, off = p.diverging_epoch
                    tags.append(_tag(0, _I32.pack(e) + _I64.pack(off) + b"\x00"))
                if p.current_leader is not None:
                    lid, lep = p.current_leader
                    tags.append(_tag(1, _I32.pack(lid) + _I32.pack(lep) + b"\x00"))
                buf += _uvarint(len(tags))
                for tg in tags:
                    buf += tg
        if flexible:
            buf += b"\x00"
    if flexible:
        if version >= 16 and node_endpoints:
            body = bytearray(_uvarint(len(node_endpoints) + 1))
            for node_id, host, port, rack in node_endpoints:
                h = host.encode()
                body += _I32.pack(node_id) + _uvarint(len(h) + 1) + h + _I32.pack(port)
                if rack is None:
                    body += b"\x00"
                else:
                    r = rack.encode()
                    body += _uvarint(len(r) + 1) + r
                body += b"\x00"
            buf += b"\x01" + _tag(0, bytes(body))
        else:
            buf += b"\x00"
    parts.append(bytes(buf))
    return parts


def _tag(tag: int, payload: bytes) -> bytes:
    return _uvarint(tag) + _uvarint(len(payload)) + payload


def flatten(parts: list[Any]) -> bytes:
    """Join a response into bytes (tests, and the TLS copy path)."""
    out = bytearray()
    for p in parts:
        if isinstance(p, bytes | bytearray | memoryview):
            out += p
        else:
            out += p.read_bytes()
    return bytes(out)
