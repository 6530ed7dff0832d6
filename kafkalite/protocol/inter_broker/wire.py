"""Primitive readers and writers for the inter-broker codecs.

A :class:`Writer` / :class:`Reader` is bound to one message version's encoding:
flexible versions (KIP-482) use compact strings and arrays (unsigned varint
length + 1) and end every struct with a tagged-field section; older versions
use int16 string and int32 array lengths. Readers skip tagged fields they do
not know, as Kafka does, so a newer peer's additions do not break decoding.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from typing import TypeVar

from kafkalite.common import structs
from kafkalite.protocol.varint import VarintError, decode_unsigned_varint, write_unsigned_varint

T = TypeVar("T")


class InterBrokerCodecError(ValueError):
    """The bytes are not a valid message of the expected API and version."""


class Writer:
    __slots__ = ("buf", "flexible")

    def __init__(self, flexible: bool) -> None:
        self.buf = bytearray()
        self.flexible = flexible

    def int8(self, v: int) -> None:
        self.buf += structs.I8.pack(v)

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def int16(self, v: int) -> None:
        self.buf += structs.I16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += structs.I32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += structs.I64.pack(v)

    def uuid(self, v: uuid.UUID) -> None:
        self.buf += v.bytes

    def string(self, s: str) -> None:
        b = s.encode()
        if self.flexible:
            write_unsigned_varint(self.buf, len(b) + 1)
        else:
            self.buf += structs.I16.pack(len(b))
        self.buf += b

    def nullable_string(self, s: str | None) -> None:
        if s is not None:
            self.string(s)
        elif self.flexible:
            self.buf.append(0)
        else:
            self.buf += structs.I16.pack(-1)

    def array_length(self, n: int) -> None:
        if self.flexible:
            write_unsigned_varint(self.buf, n + 1)
        else:
            self.buf += structs.I32.pack(n)

    def array(self, items: Sequence[T], write_item: Callable[[Writer, T], None]) -> None:
        self.array_length(len(items))
        for item in items:
            write_item(self, item)

    def int32_array(self, items: Sequence[int]) -> None:
        self.array_length(len(items))
        self.buf += struct.pack(f">{len(items)}i", *items)

    def tagged_fields(self) -> None:
        """An empty tagged-field section (flexible versions only)."""
        if self.flexible:
            self.buf.append(0)

    def getvalue(self) -> bytes:
        return bytes(self.buf)


class Reader:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int, flexible: bool) -> None:
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def _unpack(self, s: struct.Struct) -> int:
        try:
            (v,) = s.unpack_from(self.buf, self.pos)
        except struct.error:
            raise InterBrokerCodecError("message truncated") from None
        self.pos += s.size
        return int(v)

    def int8(self) -> int:
        return self._unpack(structs.I8)

    def boolean(self) -> bool:
        return self._unpack(structs.I8) != 0

    def int16(self) -> int:
        return self._unpack(structs.I16)

    def int32(self) -> int:
        return self._unpack(structs.I32)

    def int64(self) -> int:
        return self._unpack(structs.I64)

    def uuid(self) -> uuid.UUID:
        raw = self._take(16)
        return uuid.UUID(bytes=raw)

    def _uvarint(self) -> int:
        try:
            v, self.pos = decode_unsigned_varint(self.buf, self.pos)
        except VarintError as e:
            raise InterBrokerCodecError(str(e)) from None
        return v

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise InterBrokerCodecError("message truncated")
        out = bytes(self.buf[self.pos : end])
        self.pos = end
        return out

    def nullable_string(self) -> str | None:
        n = self._uvarint() - 1 if self.flexible else self.int16()
        if n < 0:
            if n != -1:
                raise InterBrokerCodecError(f"negative string length {n}")
            return None
        try:
            return self._take(n).decode()
        except UnicodeDecodeError:
            raise InterBrokerCodecError("string is not UTF-8") from None

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise InterBrokerCodecError("null for a non-nullable string")
        return s

    def array_length(self) -> int:
        n = self._uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            raise InterBrokerCodecError("null for a non-nullable array")
        if n > len(self.buf) - self.pos:  # every element takes at least one byte
            raise InterBrokerCodecError(f"array of {n} elements overruns the message")
        return n

    def array(self, read_item: Callable[[Reader], T]) -> list[T]:
        return [read_item(self) for _ in range(self.array_length())]

    def int32_array(self) -> list[int]:
        n = self.array_length()
        raw = self._take(4 * n)
        return list(struct.unpack(f">{n}i", raw))

    def tagged_fields(self) -> None:
        """Skip a tagged-field section (flexible versions only): none are defined here."""
        if not self.flexible:
            return
        for _ in range(self._uvarint()):
            self._uvarint()  # tag
            self._take(self._uvarint())

    def tagged_field(self, wanted: int) -> bytes | None:
        """Read a tagged-field section and return the value of tag ``wanted`` (None if
        absent), skipping the others; a tag that appears twice is malformed."""
        found: bytes | None = None
        for _ in range(self._uvarint()):
            tag = self._uvarint()
            value = self._take(self._uvarint())
            if tag == wanted:
                if found is not None:
                    raise InterBrokerCodecError(f"tagged field {tag} appears twice")
                found = value
        return found
