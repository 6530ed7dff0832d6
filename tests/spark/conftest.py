"""One SparkSession for every test marked ``spark`` (a JVM start costs seconds), and one
embedded broker for them; both package-scoped, so the session is stopped once the Spark tests
are done rather than held through the rest of the suite."""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip(
    "pyspark", reason="the spark extra is not installed (pip install kafkalite[spark])"
)

from kafkalite.testing import ThreadedBroker


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="package")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    import kafkalite.spark

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs a Java runtime (make system-deps installs default-jre-headless)")

    # Python workers must be this interpreter (the one with pyspark, pyarrow, confluent-kafka),
    # through kafkalite-spark-python as docs/spark.md advises (the installed PySpark, not
    # pyspark.zip: every streaming query starts a Python process)
    os.environ["PYSPARK_PYTHON"] = kafkalite.spark.worker_python()
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafkalite-spark-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    kafkalite.spark.register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="package")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedBroker]:
    b = ThreadedBroker(tmp_path_factory.mktemp("spark-broker"))
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@dataclass(frozen=True)
class Sent:
    """One record as produced and acknowledged."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    timestamp_ms: int
    headers: tuple[tuple[str, bytes], ...]


def produce(
    bootstrap: str,
    topic: str,
    n: int,
    *,
    partitions: int = 1,
    start: int = 0,
    headers: bool = False,
    base_ts: int = 1_700_000_000_000,
    value_size: int = 0,
) -> list[Sent]:
    """Produce ``n`` records round-robin over ``partitions``: key ``k<i>`` (none for every
    fifth), value ``v<i>`` (padded to ``value_size``), timestamp ``base_ts + i``."""
    from confluent_kafka import Producer

    acked: list[Sent] = []

    def on_delivery(err: Any, msg: Any, hs: Any) -> None:
        assert err is None, err
        acked.append(
            Sent(
                msg.topic(),
                msg.partition(),
                msg.offset(),
                msg.key(),
                msg.value(),
                msg.timestamp()[1],
                tuple(hs or ()),  # a delivery report carries no headers
            )
        )

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        hs = [("h", f"x{i}".encode()), ("n", None)] if headers else None
        p.produce(
            topic,
            key=None if i % 5 == 4 else f"k{i}".encode(),
            value=f"v{i}".encode().ljust(value_size, b"."),
            partition=i % partitions,
            timestamp=base_ts + i,
            headers=hs,
            on_delivery=lambda err, msg, hs=hs: on_delivery(err, msg, hs),
        )
    assert p.flush(30) == 0
    assert len(acked) == n
    return sorted(acked, key=lambda s: (s.topic, s.partition, s.offset))


def kafka_rows(df: Any, with_headers: bool = True) -> list[Sent]:
    """A DataFrame of the kafkalite schema, collected as ``Sent`` values sorted like
    ``produce`` (timestamps through ``unix_millis``, free of the local time zone)."""
    cols = ["topic", "partition", "offset", "key", "value", "unix_millis(timestamp) AS ts"]
    rows = df.selectExpr(*cols, *(["headers"] if with_headers else [])).collect()
    out = [
        Sent(
            r["topic"],
            r["partition"],
            r["offset"],
            r["key"],
            r["value"],
            r["ts"],
            tuple((h["key"], h["value"]) for h in r["headers"]) if with_headers else (),
        )
        for r in rows
    ]
    return sorted(out, key=lambda s: (s.topic, s.partition, s.offset))
