"""Where the lengths and counts are in an encoded request body.

Structural mutations need to hit the bytes a decoder trusts: an array count,
a string or bytes length, a tag-section count. This walks a well-formed body
with the same schema view as the decoding boundary (``protocol.prescan``) and
lists each such site, so a mutation can replace exactly those bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, fields

from kio.serial._introspect import get_field_tag

from kafkalite.protocol.prescan import Array, Bytes, Entity, Fixed, Node, field_node
from kafkalite.protocol.varint import decode_unsigned_varint


@dataclass(frozen=True, slots=True)
class Site:
    """A length or count: ``width`` bytes at ``pos``."""

    pos: int
    width: int
    #: "array", "string", "bytes", "tags"
    kind: str
    #: compact (unsigned varint N+1) rather than int16/int32
    compact: bool
    nullable: bool
    #: the decoded count or length (-1: null)
    value: int
    path: str


def find_sites(cls: type, body: bytes) -> list[Site]:
    """Every length/count site of ``body``, a well-formed encoding of ``cls``."""
    out: list[Site] = []
    end = _entity(cls, False, body, 0, out, cls.__name__)
    if end != len(body):
        raise ValueError(f"{cls.__name__}: walked {end} of {len(body)} bytes")
    return out


def _length(buf: bytes, p: int, compact: bool, wide: bool) -> tuple[int, int]:
    if compact:
        n, q = decode_unsigned_varint(buf, p)
        return n - 1, q
    if wide:
        return struct.unpack_from(">i", buf, p)[0], p + 4
    return struct.unpack_from(">h", buf, p)[0], p + 2


def _entity(cls: type, nullable: bool, buf: bytes, p: int, out: list[Site], path: str) -> int:
    flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]
    if nullable:
        marker = buf[p]
        p += 1
        if marker == 0xFF:
            return p
    for f in fields(cls):
        if get_field_tag(f) is not None:
            continue
        p = _node(field_node(f, False), flexible, buf, p, out, f"{path}.{f.name}")
    if flexible:
        start = p
        n, p = decode_unsigned_varint(buf, p)
        out.append(Site(start, p - start, "tags", True, False, n, f"{path}.<tags>"))
        for _ in range(n):
            _tag, p = decode_unsigned_varint(buf, p)
            size, p = decode_unsigned_varint(buf, p)
            p += size
    return p


def _node(node: Node, flexible: bool, buf: bytes, p: int, out: list[Site], path: str) -> int:
    if isinstance(node, Fixed):
        return p + node.size
    if isinstance(node, Entity):
        return _entity(node.cls, node.nullable, buf, p, out, path)
    if isinstance(node, Bytes):
        n, q = _length(buf, p, flexible, wide=not node.limit)
        kind = "string" if node.limit else "bytes"
        out.append(Site(p, q - p, kind, flexible, node.nullable, n, path))
        return q + max(n, 0)
    assert isinstance(node, Array)
    n, q = _length(buf, p, flexible, wide=True)
    out.append(Site(p, q - p, "array", flexible, node.nullable, n, path))
    p = q
    for i in range(max(n, 0)):
        p = _node(node.item, flexible, buf, p, out, f"{path}[{i}]")
    return p


def encode_length(site: Site, value: int) -> bytes:
    """``value`` (-1: null) in the site's own encoding."""
    if site.compact:
        raw = value + 1
        if raw < 0:
            raw &= 0xFFFFFFFF
        out = bytearray()
        while raw >= 0x80:
            out.append(raw & 0x7F | 0x80)
            raw >>= 7
        out.append(raw)
        return bytes(out)
    if site.kind == "string":
        return struct.pack(">h", max(-(2**15), min(value, 2**15 - 1)))
    return struct.pack(">i", max(-(2**31), min(value, 2**31 - 1)))


def replace(body: bytes, site: Site, new: bytes) -> bytes:
    return body[: site.pos] + new + body[site.pos + site.width :]
