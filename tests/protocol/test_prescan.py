"""The decoding boundary (``protocol/prescan.py``) against kio's native reader.

A request body the pre-scan lets through must be one kio reads to the same end
without a structural error; one whose counts or lengths lie must be refused
before kio sees it (kio aborts the process on an array count it cannot
allocate). Bodies are built by kio from hypothesis values for every API and
version the broker serves, then mutated.
"""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.serial.errors import (
    BufferUnderflow,
    InvalidUnicode,
    NegativeByteLength,
    UnexpectedNull,
)
from kio.static.primitive import Records

from kafkalite.protocol import messages
from kafkalite.protocol.headers import MalformedRequest
from kafkalite.protocol.prescan import prescan, walker
from kafkalite.server.apis import build_api_table

st.register_type_strategy(Records, st.binary(max_size=64).map(Records))

SERVED = [
    (spec.name, spec.key, v)
    for spec in sorted(build_api_table(None).values(), key=lambda s: s.key)
    for v in range(spec.min_version, spec.max_version + 1)
]
IDS = [f"{name}v{v}" for name, _, v in SERVED]


def _encode_or_skip(entity: object) -> bytes:
    try:
        return messages.encode(entity)
    except (ValueError, OverflowError):  # kio's writer refuses some generated values
        assume(False)
        raise AssertionError("unreachable") from None


@pytest.mark.parametrize(("name", "key", "version"), SERVED, ids=IDS)
def test_prescan_ends_where_kio_ends_for_every_served_request(name, key, version):
    cls = messages.request_type(key, version)

    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_type(cls), st.binary(max_size=8))
    def check(entity, prefix):
        body = _encode_or_skip(entity)
        frame = prefix + body
        assert prescan(cls, frame, len(prefix)) is frame  # nothing to edit: no copy
        end = walker(cls)(frame, len(prefix), len(frame), [])
        try:
            _obj, size = messages._reader(cls)(frame, len(prefix))
        except (ValueError, OverflowError):
            # kio writes timedeltas its reader cannot read back (OffsetCommit v2-4
            # retention_time near the int64 limit): not a walk of the frame
            assume(False)
            raise
        assert end - len(prefix) == size == len(body)

    check()


# kio's structural errors: the pre-scan must have refused every frame that causes one
_STRUCTURAL = (BufferUnderflow, NegativeByteLength, UnexpectedNull, KeyError)


def _mutations(body: bytes, rng: random.Random) -> list[bytes]:
    out = [body[: rng.randrange(len(body))]] if body else []
    for _ in range(6):
        b = bytearray(body)
        if not b:
            break
        i = rng.randrange(len(b))
        choice = rng.randrange(4)
        if choice == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif choice == 1:
            b[i] = rng.choice([0x00, 0x7F, 0x80, 0xFF])
        elif choice == 2:
            b[i : i + 4] = rng.choice([b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\xff\xff"])
        else:
            b[i:i] = rng.choice([b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x80\x01"])
        out.append(bytes(b))
    return out


@pytest.mark.parametrize(("name", "key", "version"), SERVED, ids=IDS)
def test_mutated_bodies_the_prescan_accepts_decode_without_structural_errors(name, key, version):
    cls = messages.request_type(key, version)

    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_type(cls), st.integers(0, 2**32))
    def check(entity, seed):
        body = _encode_or_skip(entity)
        for mutated in _mutations(body, random.Random(seed)):
            try:
                checked = prescan(cls, mutated, 0)
            except MalformedRequest:
                continue
            try:
                messages._reader(cls)(checked, 0)
            except _STRUCTURAL as e:
                raise AssertionError(f"pre-scan passed {mutated.hex()} but kio: {e!r}") from e
            except (InvalidUnicode, ValueError, OverflowError):
                pass  # bad UTF-8, a bool that is not 0/1, a timedelta past Python's range

    check()


def _malformed(key: int, version: int, body: bytes) -> str:
    with pytest.raises(MalformedRequest) as e:
        messages.decode_request(key, version, body, 0)
    return str(e.value)


def test_compact_array_count_beyond_frame_is_malformed():
    # Metadata v12: topics = 2**32-2 elements (uvarint 0xffffffff), then 3 bytes
    msg = _malformed(3, 12, bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F]) + b"\x01\x00\x00")
    assert "4294967294 elements in 3 bytes" in msg


def test_legacy_array_count_0x7fffffff_is_malformed():
    msg = _malformed(3, 4, b"\x7f\xff\xff\xff\x01")
    assert "2147483647 elements" in msg


def test_array_count_may_equal_remaining_bytes_as_kafka_allows():
    # DescribeGroups v0: 2 group ids of length 0 (2 bytes each) after a count of 2... the
    # count (2) is below the 4 bytes left, so it passes the count check and decodes
    assert messages.decode_request(15, 0, b"\x00\x00\x00\x02\x00\x00\x00\x00", 0).groups == (
        "",
        "",
    )


def test_null_non_nullable_array_is_malformed():
    assert "was null" in _malformed(15, 5, b"\x00\x00")  # DescribeGroups v5: groups compact null
    assert "was null" in _malformed(15, 0, b"\xff\xff\xff\xff")  # legacy -1


def test_null_nullable_array_decodes_as_none():
    # Metadata v4: topics null means every topic
    assert messages.decode_request(3, 4, b"\xff\xff\xff\xff\x00", 0).topics is None


def test_negative_array_count_other_than_null_is_malformed():
    assert "negative length -2" in _malformed(3, 4, b"\xff\xff\xff\xfe\x00")


def test_null_non_nullable_string_is_malformed():
    # Heartbeat v0: group_id int16 -1
    assert "was null" in _malformed(12, 0, b"\xff\xff" + b"\x00\x00\x00\x01" + b"\x00\x00")


def test_compact_string_longer_than_32767_bytes_is_malformed():
    # Kafka's generated readers throw "string field X had invalid length N" above Short.MAX_VALUE
    n = 32768
    length = bytes([(n + 1) & 0x7F | 0x80, ((n + 1) >> 7) & 0x7F | 0x80, (n + 1) >> 14])
    body = length + b"g" * n + b"\x00\x00\x00\x01" + b"\x01\x01\x00"  # Heartbeat v4
    assert "invalid length 32768" in _malformed(12, 4, body)


def test_compact_string_of_32767_bytes_decodes():
    n = 32767
    length = bytes([(n + 1) & 0x7F | 0x80, ((n + 1) >> 7) & 0x7F | 0x80, (n + 1) >> 14])
    body = length + b"g" * n + b"\x00\x00\x00\x01" + b"\x01\x01\x00"
    assert len(messages.decode_request(12, 4, body, 0).group_id) == n


def test_varint_longer_than_5_bytes_is_malformed():
    body = b"\x80\x80\x80\x80\x80\x01" + b"\x00"  # DescribeGroups v5
    assert "longer than 5 bytes" in _malformed(15, 5, body)


def test_truncated_body_is_malformed():
    body = messages.encode(HeartbeatRequest(group_id="g", generation_id=1, member_id="m"))
    for cut in range(len(body)):
        _malformed(12, 4, body[:cut])


def test_trailing_bytes_are_ignored_as_kafka_does():
    body = messages.encode(HeartbeatRequest(group_id="g", generation_id=1, member_id="m"))
    assert messages.decode_request(12, 4, body + b"garbage", 0).group_id == "g"


def test_unknown_tagged_field_is_skipped_as_kafka_does():
    plain = messages.encode(HeartbeatRequest(group_id="g", generation_id=7, member_id="m"))
    assert plain[-1] == 0  # an empty tag section
    # two unknown tags (5 and 300) of 3 and 1 bytes
    tagged = plain[:-1] + b"\x02" + b"\x05\x03abc" + b"\xac\x02\x01z"
    got = messages.decode_request(12, 4, tagged, 0)
    assert (got.group_id, got.generation_id, got.member_id) == ("g", 7, "m")


def test_unknown_tagged_fields_after_a_non_minimal_count_are_skipped():
    plain = messages.encode(HeartbeatRequest(group_id="g", generation_id=7, member_id="m"))
    tagged = plain[:-1] + b"\x82\x00" + b"\x05\x01a" + b"\x06\x00"  # count 2 in 2 bytes
    got = messages.decode_request(12, 4, tagged, 0)
    assert (got.group_id, got.generation_id, got.member_id) == ("g", 7, "m")


def test_unknown_tagged_field_overrunning_the_frame_is_malformed():
    plain = messages.encode(HeartbeatRequest(group_id="g", generation_id=7, member_id="m"))
    assert "overruns" in _malformed(12, 4, plain[:-1] + b"\x01\x05\x10abc")


def test_truncated_fixed_fields_raise_malformed_not_struct_errors():
    with pytest.raises(MalformedRequest):
        prescan(messages.request_type(12, 0), b"\x00\x01g" + struct.pack(">h", 1), 0)
