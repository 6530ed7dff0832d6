"""What a handler returns or raises besides a response dict or bytes.

Handlers (``kafkalite/server/apis``) import these from here rather than from
:mod:`kafkalite.network.connection`, which writes them: a handler needs the
response shapes, not the socket code.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["CloseConnection", "FileRange", "Parts"]


class FileRange:
    """A byte range of an open file, sent with sendfile (or copied for TLS).

    ``owner`` is whatever keeps ``fd`` open (a log segment's file, which closes
    when its last reference goes): held until the range has been sent.
    """

    __slots__ = ("fd", "offset", "size", "owner")

    def __init__(self, fd: int, offset: int, size: int, owner: object = None) -> None:
        self.fd = fd
        self.offset = offset
        self.size = size
        self.owner = owner

    def read_bytes(self) -> bytes:
        return os.pread(self.fd, self.size, self.offset)


#: A response on the wire: byte chunks and file ranges, in order.
Parts = list[Any]


class CloseConnection(Exception):
    """Raised by a handler to drop the connection (e.g. an unknown api key)."""
