"""Unit tests of the connector's option parsing and planning arithmetic (no SparkSession)."""

from __future__ import annotations

import pytest

from kafkalite.common.errors import ConfigError
from kafkalite.spark.client import OffsetRange
from kafkalite.spark.options import parse_sink_options, parse_source_options
from kafkalite.spark.planning import from_json, rate_limit, split_ranges, to_json

BOOT = {"kafka.bootstrap.servers": "h:9092"}


def test_option_names_are_case_insensitive_values_are_not() -> None:
    o = parse_source_options(
        {
            "KAFKA.bootstrap.servers": "h:9092",
            "kafka.Isolation.Level": "read_committed",
            "SUBSCRIBE": "Orders,Refunds",
            "startingoffsets": '{"Orders":{"0":5,"1":-2}}',
            "MaxOffsetsPerTrigger": "100",
        },
        streaming=True,
    )
    assert o.subscribe == ["Orders", "Refunds"]
    assert o.starting.kind == "offsets" and o.starting.offsets == {"Orders": {0: 5, 1: -2}}
    assert o.max_offsets_per_trigger == 100
    # kafka.* keys reach the client with the prefix removed and their own spelling
    assert o.client == {"bootstrap.servers": "h:9092", "Isolation.Level": "read_committed"}


def test_source_defaults_and_precedence() -> None:
    batch = parse_source_options({**BOOT, "assign": '{"a":[0,2]}'}, streaming=False)
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.assign == {"a": [0, 2]} and batch.fail_on_data_loss and not batch.include_headers
    stream = parse_source_options({**BOOT, "subscribePattern": "a.*"}, streaming=True)
    assert stream.starting.kind == "latest"
    ts = parse_source_options(
        {
            **BOOT,
            "subscribe": "a",
            "startingTimestamp": "1000",
            "startingOffsetsByTimestamp": '{"a":{"0":5}}',
            "startingOffsets": "earliest",
        },
        streaming=True,
    )
    assert ts.starting.kind == "timestamp" and ts.starting.timestamp == 1000


@pytest.mark.parametrize(
    ("options", "streaming", "key"),
    [
        ({"subscribe": "a"}, False, "kafka.bootstrap.servers"),
        ({**BOOT}, False, "subscribe"),
        ({**BOOT, "subscribe": "a", "assign": '{"a":[0]}'}, False, "subscribe"),
        ({**BOOT, "subscribe": "a", "startingOffsets": "latest"}, False, "startingOffsets"),
        ({**BOOT, "subscribe": "a", "endingOffsets": "earliest"}, False, "endingOffsets"),
        ({**BOOT, "subscribe": "a", "endingOffsets": "latest"}, True, "endingOffsets"),
        ({**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": "5"}, False, "maxOffsetsPerTrigger"),
        ({**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": "0"}, True, "maxOffsetsPerTrigger"),
        (
            {**BOOT, "subscribe": "a", "kafka.auto.offset.reset": "x"},
            True,
            "kafka.auto.offset.reset",
        ),
        ({**BOOT, "subscribe": "a", "failOnDataLoss": "maybe"}, True, "failOnDataLoss"),
        ({**BOOT, "assign": "[0]"}, True, "assign"),
        ({**BOOT, "subscribePattern": "("}, True, "subscribePattern"),
    ],
)
def test_bad_source_options(options: dict[str, str], streaming: bool, key: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_source_options(options, streaming=streaming)
    assert e.value.key == key


def test_sink_options() -> None:
    o = parse_sink_options({**BOOT, "Topic": "Out", "EXACTLYONCE": "true"})
    assert o.topic == "Out" and o.exactly_once
    with pytest.raises(ConfigError):
        parse_sink_options({**BOOT, "kafka.transactional.id": "x"})


def test_offsets_json_round_trip() -> None:
    offsets = {("b", 1): 7, ("a", 10): 3, ("a", 2): 0}
    assert to_json(offsets) == {"a": {"10": 3, "2": 0}, "b": {"1": 7}}
    assert from_json(to_json(offsets)) == offsets


def test_rate_limit_shares_by_backlog() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    end = {("t", 0): 60, ("t", 1): 120, ("t", 2): 5}
    # 80 waiting, limit 40: 60/80*40 = 30 and 20/80*40 = 10
    assert rate_limit(40, start, end) == {("t", 0): 30, ("t", 1): 110, ("t", 2): 5}
    # a share under one record rounds up (no partition starves), others round down
    assert rate_limit(3, {("t", 0): 0, ("t", 1): 0}, {("t", 0): 100, ("t", 1): 1}) == {
        ("t", 0): 2,
        ("t", 1): 1,
    }
    assert rate_limit(1000, start, end) == end


def test_split_ranges_by_min_partitions() -> None:
    ranges = [OffsetRange("t", 0, 0, 300), OffsetRange("t", 1, 10, 110), OffsetRange("t", 2, 4, 4)]
    assert split_ranges(ranges, None) == ranges[:2]  # empty ranges are not planned
    parts = split_ranges(ranges, 8)
    assert len([r for r in parts if r.partition == 0]) == 6
    assert len([r for r in parts if r.partition == 1]) == 2
    for p in (0, 1):
        mine = [r for r in parts if r.partition == p]
        assert mine[0].start == ranges[p].start and mine[-1].end == ranges[p].end
        assert all(a.end == b.start for a, b in zip(mine, mine[1:], strict=False))


def test_spark_finds_the_top_level_entry_module() -> None:
    """Spark's look-up registers ``DefaultSource`` of every top-level ``pyspark_*`` module on
    the path (``pyspark/sql/worker/lookup_data_sources.py``); an installed wheel puts
    ``pyspark_kafkalite`` there."""
    import pkgutil
    from pathlib import Path

    from pyspark.sql.datasource import DataSource

    import pyspark_kafkalite

    root = Path(__file__).resolve().parents[2]
    assert "pyspark_kafkalite" in {m.name for m in pkgutil.iter_modules([str(root)])}
    assert issubclass(pyspark_kafkalite.DefaultSource, DataSource)
    assert pyspark_kafkalite.DefaultSource.name() == "kafkalite"
