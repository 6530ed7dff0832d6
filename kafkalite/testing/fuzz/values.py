"""Well-formed requests of any API and version, from kio's schemas and a seeded random.

Values lean towards the edges handlers get wrong (0, -1, the type's limits,
empty and null arrays, long strings), while names come from small pools so a
long run does not create topics and groups without end: topic and group names
are the target's fuzz names plus a few invalid ones, and timeouts stay short
so a long-poll Fetch or a JoinGroup does not hold the connection.
"""

from __future__ import annotations

import datetime
import random
import string
import uuid
from dataclasses import dataclass, field, fields
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from kafkalite.protocol.prescan import declares_none
from kafkalite.protocol.records import build_batch

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
#: names that must be refused (Kafka's topic rules) and never reach the filesystem
INVALID_TOPIC_NAMES = ("", ".", "..", "../fuzz", "a/b", "x\x00y", "t" * 250, "bad name")


@dataclass
class NamePools:
    """The names generated requests use: bounded, so a run's state stays bounded."""

    topics: list[str] = field(default_factory=lambda: ["fuzz-0", "fuzz-1"])
    groups: list[str] = field(default_factory=lambda: ["fuzz-group-0", "fuzz-group-1"])
    #: protected names (the canary's): never generated, even if listed above
    avoid: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.topics = [t for t in self.topics if t not in self.avoid]
        self.groups = [g for g in self.groups if g not in self.avoid]


class ValueBuilder:
    """Builds kio request entities with random field values from ``rng``."""

    def __init__(self, rng: random.Random, pools: NamePools | None = None) -> None:
        self.rng = rng
        self.pools = pools or NamePools()

    # --- entities ---------------------------------------------------------------
    def build(self, cls: type, depth: int = 0) -> Any:
        kwargs = {}
        for f in fields(cls):
            if f.name.startswith("__"):
                continue
            if get_field_tag(f) is not None and self.rng.random() < 0.7:
                continue  # a tagged field left at its default
            kwargs[f.name] = self._field(cls, f, depth)
        return cls(**kwargs)

    def _field(self, owner: type, f: Any, depth: int) -> Any:
        kind = classify_field(f)
        rng = self.rng
        top_null = declares_none(f.type)
        if isinstance(kind, EntityTupleField | PrimitiveTupleField):
            if top_null and rng.random() < 0.15:
                return None
            n = self._count(depth)
            if isinstance(kind, EntityTupleField):
                return tuple(self.build(kind.type_, depth + 1) for _ in range(n))
            kt = f.metadata["kafka_type"]
            return tuple(self._primitive(owner, f.name, kt, False) for _ in range(n))
        if isinstance(kind, EntityField):
            if is_optional(f) and rng.random() < 0.3:
                return None
            return self.build(kind.type_, depth + 1)
        nullable = is_optional(f) and get_field_tag(f) is None
        return self._primitive(owner, f.name, f.metadata["kafka_type"], nullable)

    def _count(self, depth: int) -> int:
        r = self.rng.random()
        if r < 0.2:
            return 0
        if r < 0.85 or depth > 1:
            return 1
        return self.rng.randint(2, 4)

    # --- primitives -------------------------------------------------------------
    def _primitive(self, owner: type, name: str, kafka_type: str, nullable: bool) -> Any:
        rng = self.rng
        if nullable and rng.random() < 0.2:
            return None
        if kafka_type == "string":
            return self.string(owner, name)
        if kafka_type in ("bytes", "records"):
            if kafka_type == "records" or name == "records":
                return self.records()
            return rng.randbytes(rng.choice((0, 1, 8, 64)))
        if kafka_type == "bool":
            return rng.random() < 0.5
        if kafka_type == "uuid":
            return None if rng.random() < 0.5 else uuid.UUID(int=rng.getrandbits(128))
        if kafka_type == "error_code":
            return rng.choice(list(ErrorCode))
        if kafka_type == "float64":
            return rng.choice((0.0, -1.0, 1.5, 1e300))
        if kafka_type in ("timedelta_i32", "timedelta_i64"):
            return datetime.timedelta(milliseconds=self._duration_ms(name))
        if kafka_type == "datetime_i64":
            ms = rng.choice((0, 1, rng.randint(0, 2**41)))
            return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
        lo, hi = _INT_RANGES[kafka_type]
        return self.integer(name, lo, hi)

    def _duration_ms(self, name: str) -> int:
        """Short waits: a long poll or a rebalance must not hold the connection."""
        rng = self.rng
        if "session" in name and rng.random() < 0.3:
            return rng.choice((6000, 10000))
        if "retention" in name:
            return rng.choice((-1, 0, 1000, 2**40))
        return rng.choice((-1, 0, 0, 1, 10, 100, 2**31 - 1 if "timeout" not in name else 50))

    def integer(self, name: str, lo: int, hi: int) -> int:
        rng = self.rng
        r = rng.random()
        if "partition" in name or name in ("index", "partition_index"):
            if r < 0.8:
                return rng.choice((0, 1, -1))
        elif name in ("acks",):
            return rng.choice((-1, 0, 1, 1, 2, -2))
        elif "timeout" in name or "wait" in name:
            return rng.choice((-1, 0, 10, 100))
        elif "replication_factor" in name or name in ("num_partitions", "count"):
            return rng.choice((-1, 1, 1, 2, 0))
        if r < 0.3:
            return rng.choice((0, 1, -1 if lo < 0 else 0))
        if r < 0.45:
            return rng.choice((lo, hi))
        if r < 0.6:
            return rng.randint(max(lo, -100), min(hi, 100))
        return rng.randint(lo, hi)

    def string(self, owner: type, name: str) -> str:
        rng = self.rng
        owner_name = owner.__name__.lower()
        r = rng.random()
        if r < 0.03:
            return "x" * rng.choice((255, 32767))  # long: echoed back into responses
        if name in ("topic", "name", "topic_name", "resource_name") and (
            "topic" in owner_name or name != "name" or "resource" in owner_name
        ):
            if r < 0.85:
                return rng.choice(self.pools.topics)
            return rng.choice(INVALID_TOPIC_NAMES)
        if "group" in name:
            return rng.choice(self.pools.groups) if r < 0.9 else ""
        if "member_id" in name or "instance_id" in name:
            return rng.choice(("", "fuzz-member"))
        if name == "transactional_id":
            return rng.choice(("fuzz-txn", ""))
        n = rng.choice((0, 1, 5, 20))
        return "".join(rng.choice(string.ascii_letters + "._-é") for _ in range(n))

    def records(self) -> bytes | None:
        """A valid batch (sometimes compressed), an empty set, or null."""
        rng = self.rng
        r = rng.random()
        if r < 0.1:
            return None
        if r < 0.2:
            return b""
        n = rng.randint(1, 3)
        recs = [
            (rng.randbytes(rng.choice((0, 4))) or None, rng.randbytes(rng.choice((0, 10, 100))))
            for _ in range(n)
        ]
        return build_batch(
            recs, compression=rng.choice((0, 0, 1, 2, 3, 4)), timestamp_ms=timestamp_ms(rng)
        )


#: record timestamps are drawn around this (Nov 2023: in the past, which Kafka's default
#: message.timestamp.before.max.ms accepts), not the clock, so frames depend on the seed only
_BASE_TIMESTAMP_MS = 1_700_000_000_000


def timestamp_ms(rng: random.Random) -> int:
    return _BASE_TIMESTAMP_MS + rng.randrange(10**9)
