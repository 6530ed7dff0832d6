"""examples/spark-clickstream on a small input: its per-minute aggregates, in Parquet and in
the compacted topic, equal the same numbers computed in plain Python."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark-clickstream" / "clickstream.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("clickstream_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_clickstream_aggregates_match_plain_python(
    spark: Any, spark_broker: Any, tmp_path: Path
) -> None:
    cs = _example()
    bootstrap = spark_broker.bootstrap_servers
    cs.ensure_topics(bootstrap)
    evs = list(cs.events(700, users=25))
    cs.produce_events(bootstrap, evs)
    want = cs.expected(evs)
    assert len(want) >= 4 * len(cs.PAGES)  # several closed minutes of every page

    # two micro-batches (and a no-data one), so the watermark moves between batches
    for q in cs.start(spark, bootstrap, str(tmp_path), available_now=True, max_per_trigger=350):
        q.awaitTermination(300)
        assert q.exception() is None

    parquet = spark.read.parquet(str(tmp_path / "parquet")).collect()
    assert {(r["minute"], r["page"]): (r["views"], r["users"]) for r in parquet} == want
    assert len(parquet) == len(want)  # each minute emitted once

    rows = (
        spark.read.format("kafkalite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", cs.AGG_TOPIC)
        .load()
        .orderBy("offset")
        .collect()
    )
    latest: dict[str, Any] = {}
    for r in rows:
        latest[r["key"].decode()] = json.loads(r["value"])
    assert {(v["minute"], v["page"]): (v["views"], v["users"]) for v in latest.values()} == want
    assert all(k == f"{v['minute']}|{v['page']}" for k, v in latest.items())
