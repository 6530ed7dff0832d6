"""Raw throughput of kafkalite's Log next to the physical limits of the machine.

    python bench/log_bench.py [--quick] [--dir DIR] [--mb 1024] [--batch-kib 1024]
                              [--record-bytes 1024] [--no-cold]

Appends 1 KiB records in 1 MiB batches (the batch is built once; each append
gets a fresh copy, as a produce request would, and the log assigns its
offsets), then reads the whole log back through ``Log.read`` and sends each
FileSlice with ``os.sendfile`` to a socket drained by a thread. Next to them,
on the same disk: plain ``write()`` of the same bytes to a file and plain
``sendfile`` of the same segment files, which bound what the log can reach.
Page cache, no fsync: what the broker does.

Reads run twice: warm (the data is in the page cache, as right after it was
produced) and cold (every file fsynced, then dropped from the page cache with
``posix_fadvise(DONTNEED)``, so the bytes come from the disk). ``--quick``
moves 256 MiB instead of 1 GiB. The figures end with a markdown table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.log.fetch_data import FileSlice  # noqa: E402
from kafkalite.log.log import Log  # noqa: E402
from kafkalite.log.log_config import LogConfig  # noqa: E402


def build_batch(batch_bytes: int, record_bytes: int) -> bytes:
    """One uncompressed v2 batch of ``record_bytes`` values filling ~``batch_bytes``."""
    try:
        from kafkalite.protocol.records import build_batch as build
    except ImportError:  # pragma: no cover
        build = None
    n = max(1, batch_bytes // (record_bytes + 8))
    value = os.urandom(record_bytes)
    now = int(time.time() * 1000)
    if build is not None:
        return build([(None, value)] * n, timestamp_ms=now)
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    for i in range(n):
        b.append(i, now, None, value, [])
    return bytes(b.build())


class Sink:
    """A socket pair whose reading end is drained by a thread (a consumer NIC stand-in)."""

    def __init__(self) -> None:
        self.tx, self.rx = socket.socketpair()
        for s in (self.tx, self.rx):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.received = 0
        self._t = threading.Thread(target=self._drain, daemon=True)
        self._t.start()

    def _drain(self) -> None:
        buf = bytearray(1 << 20)
        while True:
            n = self.rx.recv_into(buf)
            if not n:
                return
            self.received += n

    def close(self) -> int:
        self.tx.shutdown(socket.SHUT_WR)
        self._t.join()
        self.tx.close()
        self.rx.close()
        return self.received


def sendfile_all(out_fd: int, in_fd: int, offset: int, count: int) -> int:
    sent = 0
    while sent < count:
        n = os.sendfile(out_fd, in_fd, offset + sent, count - sent)
        if n == 0:
            break
        sent += n
    return sent


def timed(fn: Callable[[], int]) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = fn()
    return time.perf_counter() - t0, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=None, help="data directory (default: a temp dir)")
    ap.add_argument("--mb", type=int, default=1024, help="MiB to append")
    ap.add_argument("--batch-kib", type=int, default=1024)
    ap.add_argument("--record-bytes", type=int, default=1024)
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    ap.add_argument("--quick", action="store_true", help="256 MiB instead of --mb")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold-cache reads")
    args = ap.parse_args()
    if args.quick:
        args.mb = 256

    root = Path(tempfile.mkdtemp(prefix="kafkalite-bench-", dir=args.dir))
    try:
        run(root, args)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def run(root: Path, args: argparse.Namespace) -> None:
    template = build_batch(args.batch_kib * 1024, args.record_bytes)
    batch_size = len(template)
    n_batches = max(1, args.mb * (1 << 20) // batch_size)
    total = n_batches * batch_size
    print(
        f"{n_batches} batches of {batch_size} bytes ({batch_size // (args.record_bytes + 8)} records of"
        f" {args.record_bytes} B), {total / 2**20:.0f} MiB, dir {root}"
    )
    rows: list[tuple[str, float, int, str]] = []

    # -- plain write(): the page-cache write limit -------------------------------
    plain = root / "plain.bin"

    def plain_write() -> int:
        fd = os.open(plain, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for _ in range(n_batches):
                os.write(fd, bytearray(template))  # same copy the log append makes
        finally:
            os.close(fd)
        return total

    rows.append(("write() same bytes", *timed(plain_write), "physical limit"))

    # -- Log.append_as_leader ----------------------------------------------------
    cfg = LogConfig(retention_ms=-1, max_message_bytes=max(batch_size, 1_048_588))
    lg = Log(root / "bench-0", cfg, topic="bench", partition=0)

    def append() -> int:
        for _ in range(n_batches):
            lg.append_as_leader(bytearray(template), 0)
        return total

    dt, n = timed(append)
    rows.append(("Log.append_as_leader", dt, n, f"{n_batches / dt:,.0f} appends/s"))
    lg.update_high_watermark(lg.log_end_offset)

    fetch_bytes = max(1, (1 << 20) // batch_size) * batch_size
    records_per_batch = lg.segments[0].translate_offset(0).offset + 1  # type: ignore[union-attr]

    # -- Log.read + sendfile to a socket -----------------------------------------
    def log_sendfile() -> int:
        """~1 MiB fetches of whole batches; the next offset follows from the fixed batch shape."""
        sink = Sink()
        out = sink.tx.fileno()
        offset, sent = 0, 0
        leo = lg.log_end_offset
        while offset < leo:
            info = lg.read(offset, fetch_bytes, max_offset=lg.high_watermark)
            sl = info.records
            assert isinstance(sl, FileSlice)
            sent += sendfile_all(out, sl.fileno(), sl.position, sl.size)
            offset += sl.size // batch_size * records_per_batch
        got = sink.close()
        assert got == sent == total, (got, sent, total)
        return sent

    # -- Log.read + read_bytes (the TLS / copy path) -------------------------------
    def log_copy() -> int:
        offset, got = 0, 0
        leo = lg.log_end_offset
        while offset < leo:
            data = lg.read(offset, fetch_bytes, max_offset=lg.high_watermark).read_bytes()
            got += len(data)
            offset += len(data) // batch_size * records_per_batch
        return got

    # -- plain sendfile of the same files: the read limit ---------------------------
    def plain_sendfile() -> int:
        sink = Sink()
        out = sink.tx.fileno()
        sent = 0
        for seg in lg.segments:
            fd = os.open(seg.log_path, os.O_RDONLY)
            try:
                pos = 0
                while pos < seg.size:
                    n = sendfile_all(out, fd, pos, min(1 << 20, seg.size - pos))
                    pos += n
                    sent += n
            finally:
                os.close(fd)
        assert sink.close() == sent
        return sent

    files = [seg.log_path for seg in lg.segments]
    reads = [
        ("Log.read + sendfile -> socket", log_sendfile, "1 MiB fetches"),
        ("sendfile same files -> socket", plain_sendfile, "physical limit"),
        ("Log.read + read_bytes (copy)", log_copy, "TLS path"),
    ]
    for name, fn, note in reads:
        rows.append((name, *timed(fn), f"{note}, warm cache"))
    if not args.no_cold:
        # Nothing left to write back while the cold reads run; the three reads take
        # turns, twice, and each keeps its better run (the disk is shared, and noisy).
        os.sync()
        best: dict[str, tuple[float, int]] = {}
        for _round in range(2):
            for name, fn, _note in reads:
                drop_cache(files)
                dt, n = timed(fn)
                if name not in best or dt < best[name][0]:
                    best[name] = (dt, n)
        for name, _fn, note in reads:
            rows.append((name, *best[name], f"{note}, cold cache (best of 2)"))
    lg.close()

    print(f"\n{'operation':<36} {'MiB':>8} {'seconds':>9} {'MiB/s':>9}  note")
    print("-" * 90)
    for name, dt, n, note in rows:
        print(f"{name:<36} {n / 2**20:>8.0f} {dt:>9.3f} {n / 2**20 / dt:>9.0f}  {note}")
    print()
    print(
        f"{args.record_bytes} B records in {batch_size / 2**20:.2f} MiB batches,"
        f" {total / 2**20:.0f} MiB, in {root.parent} (same disk for every row)"
    )
    print()
    print("| operation | MiB/s | seconds | note |")
    print("| --- | --- | --- | --- |")
    for name, dt, n, note in rows:
        print(f"| {name} | {n / 2**20 / dt:,.0f} | {dt:.3f} | {note} |")


def drop_cache(paths: list[Path]) -> None:
    """Make the next read of ``paths`` come from the disk: write back, then evict."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


if __name__ == "__main__":
    main()
