"""How parked delayed fetches affect produce latency, on a real broker over TCP.

    python bench/purgatory_bench.py [--bootstrap HOST:PORT] [--produces 300]

Parks 0 / 10 / 1,000 / 10,000 long-poll fetches (max_wait 30 s) on partition 1
of a topic — pipelined, 100 per connection — then measures acks=1 produce
latency to partition 0 (p50/p99). Finally it measures the fan-out: one produce
to the partition the fetches wait on, and the time until every parked fetch
has been answered. Without --bootstrap it starts an embedded kafkalite broker.
"""

from __future__ import annotations

import argparse
import datetime
import socket
import statistics
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.protocol import messages  # noqa: E402
from kafkalite.protocol.records import build_batch  # noqa: E402

_I32 = struct.Struct(">i")


def frame(api_key: int, version: int, cid: int, body: object) -> bytes:
    flexible = messages.is_flexible_request(api_key, version)
    header = (
        struct.pack(">hhi", api_key, version, cid)
        + b"\x00\x05bench"
        + (b"\x00" if flexible else b"")
    )
    payload = header + messages.encode(body)
    return _I32.pack(len(payload)) + payload


def read_frame(sock: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return bytes(buf)

    return exact(_I32.unpack(exact(4))[0])


def fetch_body(topic: str, partition: int, offset: int, wait_ms: int) -> object:
    return messages.build(
        messages.request_type(1, 12),
        {
            "replica_id": -1,
            "max_wait": datetime.timedelta(milliseconds=wait_ms),
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": partition,
                            "fetch_offset": offset,
                            "partition_max_bytes": 1 << 20,
                        }
                    ],
                }
            ],
        },
    )


def produce_body(topic: str, partition: int, records: bytes) -> object:
    return messages.build(
        messages.request_type(0, 9),
        {
            "acks": 1,
            "timeout": 30000,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": records}]}
            ],
        },
    )


def create_topic(host: str, port: int, topic: str) -> None:
    s = socket.create_connection((host, port))
    body = messages.build(
        messages.request_type(19, 7),
        {
            "topics": [
                {
                    "name": topic,
                    "num_partitions": 2,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout": 10000,
            "validate_only": False,
        },
    )
    s.sendall(frame(19, 7, 1, body))
    read_frame(s)
    s.close()


def run(host: str, port: int, parked: int, produces: int, topic: str) -> tuple[float, float, float]:
    conns = []
    per_conn = 100
    # park on partition 1 at its log end (the topic is new: offset 0)
    fb = fetch_body(topic, 1, 0, 30_000)
    for i in range(0, parked, per_conn):
        s = socket.create_connection((host, port))
        n = min(per_conn, parked - i)
        s.sendall(b"".join(frame(1, 12, c, fb) for c in range(n)))
        conns.append((s, n))
    time.sleep(0.5 + parked / 20000)  # let the broker park them
    p = socket.create_connection((host, port))
    p.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rec = build_batch([(b"k", b"v" * 100)])
    body = frame(0, 9, 1, produce_body(topic, 0, rec))
    lat = []
    for _ in range(produces):
        t = time.perf_counter()
        p.sendall(body)
        read_frame(p)
        lat.append((time.perf_counter() - t) * 1000)
    # fan-out: one produce to the partition every parked fetch watches
    fan = 0.0
    if parked:
        t = time.perf_counter()
        p.sendall(frame(0, 9, 2, produce_body(topic, 1, rec)))
        read_frame(p)
        for s, n in conns:
            for _ in range(n):
                read_frame(s)
        fan = (time.perf_counter() - t) * 1000
    for s, _ in conns:
        s.close()
    p.close()
    lat.sort()
    return statistics.median(lat), lat[int(len(lat) * 0.99) - 1], fan


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--produces", type=int, default=300)
    ap.add_argument("--parked", default="0,10,1000,10000")
    args = ap.parse_args()
    broker = None
    if args.bootstrap:
        host, port_s = args.bootstrap.rsplit(":", 1)
        port = int(port_s)
    else:
        from kafkalite.testing import broker as start_broker

        cm = start_broker()
        broker = cm.__enter__()
        host, port = "127.0.0.1", broker.port
    print(
        f"{'parked fetches':>15} | {'produce p50 ms':>14} | {'produce p99 ms':>14} | {'wake all parked ms':>18}"
    )
    print("-" * 72)
    try:
        for i, n in enumerate(int(x) for x in args.parked.split(",")):
            topic = f"purgatory-bench-{i}-{int(time.time())}"
            create_topic(host, port, topic)
            p50, p99, fan = run(host, port, n, args.produces, topic)
            print(f"{n:>15} | {p50:>14.3f} | {p99:>14.3f} | {fan:>18.1f}")
    finally:
        if broker is not None:
            cm.__exit__(None, None, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
