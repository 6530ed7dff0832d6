"""A deliberately dumb Kafka wire client for protocol edge cases: it sends what
it is told, including garbage, and reads raw frames back."""

from __future__ import annotations

import datetime
import socket
import struct
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from kafkalite.protocol import messages
from kafkalite.protocol.headers import skip_tagged_fields

_I32 = struct.Struct(">i")
TIMEOUT = datetime.timedelta(seconds=10)


def api_versions(name: str = "raw-test") -> ApiVersionsRequest:
    """ApiVersions v3 body."""
    return ApiVersionsRequest(client_software_name=name, client_software_version="1.0")


def produce(topic: str, records: bytes, acks: int = 1, partition: int = 0) -> ProduceRequest:
    """Produce v9 body for one partition."""
    return ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=TIMEOUT,
        topic_data=(
            TopicProduceData(
                name=topic, partition_data=(PartitionProduceData(index=partition, records=records),)
            ),
        ),
    )


def fetch(
    topic: str, offset: int, partition: int = 0, max_wait_ms: int = 0, max_bytes: int = 1 << 20
) -> FetchRequest:
    """Fetch v12 body for one partition (sessionless)."""
    return FetchRequest(
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(
                    FetchPartition(
                        partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def request_bytes(
    api_key: int, version: int, correlation_id: int, body: Any, client_id: str | None = "raw"
) -> bytes:
    try:
        flexible = messages.is_flexible_request(api_key, version)
    except Exception:  # a version no schema knows: send a flexible header, as a newer client would
        flexible = True
    cid = (
        b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id)) + client_id.encode()
    )
    header = (
        struct.pack(">hhi", api_key, version, correlation_id) + cid + (b"\x00" if flexible else b"")
    )
    payload = header + (messages.encode(body) if not isinstance(body, bytes) else body)
    return _I32.pack(len(payload)) + payload


class RawClient:
    def __init__(
        self, host: str, port: int, timeout: float = 10, rcvbuf: int | None = None
    ) -> None:
        if rcvbuf is None:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        else:  # the receive buffer must be set before connecting to bound the window
            self.sock = socket.socket()
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.sock.settimeout(timeout)
            self.sock.connect((host, port))
        self._cid = 0

    @classmethod
    def to(cls, bootstrap: str, **kw: Any) -> RawClient:
        host, port = bootstrap.rsplit(":", 1)
        return cls(host, int(port), **kw)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(
        self,
        api_key: int,
        version: int,
        body: Any,
        *,
        correlation_id: int | None = None,
        client_id: str | None = "raw",
    ) -> int:
        if correlation_id is None:
            self._cid += 1
            correlation_id = self._cid
        self.sock.sendall(request_bytes(api_key, version, correlation_id, body, client_id))
        return correlation_id

    def read_frame(self) -> bytes:
        head = self._read_exact(4)
        (size,) = _I32.unpack(head)
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by broker")
            buf += chunk
        return bytes(buf)

    def read_response(self, api_key: int, version: int) -> tuple[int, Any]:
        frame = self.read_frame()
        (cid,) = _I32.unpack_from(frame, 0)
        flexible = messages.response_type(api_key, version).__flexible__ and api_key != 18
        pos = skip_tagged_fields(frame, 4) if flexible else 4
        obj, _ = messages._reader(messages.response_type(api_key, version))(frame, pos)
        return cid, obj

    def call(self, api_key: int, version: int, body: Any) -> Any:
        cid = self.send(api_key, version, body)
        got_cid, obj = self.read_response(api_key, version)
        assert got_cid == cid
        return obj

    def sign_in_as_broker(self, broker: Any, replica_id: int) -> RawClient:
        """Make this connection a broker's, as a replica fetcher's first signed request
        does (an OffsetForLeaderEpoch v4 with no topics, carrying the inter-broker
        authenticator for ``broker``, a KafkaBroker): its follower fetches are obeyed."""
        from kafkalite.protocol import inter_broker as ib

        body = messages.encode(
            messages.build(messages.request_type(23, 4), {"replica_id": replica_id, "topics": []})
        )
        mac = ib.authenticator(broker.inter_broker_secret, 23, 4, broker.broker_id, body)
        self._cid += 1
        client_id = b"raw"
        header = (
            struct.pack(">hhi", 23, 4, self._cid)
            + struct.pack(">h", len(client_id))
            + client_id
            + ib.header_tagged_fields(mac)
        )
        payload = header + body
        self.sock.sendall(_I32.pack(len(payload)) + payload)
        cid, resp = self.read_response(23, 4)
        assert cid == self._cid and resp.topics == ()
        return self

    def is_closed(self, timeout: float = 5) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()
