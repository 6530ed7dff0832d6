"""Hand-made v2 records, malformed on purpose, inside batches whose CRC is right.

Every field of :func:`record` can be given as raw bytes, so a test can write a
key length of -7, a varint of six bytes or an offset delta of 2**31-1 exactly
as an attacker would; :func:`batch` wraps records in a batch with a valid
header and CRC-32C, compressed with any codec.
"""

from __future__ import annotations

import struct
import time

import crc32c

from kafkalite.protocol.compression import compress
from kafkalite.protocol.records import build_batch

Field = bytes | int | None


def uvarint(value: int) -> bytes:
    """Unsigned base-128 varint."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def svarint(value: int) -> bytes:
    """Zigzag varint (int32/int64 record fields)."""
    return uvarint((value << 1) ^ (value >> 63))


def _length_prefixed(value: bytes | None) -> bytes:
    return svarint(-1) if value is None else svarint(len(value)) + value


def record(
    index: int = 0,
    *,
    key: bytes | None = None,
    value: bytes | None = b"v",
    headers: list[tuple[bytes, bytes | None]] | None = None,
    attributes: bytes = b"\x00",
    timestamp_delta: bytes | None = None,
    offset_delta: bytes | None = None,
    key_field: bytes | None = None,
    value_field: bytes | None = None,
    headers_field: bytes | None = None,
    length_adjust: int = 0,
    length_field: bytes | None = None,
) -> bytes:
    """One record; ``*_field`` arguments replace a field's encoded bytes as they are."""
    body = attributes
    body += svarint(0) if timestamp_delta is None else timestamp_delta
    body += svarint(index) if offset_delta is None else offset_delta
    body += _length_prefixed(key) if key_field is None else key_field
    body += _length_prefixed(value) if value_field is None else value_field
    if headers_field is None:
        headers_field = svarint(len(headers or ()))
        for hk, hv in headers or ():
            headers_field += svarint(len(hk)) + hk + _length_prefixed(hv)
    body += headers_field
    length = svarint(len(body) + length_adjust) if length_field is None else length_field
    return length + body


def batch(
    records: list[bytes],
    *,
    codec: int = 0,
    count: int | None = None,
    timestamp_ms: int | None = None,
) -> bytes:
    """A v2 batch holding ``records`` (raw, as given) with a valid header and CRC.

    The header claims ``count`` records (default: as many as given) with dense
    offset deltas; timestamps are ``timestamp_ms`` (default: now).
    """
    n = len(records) if count is None else count
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    section = b"".join(records)
    return with_section(build_batch([(None, b"")] * n, timestamp_ms=ts), section, codec)


def with_section(template: bytes, section: bytes, codec: int = 0) -> bytes:
    """``template``'s header over ``section`` (compressed with ``codec``): length,
    codec bits and CRC-32C rewritten (written here, not with kafkalite's own code,
    so that these tests run against any version of it)."""
    out = bytearray(template[:61]) + (compress(codec, section) if codec else section)
    struct.pack_into(">i", out, 8, len(out) - 12)
    attrs = struct.unpack_from(">h", out, 21)[0]
    struct.pack_into(">h", out, 21, (attrs & ~7) | codec)
    struct.pack_into(">I", out, 17, crc32c.crc32c(memoryview(out)[21:]))
    return bytes(out)


#: One malformed record (or pair) per class the record validator rejects with
#: INVALID_RECORD, smallest form; every one is stored by the pre-validation
#: broker and breaks some consumer.
MALFORMED: dict[str, list[bytes]] = {
    "negative_attributes": [record(attributes=b"\x80")],
    "key_length_below_minus_one": [record(key_field=svarint(-7))],
    "value_length_below_minus_one": [record(value_field=svarint(-2))],
    "key_overruns_the_record": [record(key_field=svarint(50) + b"k")],
    "varint_longer_than_five_bytes": [record(key_field=b"\x81\x80\x80\x80\x80\x00")],
    "varlong_longer_than_ten_bytes": [record(timestamp_delta=b"\x80" * 10 + b"\x00")],
    "int32_varint_beyond_32_bits": [record(offset_delta=b"\x80\x80\x80\x80\x70")],
    "offset_delta_not_the_index": [record(offset_delta=svarint(2**31 - 1))],
    "offset_delta_repeated": [record(0), record(0)],
    "record_length_beyond_its_fields": [record(length_adjust=1) + b"\x00"],
    "record_length_short_of_its_fields": [record(length_adjust=-1)],
    "negative_record_length": [record(length_field=svarint(-3))],
    "negative_header_count": [record(headers_field=svarint(-1))],
    "header_count_beyond_the_record": [record(headers_field=svarint(100))],
    "null_header_key": [record(headers_field=svarint(1) + svarint(-1) + svarint(-1))],
    "header_value_length_below_minus_one": [
        record(headers_field=svarint(1) + svarint(1) + b"k" + svarint(-2))
    ],
}
