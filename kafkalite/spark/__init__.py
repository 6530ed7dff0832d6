"""A pure-Python Kafka source and sink for PySpark (the ``kafkalite`` format), built on
PySpark's Python Data Source API and confluent-kafka. It works against kafkalite and any
Kafka-compatible broker; see docs/spark.md.

>>> import kafkalite.spark  # doctest: +SKIP
>>> kafkalite.spark.register(spark)  # doctest: +SKIP
>>> spark.read.format("kafkalite").option("kafka.bootstrap.servers", "127.0.0.1:9092") \\
...     .option("subscribe", "events").load()  # doctest: +SKIP

Installing ``kafkalite[spark]`` also installs the top-level module ``pyspark_kafkalite``,
which Spark's data source look-up registers by itself in sessions started afterwards.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FORMAT", "register"]

#: the name to pass to ``format()``
FORMAT = "kafkalite"


def register(spark: Any) -> None:
    """Register the ``kafkalite`` format on a SparkSession."""
    from kafkalite.spark.datasource import KafkaliteDataSource

    spark.dataSource.register(KafkaliteDataSource)
