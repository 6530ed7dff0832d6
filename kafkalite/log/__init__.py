"""Kafka's segment-file log: byte-compatible ``.log``/``.index``/``.timeindex`` storage.

Entry points: :class:`LogManager` (all partitions of a broker) and :class:`Log`
(one partition). ``cleaner.py`` (compaction) plugs in later.
"""

from kafkalite.log.errors import (
    KafkaStorageError,
    LogError,
    OffsetOutOfRange,
    PolicyViolation,
    RecordBatchTooLarge,
    RecordTooLarge,
)
from kafkalite.log.fetch_data import FetchDataInfo, FileSlice, LogOffsetMetadata
from kafkalite.log.log import Log, LogAppendInfo
from kafkalite.log.log_config import TOPIC_CONFIG_DEFS, ConfigError, LogConfig
from kafkalite.log.log_manager import LogManager

__all__ = [
    "TOPIC_CONFIG_DEFS",
    "ConfigError",
    "FetchDataInfo",
    "FileSlice",
    "KafkaStorageError",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "LogError",
    "LogManager",
    "LogOffsetMetadata",
    "OffsetOutOfRange",
    "PolicyViolation",
    "RecordBatchTooLarge",
    "RecordTooLarge",
]
