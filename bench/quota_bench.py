"""Client quotas on a real broker process: fairness, rate accuracy, request_percentage.

    python bench/quota_bench.py [--seconds 30] [--rate-seconds 30] [--quota 1048576]
                                [--phases 1234] [--runs 1]
    nice -n 19 python bench/quota_bench.py --phases 23 --runs 3   # rate accuracy only

One run prints, against a ``kafkalite-server`` process (2-core machine: numbers
are this machine's, shared with whatever else runs):

1. **fairness**: 1 greedy producer (as fast as librdkafka goes, 16 KiB values)
   and 10 well-behaved ones (100 records/s of 1 KiB each, linger.ms=0), first
   without quotas, then with ``producer_byte_rate=--quota`` on the greedy client
   id: every producer's throughput and the well-behaved ones' delivery p50/p99;
2. **producer_byte_rate** accuracy, ``--runs`` times: a confluent-kafka producer
   alone under the quota (librdkafka's default batch.size, then 16384) for
   10 + ``--rate-seconds`` s: its rate over the first ``--rate-seconds`` (which
   include Kafka's initial allowance) and over the ``--rate-seconds`` after the
   allowance, its rate per 5 s, throttle callbacks, failed deliveries;
3. **consumer_byte_rate** accuracy, ``--runs`` times: a consumer reading a
   pre-filled topic under the quota, the same figures; then a summary of the
   after-the-allowance figures of every run against the quota;
s. (``--phases s``) the same arithmetic without a broker: kafkalite's
   ``WindowedRate`` against a simulated greedy client, the spread of 30 s rates;
4. **request_percentage**: 4 processes flooding Metadata, with and without
   ``request_percentage=10`` on their client id, while one producer sends 200
   records/s and measures its delivery p99 (also after the quota window's
   initial allowance is spent).

Kafka's windowed rate divides by at least ``quota.window.num - 1`` windows
(10 s by default), so a client may burst that much of its quota at the start;
the sample holding that burst expires ``quota.window.num`` windows later and a
greedy client bursts again: a sawtooth of period ~11 s (docs/quotas.md).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.cli.wire_client import WireClient  # noqa: E402

ALTER_CLIENT_QUOTAS, METADATA = 49, 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, root: Path) -> None:
        self.port = _free_port()
        cfg = root / "server.properties"
        cfg.write_text(
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}\n"
            f"log.dirs={root / 'data'}\n"
            "broker.id=0\n"
            "offsets.topic.replication.factor=1\n"
            "num.partitions=1\n"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkalite.cli.server", str(cfg), "--log-level", "WARNING"],
            stdout=subprocess.PIPE,
            stderr=(root / "broker.err").open("w"),
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "ready on" not in line:
            raise RuntimeError(f"broker did not start: {line!r}")
        self.bootstrap = f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(120)


def set_quota(bootstrap: str, client_id: str, values: dict[str, float | None]) -> None:
    c = WireClient(bootstrap)
    try:
        ops = [
            {"key": k, "value": 0.0 if v is None else float(v), "remove": v is None}
            for k, v in values.items()
        ]
        r = c.call(
            ALTER_CLIENT_QUOTAS,
            1,
            {
                "entries": [
                    {"entity": [{"entity_type": "client-id", "entity_name": client_id}], "ops": ops}
                ],
                "validate_only": False,
            },
        )
        assert r.entries[0].error_code == 0, r
    finally:
        c.close()
    time.sleep(0.2)


@dataclass
class Stats:
    name: str
    bytes: int = 0
    failed: int = 0
    throttles: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    #: (time, cumulative bytes) every 0.5 s, for the steady-state rate
    marks: list[tuple[float, int]] = field(default_factory=list)

    def p(self, q: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        return statistics.quantiles(self.latencies_ms, n=100)[int(q) - 1]


def producer(
    bootstrap: str,
    client_id: str,
    topic: str,
    stop: threading.Event,
    stats: Stats,
    *,
    size: int,
    rate: float | None,
    batch_size: int | None = None,
) -> None:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 0 if rate else 5,
            "acks": 1,
            # a greedy producer queues at most this much (stopping purges it)
            "queue.buffering.max.kbytes": 16384,
            **({"batch.size": batch_size} if batch_size else {}),
            "throttle_cb": lambda ev: setattr(stats, "throttles", stats.throttles + 1),
        }
    )
    value = b"x" * size

    from confluent_kafka import KafkaError

    purged = (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT)

    def done(err: Any, _msg: Any, t0: float) -> None:
        if err is None:
            stats.bytes += size
            stats.latencies_ms.append((time.perf_counter() - t0) * 1000)
        elif err.code() not in purged:  # what the bench dropped when it stopped
            stats.failed += 1

    start = time.perf_counter()
    sent = 0
    next_mark = start
    while not stop.is_set():
        now = time.perf_counter()
        if now >= next_mark:
            stats.marks.append((now, stats.bytes))
            next_mark += 0.5
        if rate is not None and sent >= (now - start) * rate:
            p.poll(0.002)
            continue
        t0 = time.perf_counter()
        try:
            p.produce(topic, value, on_delivery=lambda e, m, t0=t0: done(e, m, t0))
            sent += 1
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    stats.marks.append((time.perf_counter(), stats.bytes))
    p.purge(in_queue=True, in_flight=False)
    p.flush(30)


def run_producers(
    bootstrap: str,
    specs: list[tuple[str, int, float | None]],
    seconds: float,
    batch_size: int | None = None,
) -> list[Stats]:
    stop = threading.Event()
    stats = [Stats(cid) for cid, _, _ in specs]
    threads = [
        threading.Thread(
            target=producer,
            args=(bootstrap, cid, "fair", stop, st),
            kwargs={"size": size, "rate": rate, "batch_size": batch_size},
        )
        for (cid, size, rate), st in zip(specs, stats, strict=True)
    ]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(60)
    return stats


def steady_rate(st: Stats, skip_s: float) -> float:
    if not st.marks:
        return 0.0
    t_first = st.marks[0][0]
    after = [(t, b) for t, b in st.marks if t - t_first >= skip_s]
    if len(after) < 2:
        return float("nan")
    (t0, b0), (t1, b1) = after[0], after[-1]
    return (b1 - b0) / (t1 - t0)


def window_rate(st: Stats, a: float, b: float) -> float:
    """Bytes/s delivered between ``a`` and ``b`` seconds after the client started
    (the marks taken every 0.5 s nearest inside the interval)."""
    if not st.marks:
        return float("nan")
    t_first = st.marks[0][0]
    inside = [(t, n) for t, n in st.marks if a <= t - t_first <= b + 0.25]
    if len(inside) < 2:
        return float("nan")
    (t0, b0), (t1, b1) = inside[0], inside[-1]
    return (b1 - b0) / (t1 - t0)


def per_slice(st: Stats, slice_s: float = 5.0) -> str:
    """The rate slice by slice (MB/s): shows Kafka's windowed-rate sawtooth."""
    if len(st.marks) < 2:
        return ""
    t_first, end = st.marks[0][0], st.marks[-1][0]
    out, a = [], 0.0
    while t_first + a + slice_s <= end + 0.25:
        out.append(f"{window_rate(st, a, a + slice_s) / 1e6:.2f}")
        a += slice_s
    return " ".join(out)


def accuracy_line(st: Stats, quota: int, skip_s: float, seconds: float) -> tuple[str, float]:
    """The figures of one rate run; returns the after-the-allowance percentage too."""
    first = window_rate(st, 0, seconds)
    after = window_rate(st, skip_s, skip_s + seconds)
    pct = after / quota * 100
    return (
        f"first {seconds:.0f} s {first / 1e6:.3f} MB/s = {first / quota * 100:.1f}% of the"
        f" quota (with Kafka's initial allowance); the {seconds:.0f} s after it"
        f" {after / 1e6:.3f} MB/s = {pct:.1f}%\n      per 5 s (MB/s): {per_slice(st)}",
        pct,
    )


def total_rate(st: Stats) -> float:
    if len(st.marks) < 2:
        return 0.0
    return (st.marks[-1][1] - st.marks[0][1]) / (st.marks[-1][0] - st.marks[0][0])


def fairness(bootstrap: str, seconds: float, quota: int, with_quota: bool, skip_s: float) -> None:
    set_quota(bootstrap, "greedy", {"producer_byte_rate": quota if with_quota else None})
    specs: list[tuple[str, int, float | None]] = [("greedy", 16384, None)]
    specs += [(f"polite-{i}", 1024, 100.0) for i in range(10)]
    stats = run_producers(bootstrap, specs, seconds)
    g, polite = stats[0], stats[1:]
    lat = [x for s in polite for x in s.latencies_ms]
    q = statistics.quantiles(lat, n=100) if len(lat) > 2 else [float("nan")] * 99
    label = f"quota {quota / 1e6:.2f} MB/s on greedy" if with_quota else "no quota"
    print(f"  {label}:")
    print(
        f"    greedy   {total_rate(g) / 1e6:7.2f} MB/s (after {skip_s:.0f} s:"
        f" {steady_rate(g, skip_s) / 1e6:.2f})  throttle callbacks {g.throttles:5d}"
        f"  failed {g.failed}"
    )
    rates = [total_rate(s) / 1e3 for s in polite]
    print(
        f"    polite x10 {statistics.mean(rates):6.1f} kB/s each (min {min(rates):.1f}, "
        f"max {max(rates):.1f}; asked 102.4)  delivery p50 {q[49]:6.1f} ms  p99 {q[98]:7.1f} ms"
        f"  failed {sum(s.failed for s in polite)}"
    )


def produce_rate(
    bootstrap: str, seconds: float, quota: int, skip_s: float, batch_size: int | None, run: int
) -> float:
    """One producer alone under the quota for ``skip_s + seconds``; its figures."""
    client = f"greedy-{batch_size or 'default'}-{run}"
    set_quota(bootstrap, client, {"producer_byte_rate": quota})
    [g] = run_producers(bootstrap, [(client, 16384, None)], skip_s + seconds, batch_size)
    what = f"batch.size {batch_size}" if batch_size else "default batch.size (1 MB requests)"
    line, pct = accuracy_line(g, quota, skip_s, seconds)
    print(
        f"  producer run {run}, {what}: {line}\n"
        f"      throttle callbacks {g.throttles}, failed deliveries {g.failed}"
    )
    return pct


def consume_rate(bootstrap: str, seconds: float, quota: int, skip_s: float, run: int) -> float:
    """One consumer alone under the quota, reading a pre-filled topic; its figures."""
    from confluent_kafka import Consumer

    # enough data for the whole run at twice the quota
    need = int(quota * (seconds + skip_s) * 2)
    topic = f"backlog-{run}"
    set_quota(bootstrap, "loader", {})
    stop = threading.Event()
    st = Stats("loader")
    t = threading.Thread(
        target=producer,
        args=(bootstrap, "loader", topic, stop, st),
        kwargs={"size": 16384, "rate": None},
    )
    t.start()
    while st.bytes < need:
        time.sleep(0.2)
    stop.set()
    t.join(60)
    reader = f"reader-{run}"
    set_quota(bootstrap, reader, {"consumer_byte_rate": quota})
    throttles = [0]
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": reader,
            "group.id": f"bench-{reader}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "throttle_cb": lambda ev: throttles.__setitem__(0, throttles[0] + 1),
        }
    )
    c.subscribe([topic])
    got = 0
    errors = 0
    marks: list[tuple[float, int]] = []
    start = time.perf_counter()
    next_mark = start
    while time.perf_counter() - start < skip_s + seconds:
        m = c.poll(0.1)
        now = time.perf_counter()
        if now >= next_mark:
            marks.append((now, got))
            next_mark += 0.5
        if m is None:
            continue
        if m.error():
            errors += 1
            continue
        got += len(m.value())
    marks.append((time.perf_counter(), got))
    c.close()
    s = Stats(reader, bytes=got, marks=marks)
    line, pct = accuracy_line(s, quota, skip_s, seconds)
    print(
        f"  consumer run {run}: {line}\n"
        f"      throttle callbacks {throttles[0]}, consumer errors {errors}"
    )
    return pct


def _flood(bootstrap: str, seconds: float, counter: Any) -> None:
    import struct

    from kafkalite.protocol import messages

    host, port = bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    body = messages.encode(
        messages.build(
            messages.request_type(METADATA, 12),
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
    )
    cid_name = b"flood"
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
        header = (
            struct.pack(">hhi", METADATA, 12, n)
            + struct.pack(">h", len(cid_name))
            + cid_name
            + b"\x00"
        )
        payload = header + body
        s.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", _read(s, 4))[0]
        _read(s, size)
    with counter.get_lock():
        counter.value += n
    s.close()


def _read(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def request_percentage(
    bootstrap: str, seconds: float, with_quota: bool, skip_s: float, flooders: int = 4
) -> None:
    """The victim producer's delivery latency beside ``flooders`` Metadata floods (0:
    the machine's own baseline, what the broker and the machine give without any)."""
    set_quota(bootstrap, "flood", {"request_percentage": 10 if with_quota else None})
    counter = multiprocessing.Value("q", 0)
    floods = [
        multiprocessing.Process(target=_flood, args=(bootstrap, seconds, counter))
        for _ in range(flooders)
    ]
    for f in floods:
        f.start()
    time.sleep(0.5)
    [st] = run_producers(bootstrap, [("victim", 1024, 200.0)], seconds - 1)
    for f in floods:
        f.join(60)
    label = "request_percentage=10 on the flood" if with_quota else "no quota"
    if not flooders:
        label = "no flood (baseline)"
    late = [x for x in st.latencies_ms[int(len(st.latencies_ms) * skip_s / seconds) :]]
    p99_late = statistics.quantiles(late, n=100)[98] if len(late) > 2 else float("nan")
    print(
        f"  {label}: Metadata requests answered {counter.value / seconds:8.0f}/s;"
        f" victim producer {total_rate(st) / 1e3:.1f} kB/s (asked 204.8),"
        f" delivery p50 {st.p(50):.1f} ms p99 {st.p(99):.1f} ms"
        f" (after {skip_s:.0f} s: p99 {p99_late:.1f} ms), failed {st.failed}"
    )
    # 200 deliveries a second: the p99 of each 5 s shows when the latency is lost
    lat, step = st.latencies_ms, 1000
    slices = [lat[i : i + step] for i in range(0, len(lat) - step // 2, step)]
    p99s = [statistics.quantiles(x, n=100)[98] for x in slices if len(x) > 2]
    print(f"      victim p99 per 5 s (ms): {' '.join(f'{v:.1f}' for v in p99s)}")


def simulate(quota: int, seconds: float, skip_s: float) -> None:
    """Kafka's arithmetic alone (kafkalite's WindowedRate, no broker): a greedy client
    that sends its next request as soon as the mute is over, for a few request sizes.
    Shows the sawtooth a 30 s measurement lands on: it is the windowed rate's, not
    the machine's."""
    import random

    from kafkalite.quota.rate import WindowedRate

    total = 120.0
    for size in (1_000_000, 65536, 16384):
        series: list[float] = []
        for seed in range(20):
            rnd = random.Random(seed)
            r = WindowedRate(11, 1000, 0)
            t, sent = 0.0, []
            while t < total * 1000:
                r.record(size, int(t))
                sent.append((t, size))
                # the broker's time for the request, then the mute (KIP-219)
                t += rnd.uniform(1, 20) + r.throttle_ms(quota, int(t))
            a = skip_s
            while a + seconds <= total:
                n = sum(x for ts, x in sent if a * 1000 <= ts < (a + seconds) * 1000)
                series.append(n / seconds / quota * 100)
                a += 1
        print(
            f"  requests of {size} B: every {seconds:.0f} s window from {skip_s:.0f} s on,"
            f" 20 runs: {min(series):.1f}%..{max(series):.1f}% of the quota"
            f" (mean {statistics.mean(series):.1f}%,"
            f" {sum(90 <= v <= 110 for v in series) * 100 / len(series):.0f}% of them within 10%)"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--rate-seconds", type=float, default=30)
    ap.add_argument("--quota", type=int, default=1048576)
    ap.add_argument(
        "--phases", default="1234", help="which of the four parts to run (s: the simulation only)"
    )
    ap.add_argument("--runs", type=int, default=1, help="rate runs (parts 2 and 3) each")
    args = ap.parse_args()
    skip = 10.0  # quota.window.num - 1 windows of 1 s (Kafka's defaults: 11 x 1 s)
    if "s" in args.phases:
        print("s. Kafka's windowed rate alone, a simulated greedy client (no broker)")
        simulate(args.quota, args.rate_seconds, skip)
        if not set(args.phases) & set("1234"):
            return
    with tempfile.TemporaryDirectory(prefix="quota-bench-") as d:
        server = Server(Path(d))
        try:
            print(f"kafkalite quota bench (pid {os.getpid()}, broker {server.bootstrap})")
            if "1" in args.phases:
                print("1. fairness: 1 greedy + 10 polite producers")
                fairness(server.bootstrap, args.seconds, args.quota, False, skip)
                fairness(server.bootstrap, args.seconds, args.quota, True, skip)
            runs = range(1, args.runs + 1)
            pcts: dict[str, list[float]] = {}
            if "2" in args.phases:
                print(f"2. producer rate under the quota, {args.runs} run(s)")
                for run in runs:
                    for batch_size in (None, 16384):
                        pct = produce_rate(
                            server.bootstrap, args.rate_seconds, args.quota, skip, batch_size, run
                        )
                        key = f"producer, batch.size {batch_size or 'default'}"
                        pcts.setdefault(key, []).append(pct)
            if "3" in args.phases:
                print(f"3. consumer rate under the quota, {args.runs} run(s)")
                for run in runs:
                    pct = consume_rate(server.bootstrap, args.rate_seconds, args.quota, skip, run)
                    pcts.setdefault("consumer", []).append(pct)
            if pcts:
                print(f"   the {args.rate_seconds:.0f} s after the allowance, % of the quota:")
                for key, values in pcts.items():
                    within = sum(90 <= v <= 110 for v in values)
                    print(
                        f"     {key}: {' '.join(f'{v:.1f}' for v in values)}"
                        f"  (min {min(values):.1f}, max {max(values):.1f};"
                        f" {within}/{len(values)} within 10%)"
                    )
            if "4" in args.phases:
                print("4. request_percentage: 4 Metadata flooders and one producer")
                secs = args.rate_seconds + skip
                request_percentage(server.bootstrap, secs, False, skip, flooders=0)
                request_percentage(server.bootstrap, secs, False, skip)
                request_percentage(server.bootstrap, secs, True, skip)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
