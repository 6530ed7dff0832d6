"""Kafka error codes. kio generates the table from Kafka's own Errors.java, so we
re-export it rather than typing 130 codes by hand."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError", "error_name"]


class KafkaError(Exception):
    """An error that maps onto a Kafka error code in a response."""

    def __init__(self, code: ErrorCode | int, message: str | None = None) -> None:
        self.code = ErrorCode(code)
        self.message = message
        super().__init__(message or self.code.name)


def error_name(code: int) -> str:
    return ErrorCode(code).name.upper()
