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
        (
            {**BOOT, "subscribe": "a", "minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "5"},
            True,
            "minOffsetsPerTrigger",
        ),
        ({**BOOT, "subscribe": "a", "maxTriggerDelay": "5 parsecs"}, True, "maxTriggerDelay"),
        ({**BOOT, "subscribe": "a", "maxRecordsPerPartition": "0"}, True, "maxRecordsPerPartition"),
    ],
)
def test_bad_source_options(options: dict[str, str], streaming: bool, key: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_source_options(options, streaming=streaming)
    assert e.value.key == key


def test_trigger_delay_record_cap_and_group_prefix_options() -> None:
    o = parse_source_options({**BOOT, "subscribe": "a"}, streaming=True)
    assert o.max_trigger_delay_ms == 15 * 60_000  # Spark's default, 15m
    assert o.group_id_prefix == "spark-kafka-source" and o.max_records_per_partition is None
    for raw, ms in (("10s", 10_000), ("250ms", 250), ("2m", 120_000), ("1h", 3_600_000)):
        parsed = parse_source_options(
            {**BOOT, "subscribe": "a", "MAXTRIGGERDELAY": raw}, streaming=True
        )
        assert parsed.max_trigger_delay_ms == ms
    o = parse_source_options(
        {**BOOT, "subscribe": "a", "groupIdPrefix": "Etl", "maxRecordsPerPartition": "50"},
        streaming=False,
    )
    assert o.group_id_prefix == "Etl" and o.max_records_per_partition == 50


def test_min_offsets_wait_for_max_trigger_delay() -> None:
    """Spark's ``delayBatch``: the clock starts at 0, so the first trigger runs; later ones
    wait for ``minOffsetsPerTrigger`` records or ``maxTriggerDelay`` since the last batch."""
    from kafkalite.spark.datasource import kafka_schema
    from kafkalite.spark.source import KafkaStreamReader

    opts = parse_source_options(
        {**BOOT, "subscribe": "a", "minOffsetsPerTrigger": "10", "maxTriggerDelay": "5s"},
        streaming=True,
    )
    reader = KafkaStreamReader(opts, kafka_schema(False))
    now = [1_000_000]
    reader._clock = lambda: now[0]
    begin, few, enough = {("a", 0): 0}, {("a", 0): 3}, {("a", 0): 10}
    assert not reader._delay_batch(10, begin, few)  # first trigger
    now[0] += 4_000
    assert reader._delay_batch(10, begin, few)  # 3 < 10 and 4 s < 5 s: skipped
    assert not reader._delay_batch(10, begin, enough)  # the minimum is there: runs
    now[0] += 4_999
    assert reader._delay_batch(10, begin, few)  # the clock restarted at the last batch
    now[0] += 1
    assert not reader._delay_batch(10, begin, few)  # 5 s since it: runs below the minimum


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


def test_split_ranges_by_max_records_per_partition() -> None:
    """Spark's order: ranges over ``maxRecordsPerPartition`` are cut first, then
    ``minPartitions`` splits further if there are still fewer pieces."""
    ranges = [OffsetRange("t", 0, 0, 250), OffsetRange("t", 1, 0, 40)]
    parts = split_ranges(ranges, None, 100)
    assert [(r.partition, r.start, r.end) for r in parts] == [
        (0, 0, 83),
        (0, 83, 166),
        (0, 166, 250),
        (1, 0, 40),
    ]
    # then each piece in proportion to its size, rounded: 3 x round(2.29) + round(1.1), as
    # approximate as Spark's
    assert len(split_ranges(ranges, 8, 100)) == 7
    assert split_ranges(ranges, 2, 1000) == ranges


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


def test_executor_fetch_settings_and_user_overrides() -> None:
    """Executors fetch without librdkafka's one-second queue back-off and 500 ms end-of-log
    wait; the driver (which never fetches) keeps the fetch defaults and reconnects to the
    brokers its first Metadata names without the 100 ms back-off; ``kafka.*`` options win."""
    from kafkalite.spark.client import DRIVER_LOOKUP, EXECUTOR_FETCH, _consumer_conf

    conf = _consumer_conf({"bootstrap.servers": "h:9092"}, "executor", "p")
    assert {k: conf[k] for k in EXECUTOR_FETCH} == {
        "fetch.queue.backoff.ms": "10",
        "fetch.wait.max.ms": "10",
        "max.partition.fetch.bytes": str(8 << 20),
    }
    driver = _consumer_conf({}, "driver", "p")
    assert not EXECUTOR_FETCH.keys() & driver.keys()
    assert driver["reconnect.backoff.ms"] == DRIVER_LOOKUP["reconnect.backoff.ms"] == "10"
    assert "reconnect.backoff.ms" not in conf
    mine = _consumer_conf({"fetch.wait.max.ms": "250"}, "executor", "p")
    assert mine["fetch.wait.max.ms"] == "250"
    assert mine["fetch.queue.backoff.ms"] == "10"
    assert (
        _consumer_conf({"reconnect.backoff.ms": "200"}, "driver", "p")["reconnect.backoff.ms"]
        == "200"
    )


def test_gc_paused_restores_the_collector() -> None:
    import gc

    from kafkalite.spark.record_columns import gc_paused

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("consume failed")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller's own choice is left alone
    finally:
        gc.enable()
