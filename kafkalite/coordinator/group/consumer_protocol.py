"""Just enough of the "consumer" embedded protocol to know what a group subscribes to.

The coordinator treats member metadata as opaque, except for groups whose
protocol type is ``consumer``: their subscribed topics decide which offsets
OffsetDelete may remove (GROUP_SUBSCRIBED_TO_TOPIC) and which offsets of a
stable group may expire. Every Subscription version (0-3) starts with
``version int16, topics [string]``; the rest is not needed here.
"""

from __future__ import annotations

import struct

from kafkalite.common import structs

PROTOCOL_TYPE = "consumer"


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """Topics in a consumer Subscription, or None if it cannot be parsed."""
    try:
        pos = 2  # version
        (n,) = structs.I32.unpack_from(metadata, pos)
        pos += 4
        if n < 0:
            return set()
        topics = set()
        for _ in range(n):
            (ln,) = structs.I16.unpack_from(metadata, pos)
            pos += 2
            if ln < 0 or pos + ln > len(metadata):
                return None
            topics.add(metadata[pos : pos + ln].decode("utf-8"))
            pos += ln
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


def assigned_partitions(assignment: bytes) -> dict[str, list[int]] | None:
    """Partitions in a consumer Assignment (every version starts with them), or None."""
    try:
        pos = 2  # version
        (n,) = structs.I32.unpack_from(assignment, pos)
        pos += 4
        out: dict[str, list[int]] = {}
        for _ in range(max(n, 0)):
            (ln,) = structs.I16.unpack_from(assignment, pos)
            pos += 2
            if ln < 0 or pos + ln > len(assignment):
                return None
            topic = assignment[pos : pos + ln].decode("utf-8")
            pos += ln
            (k,) = structs.I32.unpack_from(assignment, pos)
            pos += 4
            parts = []
            for _ in range(max(k, 0)):
                (p,) = structs.I32.unpack_from(assignment, pos)
                pos += 4
                parts.append(int(p))
            out[topic] = parts
        return out
    except (struct.error, UnicodeDecodeError):
        return None


def owned_partitions(metadata: bytes) -> dict[str, list[int]]:
    """The owned partitions of a Subscription v1+ (cooperative clients), else none."""
    try:
        (version,) = structs.I16.unpack_from(metadata, 0)
        if version < 1:
            return {}
        pos = 2
        (n,) = structs.I32.unpack_from(metadata, pos)
        pos += 4
        for _ in range(max(n, 0)):
            (ln,) = structs.I16.unpack_from(metadata, pos)
            pos += 2 + max(ln, 0)
        (ud,) = structs.I32.unpack_from(metadata, pos)
        pos += 4 + max(ud, 0)
        out = assigned_partitions(b"\x00\x00" + metadata[pos:])
        return out or {}
    except struct.error:
        return {}


def encode_assignment(parts: dict[str, list[int]], version: int = 0) -> bytes:
    """A ConsumerProtocolAssignment (v0 layout; v1+ only adds nothing we send)."""
    out = bytearray(structs.I16.pack(min(max(version, 0), 3)))
    out += structs.I32.pack(len(parts))
    for topic in sorted(parts):
        b = topic.encode("utf-8")
        out += structs.I16.pack(len(b)) + b
        out += structs.I32.pack(len(parts[topic]))
        for p in sorted(parts[topic]):
            out += structs.I32.pack(p)
    out += structs.I32.pack(-1)  # user data: null
    return bytes(out)
