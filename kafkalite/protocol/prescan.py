"""The decoding boundary: every length and count checked before kio's native reader runs.

kio's reader sizes an array from the count on the wire before it reads one
element (``Vec::with_capacity``): a 19-byte Metadata v12 whose compact count
is 2**32-2 makes it allocate 32 GiB, and Rust aborts the process when that
fails; no ``except`` can catch it. kio also returns ``None`` for a null array
the schema says is not nullable, which then reaches a handler that iterates
it. So nothing untrusted reaches kio before :func:`prescan` has walked the
body as kio will, without building anything, and raised
:class:`MalformedRequest` wherever Kafka's generated readers throw (the
connection is then closed, as Kafka's SocketServer does):

- a count or length beyond the bytes that remain (Kafka: "Tried to allocate a
  collection of size N, but there are only M bytes remaining"), a truncated
  field, a varint longer than 5 bytes;
- null (-1, or compact 0) where this version's schema is not nullable, and a
  negative length other than -1;
- a string longer than 32767 bytes, compact ones included (Kafka's generated
  code: "string field X had invalid length N").

Tagged fields this version does not know are skipped by Kafka; kio raises
on them. The walk records them as edits and :func:`prescan` returns a copy of
the frame without them (rare; nothing is copied otherwise), so kio decodes
what Kafka would.

The walker of each entity class is generated Python source, compiled once and
cached: fixed-size fields become one ``p += N``, and only lengths, counts and
tag sections are read. A Heartbeat costs about 0.3 us, a 3-partition
OffsetCommit about 1.1 us, a little more than kio's own decode of the same
body (``bench/prescan_bench.py``). :func:`field_node` is the schema view both
the walker and the fuzzer (``kafkalite.testing.fuzz.sites``) use.
"""

from __future__ import annotations

import struct
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cache
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from kafkalite.common import structs
from kafkalite.protocol.headers import MalformedRequest
from kafkalite.protocol.varint import encode_unsigned_varint

#: Kafka's generated readers reject longer strings (Short.MAX_VALUE)
MAX_STRING_BYTES = 0x7FFF

#: (start, end, replacement): applied to a copy of the frame, in order
Edit = tuple[int, int, bytes]
#: (buffer, position, end, edits) -> position after the entity
Walker = Callable[[Any, int, int, list[Edit]], int]

_FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_BYTES_TYPES = ("bytes", "records")


class Truncated(MalformedRequest):
    """A field runs past the end of the frame."""


def prescan(cls: type, buf: bytes, pos: int) -> bytes:
    """Check the body of ``cls`` at ``pos`` in ``buf``; return what kio may decode.

    That is ``buf`` itself, or (only when the body carries tagged fields this
    version does not know) a copy without them. Raises MalformedRequest.
    """
    walk = walker(cls)
    edits: list[Edit] = []
    end = len(buf)
    try:
        p = walk(buf, pos, end, edits)
    except (IndexError, struct.error):
        raise Truncated("truncated") from None
    if p > end:
        raise Truncated(f"needs {p - end} more bytes than the frame has")
    if edits:
        return _apply(buf, edits)
    return buf


def _apply(buf: bytes, edits: list[Edit]) -> bytes:
    out = bytearray()
    last = 0
    for start, stop, replacement in sorted(edits):
        out += buf[last:start]
        out += replacement
        last = stop
    out += buf[last:]
    return bytes(out)


# --- the schema, as kio compiles it ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fixed:
    size: int


@dataclass(frozen=True, slots=True)
class Bytes:
    """A string (``limit``: at most 32767 bytes), bytes or records field."""

    nullable: bool
    limit: bool
    #: a tagged nullable primitive: kio reads it as not nullable, Kafka takes
    #: null as the default, which kio fills in when the field is dropped
    drop_null: bool = False


@dataclass(frozen=True, slots=True)
class Entity:
    cls: type
    nullable: bool


@dataclass(frozen=True, slots=True)
class Array:
    nullable: bool
    item: Fixed | Bytes | Entity


Node = Fixed | Bytes | Entity | Array


def declares_none(tp: Any) -> bool:
    """``X | None`` at the top level (``tuple[X | None, ...]`` is not a null array)."""
    return typing.get_origin(tp) in (types.UnionType, typing.Union) and type(None) in (
        typing.get_args(tp)
    )


def field_node(f: Any, tagged: bool) -> Node:
    """How kio reads dataclass field ``f`` (``tagged``: in a tag section)."""
    kind = classify_field(f)
    if isinstance(kind, EntityTupleField):
        return Array(declares_none(f.type), Entity(kind.type_, False))
    if isinstance(kind, EntityField):
        return Entity(kind.type_, is_optional(f))
    kafka_type = f.metadata["kafka_type"]
    if isinstance(kind, PrimitiveTupleField):
        item: Fixed | Bytes
        if kafka_type in _FIXED_SIZES:
            item = Fixed(_FIXED_SIZES[kafka_type])
        else:  # kio reads array elements as not nullable
            item = Bytes(False, kafka_type == "string")
        return Array(declares_none(f.type), item)
    if kafka_type in _FIXED_SIZES:
        return Fixed(_FIXED_SIZES[kafka_type])
    if kafka_type != "string" and kafka_type not in _BYTES_TYPES:
        raise TypeError(f"no pre-scan for kafka_type {kafka_type!r}")
    optional = is_optional(f)
    limit = kafka_type == "string"
    if tagged:  # kio ignores optional for tagged primitives
        return Bytes(False, limit, drop_null=optional)
    return Bytes(optional, limit)


# --- code generation --------------------------------------------------------------------


def _uvarint(b: Any, p: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (kio's limit); ``(value, next position)``."""
    value = shift = 0
    for _ in range(5):
        x = b[p]
        p += 1
        value |= (x & 0x7F) << shift
        if x < 0x80:
            return value, p
        shift += 7
    raise MalformedRequest("unsigned varint longer than 5 bytes")


def _tag_section(b: Any, p: int, e: int, ed: list[Edit], known: dict[int, Walker]) -> int:
    """A tagged-field section with at least one field; unknown tags become edits."""
    start = p
    count, p = _uvarint(b, p)
    count_at = p
    dropped: list[Edit] = []
    for _ in range(count):
        entry = p
        tag, p = _uvarint(b, p)
        size, p = _uvarint(b, p)
        walk = known.get(tag)
        if walk is not None:
            q = walk(b, p, e, ed)
            if q >= 0:
                p = q
                continue
        p += size
        if p > e:
            raise Truncated(f"tagged field {tag} of {size} bytes overruns the frame")
        dropped.append((entry, p, b""))
    if dropped:
        ed.append((start, count_at, encode_unsigned_varint(count - len(dropped))))
        ed.extend(dropped)
    return p


class _Generator:
    """Python source for the walkers of one request schema and what it nests."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[tuple[type, bool], str] = {}
        #: per flexible entity: tag -> name of its walker, resolved after exec
        self.tables: list[dict[int, Any]] = []
        self.tagged_count = 0
        self.namespace: dict[str, Any] = {
            "_uv": _uvarint,
            "_i16": structs.I16.unpack_from,
            "_i32": structs.I32.unpack_from,
            "_M": MalformedRequest,
            "_tags": _tag_section,
        }

    def entity(self, cls: type, nullable: bool = False) -> str:
        key = (cls, nullable)
        name = self.names.get(key)
        if name is not None:
            return name
        name = self.names[key] = f"_w{len(self.names)}"
        flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]
        body: list[str] = []
        if nullable:  # kio: an int8 marker, -1 for null
            body += [
                "m = b[p]",
                "p += 1",
                "if m == 255:",
                "    return p",
                "if m > 127:",
                f"    raise _M('{cls.__name__}: null marker ' + str(m - 256))",
            ]
        tagged: dict[int, str] = {}
        pending = 0
        for f in fields(cls):
            tag = get_field_tag(f)
            if tag is not None:
                tagged[int(tag)] = self._tagged_walker(cls, f)
                continue
            node = field_node(f, False)
            if isinstance(node, Fixed):
                pending += node.size
                continue
            if pending:
                body.append(f"p += {pending}")
                pending = 0
            body += self._read(node, f.name, flexible)
        if pending:
            body.append(f"p += {pending}")
        if flexible:
            table = f"_t{name}"
            self.namespace[table] = tagged
            self.tables.append(tagged)
            body += [
                "if b[p]:",
                f"    p = _tags(b, p, e, ed, {table})",
                "else:",
                "    p += 1",
            ]
        self.lines.append(f"def {name}(b, p, e, ed):")
        self.lines += ["    " + line for line in body]
        self.lines.append("    return p")
        return name

    def _tagged_walker(self, cls: type, f: Any) -> str:
        self.tagged_count += 1
        name = f"_g{self.tagged_count}_{f.name}"
        node = field_node(f, True)
        body: list[str] = []
        if isinstance(node, Bytes) and node.drop_null:
            body += ["if b[p] == 0:", "    return -1"]
        if isinstance(node, Fixed):
            body.append(f"p += {node.size}")
        else:
            body += self._read(node, f"{cls.__name__}.{f.name}", True)
        self.lines.append(f"def {name}(b, p, e, ed):")
        self.lines += ["    " + line for line in body]
        self.lines.append("    return p")
        return name

    def _read(self, node: Node, what: str, flexible: bool) -> list[str]:
        """Statements that advance ``p`` over one field (``n`` is scratch)."""
        if isinstance(node, Entity):
            fn = self.entity(node.cls, node.nullable)
            return [f"p = {fn}(b, p, e, ed)"]
        if isinstance(node, Bytes):
            return self._bytes(node, what, flexible)
        assert isinstance(node, Array)
        out = self._length(flexible, wide=True)
        out += self._null(node.nullable, what)
        out += [
            "elif n > e - p:",
            f"    raise _M('{what}: ' + str(n) + ' elements in ' + str(e - p) + ' bytes')",
        ]
        item = node.item
        if isinstance(item, Fixed):
            loop = [f"p += n * {item.size}" if item.size > 1 else "p += n"]
        elif isinstance(item, Entity):
            fn = self.entity(item.cls, item.nullable)
            loop = ["for _ in range(n):", f"    p = {fn}(b, p, e, ed)"]
        else:
            loop = ["for _ in range(n):"]
            loop += ["    " + s for s in self._bytes(item, f"{what}[]", flexible)]
        out.append("else:")
        out += ["    " + s for s in loop]
        return out

    @staticmethod
    def _length(flexible: bool, *, wide: bool) -> list[str]:
        """Read a length or count into ``n``: -1 is null (compact lengths are N+1)."""
        if flexible:
            return [
                "n = b[p]",
                "p += 1",
                "if n > 127:",
                "    n, p = _uv(b, p - 1)",
                "n -= 1",
            ]
        if wide:
            return ["n = _i32(b, p)[0]", "p += 4"]
        return ["n = _i16(b, p)[0]", "p += 2"]

    @staticmethod
    def _null(nullable: bool, what: str) -> list[str]:
        """The ``if n < 0`` branch: -1 is null; any other negative length is malformed."""
        if nullable:
            return [
                "if n < 0:",
                "    if n != -1:",
                f"        raise _M('{what}: negative length ' + str(n))",
            ]
        return ["if n < 0:", f"    raise _M('non-nullable field {what} was null')"]

    def _bytes(self, node: Bytes, what: str, flexible: bool) -> list[str]:
        out = self._length(flexible, wide=not node.limit)
        out += self._null(node.nullable, what)
        if node.limit and flexible:  # an int16 length cannot exceed it
            out += [
                f"elif n > {MAX_STRING_BYTES}:",
                f"    raise _M('string field {what} had invalid length ' + str(n))",
            ]
        out += ["else:", "    p += n"]
        return out

    def compile(self, root: type) -> Walker:
        name = self.entity(root)
        source = "\n".join(self.lines)
        exec(
            compile(source, f"<prescan {root.__module__}.{root.__name__}>", "exec"), self.namespace
        )
        for table in self.tables:
            table.update({tag: self.namespace[fn] for tag, fn in table.items()})
        walk: Walker = self.namespace[name]
        return walk


@cache
def walker(cls: type) -> Walker:
    """The compiled walker for the kio entity ``cls`` (a request or response body)."""
    return _Generator().compile(cls)


def walker_source(cls: type) -> str:
    """The generated source of ``cls``'s walker (for reading and debugging)."""
    gen = _Generator()
    gen.entity(cls)
    return "\n".join(gen.lines)
