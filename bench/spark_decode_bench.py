"""CPU per record of the Spark connector's direct-read decode (``BatchColumns.decode``),
optionally against an older revision in the same run.

    python bench/spark_decode_bench.py [--records 200000] [--size 1024]
                                       [--compare REV] [--rounds 9]

Builds Fetch records sections as ``bench/spark_bench.py``'s producer leaves them in the log
(keys ``str(i)``, ``--size``-byte values, batches of about 1 MiB, sections cut at 8 MiB, the
executors' ``max.partition.fetch.bytes``), then decodes them into Arrow batches, ``--rounds``
times, and prints the best process-CPU time per record. With ``--compare REV`` the same
sections are also decoded by ``kafkalite/spark/record_columns.py`` of git revision ``REV``
(checked out into a temporary worktree), alternating round by round: a before/after from
one run.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kafkalite.protocol.records import build_batch  # noqa: E402

SECTION = 8 << 20
BATCH_BYTES = 1 << 20


def sections(records: int, size: int) -> list[tuple[int, bytearray]]:
    """(first offset, records section) pairs, each under 8 MiB of whole batches."""
    per_batch = max(1, BATCH_BYTES // (size + 20))
    value = b"x" * size
    out: list[tuple[int, bytearray]] = []
    current, first, ts = bytearray(), 0, 1_700_000_000_000
    for base in range(0, records, per_batch):
        n = min(per_batch, records - base)
        batch = build_batch(
            [(str(i).encode(), value) for i in range(base, base + n)],
            base_offset=base,
            timestamp_ms=ts + base,
        )
        if current and len(current) + len(batch) > SECTION:
            out.append((first, current))
            current, first = bytearray(), base
        current += batch
    if current:
        out.append((first, current))
    return out


def columns_of(root: Path) -> Any:
    """A ``BatchColumns`` from the ``kafkalite`` package under ``root``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    for name in [m for m in sys.modules if m == "kafkalite" or m.startswith("kafkalite.")]:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    try:
        rc = importlib.import_module("kafkalite.spark.record_columns")
        ds = importlib.import_module("kafkalite.spark.datasource")
    finally:
        sys.path.remove(str(root))
    schema = to_arrow_schema(ds.kafka_schema(False), timezone="UTC")
    return rc.BatchColumns("bench", 0, False, schema)


def decode_all(cols: Any, secs: list[tuple[int, bytearray]]) -> tuple[float, int]:
    t, rows = time.process_time(), 0
    for first, body in secs:
        got = cols.decode(body, 0, len(body), start=first, stop=1 << 62, aborted=None)
        rows += got.batch.num_rows
    return time.process_time() - t, rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--compare", metavar="REV", help="also decode with this git revision's code")
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args(argv)
    secs = sections(args.records, args.size)
    with tempfile.TemporaryDirectory() as tmp:
        cases = {"this checkout": columns_of(ROOT)}
        if args.compare:
            old = Path(tmp) / "old"
            subprocess.run(
                [
                    "git",
                    "-C",
                    str(ROOT),
                    "worktree",
                    "add",
                    "-q",
                    "--detach",
                    str(old),
                    args.compare,
                ],
                check=True,
            )
            try:
                cases[args.compare] = columns_of(old)
            finally:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=True
                )
        best = dict.fromkeys(cases, float("inf"))
        rows = 0
        for _ in range(args.rounds):
            for name, cols in cases.items():
                secs_cpu, rows = decode_all(cols, secs)
                best[name] = min(best[name], secs_cpu)
    print(
        f"{rows} records of {args.size} B in {len(secs)} sections of up to 8 MiB,"
        f" best of {args.rounds} rounds (process CPU):"
    )
    for name, secs_cpu in best.items():
        print(f"  {name:<20} {secs_cpu / rows * 1e6:6.3f} us per record")
    return 0


if __name__ == "__main__":
    sys.exit(main())
