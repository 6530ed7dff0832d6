"""The share-group records kafkalite writes to ``__consumer_offsets``.

* ``ShareGroupMetadata`` is Kafka's own record (key version 11: the group id; value
  version 0, flexible: the group epoch and metadata hash), so a share group exists
  after a restart as it does in Kafka's ``__consumer_offsets``.
* The share-partition state is Kafka's ``ShareSnapshot`` of ``__share_group_state``
  (start offset and state batches), kept under key version 1000 (kafkalite's own,
  outside Kafka's range): group id, topic id, partition. Each write is a full
  snapshot of one share partition, so compaction keeps exactly the latest.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kafkalite.common import structs

SHARE_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_SNAPSHOT = 1000
SHARE_KEY_VERSIONS = (
    SHARE_MEMBER_METADATA,
    SHARE_GROUP_METADATA,
    SHARE_CURRENT_MEMBER_ASSIGNMENT,
    SHARE_SNAPSHOT,
)
_PER_MEMBER = (SHARE_MEMBER_METADATA, SHARE_CURRENT_MEMBER_ASSIGNMENT)
#: Kafka's MemberState.STABLE (share members are always stable: nothing is revoked)
MEMBER_STATE_STABLE = 0


class ShareCodecError(ValueError):
    pass


def _str(out: bytearray, s: str) -> None:
    b = s.encode()
    out += structs.I16.pack(len(b))
    out += b


def _read_str(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = structs.I16.unpack_from(buf, pos)
    pos += 2
    if n < 0 or pos + n > len(buf):
        raise ShareCodecError("truncated string")
    return buf[pos : pos + n].decode(), pos + n


def group_metadata_key(group_id: str) -> bytes:
    out = bytearray(structs.I16.pack(SHARE_GROUP_METADATA))
    _str(out, group_id)
    return bytes(out)


def group_metadata_value(epoch: int) -> bytes:
    # version 0, flexible: Epoch int32, MetadataHash int64, no tagged fields
    return structs.I16.pack(0) + structs.I32.pack(epoch) + structs.I64.pack(0) + b"\x00"


def decode_group_metadata_value(buf: bytes) -> int:
    if len(buf) < 6:
        raise ShareCodecError("truncated ShareGroupMetadataValue")
    return int(structs.I32.unpack_from(buf, 2)[0])


def snapshot_key(group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    out = bytearray(structs.I16.pack(SHARE_SNAPSHOT))
    _str(out, group_id)
    out += topic_id.bytes
    out += structs.I32.pack(partition)
    return bytes(out)


@dataclass(frozen=True, slots=True)
class ShareKey:
    version: int
    group_id: str
    topic_id: uuid.UUID | None = None
    partition: int = -1
    member_id: str | None = None


def member_key(version: int, group_id: str, member_id: str) -> bytes:
    """ShareGroupMemberMetadataKey (10) or ShareGroupCurrentMemberAssignmentKey (14)."""
    out = bytearray(structs.I16.pack(version))
    _str(out, group_id)
    _str(out, member_id)
    return bytes(out)


def _uvarint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _cstr(out: bytearray, s: str | None) -> None:
    if s is None:
        out.append(0)
        return
    b = s.encode()
    _uvarint(out, len(b) + 1)
    out += b


def member_metadata_value(
    rack_id: str | None, client_id: str, client_host: str, topics: tuple[str, ...]
) -> bytes:
    """ShareGroupMemberMetadataValue v0 (flexible), as Kafka writes it."""
    out = bytearray(structs.I16.pack(0))
    _cstr(out, rack_id)
    _cstr(out, client_id)
    _cstr(out, client_host)
    _uvarint(out, len(topics) + 1)
    for t in topics:
        _cstr(out, t)
    out.append(0)  # tagged fields
    return bytes(out)


def member_assignment_value(
    member_epoch: int, previous_epoch: int, assigned: dict[uuid.UUID, list[int]]
) -> bytes:
    """ShareGroupCurrentMemberAssignmentValue v0 (flexible), as Kafka writes it."""
    out = bytearray(structs.I16.pack(0))
    out += structs.I32.pack(member_epoch)
    out += structs.I32.pack(previous_epoch)
    out.append(MEMBER_STATE_STABLE)
    items = sorted(assigned.items(), key=lambda kv: str(kv[0]))
    _uvarint(out, len(items) + 1)
    for tid, parts in items:
        out += tid.bytes
        _uvarint(out, len(parts) + 1)
        for p in sorted(parts):
            out += structs.I32.pack(p)
        out.append(0)
    out.append(0)
    return bytes(out)


class _Cursor:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf, self.pos = buf, pos

    def uvarint(self) -> int:
        v = shift = 0
        while True:
            if self.pos >= len(self.buf):
                raise ShareCodecError("truncated varint")
            b = self.buf[self.pos]
            self.pos += 1
            v |= (b & 0x7F) << shift
            if b < 0x80:
                return v
            shift += 7

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise ShareCodecError("truncated value")
        b = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return b

    def cstr(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def i32(self) -> int:
        return int(structs.I32.unpack(self.take(4))[0])


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


def decode_member_metadata(buf: bytes) -> MemberMetadata:
    c = _Cursor(buf, 2)
    rack = c.cstr()
    client_id = c.cstr() or ""
    host = c.cstr() or ""
    topics = tuple(c.cstr() or "" for _ in range(max(c.uvarint() - 1, 0)))
    return MemberMetadata(rack, client_id, host, topics)


def decode_member_assignment(buf: bytes) -> tuple[int, dict[uuid.UUID, list[int]]]:
    """(member epoch, assigned partitions)."""
    c = _Cursor(buf, 2)
    epoch = c.i32()
    c.i32()  # previous member epoch
    c.take(1)  # state
    assigned: dict[uuid.UUID, list[int]] = {}
    for _ in range(max(c.uvarint() - 1, 0)):
        tid = uuid.UUID(bytes=c.take(16))
        assigned[tid] = [c.i32() for _ in range(max(c.uvarint() - 1, 0))]
        c.uvarint()  # tagged fields (none written)
    return epoch, assigned


def decode_key(buf: bytes) -> ShareKey:
    (version,) = structs.I16.unpack_from(buf, 0)
    group, pos = _read_str(buf, 2)
    if version == SHARE_GROUP_METADATA:
        return ShareKey(version, group)
    if version in _PER_MEMBER:
        member, _ = _read_str(buf, pos)
        return ShareKey(version, group, member_id=member)
    if version == SHARE_SNAPSHOT:
        if pos + 20 > len(buf):
            raise ShareCodecError("truncated share snapshot key")
        tid = uuid.UUID(bytes=bytes(buf[pos : pos + 16]))
        return ShareKey(version, group, tid, int(structs.I32.unpack_from(buf, pos + 16)[0]))
    raise ShareCodecError(f"not a share key: version {version}")


@dataclass(frozen=True, slots=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(slots=True)
class ShareSnapshot:
    """Kafka's ShareSnapshotValue, the fields kafkalite uses."""

    start_offset: int
    state_epoch: int = 0
    batches: list[StateBatch] = field(default_factory=list)
    #: the leader epoch of the share partition's last reader or writer (fences an old
    #: leader's writes after a new leader read the state, as Kafka's share coordinator)
    leader_epoch: int = -1


def encode_snapshot(s: ShareSnapshot) -> bytes:
    # version 1 = version 0 followed by the leader epoch
    out = bytearray(structs.I16.pack(1))
    out += structs.I32.pack(s.state_epoch)
    out += structs.I64.pack(s.start_offset)
    out += structs.I32.pack(len(s.batches))
    for b in s.batches:
        out += structs.I64.pack(b.first_offset)
        out += structs.I64.pack(b.last_offset)
        out += bytes((b.delivery_state & 0xFF,))
        out += structs.I16.pack(b.delivery_count)
    out += structs.I32.pack(s.leader_epoch)
    return bytes(out)


def decode_snapshot(buf: bytes) -> ShareSnapshot:
    try:
        (version,) = structs.I16.unpack_from(buf, 0)
        if version not in (0, 1):
            raise ShareCodecError(f"unknown share snapshot version {version}")
        (epoch,) = structs.I32.unpack_from(buf, 2)
        (start,) = structs.I64.unpack_from(buf, 6)
        (n,) = structs.I32.unpack_from(buf, 14)
        pos = 18
        batches = []
        for _ in range(n):
            (first,) = structs.I64.unpack_from(buf, pos)
            (last,) = structs.I64.unpack_from(buf, pos + 8)
            state = buf[pos + 16]
            (count,) = structs.I16.unpack_from(buf, pos + 17)
            batches.append(StateBatch(int(first), int(last), int(state), int(count)))
            pos += 19
        leader_epoch = int(structs.I32.unpack_from(buf, pos)[0]) if version == 1 else -1
        return ShareSnapshot(int(start), int(epoch), batches, leader_epoch)
    except Exception as e:  # struct.error, IndexError
        if isinstance(e, ShareCodecError):
            raise
        raise ShareCodecError(f"undecodable share snapshot: {e}") from None
