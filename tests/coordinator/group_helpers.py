"""Helpers for wire-level group protocol tests: consumer-protocol payloads and a
member that speaks JoinGroup/SyncGroup/Heartbeat/LeaveGroup/OffsetCommit."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from kafkalite.protocol.errors import ErrorCode
from tests.coordinator.wire import Wire

JOIN, SYNC, HEARTBEAT, LEAVE = 11, 14, 12, 13
FIND, COMMIT, FETCH, DESCRIBE, LIST, DELETE, OFFSET_DELETE = 10, 8, 9, 15, 16, 42, 47


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, user_data (null)."""
    return (
        struct.pack(">hi", 0, len(topics))
        + b"".join(_str(t) for t in topics)
        + struct.pack(">i", -1)
    )


def assignment(parts: dict[str, Sequence[int]]) -> bytes:
    """ConsumerProtocolAssignment v0: version, [topic, [partition]], user_data (null)."""
    out = struct.pack(">hi", 0, len(parts))
    for t, ps in parts.items():
        out += _str(t) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", -1)


class Member:
    def __init__(
        self,
        wire: Wire,
        group: str,
        *,
        instance_id: str | None = None,
        protocols: Sequence[tuple[str, bytes]] = (("range", b"m"),),
        session_ms: int = 10000,
        rebalance_ms: int = 10000,
        protocol_type: str = "consumer",
        join_version: int = 5,
    ) -> None:
        self.wire = wire
        self.group = group
        self.instance_id = instance_id
        self.protocols = list(protocols)
        self.session_ms = session_ms
        self.rebalance_ms = rebalance_ms
        self.protocol_type = protocol_type
        self.join_version = join_version
        self.member_id = ""
        self.generation = -1
        self.leader = ""
        self.members: list[Any] = []

    async def join_once(self) -> Any:
        body = {
            "group_id": self.group,
            "session_timeout": self.session_ms,
            "rebalance_timeout": self.rebalance_ms,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            "protocol_type": self.protocol_type,
            "reason": None,
            "protocols": [{"name": n, "metadata": m} for n, m in self.protocols],
        }
        r = await self.wire.call(JOIN, self.join_version, body, timeout=30)
        if r.error_code in (ErrorCode.none, ErrorCode.member_id_required):
            self.member_id = r.member_id
        if r.error_code == ErrorCode.none:
            self.generation = r.generation_id
            self.leader = r.leader
            self.members = list(r.members)
        return r

    async def join(self) -> Any:
        """JoinGroup, answering MEMBER_ID_REQUIRED (KIP-394) with a second join."""
        r = await self.join_once()
        if r.error_code == ErrorCode.member_id_required:
            r = await self.join_once()
        return r

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader

    async def sync(self, assignments: dict[str, bytes] | None = None, version: int = 3) -> Any:
        body = {
            "group_id": self.group,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            "protocol_type": self.protocol_type,
            "protocol_name": self.protocols[0][0],
            "assignments": [
                {"member_id": m, "assignment": a} for m, a in (assignments or {}).items()
            ],
        }
        return await self.wire.call(SYNC, version, body, timeout=30)

    async def heartbeat(self) -> ErrorCode:
        r = await self.wire.call(
            HEARTBEAT,
            4,
            {
                "group_id": self.group,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": self.instance_id,
            },
        )
        return r.error_code

    async def leave(self) -> Any:
        return await self.wire.call(
            LEAVE,
            4,
            {
                "group_id": self.group,
                "members": [{"member_id": self.member_id, "group_instance_id": self.instance_id}],
            },
        )

    async def commit(
        self, offsets: dict[tuple[str, int], int], version: int = 8, **extra: Any
    ) -> dict:
        body = {
            "group_id": self.group,
            "generation_id_or_member_epoch": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            "retention_time": -1,
            **extra,
        }
        return await commit(self.wire, body, offsets, version)


async def commit(
    wire: Wire, body: dict[str, Any], offsets: dict[tuple[str, int], Any], version: int = 8
) -> dict[tuple[str, int], ErrorCode]:
    """OffsetCommit; offsets map (topic, partition) to an offset or (offset, metadata)."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), v in offsets.items():
        offset, meta = v if isinstance(v, tuple) else (v, "")
        topics.setdefault(t, []).append(
            {
                "partition_index": p,
                "committed_offset": offset,
                "committed_leader_epoch": -1,
                "committed_metadata": meta,
            }
        )
    r = await wire.call(
        COMMIT,
        version,
        {**body, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
    )
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


async def fetch(
    wire: Wire, group: str, partitions: dict[str, list[int]] | None, version: int = 8
) -> tuple[ErrorCode, dict[tuple[str, int], tuple[int, str | None, ErrorCode]]]:
    """OffsetFetch of one group: (group error, {(topic, partition): (offset, metadata, error)})."""
    topics = (
        None
        if partitions is None
        else [{"name": t, "partition_indexes": ps} for t, ps in partitions.items()]
    )
    if version >= 8:
        r = await wire.call(
            FETCH,
            version,
            {
                "groups": [
                    {"group_id": group, "topics": topics, "member_id": None, "member_epoch": -1}
                ],
                "require_stable": True,
            },
        )
        g = r.groups[0]
        error, rtopics = g.error_code, g.topics
    else:
        r = await wire.call(
            FETCH, version, {"group_id": group, "topics": topics, "require_stable": False}
        )
        error, rtopics = getattr(r, "error_code", ErrorCode.none), r.topics
    return error, {
        (t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
        for t in rtopics
        for p in t.partitions
    }


async def find_coordinator(wire: Wire, group: str) -> Any:
    r = await wire.call(FIND, 4, {"key_type": 0, "coordinator_keys": [group]})
    return r.coordinators[0]
