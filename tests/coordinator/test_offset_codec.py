"""__consumer_offsets record formats, byte for byte, and the group → partition mapping."""

from __future__ import annotations

import struct

import pytest

from kafkalite.coordinator.group import offset_codec as codec
from kafkalite.coordinator.group.offset_codec import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)


def s(text: str | None) -> bytes:
    if text is None:
        return b"\xff\xff"
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def by(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


@pytest.mark.parametrize(
    ("group", "hash_", "partition"),
    [
        ("testgroup", -1172783827, 27),
        ("test-group", 627841412, 12),
        ("my-group", -1906497762, 12),
        ("group1", -1237460590, 40),
        ("console-consumer-1", 35782224, 24),
        ("a", 97, 47),
        ("", 0, 0),
        ("polygenelubricants", -2147483648, 0),
        ("消费组", 28099635, 35),
    ],
)
def test_partition_for_matches_kafka(group: str, hash_: int, partition: int) -> None:
    assert codec.java_string_hash(group) == hash_
    assert codec.partition_for(group, 50) == partition
    assert codec.partition_for(group, 1) == 0


def test_java_hash_counts_utf16_code_units() -> None:
    # U+1F600 is the surrogate pair D83D DE00 in Java: two code units
    assert codec.java_string_hash("\U0001f600") == ((0xD83D * 31 + 0xDE00) & 0xFFFFFFFF)


def test_offset_commit_key_v1_bytes() -> None:
    expected = b"\x00\x01" + s("g1") + s("topic") + b"\x00\x00\x00\x07"
    assert codec.encode_offset_commit_key("g1", "topic", 7) == expected
    assert codec.decode_key(expected) == OffsetCommitKey("g1", "topic", 7)
    # version 0 has the same layout
    assert codec.decode_key(b"\x00\x00" + expected[2:]) == OffsetCommitKey("g1", "topic", 7)


def test_group_metadata_key_v2_bytes() -> None:
    expected = b"\x00\x02" + s("my-group")
    assert codec.encode_group_metadata_key("my-group") == expected
    assert codec.decode_key(expected) == GroupMetadataKey("my-group")


def test_unknown_key_versions_are_reported_not_misread() -> None:
    assert codec.decode_key(b"\x00\x03" + s("x")) == codec.UnknownKey(3)


def test_offset_commit_value_v3_bytes() -> None:
    v = OffsetCommitValue(
        offset=42, metadata="meta", commit_timestamp=1700000000000, leader_epoch=5
    )
    expected = (
        b"\x00\x03"
        + struct.pack(">q", 42)
        + struct.pack(">i", 5)
        + s("meta")
        + struct.pack(">q", 1700000000000)
    )
    assert codec.encode_offset_commit_value(v) == expected
    assert codec.decode_offset_commit_value(expected) == v


def test_offset_commit_value_v1_keeps_expire_timestamp() -> None:
    v = OffsetCommitValue(offset=9, metadata="", commit_timestamp=1000, expire_timestamp=5000)
    expected = b"\x00\x01" + struct.pack(">q", 9) + s("") + struct.pack(">qq", 1000, 5000)
    assert codec.encode_offset_commit_value(v) == expected
    assert codec.decode_offset_commit_value(expected) == v


def test_offset_commit_value_old_and_flexible_versions_decode() -> None:
    v0 = b"\x00\x00" + struct.pack(">q", 3) + s("m") + struct.pack(">q", 77)
    assert codec.decode_offset_commit_value(v0) == OffsetCommitValue(3, "m", 77)
    v2 = b"\x00\x02" + struct.pack(">q", 4) + s("") + struct.pack(">q", 88)
    assert codec.decode_offset_commit_value(v2) == OffsetCommitValue(4, "", 88)
    # v4: compact string (length + 1 as a varint) and a tagged field section with one unknown tag
    v4 = (
        b"\x00\x04"
        + struct.pack(">q", 5)
        + struct.pack(">i", 2)
        + b"\x03ab"
        + struct.pack(">q", 99)
        + b"\x01"
        + b"\x00"
        + b"\x10"
        + bytes(16)
    )
    assert codec.decode_offset_commit_value(v4) == OffsetCommitValue(5, "ab", 99, 2)


def _member_v3_bytes() -> bytes:
    return (
        s("m-1")
        + s("inst-1")
        + s("client")
        + s("/127.0.0.1")
        + struct.pack(">ii", 300000, 10000)
        + by(b"sub")
        + by(b"asg")
    )


def test_group_metadata_value_v3_bytes() -> None:
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=3,
        protocol="range",
        leader="m-1",
        current_state_timestamp=123,
        members=[
            MemberMetadataValue(
                "m-1", "client", "/127.0.0.1", 10000, b"sub", b"asg", 300000, "inst-1"
            )
        ],
    )
    expected = (
        b"\x00\x03"
        + s("consumer")
        + struct.pack(">i", 3)
        + s("range")
        + s("m-1")
        + struct.pack(">q", 123)
        + struct.pack(">i", 1)
        + _member_v3_bytes()
    )
    assert codec.encode_group_metadata_value(value) == expected
    assert codec.decode_group_metadata_value(expected) == value


def test_empty_group_metadata_value_has_null_protocol_and_leader() -> None:
    value = GroupMetadataValue("consumer", 4, None, None, 55, [])
    expected = (
        b"\x00\x03"
        + s("consumer")
        + struct.pack(">i", 4)
        + b"\xff\xff\xff\xff"
        + struct.pack(">qi", 55, 0)
    )
    assert codec.encode_group_metadata_value(value) == expected
    assert codec.decode_group_metadata_value(expected) == value


def test_group_metadata_value_old_versions_decode() -> None:
    member_v0 = s("m") + s("c") + s("h") + struct.pack(">i", 6000) + by(b"s") + by(b"a")
    v0 = (
        b"\x00\x00"
        + s("consumer")
        + struct.pack(">i", 1)
        + s("range")
        + s("m")
        + struct.pack(">i", 1)
        + member_v0
    )
    got = codec.decode_group_metadata_value(v0)
    assert got.members == [MemberMetadataValue("m", "c", "h", 6000, b"s", b"a", -1, None)]
    assert got.current_state_timestamp == -1
    member_v1 = s("m") + s("c") + s("h") + struct.pack(">ii", 9000, 6000) + by(b"s") + by(b"a")
    v2 = (
        b"\x00\x02"
        + s("consumer")
        + struct.pack(">i", 1)
        + s("range")
        + s("m")
        + struct.pack(">q", 7)
        + struct.pack(">i", 1)
        + member_v1
    )
    got = codec.decode_group_metadata_value(v2)
    assert got.members[0].rebalance_timeout == 9000 and got.current_state_timestamp == 7


def test_truncated_records_raise_codec_error() -> None:
    with pytest.raises(codec.CodecError):
        codec.decode_offset_commit_value(b"\x00\x03\x00")
    with pytest.raises(codec.CodecError):
        codec.decode_group_metadata_value(b"\x00\x09")
