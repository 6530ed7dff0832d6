"""Storage-layer exceptions, one per Kafka error, each carrying its ``error_code``.

Handlers turn ``exc.error_code`` into the partition-level error of a response.
Record-batch validation errors (CORRUPT_MESSAGE, UNSUPPORTED_VERSION,
INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE) come from
:mod:`kafkalite.protocol.record_batch` and are re-exported here so callers can
catch everything the log raises from one module.
"""

from __future__ import annotations

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.record_batch import (
    CorruptRecordBatch,
    InvalidRecord,
    InvalidRecordBatch,
    UnsupportedCompression,
    UnsupportedMagic,
)

__all__ = [
    "ConfigError",
    "CorruptRecordBatch",
    "InconsistentBrokerIdError",
    "InconsistentClusterIdError",
    "InvalidRecord",
    "InvalidReadSize",
    "InvalidRecordBatch",
    "InvalidTimestamp",
    "KafkaStorageError",
    "LogDirNotFound",
    "LogError",
    "OffsetOutOfRange",
    "OffsetsOutOfOrder",
    "PolicyViolation",
    "RecordBatchTooLarge",
    "RecordTooLarge",
    "UnexpectedAppendOffset",
    "UnsupportedCompression",
    "UnsupportedMagic",
]


class LogError(Exception):
    """Base class; ``error_code`` is the Kafka error code for the response."""

    error_code: int = ErrorCode.unknown_server_error


class InvalidReadSize(LogError, ValueError):
    """A negative read size (a Fetch's partition or request ``max_bytes``).

    Kafka's ``LogSegment.read`` throws IllegalArgumentException and the fetch
    answers that partition with UNKNOWN_SERVER_ERROR.
    """

    error_code = ErrorCode.unknown_server_error


class OffsetOutOfRange(LogError):
    error_code = ErrorCode.offset_out_of_range


class RecordTooLarge(LogError):
    """A batch is larger than max.message.bytes."""

    error_code = ErrorCode.message_too_large


class RecordBatchTooLarge(LogError):
    """The produce records are larger than segment.bytes."""

    error_code = ErrorCode.record_list_too_large


class InvalidTimestamp(LogError):
    """CreateTime outside message.timestamp.before/after.max.ms."""

    error_code = ErrorCode.invalid_timestamp


class PolicyViolation(LogError):
    """E.g. DeleteRecords on a topic whose cleanup.policy has no ``delete``."""

    error_code = ErrorCode.policy_violation


class KafkaStorageError(LogError):
    """The log directory holding this partition is offline."""

    error_code = ErrorCode.kafka_storage_error


class LogDirNotFound(LogError):
    error_code = ErrorCode.log_dir_not_found


class ReplicaNotAvailable(LogError):
    """AlterReplicaLogDirs for a partition this broker does not host."""

    error_code = ErrorCode.replica_not_available


class UnexpectedAppendOffset(LogError):
    """Follower append whose first offset is below the log end offset."""

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class OffsetsOutOfOrder(LogError):
    """Follower append whose batches' offsets are not increasing."""


class ConfigError(LogError, ValueError):
    """A bad config value; names the key like Kafka's ConfigException."""

    error_code = ErrorCode.invalid_config

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"Invalid value for configuration {key}: {message}")
        self.key = key
        self.message = message


class InconsistentBrokerIdError(LogError):
    """meta.properties broker.id disagrees across dirs or with the configured id."""


class InconsistentClusterIdError(LogError):
    """meta.properties cluster.id disagrees across dirs or with the cluster."""
