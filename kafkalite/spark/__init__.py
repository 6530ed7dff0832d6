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

import os
import sys
from typing import Any

__all__ = ["FORMAT", "register", "worker_python"]

#: the name to pass to ``format()``
FORMAT = "kafkalite"


def register(spark: Any) -> None:
    """Register the ``kafkalite`` format on a SparkSession."""
    from kafkalite.spark.datasource import KafkaliteDataSource

    spark.dataSource.register(KafkaliteDataSource)


def worker_python() -> str:
    """The Python to give Spark for its Python processes (``spark.pyspark.python`` or
    ``PYSPARK_PYTHON``): ``kafkalite-spark-python`` of this environment, which imports the
    installed PySpark rather than compiling it from ``pyspark.zip`` in each process Spark
    starts (about 0.5 to 1 s of every streaming query's start-up), or this interpreter when
    that script is not installed next to it."""
    script = os.path.join(os.path.dirname(sys.executable), "kafkalite-spark-python")
    return script if os.access(script, os.X_OK) else sys.executable
