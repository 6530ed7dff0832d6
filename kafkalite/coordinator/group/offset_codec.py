"""The ``__consumer_offsets`` record formats, byte for byte as Apache Kafka writes them.

Every record key starts with an int16 version that says what the record is:

* 0 or 1 — OffsetCommitKey: group, topic, partition (Kafka 4 writes version 1);
* 2 — GroupMetadataKey: group;
* 3 and above — the KIP-848 consumer group records; a classic coordinator skips them.

Values are versioned separately. OffsetCommitValue v3 is what Kafka writes today
(v1 when the commit carried a retention time, to keep its expire timestamp);
GroupMetadataValue v3 (with group.instance.id per member). A null value is a
tombstone. Versions 4+ of both values are flexible (compact strings, tagged
fields) and are decoded for compatibility, never written.

Strings are int16 length + UTF-8 (-1 = null) and bytes int32 length + data,
except in flexible versions where lengths are unsigned varints of length + 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkalite.common import structs
from kafkalite.protocol.varint import decode_unsigned_varint

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3


class CodecError(ValueError):
    """A ``__consumer_offsets`` record that cannot be decoded."""


# --- partitioning ------------------------------------------------------------------


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: 31*h + c over UTF-16 code units, signed 32-bit."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: like Math.abs, but Integer.MIN_VALUE maps to 0, not to itself."""
    return 0 if n == -(2**31) else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition (and so the coordinator) of a group."""
    return kafka_abs(java_string_hash(group_id)) % num_partitions


# --- records ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A key version this coordinator does not own (KIP-848 records and newer)."""

    version: int


@dataclass(slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1  # only kept by value v1 (OffsetCommit v2-v4 retention_time_ms)


@dataclass(slots=True)
class MemberMetadataValue:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int = -1
    group_instance_id: str | None = None


@dataclass(slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadataValue] = field(default_factory=list)


# --- writer -------------------------------------------------------------------------


def _str(out: bytearray, s: str | None) -> None:
    if s is None:
        out += structs.I16.pack(-1)
        return
    b = s.encode("utf-8")
    out += structs.I16.pack(len(b))
    out += b


def _bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        out += structs.I32.pack(-1)
        return
    out += structs.I32.pack(len(b))
    out += b


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    out = bytearray(structs.I16.pack(OFFSET_COMMIT_KEY_VERSION))
    _str(out, group)
    _str(out, topic)
    out += structs.I32.pack(partition)
    return bytes(out)


def encode_group_metadata_key(group: str) -> bytes:
    out = bytearray(structs.I16.pack(GROUP_METADATA_KEY_VERSION))
    _str(out, group)
    return bytes(out)


def encode_offset_commit_value(v: OffsetCommitValue) -> bytes:
    """v1 when the commit has an explicit expire timestamp, v3 otherwise (as Kafka does)."""
    if v.expire_timestamp >= 0:
        out = bytearray(structs.I16.pack(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY))
        out += structs.I64.pack(v.offset)
        _str(out, v.metadata)
        out += structs.I64.pack(v.commit_timestamp)
        out += structs.I64.pack(v.expire_timestamp)
        return bytes(out)
    out = bytearray(structs.I16.pack(OFFSET_COMMIT_VALUE_VERSION))
    out += structs.I64.pack(v.offset)
    out += structs.I32.pack(v.leader_epoch)
    _str(out, v.metadata)
    out += structs.I64.pack(v.commit_timestamp)
    return bytes(out)


def encode_group_metadata_value(v: GroupMetadataValue) -> bytes:
    out = bytearray(structs.I16.pack(GROUP_METADATA_VALUE_VERSION))
    _str(out, v.protocol_type)
    out += structs.I32.pack(v.generation)
    _str(out, v.protocol)
    _str(out, v.leader)
    out += structs.I64.pack(v.current_state_timestamp)
    out += structs.I32.pack(len(v.members))
    for m in v.members:
        _str(out, m.member_id)
        _str(out, m.group_instance_id)
        _str(out, m.client_id)
        _str(out, m.client_host)
        out += structs.I32.pack(m.rebalance_timeout)
        out += structs.I32.pack(m.session_timeout)
        _bytes(out, m.subscription)
        _bytes(out, m.assignment)
    return bytes(out)


# --- reader -------------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes, pos: int = 0, flexible: bool = False) -> None:
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise CodecError("truncated record")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def i8(self) -> int:
        return int.from_bytes(self._take(1), "big", signed=True)

    def i16(self) -> int:
        return int(structs.I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(structs.I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(structs.I64.unpack(self._take(8))[0])

    def _uvarint(self) -> int:
        try:
            n, self.pos = decode_unsigned_varint(self.buf, self.pos)
        except Exception as e:
            raise CodecError(f"bad varint: {e}") from None
        return n

    def _len(self, wide: bool) -> int:
        if self.flexible:
            return self._uvarint() - 1
        return self.i32() if wide else self.i16()

    def nullable_str(self) -> str | None:
        n = self._len(False)
        if n < 0:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise CodecError(f"bad string: {e}") from None

    def str(self) -> str:
        s = self.nullable_str()
        if s is None:
            raise CodecError("null where a string is required")
        return s

    def bytes(self) -> bytes:
        n = self._len(True)
        return b"" if n < 0 else self._take(n)

    def array_len(self) -> int:
        return self._len(True)

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self._uvarint()):
            self._uvarint()
            self._take(self._uvarint())


Key = OffsetCommitKey | GroupMetadataKey | UnknownKey


def decode_key(buf: bytes) -> Key:
    r = _Reader(buf)
    version = r.i16()
    if version in (0, 1):
        return OffsetCommitKey(r.str(), r.str(), r.i32())
    if version == 2:
        return GroupMetadataKey(r.str())
    if version < 0:
        raise CodecError(f"negative key version {version}")
    return UnknownKey(version)


def decode_offset_commit_value(buf: bytes) -> OffsetCommitValue:
    r = _Reader(buf)
    version = r.i16()
    if not 0 <= version <= 4:
        raise CodecError(f"unknown OffsetCommitValue version {version}")
    r.flexible = version >= 4
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.str()
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    r.skip_tags()
    return OffsetCommitValue(offset, metadata, commit_ts, leader_epoch, expire_ts)


def decode_group_metadata_value(buf: bytes) -> GroupMetadataValue:
    r = _Reader(buf)
    version = r.i16()
    if not 0 <= version <= 4:
        raise CodecError(f"unknown GroupMetadataValue version {version}")
    r.flexible = version >= 4
    protocol_type = r.str()
    generation = r.i32()
    protocol = r.nullable_str()
    leader = r.nullable_str()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(max(r.array_len(), 0)):
        member_id = r.str()
        instance_id = r.nullable_str() if version >= 3 else None
        client_id = r.str()
        client_host = r.str()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        subscription = r.bytes()
        assignment = r.bytes()
        r.skip_tags()
        members.append(
            MemberMetadataValue(
                member_id,
                client_id,
                client_host,
                session_timeout,
                subscription,
                assignment,
                rebalance_timeout,
                instance_id,
            )
        )
    r.skip_tags()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, members)
