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

SHARE_GROUP_METADATA = 11
SHARE_SNAPSHOT = 1000
SHARE_KEY_VERSIONS = (SHARE_GROUP_METADATA, SHARE_SNAPSHOT)


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


def decode_key(buf: bytes) -> ShareKey:
    (version,) = structs.I16.unpack_from(buf, 0)
    group, pos = _read_str(buf, 2)
    if version == SHARE_GROUP_METADATA:
        return ShareKey(version, group)
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
