"""The KIP-848 consumer group records of ``__consumer_offsets``, as Apache Kafka writes them.

Keys (int16 version, then non-flexible fields) say what a record is:

====  ==========================================  =========================
key   record                                      key fields
====  ==========================================  =========================
3     ConsumerGroupMetadata                       group
4     ConsumerGroupPartitionMetadata              group
5     ConsumerGroupMemberMetadata                 group, member
6     ConsumerGroupTargetAssignmentMetadata       group
7     ConsumerGroupTargetAssignmentMember         group, member
8     ConsumerGroupCurrentMemberAssignment        group, member
====  ==========================================  =========================

Values are version 0 and flexible (compact strings and arrays, tagged fields);
a null value is a tombstone. :func:`group_records` renders a group as these
records and :func:`rebuild` turns the records read back into a group, so the
coordinator persists a change by writing the records that differ.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kafkalite.common import structs
from kafkalite.coordinator.group.assignors import Assignment
from kafkalite.coordinator.group.consumer_group import (
    ClassicMember,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    TopicInfo,
)
from kafkalite.coordinator.group.offset_codec import CodecError, _Reader
from kafkalite.protocol.varint import encode_unsigned_varint

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_KEY_VERSIONS = range(GROUP_METADATA, CURRENT_MEMBER_ASSIGNMENT + 1)
_PER_MEMBER = (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT)

_STATE_CODES = {
    MemberState.STABLE: 0,
    MemberState.UNREVOKED_PARTITIONS: 1,
    MemberState.UNRELEASED_PARTITIONS: 2,
}
_STATES = {v: k for k, v in _STATE_CODES.items()}


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    version: int
    group: str
    member: str | None = None


# ---- keys -------------------------------------------------------------------------


def _key_str(out: bytearray, s: str) -> None:
    b = s.encode("utf-8")
    out += structs.I16.pack(len(b))
    out += b


def encode_key(k: ConsumerKey) -> bytes:
    out = bytearray(structs.I16.pack(k.version))
    _key_str(out, k.group)
    if k.version in _PER_MEMBER:
        _key_str(out, k.member or "")
    return bytes(out)


def decode_key(buf: bytes) -> ConsumerKey:
    r = _Reader(buf)
    version = r.i16()
    if version not in CONSUMER_KEY_VERSIONS:
        raise CodecError(f"not a consumer group key: version {version}")
    group = r.str()
    member = r.str() if version in _PER_MEMBER else None
    return ConsumerKey(version, group, member)


# ---- flexible values -----------------------------------------------------------------


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray(structs.I16.pack(0))  # value version 0

    def i8(self, v: int) -> None:
        self.out += v.to_bytes(1, "big", signed=True)

    def i32(self, v: int) -> None:
        self.out += structs.I32.pack(v)

    def uvarint(self, v: int) -> None:
        self.out += encode_unsigned_varint(v)

    def str(self, s: str | None) -> None:
        if s is None:
            self.uvarint(0)
            return
        b = s.encode("utf-8")
        self.uvarint(len(b) + 1)
        self.out += b

    def topic_id(self, u: uuid.UUID) -> None:
        self.out += u.bytes

    def tags(self) -> None:
        self.uvarint(0)

    def topic_partitions(self, a: Mapping[uuid.UUID, Iterable[int]]) -> None:
        items = [(t, sorted(ps)) for t, ps in sorted(a.items(), key=lambda x: str(x[0])) if ps]
        self.uvarint(len(items) + 1)
        for tid, parts in items:
            self.topic_id(tid)
            self.uvarint(len(parts) + 1)
            for p in parts:
                self.i32(p)
            self.tags()

    def bytes_(self, b: bytes) -> None:
        self.uvarint(len(b) + 1)
        self.out += b

    def done(self) -> bytes:
        self.tags()
        return bytes(self.out)


def _classic_tag(c: ClassicMember) -> bytes:
    """ConsumerGroupMemberMetadataValue's tagged field 0, ClassicMemberMetadata."""
    w = _Writer()
    del w.out[:]  # a nested struct: no version prefix
    w.i32(c.session_timeout_ms)
    w.uvarint(len(c.protocols) + 1)
    for name, meta in c.protocols:
        w.str(name)
        w.bytes_(meta)
        w.tags()
    w.tags()
    return bytes(w.out)


def _reader(buf: bytes) -> _Reader:
    r = _Reader(buf, flexible=True)
    version = r.i16()
    if version != 0:
        raise CodecError(f"unknown consumer group value version {version}")
    return r


def _read_uuid(r: _Reader) -> uuid.UUID:
    return uuid.UUID(bytes=r._take(16))


def _read_partitions(r: _Reader) -> Assignment:
    out: Assignment = {}
    for _ in range(max(r.array_len(), 0)):
        tid = _read_uuid(r)
        out[tid] = {r.i32() for _ in range(max(r.array_len(), 0))}
        r.skip_tags()
    return {t: ps for t, ps in out.items() if ps}


def _read_classic_tag(r: _Reader) -> ClassicMember | None:
    classic = None
    for _ in range(r._uvarint()):
        tag = r._uvarint()
        size = r._uvarint()
        if tag != 0:
            r._take(size)
            continue
        sub = _Reader(r._take(size), flexible=True)
        session = sub.i32()
        protocols = []
        for _ in range(max(sub.array_len(), 0)):
            name = sub.str()
            meta = sub.bytes()
            sub.skip_tags()
            protocols.append((name, meta))
        classic = ClassicMember(session, protocols)
    return classic


def _read_strings(r: _Reader) -> tuple[str, ...]:
    return tuple(r.str() for _ in range(max(r.array_len(), 0)))


# ---- a group as records ------------------------------------------------------------


def group_records(g: ConsumerGroup) -> dict[bytes, bytes]:
    """Every record of the group's current state, key bytes -> value bytes."""
    out = group_level_records(g)
    for m in g.members.values():
        out.update(member_records(g, m))
    return out


def group_level_records(g: ConsumerGroup) -> dict[bytes, bytes]:
    """The group's epoch, subscription metadata and target assignment epoch."""
    out: dict[bytes, bytes] = {}
    w = _Writer()
    w.i32(g.group_epoch)
    out[encode_key(ConsumerKey(GROUP_METADATA, g.group_id))] = w.done()

    w = _Writer()
    w.uvarint(len(g.subscription_metadata) + 1)
    for t in g.subscription_metadata.values():
        w.topic_id(t.topic_id)
        w.str(t.name)
        w.i32(t.num_partitions)
        w.uvarint(1)  # PartitionMetadata (racks): not tracked
        w.tags()
    out[encode_key(ConsumerKey(PARTITION_METADATA, g.group_id))] = w.done()

    w = _Writer()
    w.i32(g.target_assignment_epoch)
    out[encode_key(ConsumerKey(TARGET_ASSIGNMENT_METADATA, g.group_id))] = w.done()
    return out


def member_records(g: ConsumerGroup, m: ConsumerGroupMember) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    w = _Writer()
    w.str(m.instance_id)
    w.str(m.rack_id)
    w.str(m.client_id)
    w.str(m.client_host)
    w.uvarint(len(m.subscribed_topic_names) + 1)
    for name in m.subscribed_topic_names:
        w.str(name)
    w.str(m.subscribed_topic_regex)
    w.i32(m.rebalance_timeout_ms)
    w.str(m.server_assignor)
    if m.classic is None:
        value = w.done()
    else:
        tag = _classic_tag(m.classic)
        w.uvarint(1)  # one tagged field: tag 0, its size, then the struct
        w.uvarint(0)
        w.uvarint(len(tag))
        w.out += tag
        value = bytes(w.out)
    out[encode_key(ConsumerKey(MEMBER_METADATA, g.group_id, m.member_id))] = value

    w = _Writer()
    w.topic_partitions(g.target_assignment.get(m.member_id, {}))
    out[encode_key(ConsumerKey(TARGET_ASSIGNMENT_MEMBER, g.group_id, m.member_id))] = w.done()

    w = _Writer()
    w.i32(m.member_epoch)
    w.i32(m.previous_member_epoch)
    w.i8(_STATE_CODES[m.state])
    w.topic_partitions(m.assigned)
    w.topic_partitions(m.pending_revocation)
    out[encode_key(ConsumerKey(CURRENT_MEMBER_ASSIGNMENT, g.group_id, m.member_id))] = w.done()
    return out


def member_keys(group_id: str, member_id: str) -> list[bytes]:
    """The member's keys in the order Kafka tombstones them."""
    return [
        encode_key(ConsumerKey(v, group_id, member_id))
        for v in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA)
    ]


def group_keys(group_id: str) -> list[bytes]:
    return [
        encode_key(ConsumerKey(v, group_id))
        for v in (TARGET_ASSIGNMENT_METADATA, PARTITION_METADATA, GROUP_METADATA)
    ]


def rebuild(group_id: str, records: Mapping[bytes, bytes | None]) -> ConsumerGroup | None:
    """The group the records describe (the last value of each key), or None if deleted."""
    g = ConsumerGroup(group_id)
    members: dict[str, ConsumerGroupMember] = {}
    seen_group = False
    for kb, vb in records.items():
        if vb is None:
            continue
        k = decode_key(kb)
        r = _reader(vb)
        if k.version == GROUP_METADATA:
            g.group_epoch = r.i32()
            seen_group = True
        elif k.version == PARTITION_METADATA:
            for _ in range(max(r.array_len(), 0)):
                tid = _read_uuid(r)
                name = r.str()
                n = r.i32()
                for _ in range(max(r.array_len(), 0)):  # partition racks: skipped
                    r.i32()
                    _read_strings(r)
                    r.skip_tags()
                r.skip_tags()
                g.subscription_metadata[name] = TopicInfo(tid, name, n)
        elif k.version == TARGET_ASSIGNMENT_METADATA:
            g.target_assignment_epoch = r.i32()
        elif k.member is not None:
            m = members.setdefault(k.member, ConsumerGroupMember(k.member))
            if k.version == MEMBER_METADATA:
                m.instance_id = r.nullable_str()
                m.rack_id = r.nullable_str()
                m.client_id = r.str()
                m.client_host = r.str()
                m.subscribed_topic_names = _read_strings(r)
                m.subscribed_topic_regex = r.nullable_str()
                m.rebalance_timeout_ms = r.i32()
                m.server_assignor = r.nullable_str()
                m.classic = _read_classic_tag(r)
            elif k.version == TARGET_ASSIGNMENT_MEMBER:
                g.target_assignment[k.member] = _read_partitions(r)
            elif k.version == CURRENT_MEMBER_ASSIGNMENT:
                m.member_epoch = r.i32()
                m.previous_member_epoch = r.i32()
                m.state = _STATES.get(r.i8(), MemberState.STABLE)
                m.assigned = _read_partitions(r)
                m.pending_revocation = _read_partitions(r)
    if not seen_group:
        return None
    g.subscription_metadata = dict(sorted(g.subscription_metadata.items()))
    for m in members.values():
        g.update_member(m)
    g.target_assignment = {m: a for m, a in g.target_assignment.items() if m in g.members}
    return g
