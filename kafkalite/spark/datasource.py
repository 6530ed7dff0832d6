"""``KafkaliteDataSource``, the ``kafkalite`` format: Spark's Kafka connector schema and
options on PySpark's Python Data Source API, over confluent-kafka."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafkalite.spark.options import parse_sink_options, parse_source_options

__all__ = ["KafkaliteDataSource", "kafka_schema"]

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def kafka_schema(include_headers: bool) -> StructType:
    """The schema of Spark's Kafka source (``KafkaRecordToRowConverter``)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


class KafkaliteDataSource(DataSource):
    """``spark.read.format("kafkalite")`` and friends; see docs/spark.md for the options."""

    @classmethod
    def name(cls) -> str:
        return "kafkalite"

    def schema(self) -> StructType:
        raw = str(dict(self.options).get("includeHeaders", "false"))
        for k, v in self.options.items():  # names are case-insensitive
            if k.lower() == "includeheaders":
                raw = v
        return kafka_schema(raw.strip().lower() == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        from kafkalite.spark.source import KafkaBatchReader

        return KafkaBatchReader(parse_source_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from kafkalite.spark.source import KafkaStreamReader

        return KafkaStreamReader(parse_source_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from kafkalite.spark.sink import KafkaBatchWriter

        return KafkaBatchWriter(parse_sink_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from kafkalite.spark.sink import KafkaStreamWriter

        return KafkaStreamWriter(parse_sink_options(self.options), schema)  # type: ignore[return-value]
