"""Broker CPU time per request, A/B: ``python -m bench.request_cost_bench A_PORT:A_PID B_PORT:B_PID``.

Throughput on a shared machine moves by tens of percent with the other jobs' load;
the CPU time the broker's event loop spends per request moves much less. This
sends the same pipelined requests to two ``kafkalite-server`` processes in turn
(Produce of one small batch, acks=1; a consumer Fetch of the log's first 64 KiB)
and reads each broker's on-CPU time (``/proc/PID/schedstat``, ns) around every
run, so a change on the request path (issue 20's metrics) can be priced in
microseconds per request, rounds alternating A, B, A, B.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import sys
import time

from kafkalite.common import structs
from kafkalite.protocol import messages
from kafkalite.protocol.records import build_batch

TOPIC = "request-cost"
PIPELINE = 64


def _frame(api_key: int, version: int, body: dict) -> bytes:
    req_cls = messages.request_type(api_key, version)
    flexible = bool(req_cls.__flexible__)  # type: ignore[attr-defined]
    header = (
        struct.pack(">hhi", api_key, version, 1) + b"\x00\x04cost" + (b"\x00" if flexible else b"")
    )
    payload = header + messages.encode(messages.build(req_cls, body))
    return structs.I32.pack(len(payload)) + payload


def _produce_frame() -> bytes:
    batch = build_batch([(b"k%d" % i, b"v" * 100) for i in range(10)])
    return _frame(
        0,
        9,
        {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
        },
    )


def _fetch_frame() -> bytes:
    return _frame(
        1,
        12,
        {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "fetch_offset": 0,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": 64 * 1024,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )


def _create_topic(port: int) -> None:
    frame = _frame(
        19,
        4,
        {
            "topics": [
                {
                    "name": TOPIC,
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 10000,
            "validate_only": False,
        },
    )
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(frame)
        _read_responses(s, 1)
    time.sleep(1.0)


def _read_responses(s: socket.socket, n: int) -> None:
    buf = bytearray()
    while n:
        while len(buf) < 4 or len(buf) < 4 + structs.I32.unpack_from(buf, 0)[0]:
            chunk = s.recv(1 << 20)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        size = structs.I32.unpack_from(buf, 0)[0]
        del buf[: 4 + size]
        n -= 1


def _cpu_ns(pid: int) -> int:
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def _run(port: int, pid: int, frame: bytes, requests: int) -> float:
    """µs of the broker's main thread per request."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        chunk = frame * PIPELINE
        s.sendall(chunk)  # warm-up
        _read_responses(s, PIPELINE)
        before = _cpu_ns(pid)
        for _ in range(requests // PIPELINE):
            s.sendall(chunk)
            _read_responses(s, PIPELINE)
        after = _cpu_ns(pid)
    return (after - before) / 1000 / (requests // PIPELINE * PIPELINE)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", metavar="A_PORT:A_PID")
    ap.add_argument("b", metavar="B_PORT:B_PID")
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    brokers = {}
    for name, spec in (("A", args.a), ("B", args.b)):
        port, pid = (int(x) for x in spec.split(":"))
        brokers[name] = (port, pid)
        _create_topic(port)
    produce, fetch = _produce_frame(), _fetch_frame()
    results: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        for what, frame in (("produce", produce), ("fetch", fetch)):
            for name in "AB" if r % 2 == 0 else "BA":
                port, pid = brokers[name]
                us = _run(port, pid, frame, args.requests)
                results.setdefault((what, name), []).append(us)
                print(f"round {r + 1} {what} {name}: {us:.2f} µs/request", file=sys.stderr)
    print("| request | A µs/request (median) | B µs/request (median) | B / A |")
    print("|---|---:|---:|---:|")
    for what in ("produce", "fetch"):
        a = statistics.median(results[(what, "A")])
        b = statistics.median(results[(what, "B")])
        print(f"| {what} | {a:.2f} | {b:.2f} | {b / a:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
