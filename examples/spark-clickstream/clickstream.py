"""Clickstream on kafkalite and Spark Structured Streaming, with the pure-Python connector.

Page-view events (JSON) go into the ``pageviews`` topic; a streaming job parses them and
computes, per page and per event-time minute, the number of views and of unique users, with a
watermark so late events are bounded and each minute is emitted once, when it is final. The
aggregates go to a compacted kafkalite topic (key ``<minute>|<page>``, the latest value wins)
and to Parquet.

One command against a broker on 127.0.0.1:9092 (``make run``)::

    python examples/spark-clickstream/clickstream.py --generate 5000 --available-now

See README.md beside this file for a Spark cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections.abc import Iterator
from typing import Any

EVENTS_TOPIC = "pageviews"
AGG_TOPIC = "pageviews-per-minute"
#: events may arrive this much out of order; later ones are dropped by the watermark
WATERMARK = "30 seconds"
WATERMARK_MS = 30_000
PAGES = ["/", "/search", "/product", "/cart", "/checkout"]


def events(
    n: int, *, seed: int = 7, start_ms: int = 1_767_225_600_000, users: int = 50
) -> Iterator[dict[str, Any]]:
    """``n`` page views about 0.5 s apart in event time, up to 10 s out of order (less than
    the watermark, so none is late)."""
    rng = random.Random(seed)
    for i in range(n):
        yield {
            "user": f"u{rng.randrange(users)}",
            "page": rng.choice(PAGES),
            "ts": start_ms + i * 500 + rng.randrange(-10_000, 10_000),
        }


def produce_events(bootstrap: str, evs: list[dict[str, Any]], topic: str = EVENTS_TOPIC) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for e in evs:
        while True:
            try:
                p.produce(topic, key=e["user"].encode(), value=json.dumps(e).encode())
                break
            except BufferError:
                p.poll(0.1)
    if p.flush(60):
        raise RuntimeError("events not delivered")


def ensure_topics(bootstrap: str, partitions: int = 2) -> None:
    """The events topic, and the compacted aggregates topic (a key per minute and page)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = [
        NewTopic(EVENTS_TOPIC, partitions),
        NewTopic(AGG_TOPIC, 1, config={"cleanup.policy": "compact"}),
    ]
    for fut in admin.create_topics(wanted).values():
        try:
            fut.result(30)
        except Exception as e:
            if "TOPIC_ALREADY_EXISTS" not in str(e) and "already exists" not in str(e):
                raise


def aggregates(spark: Any, bootstrap: str, max_per_trigger: int | None = None) -> Any:
    """The streaming DataFrame of (minute, page, views, users)."""
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("kafkalite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", EVENTS_TOPIC)
        .option("startingOffsets", "earliest")
    )
    if max_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_per_trigger))
    schema = "user string, page string, ts long"
    views = (
        reader.load()
        .select(F.from_json(F.col("value").cast("string"), schema).alias("e"))
        .select("e.user", "e.page", F.timestamp_millis("e.ts").alias("event_time"))
        .withWatermark("event_time", WATERMARK)
    )
    return (
        views.groupBy(F.window("event_time", "1 minute"), "page")
        # exact distinct users: a set per open window in the state store; for large
        # audiences use approx_count_distinct
        .agg(F.count("*").alias("views"), F.size(F.collect_set("user")).alias("users"))
        .select(
            F.unix_millis(F.col("window.start")).alias("minute"),
            "page",
            "views",
            "users",
        )
    )


def start(
    spark: Any,
    bootstrap: str,
    out_dir: str,
    *,
    available_now: bool,
    max_per_trigger: int | None = None,
) -> list[Any]:
    """Two queries on the same aggregates, each with its own checkpoint: Parquet files and
    the compacted topic."""
    from pyspark.sql import functions as F

    agg = aggregates(spark, bootstrap, max_per_trigger)

    def trigger(w: Any) -> Any:
        return (
            w.trigger(availableNow=True) if available_now else w.trigger(processingTime="5 seconds")
        )

    to_parquet = trigger(
        agg.writeStream.format("parquet")
        .option("path", os.path.join(out_dir, "parquet"))
        .option("checkpointLocation", os.path.join(out_dir, "checkpoints", "parquet"))
        .outputMode("append")
    ).start()
    to_topic = trigger(
        agg.select(
            F.concat_ws("|", F.col("minute").cast("string"), "page").alias("key"),
            F.to_json(F.struct("minute", "page", "views", "users")).alias("value"),
        )
        .writeStream.format("kafkalite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", AGG_TOPIC)
        .option("checkpointLocation", os.path.join(out_dir, "checkpoints", "topic"))
        .outputMode("append")
    ).start()
    return [to_parquet, to_topic]


def expected(evs: list[dict[str, Any]]) -> dict[tuple[int, str], tuple[int, int]]:
    """The same numbers in plain Python, for the minutes the watermark has closed once every
    event is read: (minute start ms, page) -> (views, unique users)."""
    watermark = max(e["ts"] for e in evs) - WATERMARK_MS
    views: dict[tuple[int, str], int] = {}
    users: dict[tuple[int, str], set[str]] = {}
    for e in evs:
        key = (e["ts"] - e["ts"] % 60_000, e["page"])
        views[key] = views.get(key, 0) + 1
        users.setdefault(key, set()).add(e["user"])
    return {k: (v, len(users[k])) for k, v in views.items() if k[0] + 60_000 <= watermark}


def session(master: str, app: str = "kafkalite-clickstream") -> Any:
    from pyspark.sql import SparkSession

    import kafkalite.spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master).appName(app).config("spark.sql.session.timeZone", "UTC")
    )
    if master.startswith("local"):
        builder = (
            builder.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "4")
        )
    spark = builder.getOrCreate()
    kafkalite.spark.register(spark)
    return spark


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092", help="kafkalite (or Kafka) brokers")
    ap.add_argument("--master", default="local[2]", help="Spark master, e.g. spark://host:7077")
    ap.add_argument("--out", default="clickstream-out", help="Parquet output and checkpoints")
    ap.add_argument("--generate", type=int, default=0, metavar="N", help="produce N events first")
    ap.add_argument("--available-now", action="store_true", help="stop once the events are read")
    args = ap.parse_args(argv)

    ensure_topics(args.bootstrap)
    if args.generate:
        produce_events(args.bootstrap, list(events(args.generate)))
        print(f"produced {args.generate} page views to {EVENTS_TOPIC}")
    spark = session(args.master)
    spark.sparkContext.setLogLevel("WARN")
    queries = start(spark, args.bootstrap, args.out, available_now=args.available_now)
    for q in queries:
        q.awaitTermination()
    done = spark.read.parquet(os.path.join(args.out, "parquet"))
    print(f"{done.count()} (minute, page) aggregates in {args.out}/parquet and topic {AGG_TOPIC}")
    done.orderBy("minute", "page").show(10, truncate=False)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
