"""Request/response body codecs through kio, for every API and version kio has.

kio models each API version as its own frozen dataclass. Handlers should not
care which version they answer, so responses are described as plain dicts and
:func:`build` turns them into the requested version's kio entity: fields the
version lacks are dropped, tagged fields fall back to kio's defaults, and plain
ints become the typed values kio wants (error codes, timedeltas, datetimes).
"""

from __future__ import annotations

import datetime
import io
import typing
import uuid
from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields, is_dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from kafkalite.protocol.prescan import prescan

_UTC = datetime.UTC


@cache
def request_type(api_key: int, version: int) -> type:
    return load_request_schema(api_key, version)


@cache
def response_type(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


@cache
def _reader(cls: type) -> Callable[[Any, int], tuple[Any, int]]:
    return entity_reader(cls)  # type: ignore[no-any-return]


@cache
def _writer(cls: type) -> Callable[[Any, Any], None]:
    return entity_writer(cls)  # type: ignore[no-any-return]


def is_flexible_request(api_key: int, version: int) -> bool:
    return bool(request_type(api_key, version).__flexible__)  # type: ignore[attr-defined]


def decode_request(api_key: int, version: int, buf: bytes, offset: int) -> Any:
    """The request body at ``offset``; raises MalformedRequest where Kafka's reader throws.

    Untrusted bytes go through :func:`prescan` first: kio's native reader
    aborts the process on an array count it cannot allocate.
    """
    cls = request_type(api_key, version)
    obj, _size = _reader(cls)(prescan(cls, buf, offset), offset)
    return obj


def decode_response(api_key: int, version: int, buf: bytes, offset: int) -> Any:
    cls = response_type(api_key, version)
    obj, _size = _reader(cls)(prescan(cls, buf, offset), offset)
    return obj


def encode(entity: Any) -> bytes:
    out = io.BytesIO()
    cls: type = type(entity)
    _writer(cls)(out, entity)
    return out.getvalue()


def encode_response(api_key: int, version: int, data: Mapping[str, Any]) -> bytes:
    return encode(build(response_type(api_key, version), data))


# --- dict -> kio entity -------------------------------------------------------

_Conv = Callable[[Any], Any]


def _identity(v: Any) -> Any:
    return v


def _to_error(v: Any) -> ErrorCode:
    return v if isinstance(v, ErrorCode) else ErrorCode(int(v))


def _to_timedelta(v: Any) -> datetime.timedelta:
    return v if isinstance(v, datetime.timedelta) else datetime.timedelta(milliseconds=int(v))


def _to_datetime(v: Any) -> datetime.datetime | None:
    if v is None or isinstance(v, datetime.datetime):
        return v
    if int(v) < 0:
        return None
    return datetime.datetime.fromtimestamp(int(v) / 1000, tz=_UTC)


def _to_uuid(v: Any) -> uuid.UUID | None:
    if v is None or isinstance(v, uuid.UUID):
        return v
    return uuid.UUID(str(v))


#: error messages are cut to this many characters: they may quote request data (a
#: 32767-byte name), and a string over 32767 bytes cannot be encoded at all
MAX_ERROR_MESSAGE_CHARS = 1000


def bounded_message(v: Any) -> str | None:
    """An error message short enough for any string encoding (at most 4000 bytes of UTF-8)."""
    if v is None:
        return None
    text = str(v)
    if len(text) > MAX_ERROR_MESSAGE_CHARS:
        return text[: MAX_ERROR_MESSAGE_CHARS - 3] + "..."
    return text


_KAFKA_TYPE_CONV: dict[str, _Conv] = {
    "error_code": _to_error,
    "timedelta_i32": _to_timedelta,
    "timedelta_i64": _to_timedelta,
    "datetime_i64": _to_datetime,
    "uuid": _to_uuid,
}


@cache
def _plan(cls: type) -> list[tuple[str, bool, Any, _Conv]]:
    """For each field: name, required?, default, converter (possibly recursive)."""
    hints = typing.get_type_hints(cls)
    plan = []
    for f in fields(cls):
        if f.name.startswith("__"):
            continue
        conv: _Conv = _identity
        kt = f.metadata.get("kafka_type")
        if kt in _KAFKA_TYPE_CONV:
            conv = _KAFKA_TYPE_CONV[kt]
        elif f.name == "error_message":
            conv = bounded_message
        else:
            nested = _nested_entity(hints[f.name])
            if nested is not None:
                item_cls, is_seq = nested
                conv = _seq_conv(item_cls) if is_seq else _entity_conv(item_cls)
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        default = (
            f.default
            if f.default is not MISSING
            else (f.default_factory() if f.default_factory is not MISSING else None)
        )
        plan.append((f.name, not has_default, default, conv))
    return plan


def _nested_entity(tp: Any) -> tuple[Any, bool] | None:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is tuple and args and is_dataclass(args[0]):
        return args[0], True
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        for a in args:
            if a is not type(None):
                return _nested_entity(a)
    if isinstance(tp, type) and is_dataclass(tp):
        return tp, False
    return None


def _seq_conv(item_cls: type) -> _Conv:
    def conv(v: Any) -> Any:
        if v is None:
            return None
        return tuple(x if isinstance(x, item_cls) else build(item_cls, x) for x in v)

    return conv


def _entity_conv(item_cls: type) -> _Conv:
    def conv(v: Any) -> Any:
        if v is None or isinstance(v, item_cls):
            return v
        return build(item_cls, v)

    return conv


def build(cls: type, data: Mapping[str, Any]) -> Any:
    """Build the kio entity ``cls`` from a dict, dropping keys the version lacks."""
    kwargs: dict[str, Any] = {}
    for name, required, default, conv in _plan(cls):
        if name in data:
            kwargs[name] = conv(data[name])
        elif required:
            kwargs[name] = conv(default) if default is not None else _zero_for(cls, name)
    return cls(**kwargs)


def _zero_for(cls: type, name: str) -> Any:
    """A neutral value for a required field the handler did not fill."""
    for f in fields(cls):
        if f.name == name:
            kt = f.metadata.get("kafka_type")
            if kt == "error_code":
                return ErrorCode.none
            if kt in ("timedelta_i32", "timedelta_i64"):
                return datetime.timedelta(0)
            if kt == "string":
                return ""
            if kt in ("int8", "int16", "int32", "int64", "uint16", "uint32", "float64"):
                return 0
            if kt == "bool":
                return False
            if kt == "uuid":
                return None
            if kt in ("bytes", "records"):
                return b""
            return ()
    raise KeyError(name)
