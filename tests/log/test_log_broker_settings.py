"""Broker-level log settings reach the log layer: log.cleaner.*, the flush scheduler,
the high watermark checkpoint, num.recovery.threads.per.data.dir.

Real embedded brokers; records go in through confluent-kafka.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from kafkalite.testing.embedded_broker import ThreadedBroker

COMPACT = {
    "cleanup.policy": "compact",
    "segment.bytes": "1024",
    "min.cleanable.dirty.ratio": "0.01",
}


def _produce_keyed(b: ThreadedBroker, topic: str, n: int, keys: int, pad: int = 20) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, key=b"k%d" % (i % keys), value=b"v%05d" % i + b"x" * pad)
        if i % 5 == 4:
            p.flush(10)
    assert p.flush(10) == 0


def _count(b: ThreadedBroker, topic: str) -> int:
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap_servers,
            "group.id": "count",
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 10,
        }
    )
    c.assign([CkTopicPartition(topic, 0, 0)])
    n = 0
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                return n
            n += 1
    finally:
        c.close()
    raise AssertionError("no EOF")


def _wait(pred: Callable[[], bool], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def test_log_cleaner_enable_false_stops_cleaning(
    kafka_broker_factory: Callable[..., ThreadedBroker],
) -> None:
    """With a 20 ms back-off an enabled cleaner compacts at once; a disabled one never."""
    on = kafka_broker_factory(**{"log.cleaner.backoff.ms": 20})
    off = kafka_broker_factory(**{"log.cleaner.enable": False, "log.cleaner.backoff.ms": 20})
    for b in (on, off):
        b.create_topic("compacted", config=COMPACT)
        _produce_keyed(b, "compacted", 200, 4)
    cleaner_on = on.kafka.log_manager.cleaner
    assert _wait(lambda: cleaner_on.passes > 0)
    assert _count(on, "compacted") < 200
    # the disabled broker had the same time (and many back-off periods) to clean
    time.sleep(0.5)
    assert off.kafka.log_manager.cleaner.passes == 0
    assert _count(off, "compacted") == 200


def test_log_cleaner_threads_zero_means_no_cleaning(
    kafka_broker_factory: Callable[..., ThreadedBroker],
) -> None:
    b = kafka_broker_factory(**{"log.cleaner.threads": 0, "log.cleaner.backoff.ms": 20})
    b.create_topic("compacted", config=COMPACT)
    _produce_keyed(b, "compacted", 100, 4)
    b.call(b.kafka.log_manager.cleaner.wakeup)  # a running cleaner loop would clean now
    time.sleep(0.5)
    assert b.kafka.log_manager.cleaner.passes == 0
    assert _count(b, "compacted") == 100


def test_cleaner_settings_and_io_rate_limit_reach_the_cleaner(
    kafka_broker_factory: Callable[..., ThreadedBroker],
) -> None:
    """log.cleaner.io.max.bytes.per.second throttles the pass the broker runs by itself."""
    b = kafka_broker_factory(
        **{
            "log.cleaner.backoff.ms": 600_000,
            "log.cleaner.io.max.bytes.per.second": 100_000,
            "log.cleaner.dedupe.buffer.size": 4 * 1024 * 1024,
            "log.cleaner.threads": 2,
        }
    )
    cleaner = b.kafka.log_manager.cleaner
    cfg = cleaner.config
    assert (cfg.max_io_bytes_per_second, cfg.dedupe_buffer_size, cfg.num_threads) == (
        100_000,
        4 * 1024 * 1024,
        2,
    )
    assert cfg.backoff_ms == 600_000
    # measure every millisecond: the first check after broker start-up only
    # resets the period, and the rest of a short pass must still be measured
    cleaner.throttler.check_interval_s = 0.001
    b.create_topic("compacted", config=dict(COMPACT, **{"segment.bytes": "16384"}))
    _produce_keyed(b, "compacted", 600, 6, pad=200)
    # the loops found nothing at start-up and back off 10 minutes; cut that short
    b.call(cleaner.wakeup)
    assert _wait(lambda: cleaner.passes > 0, 30)
    stats = cleaner.last_stats
    assert stats is not None and stats.bytes_read > 100_000
    # over 100 KB read at 100 KB/s: the throttler had to hold the worker back
    assert cleaner.throttler.throttled_s > 0
    assert _count(b, "compacted") < 600


def test_flush_scheduler_interval_applies_flush_ms(
    kafka_broker_factory: Callable[..., ThreadedBroker],
) -> None:
    """Kafka's log flusher checks flush.ms every log.flush.scheduler.interval.ms."""
    b = kafka_broker_factory(**{"log.flush.scheduler.interval.ms": 50})
    assert b.kafka.log_manager.flush_check_interval_ms == 50
    b.create_topic("flushed", config={"flush.ms": "100"})
    _produce_keyed(b, "flushed", 10, 10)
    lg = b.kafka.log_manager.get_log("flushed", 0)
    assert lg.num_segments == 1  # nothing rolled: only flush.ms can move the recovery point
    assert _wait(lambda: lg.recovery_point == lg.log_end_offset == 10)
    default = kafka_broker_factory()
    assert default.kafka.log_manager.flush_check_interval_ms == 2**63 - 1  # Kafka's default


def _hw_lines(path: Path) -> dict[tuple[str, int], int]:
    lines = path.read_text().splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2
    out = {}
    for line in lines[2:]:
        topic, part, off = line.split(" ")
        out[(topic, int(part))] = int(off)
    return out


def test_high_watermark_checkpoint_written_periodically_and_at_shutdown(
    kafka_broker_factory: Callable[..., ThreadedBroker],
) -> None:
    b = kafka_broker_factory(**{"replica.high.watermark.checkpoint.interval.ms": 50})
    b.create_topic("hw", partitions=2)
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
    for i in range(7):
        p.produce("hw", value=b"%d" % i, partition=0)
    for i in range(3):
        p.produce("hw", value=b"%d" % i, partition=1)
    assert p.flush(10) == 0
    (d,) = b.kafka.log_manager.log_dirs
    ckpt = d / "replication-offset-checkpoint"
    # written while running (well before Kafka's default 5 s), in Kafka's text format
    assert _wait(lambda: ckpt.exists() and _hw_lines(ckpt).get(("hw", 0)) == 7, 2.5)
    assert _hw_lines(ckpt)[("hw", 1)] == 3
    p.produce("hw", value=b"last", partition=1)
    assert p.flush(10) == 0
    b.restart()  # clean shutdown writes the final HWs
    assert _hw_lines(ckpt)[("hw", 1)] == 4
    assert b.kafka.log_manager.get_log("hw", 1).high_watermark == 4
    assert b.kafka.log_manager.get_log("hw", 0).high_watermark == 7


def test_recovery_threads_setting_reaches_the_log_manager(
    kafka_broker_factory: Callable[..., ThreadedBroker],
) -> None:
    b = kafka_broker_factory(**{"num.recovery.threads.per.data.dir": 3})
    assert b.kafka.log_manager.recovery_threads_per_data_dir == 3
    assert kafka_broker_factory().kafka.log_manager.recovery_threads_per_data_dir == 2


def test_topic_configs_apply_to_logs_loaded_at_restart(
    kafka_broker_factory: Callable[..., ThreadedBroker],
) -> None:
    """A compacted topic stays compacted after a restart (not the broker's delete default)."""
    b = kafka_broker_factory(**{"log.cleaner.backoff.ms": 600_000})
    b.create_topic("compacted", config=dict(COMPACT, **{"retention.ms": "123456789"}))
    b.restart()
    lg = b.kafka.log_manager.get_log("compacted", 0)
    assert lg is not None
    assert lg.config.compact and not lg.config.delete
    assert (lg.config.segment_bytes, lg.config.retention_ms) == (1024, 123456789)
    _produce_keyed(b, "compacted", 100, 4)
    cleaner = b.kafka.log_manager.cleaner
    b.call(cleaner.wakeup)
    assert _wait(lambda: cleaner.passes > 0)
    assert _count(b, "compacted") < 100
