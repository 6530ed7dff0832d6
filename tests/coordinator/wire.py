"""A tiny asyncio Kafka client for group protocol tests: one connection, any API,
requests and responses as kio entities (requests may be given as dicts)."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from kafkalite.protocol import messages
from kafkalite.protocol.headers import skip_tagged_fields
from tests.server.raw_client import request_bytes

_I32 = struct.Struct(">i")


class Wire:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.client_id = client_id
        self._cid = 0

    @classmethod
    async def connect(cls, bootstrap: str, client_id: str = "wire") -> Wire:
        host, port = bootstrap.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer, client_id)

    async def call(self, api_key: int, version: int, body: Any, timeout: float = 15) -> Any:
        if isinstance(body, dict):
            body = messages.build(messages.request_type(api_key, version), body)
        self._cid += 1
        cid = self._cid
        self.writer.write(request_bytes(api_key, version, cid, body, self.client_id))
        await self.writer.drain()
        head = await asyncio.wait_for(self.reader.readexactly(4), timeout)
        frame = await self.reader.readexactly(_I32.unpack(head)[0])
        assert _I32.unpack_from(frame, 0)[0] == cid
        cls = messages.response_type(api_key, version)
        pos = skip_tagged_fields(frame, 4) if cls.__flexible__ else 4
        obj, _ = messages._reader(cls)(frame, pos)
        return obj

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass
