"""Kafka variable-length integers.

Record batch v2 stores record fields as protobuf-style base-128 varints: signed
fields are zigzag-encoded first (``varint`` is an int32, ``varlong`` an int64)
so that small negative numbers such as ``-1`` for a null key stay one byte.
Flexible protocol versions use *unsigned* varints for compact lengths and
tagged fields.

Decoders take ``(buf, pos)`` and return ``(value, next_pos)`` so callers can
walk a buffer without slicing it. Every function has a one-byte fast path,
because almost every varint in a real batch (attributes, small deltas, short
lengths) fits in one byte.
"""

from __future__ import annotations

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT32_MAX = (1 << 32) - 1

Buffer = bytes | bytearray | memoryview


class VarintError(ValueError):
    """A varint is too long, out of range, or truncated."""


def zigzag_encode(value: int) -> int:
    """Map signed to unsigned so that magnitude, not sign, sets the length."""
    return (value << 1) ^ (value >> 63)


def zigzag_decode(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


# --- encoding -----------------------------------------------------------------


def _write_unsigned(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_unsigned_varint(out: bytearray, value: int) -> None:
    """Append an unsigned varint (0 .. 2**32-1) to ``out``."""
    if 0 <= value < 0x80:
        out.append(value)
        return
    if value < 0 or value > UINT32_MAX:
        raise VarintError(f"{value} does not fit an unsigned varint")
    _write_unsigned(out, value)


def write_varint(out: bytearray, value: int) -> None:
    """Append a zigzag int32 varint to ``out``."""
    if 0 <= value < 0x40:
        out.append(value << 1)
        return
    if value < INT32_MIN or value > INT32_MAX:
        raise VarintError(f"{value} does not fit a varint (int32)")
    _write_unsigned(out, (value << 1) ^ (value >> 63))


def write_varlong(out: bytearray, value: int) -> None:
    """Append a zigzag int64 varlong to ``out``."""
    if 0 <= value < 0x40:
        out.append(value << 1)
        return
    if value < INT64_MIN or value > INT64_MAX:
        raise VarintError(f"{value} does not fit a varlong (int64)")
    _write_unsigned(out, (value << 1) ^ (value >> 63))


def encode_unsigned_varint(value: int) -> bytes:
    out = bytearray()
    write_unsigned_varint(out, value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def encode_varlong(value: int) -> bytes:
    out = bytearray()
    write_varlong(out, value)
    return bytes(out)


def _unsigned_size(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def size_of_unsigned_varint(value: int) -> int:
    return _unsigned_size(value)


def size_of_varint(value: int) -> int:
    return _unsigned_size((value << 1) ^ (value >> 63))


size_of_varlong = size_of_varint


# --- decoding -----------------------------------------------------------------


def _read_unsigned(buf: Buffer, pos: int, max_bytes: int) -> tuple[int, int]:
    result = 0
    shift = 0
    end = pos + max_bytes
    try:
        while pos < end:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result, pos
            shift += 7
    except IndexError:
        raise VarintError("truncated varint") from None
    raise VarintError(f"varint longer than {max_bytes} bytes")


def decode_unsigned_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes; return ``(value, next_pos)``."""
    try:
        b = buf[pos]
    except IndexError:
        raise VarintError("truncated varint") from None
    if b < 0x80:
        return b, pos + 1
    value, pos = _read_unsigned(buf, pos, 5)
    if value > UINT32_MAX:
        raise VarintError("unsigned varint exceeds 32 bits")
    return value, pos


def decode_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Read a zigzag int32 varint (at most 5 bytes); return ``(value, next_pos)``."""
    try:
        b = buf[pos]
    except IndexError:
        raise VarintError("truncated varint") from None
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    raw, pos = _read_unsigned(buf, pos, 5)
    if raw > UINT32_MAX:
        raise VarintError("varint exceeds 32 bits")
    return (raw >> 1) ^ -(raw & 1), pos


def decode_varlong(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Read a zigzag int64 varlong (at most 10 bytes); return ``(value, next_pos)``."""
    try:
        b = buf[pos]
    except IndexError:
        raise VarintError("truncated varint") from None
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    raw, pos = _read_unsigned(buf, pos, 10)
    if raw >> 64:
        raise VarintError("varlong exceeds 64 bits")
    return (raw >> 1) ^ -(raw & 1), pos
