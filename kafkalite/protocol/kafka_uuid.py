"""Kafka's Uuid text form: URL-safe base64 of the 16 bytes, no padding (as in znodes and tools)."""

from __future__ import annotations

import base64
import uuid

ZERO_UUID = uuid.UUID(int=0)


def uuid_to_kafka(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def uuid_from_kafka(s: str) -> uuid.UUID:
    if len(s) == 36:
        return uuid.UUID(s)
    raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a Kafka Uuid: {s!r}")
    return uuid.UUID(bytes=raw)


def random_uuid() -> uuid.UUID:
    """A random id that is never ZERO_UUID or Kafka's reserved METADATA_TOPIC_ID (int 1)."""
    while True:
        u = uuid.uuid4()
        if u.int > 1 and not uuid_to_kafka(u).startswith("-"):
            return u
