"""Spark's automatic registration of Python data sources: at the first data source look-up,
PySpark imports every top-level module named ``pyspark_*`` and registers its
``DefaultSource``. This module makes ``format("kafkalite")`` work without calling
``kafkalite.spark.register``."""

from kafkalite.spark.datasource import KafkaliteDataSource as DefaultSource

__all__ = ["DefaultSource"]
