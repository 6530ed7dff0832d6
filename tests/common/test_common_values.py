"""kafkalite.common: the shared value types and struct layouts, and that the layers
use them instead of private copies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import kafkalite
from kafkalite.common import structs
from kafkalite.common.types import Endpoint
from kafkalite.log import errors as log_errors
from kafkalite.log.partition_dir import UnsafeLogDir
from kafkalite.protocol import decompression, recompression, record_batch, record_validator
from kafkalite.protocol.errors import ErrorCode

PACKAGE = Path(kafkalite.__file__).parent
#: the packages that adopt kafkalite.common after the network/broker split lands
NOT_YET = ("server", "testing")


def test_struct_layouts_are_kafkas_big_endian_primitives():
    assert [s.size for s in (structs.I8, structs.I16, structs.I32, structs.I64, structs.U32)] == [
        1,
        2,
        4,
        8,
        4,
    ]
    assert structs.I8.pack(-1) == b"\xff"
    assert structs.I16.pack(-2) == b"\xff\xfe"
    assert structs.I32.pack(1) == b"\x00\x00\x00\x01"
    assert structs.I64.pack(-1) == b"\xff" * 8
    assert structs.U32.unpack(b"\xff\xff\xff\xff") == (0xFFFFFFFF,)


@pytest.mark.parametrize(
    ("endpoint", "text"),
    [
        (Endpoint("PLAINTEXT", "localhost", 9092), "PLAINTEXT://localhost:9092"),
        (Endpoint("SECURE", "::1", 9093, "SSL"), "SECURE://[::1]:9093"),
        (Endpoint("INTERNAL", None, 19092), "INTERNAL://:19092"),
    ],
)
def test_endpoint_connection_string_is_kafkas(endpoint: Endpoint, text: str):
    assert endpoint.connection_string() == text


def _modules_below_server() -> list[Path]:
    return [
        p
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.relative_to(PACKAGE).parts[0] not in (*NOT_YET, "common")
    ]


def test_no_layer_declares_its_own_topic_partition_or_primitive_struct():
    """One TopicPartition and one structs.I8..U32 for the whole code base (kafkalite.common)."""
    own = re.compile(r'^TopicPartition = |struct\.Struct\(">[bhiqI]"\)', re.M)
    found = [
        f"{p.relative_to(PACKAGE)}: {m.group(0)}"
        for p in _modules_below_server()
        for m in own.finditer(p.read_text())
    ]
    assert found == []


def test_struct_layouts_are_reached_through_their_module():
    """``structs.I32.unpack_from(...)``, not ``from ...structs import I32``: CPython 3.11
    compiles a method call on a from-imported name as attribute load + call, a bound
    method allocated per call (the Produce parser ran 6% slower that way)."""
    found = [
        str(p.relative_to(PACKAGE))
        for p in sorted(PACKAGE.rglob("*.py"))
        if re.search(r"^\s*from kafkalite\.common\.structs import", p.read_text(), re.M)
    ]
    assert found == []


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (log_errors.LogError, ErrorCode.unknown_server_error),
        (log_errors.InvalidReadSize, ErrorCode.unknown_server_error),
        (log_errors.OffsetOutOfRange, ErrorCode.offset_out_of_range),
        (log_errors.RecordTooLarge, ErrorCode.message_too_large),
        (log_errors.RecordBatchTooLarge, ErrorCode.record_list_too_large),
        (log_errors.InvalidTimestamp, ErrorCode.invalid_timestamp),
        (log_errors.PolicyViolation, ErrorCode.policy_violation),
        (log_errors.KafkaStorageError, ErrorCode.kafka_storage_error),
        (log_errors.LogDirNotFound, ErrorCode.log_dir_not_found),
        (log_errors.ConfigError, ErrorCode.invalid_config),
        (UnsafeLogDir, ErrorCode.invalid_topic_exception),
        (record_batch.InvalidRecordBatch, ErrorCode.corrupt_message),
        (record_batch.CorruptRecordBatch, ErrorCode.corrupt_message),
        (record_batch.UnsupportedMagic, ErrorCode.unsupported_version),
        (record_batch.InvalidRecord, ErrorCode.invalid_record),
        (record_batch.UnsupportedCompression, ErrorCode.unsupported_compression_type),
        (record_validator.MessageTooLarge, ErrorCode.message_too_large),
        (record_validator.InvalidTimestamp, ErrorCode.invalid_timestamp),
        (recompression.RecompressedTooLarge, ErrorCode.message_too_large),
        (decompression.DecompressedSizeExceeded, ErrorCode.message_too_large),
    ],
)
def test_storage_and_batch_errors_carry_error_code_members(error: type, code: ErrorCode):
    assert error.error_code is code
