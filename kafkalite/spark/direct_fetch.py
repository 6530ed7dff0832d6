"""The executors' direct range reads: Fetch requests to the partition's leader over a plain
socket, decoded into Arrow columns by :mod:`kafkalite.spark.record_columns`.

Why: an executor reads ranges that are already in the log, one partition at a time, and
Spark wants columns. confluent-kafka builds a message object per record that the connector
then takes apart again; on the two cores Spark's JVM, the Python workers and the broker
share, that was the connector's largest cost (docs/spark.md, "round 4").

The direct path reads only what it knows how to read, and hands everything else to the
confluent-kafka path from the offset it reached (:class:`DirectUnavailable`):
- only ``PLAINTEXT`` connections and the ``kafka.*`` settings in :data:`UNDERSTOOD`
  (TLS, SASL or any other setting: the whole read uses confluent-kafka);
- Fetch v11 and Metadata v1 (Kafka 2.3 and later, every Kafka 4 broker);
- any partition or request error (a leader move, an offset out of range, a throttled or
  failed request), a socket error, a response that makes no progress, message formats
  v0/v1 and records that do not parse: confluent-kafka reads on from the offset reached,
  with its own retries, leader look-ups and ``failOnDataLoss`` handling.

Requests are encoded with kio. Responses are parsed here, with every length checked against
the bytes received (kio's native reader can abort the process on an absurd count, and the
Fetch response's records are read in place rather than copied).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from typing import Any

from kafkalite.common import structs
from kafkalite.spark.record_columns import (
    BATCH_HEADER,
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    BatchColumns,
    CorruptRecords,
)

__all__ = ["DirectReader", "DirectUnavailable", "understood"]

#: the ``kafka.*`` settings the direct path honours or that do not concern a range read;
#: with any other one the executors read with confluent-kafka, which knows them all
UNDERSTOOD = frozenset(
    {
        "bootstrap.servers",
        "client.id",
        "group.id",
        "isolation.level",
        "security.protocol",
        "fetch.max.bytes",
        "max.partition.fetch.bytes",
        "fetch.wait.max.ms",
        "fetch.queue.backoff.ms",
        "request.timeout.ms",
        "socket.timeout.ms",
        "enable.auto.commit",
        "auto.offset.reset",
        "check.crcs",
        "enable.partition.eof",
    }
)

_FETCH, _METADATA, _API_VERSIONS = 1, 3, 18
_FETCH_VERSION, _METADATA_VERSION = 11, 1
_FETCH_PARTITION = struct.Struct(">ihqqq")  # partition, error, HW, LSO, log start
_ABORTED = struct.Struct(">qq")  # producer id, first offset
_HEADER = struct.Struct(">hhi")  # api key, version, correlation id
#: response frames the direct path accepts beyond its fetch.max.bytes (a first batch larger
#: than the limits is returned whole, KIP-74)
_FRAME_SLACK = 64 << 20


class DirectUnavailable(Exception):
    """The direct path stops here; ``offset`` is the first offset it did not read."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason


def understood(client: dict[str, str]) -> bool:
    """Whether the direct path can read with these ``kafka.*`` settings."""
    if client.get("security.protocol", "plaintext").lower() != "plaintext":
        return False
    return all(key in UNDERSTOOD for key in client)


class _Connection:
    """One blocking connection: a request, then its response into a buffer that is reused
    (no new pages per response)."""

    def __init__(self, host: str, port: int, client_id: bytes, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self.correlation = 0
        self.buf = bytearray(1 << 16)
        self.pending: list[int] = []

    def send(self, api_key: int, version: int, body: bytes) -> None:
        self.correlation += 1
        head = _HEADER.pack(api_key, version, self.correlation)
        head += structs.I16.pack(len(self.client_id)) + self.client_id
        self.sock.sendall(structs.I32.pack(len(head) + len(body)) + head + body)
        self.pending.append(self.correlation)

    def receive(self, limit: int) -> tuple[bytearray, int]:
        """The next response: (buffer, its size); the body starts at 4 (after the
        correlation id)."""
        size = structs.I32.unpack(self._read_into(memoryview(bytearray(4)), 4))[0]
        if size < 4 or size > limit:
            raise ValueError(f"response of {size} bytes")
        if len(self.buf) < size:
            self.buf = bytearray(max(size, 2 * len(self.buf)))
        view = memoryview(self.buf)
        self._read_into(view, size)
        view.release()
        (correlation,) = structs.I32.unpack_from(self.buf, 0)
        if not self.pending or correlation != self.pending.pop(0):
            raise ValueError(f"unexpected correlation id {correlation}")
        return self.buf, size

    def _read_into(self, view: memoryview, size: int) -> memoryview:
        got = 0
        while got < size:
            n = self.sock.recv_into(view[got:size])
            if not n:
                raise ConnectionError("connection closed by the broker")
            got += n
        return view[:size]

    def call(self, api_key: int, version: int, body: bytes, limit: int = 16 << 20) -> bytes:
        self.send(api_key, version, body)
        buf, size = self.receive(limit)
        return bytes(buf[4:size])

    def close(self) -> None:
        self.sock.close()


def _kio_body(api_key: int, version: int, **fields: Any) -> bytes:
    import io

    from kio.index import load_request_schema
    from kio.serial import entity_writer

    cls = load_request_schema(api_key, version)
    out = io.BytesIO()
    entity_writer(cls)(out, cls(**fields))
    return out.getvalue()


def _string(body: bytes, p: int) -> tuple[str, int]:
    (n,) = structs.I16.unpack_from(body, p)
    p += 2
    if n < 0:
        return "", p
    if p + n > len(body):
        raise ValueError("string overruns the response")
    return body[p : p + n].decode("utf-8", "replace"), p + n


def _check_versions(body: bytes) -> None:
    """ApiVersions v0: Fetch v11 and Metadata v1 must be in the broker's ranges."""
    error, count = struct.unpack_from(">hi", body, 0)
    if error:
        raise ValueError(f"ApiVersions error {error}")
    ranges = {}
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", body, 6 + 6 * i)
        ranges[key] = (lo, hi)
    for key, version in ((_FETCH, _FETCH_VERSION), (_METADATA, _METADATA_VERSION)):
        lo, hi = ranges.get(key, (0, -1))
        if not lo <= version <= hi:
            raise ValueError(f"the broker does not support API {key} v{version}")


def _leader(body: bytes, topic: str, partition: int) -> tuple[str, int] | None:
    """Metadata v1: the address of ``topic``-``partition``'s leader, if it has one."""
    (count,) = structs.I32.unpack_from(body, 0)
    p, brokers = 4, {}
    for _ in range(count):
        (node,) = structs.I32.unpack_from(body, p)
        host, p = _string(body, p + 4)
        (port,) = structs.I32.unpack_from(body, p)
        _, p = _string(body, p + 4)  # rack
        brokers[node] = (host, port)
    p += 4  # controller id
    (topics,) = structs.I32.unpack_from(body, p)
    p += 4
    for _ in range(topics):
        (error,) = structs.I16.unpack_from(body, p)
        name, p = _string(body, p + 2)
        p += 1  # is_internal
        (parts,) = structs.I32.unpack_from(body, p)
        p += 4
        for _ in range(parts):
            perror, index, leader = struct.unpack_from(">hii", body, p)
            p += 10
            for _ in range(2):  # replicas, isr
                (n,) = structs.I32.unpack_from(body, p)
                p += 4 + 4 * max(n, 0)
            if name == topic and index == partition and not error and not perror:
                return brokers.get(leader)
    return None


class _Response:
    """The one partition of a Fetch v11 response (parsed in place)."""

    __slots__ = ("error", "high_watermark", "aborted", "records_at", "records_end")

    def __init__(self, buf: bytearray, size: int) -> None:
        self.aborted: list[tuple[int, int]] | None = None
        p = 4 + 4  # correlation id, throttle time
        (error,) = structs.I16.unpack_from(buf, p)
        p += 2 + 4  # error, session id
        (topics,) = structs.I32.unpack_from(buf, p)
        if error or topics != 1:
            self.error = error or -1
            return
        (n,) = structs.I16.unpack_from(buf, p + 4)
        p += 6 + max(n, 0)
        (parts,) = structs.I32.unpack_from(buf, p)
        if parts != 1:
            self.error = -1
            return
        _, self.error, self.high_watermark, _, _ = _FETCH_PARTITION.unpack_from(buf, p + 4)
        p += 4 + _FETCH_PARTITION.size
        (count,) = structs.I32.unpack_from(buf, p)
        p += 4
        aborted = []
        for _ in range(max(count, 0)):
            aborted.append(_ABORTED.unpack_from(buf, p))
            p += _ABORTED.size
        self.aborted = aborted
        p += 4  # preferred read replica
        (length,) = structs.I32.unpack_from(buf, p)
        p += 4
        if p + max(length, 0) > size:
            raise ValueError("records overrun the response")
        self.records_at, self.records_end = p, p + max(length, 0)


def _next_offset(buf: bytearray, pos: int, end: int, start: int) -> int:
    """The offset after the last complete batch of ``buf[pos:end]`` (``start`` if none)."""
    nxt = start
    while pos + BATCH_OVERHEAD <= end:
        head = BATCH_HEADER.unpack_from(buf, pos)
        base, length, last_delta = (
            head[0],
            head[1],
            head[6],
        )  # baseOffset, batchLength, lastOffsetDelta
        if pos + LOG_OVERHEAD + length > end or length < BATCH_OVERHEAD - LOG_OVERHEAD:
            break
        nxt = max(nxt, base + last_delta + 1)
        pos += LOG_OVERHEAD + length
    return nxt


class DirectReader:
    """An executor's direct reads with one set of ``kafka.*`` settings; kept for the life of
    the Python worker (Spark reuses them), with a connection per broker."""

    def __init__(self, client: dict[str, str]) -> None:
        self.bootstrap = [
            (h.rsplit(":", 1)[0].strip("[]"), int(h.rsplit(":", 1)[1]))
            for h in (s.strip() for s in client["bootstrap.servers"].split(","))
            if h
        ]
        self.client_id = client.get("client.id", "kafkalite-spark").encode()
        self.read_committed = client.get("isolation.level") == "read_committed"
        self.max_bytes = int(client.get("fetch.max.bytes", 52428800))
        self.partition_bytes = int(client.get("max.partition.fetch.bytes", 8 << 20))
        self.max_wait_ms = int(client.get("fetch.wait.max.ms", 10))
        self.timeout = int(client.get("request.timeout.ms", 30000)) / 1000
        self._connections: dict[tuple[str, int], _Connection] = {}
        self._leaders: dict[tuple[str, int], tuple[str, int]] = {}

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    def _connect(self, address: tuple[str, int]) -> _Connection:
        conn = self._connections.get(address)
        if conn is None:
            conn = _Connection(address[0], address[1], self.client_id, self.timeout)
            try:
                _check_versions(conn.call(_API_VERSIONS, 0, b""))
            except BaseException:
                conn.close()
                raise
            self._connections[address] = conn
        return conn

    def _leader_of(self, topic: str, partition: int) -> tuple[str, int]:
        got = self._leaders.get((topic, partition))
        if got is not None:
            return got
        body = _kio_body(_METADATA, _METADATA_VERSION, topics=(_metadata_topic(topic),))
        for address in [*self._connections, *self.bootstrap]:
            try:
                leader = _leader(self._connect(address).call(_METADATA, 1, body), topic, partition)
            except (OSError, ValueError, struct.error):
                self._drop(address)
                continue
            if leader is not None:
                self._leaders[(topic, partition)] = leader
                return leader
        raise ValueError(f"no leader known for {topic}-{partition}")

    def _drop(self, address: tuple[str, int]) -> None:
        conn = self._connections.pop(address, None)
        if conn is not None:
            conn.close()

    def _fetch_body(self, topic: str, partition: int, offset: int) -> bytes:
        return _kio_body(
            _FETCH,
            _FETCH_VERSION,
            replica_id=-1,
            max_wait=_timedelta(self.max_wait_ms),
            min_bytes=1,
            max_bytes=self.max_bytes,
            isolation_level=1 if self.read_committed else 0,
            session_id=0,
            session_epoch=-1,  # no fetch session: every request names its partition
            topics=(_fetch_topic(topic, partition, offset, self.partition_bytes),),
            forgotten_topics_data=(),
            rack_id="",
        )

    def _first_fetch(
        self, address: tuple[str, int], topic: str, partition: int, offset: int, limit: int
    ) -> tuple[_Connection, bytearray, int]:
        """The range's first Fetch and its response. A kept connection may have been closed
        by the broker while the worker was idle (``connections.max.idle.ms``): that one is
        retried once on a new connection, rather than handing the range to confluent-kafka."""
        kept = address in self._connections
        body = self._fetch_body(topic, partition, offset)
        for attempt in (1, 2):
            conn = self._connect(address)
            try:
                conn.send(_FETCH, _FETCH_VERSION, body)
                buf, size = conn.receive(limit)
                return conn, buf, size
            except OSError:
                self._drop(address)
                if not kept or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def read(
        self, topic: str, partition: int, start: int, stop: int, cols: BatchColumns
    ) -> Iterator[Any]:
        """Yield Arrow batches of ``[start, stop)``; raises :class:`DirectUnavailable` with
        the offset reached when the rest is for confluent-kafka to read."""
        offset = start
        address = None
        try:
            address = self._leader_of(topic, partition)
            limit = max(self.max_bytes, self.partition_bytes) + _FRAME_SLACK
            conn, first, size = self._first_fetch(address, topic, partition, offset, limit)
            buf: bytearray | None = first
            while True:
                if buf is None:
                    buf, size = conn.receive(limit)
                resp = _Response(buf, size)
                if resp.error:
                    self._leaders.pop((topic, partition), None)
                    raise DirectUnavailable(offset, f"fetch error {resp.error}")
                at, end = resp.records_at, resp.records_end
                following = _next_offset(buf, at, end, offset)
                if following < stop and following > offset:
                    # the next request goes out before this response is decoded: the broker
                    # reads and sends it meanwhile
                    conn.send(_FETCH, _FETCH_VERSION, self._fetch_body(topic, partition, following))
                try:
                    got = cols.decode(
                        buf,
                        at,
                        end,
                        start=offset,
                        stop=stop,
                        aborted=(resp.aborted or []) if self.read_committed else None,
                    )
                except CorruptRecords as e:
                    raise DirectUnavailable(offset, f"records that do not parse: {e}") from None
                if got.batch is not None:
                    yield got.batch
                if got.stopped is not None:
                    raise DirectUnavailable(max(offset, got.next_offset), got.stopped)
                if got.next_offset >= stop:
                    return
                if got.next_offset <= offset:
                    raise DirectUnavailable(offset, "a fetch without progress")
                offset = got.next_offset
                buf = None
                if following != offset:  # (no request in flight)
                    raise DirectUnavailable(offset, "a response read differently than walked")
        except (OSError, ValueError, struct.error) as e:
            if address is not None:
                self._drop(address)
            raise DirectUnavailable(offset, f"{type(e).__name__}: {e}") from None
        except BaseException:
            # a request may be in flight (the consumer stopped early, or a fallback): the
            # connection is not reused
            if address is not None:
                self._drop(address)
            raise


def _timedelta(ms: int) -> Any:
    import datetime

    return datetime.timedelta(milliseconds=ms)


def _metadata_topic(topic: str) -> Any:
    from kio.schema.metadata.v1.request import MetadataRequestTopic
    from kio.schema.types import TopicName

    return MetadataRequestTopic(name=TopicName(topic))


def _fetch_topic(topic: str, partition: int, offset: int, max_bytes: int) -> Any:
    from kio.schema.fetch.v11.request import FetchPartition, FetchTopic
    from kio.schema.types import TopicName
    from kio.static.primitive import i32, i64

    return FetchTopic(
        topic=TopicName(topic),
        partitions=(
            FetchPartition(
                partition=i32(partition),
                current_leader_epoch=i32(-1),
                fetch_offset=i64(offset),
                log_start_offset=i64(-1),
                partition_max_bytes=i32(max_bytes),
            ),
        ),
    )
