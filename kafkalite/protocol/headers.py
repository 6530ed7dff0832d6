"""Request and response headers (KIP-482).

Request header v1: api_key int16, api_version int16, correlation_id int32,
client_id nullable *legacy* string. v2 adds a tagged-field section. A request
uses v2 iff its API version is flexible. Response header v0 is correlation_id
only; v1 adds tagged fields; ApiVersions responses always use v0 so a client
that guessed a too-new version can still parse the error.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkalite.common import structs

_HDR = struct.Struct(">hhi")


class MalformedRequest(Exception):
    """The frame cannot be parsed; the connection must be closed."""


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int  # bytes the header occupies (body starts here)


def parse_request_header(buf: bytes | memoryview, flexible: bool | None = None) -> RequestHeader:
    """Parse the common prefix, then (if ``flexible``) skip the tagged fields.

    ``flexible`` may be None on the first pass, when the caller does not yet
    know the API version; call :func:`skip_header_tags` afterwards.
    """
    if len(buf) < 8:
        raise MalformedRequest("request shorter than its header")
    api_key, api_version, correlation_id = _HDR.unpack_from(buf, 0)
    if len(buf) < 10:
        raise MalformedRequest("request header without client_id")
    n = structs.I16.unpack_from(buf, 8)[0]
    pos = 10
    client_id: str | None = None
    if n >= 0:
        if pos + n > len(buf):
            raise MalformedRequest("client_id overruns the frame")
        # Kafka decodes it as Java does: invalid UTF-8 becomes U+FFFD, not an error
        client_id = bytes(buf[pos : pos + n]).decode("utf-8", "replace")
        pos += n
    elif n != -1:
        raise MalformedRequest("negative client_id length")
    hdr = RequestHeader(api_key, api_version, correlation_id, client_id, pos)
    if flexible:
        hdr.size = skip_tagged_fields(buf, pos)
    return hdr


def _read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise MalformedRequest("unsigned varint too long")


def skip_tagged_fields(buf: bytes | memoryview, pos: int) -> int:
    if pos < len(buf) and buf[pos] == 0:
        return pos + 1  # no tagged fields: nearly every request, several times each
    try:
        count, pos = _read_uvarint(buf, pos)
        for _ in range(count):
            _tag, pos = _read_uvarint(buf, pos)
            size, pos = _read_uvarint(buf, pos)
            pos += size
    except IndexError as e:
        raise MalformedRequest("truncated tagged fields") from e
    if pos > len(buf):
        raise MalformedRequest("tagged fields overrun the frame")
    return pos


def response_header(correlation_id: int, flexible: bool) -> bytes:
    """Response header bytes; flexible (v1) adds an empty tagged-field section."""
    if flexible:
        return structs.I32.pack(correlation_id) + b"\x00"
    return structs.I32.pack(correlation_id)
