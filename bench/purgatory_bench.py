"""How parked delayed fetches affect produce latency, on a real broker over TCP.

    python bench/purgatory_bench.py [--parked 0,10,1000,10000] [--rounds 20]

For each count N, every round parks N long-poll consumer fetches (max_wait 30 s,
pipelined 100 per connection) at the log end of one partition, waits until the
broker holds all N in its fetch purgatory, then sends one acks=1 produce to
*that* partition and measures

* produce: the produce's round trip (request sent to response read), and
* wake all: from the same start until the last parked fetch has been answered.

The produce wakes every parked fetch, so the next round parks N new ones at the
new log end. The broker runs in a child process (kafkalite.testing's embedded
broker, uvloop) so the client's reads do not share its interpreter; the parent
asks it over a pipe how many fetches are parked.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing as mp
import socket
import statistics
import struct
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.protocol import messages  # noqa: E402
from kafkalite.protocol.records import build_batch  # noqa: E402

_I32 = struct.Struct(">i")
PER_CONN = 100


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


# ---- the broker process ------------------------------------------------------------


def serve(pipe: Connection) -> None:
    """Child process: run a broker; answer "port", "topic <name>", "parked", "stop"."""
    from kafkalite.testing import broker as start_broker

    with start_broker() as b:
        rm = b.kafka.replica_manager
        while True:
            cmd = pipe.recv()
            if cmd == "port":
                pipe.send(b.port)
            elif cmd == "parked":
                pipe.send(b.call(lambda: rm.fetch_purgatory.num_delayed))
            elif cmd.startswith("topic "):
                b.create_topic(cmd.split(" ", 1)[1], 1)
                pipe.send(True)
            elif cmd == "stop":
                pipe.send(True)
                return


class BrokerProcess:
    def __init__(self) -> None:
        ctx = mp.get_context("spawn")
        self.pipe, child = ctx.Pipe()
        self.proc = ctx.Process(target=serve, args=(child,), daemon=True)
        self.proc.start()
        self.port = self.ask("port")

    def ask(self, cmd: str) -> object:
        self.pipe.send(cmd)
        return self.pipe.recv()

    def wait_parked(self, n: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.ask("parked") < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"fewer than {n} fetches parked after {timeout}s")
            time.sleep(0.002)

    def stop(self) -> None:
        self.ask("stop")
        self.proc.join(30)


# ---- the measurement -----------------------------------------------------------------


def run(broker: BrokerProcess, parked: int, rounds: int) -> tuple[list[float], list[float]]:
    """Per round: produce round trip (ms) and time until every parked fetch answered (ms)."""
    topic = f"purgatory-bench-{parked}-{time.time_ns()}"
    broker.ask(f"topic {topic}")
    host, port = "127.0.0.1", broker.port
    conns = []
    for i in range(0, parked, PER_CONN):
        s = socket.create_connection((host, port))
        conns.append((s, min(PER_CONN, parked - i)))
    p = socket.create_connection((host, port))
    p.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    produce = frame(0, 9, 1, produce_body(topic, 0, build_batch([(b"k", b"v" * 100)])))
    produce_ms: list[float] = []
    wake_ms: list[float] = []
    for offset in range(rounds):
        fetch = frame(1, 12, 1, fetch_body(topic, 0, offset, 30_000))
        for s, n in conns:
            s.sendall(fetch * n)
        broker.wait_parked(parked)
        t0 = time.perf_counter()
        p.sendall(produce)
        read_frame(p)
        produce_ms.append((time.perf_counter() - t0) * 1000)
        for s, n in conns:
            for _ in range(n):
                read_frame(s)
        wake_ms.append((time.perf_counter() - t0) * 1000)
    for s, _ in conns:
        s.close()
    p.close()
    return produce_ms, wake_ms


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parked", default="0,10,1000,10000")
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    broker = BrokerProcess()
    print(
        f"{'parked fetches':>14} | {'produce p50 ms':>14} | {'produce max ms':>14} |"
        f" {'wake all p50 ms':>15} | {'per fetch us':>12}"
    )
    print("-" * 83)
    try:
        for n in (int(x) for x in args.parked.split(",")):
            produce_ms, wake_ms = run(broker, n, args.rounds)
            wake = statistics.median(wake_ms)
            per = wake * 1000 / n if n else 0.0
            print(
                f"{n:>14,} | {statistics.median(produce_ms):>14.2f} | {max(produce_ms):>14.2f} |"
                f" {wake:>15.1f} | {per:>12.1f}",
                flush=True,
            )
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
