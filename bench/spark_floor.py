"""The floor under bench/spark_bench.py: Spark's own cost of taking Arrow batches from a Python
data source, with no Kafka at all.

    python bench/spark_floor.py [--records 1000000] [--size 1024] [--partitions 2]
                                [--batch-rows 8192] [--master local[2]]

A streaming Python data source (``Trigger.AvailableNow``, into the ``noop`` sink, as the
bench's availableNow case) whose readers yield pre-built ``pyarrow.RecordBatch`` es of the
kafkalite schema (1 KiB values by default), built once per Python worker and yielded again
and again: what is left is PySpark's Python worker writing Arrow to the JVM and Spark's JVM
turning it into rows. Also times a plain batch read of the same source. The connector cannot
be faster than this through PySpark's Python Data Source API.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyspark.sql.datasource import (  # noqa: E402
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (  # noqa: E402
    ReadAllAvailable,
    ReadLimit,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType  # noqa: E402

_BATCH: dict[tuple[int, int], Any] = {}


def _batch(rows: int, size: int, schema: StructType) -> Any:
    """One RecordBatch of the kafkalite schema, cached per worker process."""
    got = _BATCH.get((rows, size))
    if got is None:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        sch = to_arrow_schema(schema, timezone="UTC")
        value = b"x" * size
        cols = [
            pa.array([str(i).encode() for i in range(rows)], pa.binary()),
            pa.array([value] * rows, pa.binary()),
            pa.repeat(pa.scalar("floor", pa.string()), rows),
            pa.repeat(pa.scalar(0, pa.int32()), rows),
            pa.array(range(rows), pa.int64()),
            pa.array([1_700_000_000_000] * rows, pa.timestamp("ms", tz="UTC")).cast(
                sch.field("timestamp").type
            ),
            pa.repeat(pa.scalar(0, pa.int32()), rows),
        ]
        got = _BATCH[(rows, size)] = pa.RecordBatch.from_arrays(cols, schema=sch)
    return got


class _Reader:
    def __init__(self, opts: dict[str, str], schema: StructType) -> None:
        self.n = int(opts["records"])
        self.size = int(opts["size"])
        self.parts = int(opts["partitions"])
        self.rows = int(opts["batchrows"])
        self.schema = schema

    def _ranges(self, start: int, end: int) -> list[InputPartition]:
        step = (end - start) // self.parts
        bounds = [start + i * step for i in range(self.parts)] + [end]
        return [InputPartition((a, b)) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        a, b = partition.value
        full = _batch(self.rows, self.size, self.schema)
        while a < b:
            k = min(self.rows, b - a)
            yield full if k == self.rows else full.slice(0, k)
            a += k


class _Batch(_Reader, DataSourceReader):
    def partitions(self) -> Sequence[InputPartition]:
        return self._ranges(0, self.n)


class _Stream(_Reader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def initialOffset(self) -> dict:
        return {"o": 0}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return {"o": self.n}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return self._ranges(start["o"], end["o"])

    def commit(self, end: dict) -> None:
        pass


class FloorSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kafkalite_floor"

    def schema(self) -> StructType:
        from kafkalite.spark.datasource import kafka_schema

        return kafka_schema(False)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Batch(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _Stream(dict(self.options), schema)


def local_session(master: str, partitions: int, conf: dict[str, str] | None = None) -> Any:
    """The benches' SparkSession: driver on loopback, no UI, ``partitions`` shuffle
    partitions, then ``conf``; Spark's log at ERROR."""
    from pyspark.sql import SparkSession

    b = (
        SparkSession.builder.master(master)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(partitions))
    )
    for k, v in (conf or {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_available_now(spark: Any, fmt: str, opts: dict[str, str], rows: int) -> Any:
    """Run ``fmt``'s stream with ``Trigger.AvailableNow`` into the noop sink until it ends;
    check it read ``rows`` rows and return the finished query (its ``recentProgress``)."""
    with tempfile.TemporaryDirectory() as cp:
        q = (
            spark.readStream.format(fmt)
            .options(**opts)
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", cp)
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        got = sum(p["numInputRows"] for p in q.recentProgress)
        assert got == rows, got
        return q


def in_batches_seconds(q: Any) -> float:
    """The time a finished query spent in micro-batches (its triggers' triggerExecution)."""
    return sum(p["durationMs"]["triggerExecution"] for p in q.recentProgress) / 1000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--batch-rows", type=int, default=8192)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--conf", action="append", default=[], metavar="K=V")
    args = ap.parse_args(argv)
    import kafkalite.spark

    os.environ.setdefault("PYSPARK_PYTHON", kafkalite.spark.worker_python())

    spark = local_session(args.master, args.partitions, dict(kv.split("=", 1) for kv in args.conf))
    spark.dataSource.register(FloorSource)
    opts = {
        "records": str(args.records),
        "size": str(args.size),
        "partitions": str(args.partitions),
        "batchRows": str(args.batch_rows),
    }

    def batch() -> None:
        spark.read.format("kafkalite_floor").options(**opts).load().write.format("noop").mode(
            "overwrite"
        ).save()

    def stream() -> float:
        return in_batches_seconds(run_available_now(spark, "kafkalite_floor", opts, args.records))

    batch()  # warm-up: Python workers and the JIT
    for i in range(args.runs):
        t = time.perf_counter()
        batch()
        tb = time.perf_counter() - t
        t = time.perf_counter()
        in_batches = stream()
        ts = time.perf_counter() - t
        print(
            f"run {i}: batch read {tb:.2f} s; availableNow wall {ts:.2f} s,"
            f" in micro-batches {in_batches:.2f} s ({args.records} rows of {args.size} B,"
            f" {args.partitions} partitions, {args.batch_rows} rows per Arrow batch)",
            flush=True,
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
