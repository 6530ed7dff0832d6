"""Topic set-up and the wire-level probes of the workloads.

Topics are created and deleted through confluent-kafka's AdminClient, which
works with every broker under test. Metadata timing and the compression check
use raw requests (kafkalite's kio codecs) so that no client-side decoding or
caching is in the measured time.
"""

from __future__ import annotations

import datetime
import itertools
import os
import socket
import statistics
import struct
import time
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.cli.wire_client import WireClient
from kafkalite.protocol import messages

_I32 = struct.Struct(">i")
_seq = itertools.count()
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def unique(prefix: str) -> str:
    return f"bench-{prefix}-{os.getpid()}-{int(time.time())}-{next(_seq)}"


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def create_topics(bootstrap: str, topics: dict[str, int], timeout: float = 300.0) -> float:
    """Create ``{name: partitions}`` (replication factor 1); returns the seconds it took."""
    t0 = time.perf_counter()
    admin = _admin(bootstrap)  # must outlive the futures
    futures = admin.create_topics(
        [NewTopic(n, p, 1) for n, p in topics.items()],
        request_timeout=timeout,
        operation_timeout=timeout,
    )
    for name, f in futures.items():
        try:
            f.result(timeout)
        except Exception as e:
            raise RuntimeError(f"create topic {name}: {e}") from e
    return time.perf_counter() - t0


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    create_topics(bootstrap, {name: partitions})
    wait_for_leaders(bootstrap, name, partitions)


def wait_for_leaders(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """Block until Metadata shows a leader for every partition (clients would retry otherwise)."""
    admin = _admin(bootstrap)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if (
            md is not None
            and md.error is None
            and len(md.partitions) == partitions
            and all(p.leader >= 0 for p in md.partitions.values())
        ):
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {topic}: no leaders after {timeout:.0f} s")


def delete_topics(bootstrap: str, names: list[str]) -> None:
    """Best effort: frees the disk a produce case used."""
    if not names:
        return
    admin = _admin(bootstrap)
    try:
        for f in admin.delete_topics(names, operation_timeout=60).values():
            f.result(60)
    except Exception:
        pass


def _frame(api_key: int, version: int, cid: int, body: dict[str, Any]) -> bytes:
    cls = messages.request_type(api_key, version)
    header = struct.pack(">hhi", api_key, version, cid) + b"\x00\x05bench"
    if messages.is_flexible_request(api_key, version):
        header += b"\x00"
    payload = header + messages.encode(messages.build(cls, body))
    return _I32.pack(len(payload)) + payload


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise ConnectionError("broker closed the connection")
        got += k
    return bytes(buf)


def metadata_timing(bootstrap: str, repeats: int = 5) -> dict[str, float]:
    """Round trip of a Metadata request for all topics: send → last byte received.

    Returns median and max milliseconds, the response size and partition count.
    """
    wc = WireClient(bootstrap)
    version = wc.version_for(3, 12)
    body = {
        "topics": None,
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
        "include_cluster_authorized_operations": False,
    }
    req = _frame(3, version, 1, body)
    times: list[float] = []
    size = 0
    frame = b""
    for _ in range(repeats):
        t0 = time.perf_counter()
        wc.sock.sendall(req)
        size = _I32.unpack(_read_exact(wc.sock, 4))[0]
        frame = _read_exact(wc.sock, size)
        times.append((time.perf_counter() - t0) * 1000)
    wc.close()
    pos = 4
    if version >= 9:
        from kafkalite.protocol.headers import skip_tagged_fields

        pos = skip_tagged_fields(frame, 4)
    resp = messages.decode_response(3, version, frame, pos)
    parts = sum(len(t.partitions) for t in resp.topics)
    return {
        "median_ms": statistics.median(times),
        "max_ms": max(times),
        "bytes": float(size),
        "partitions": float(parts),
        "version": float(version),
    }


def stored_codec(bootstrap: str, topic: str, partition: int = 0) -> str:
    """The compression codec of the first batch the broker stored (attributes & 7).

    librdkafka silently sends lz4 uncompressed when it decides the broker
    cannot take it; this shows what actually happened.
    """
    wc = WireClient(bootstrap)
    try:
        v = wc.version_for(1, 12)
        if v < 4:
            return "?"
        part = {
            "partition": partition,
            "fetch_offset": 0,
            "partition_max_bytes": 65536,
            "log_start_offset": -1,
            "current_leader_epoch": -1,
        }
        body = {
            "replica_id": -1,
            "max_wait": datetime.timedelta(milliseconds=500),
            "min_bytes": 1,
            "max_bytes": 65536,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [part]}],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        resp = wc.call(1, v, body)
        for t in resp.responses:
            for p in t.partitions:
                rec = p.records or b""
                if len(rec) >= 23:
                    return CODECS.get(int.from_bytes(rec[21:23], "big") & 7, "?")
        return "?"
    except Exception as e:  # a probe only: never fail the run for it
        return f"? ({type(e).__name__})"
    finally:
        wc.close()
