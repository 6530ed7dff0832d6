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
