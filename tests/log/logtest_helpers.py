"""Batch builders and small helpers shared by the log tests."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkalite.log.log import Log
from kafkalite.log.log_config import LogConfig
from kafkalite.protocol.record_batch import iter_headers


def make_batch(
    n: int = 1,
    *,
    value_size: int = 10,
    timestamp: int = 1_000,
    timestamps: list[int] | None = None,
    compression: int = 0,
    key: bytes | None = b"k",
) -> bytearray:
    """A producer-style batch (baseOffset 0) built by kafka-python's encoder."""
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i in range(n):
        ts = timestamps[i] if timestamps is not None else timestamp
        b.append(i, ts, key, bytes([65 + i % 26]) * value_size, [])
    return bytearray(b.build())


def hand_batch(
    base_offset: int,
    values: list[bytes],
    *,
    base_timestamp: int,
    epoch: int = -1,
) -> bytes:
    """A v2 batch assembled field by field from the spec (no library encoder)."""

    def varint(v: int) -> bytes:
        z = (v << 1) ^ (v >> 63)
        out = bytearray()
        while z >= 0x80:
            out.append((z & 0x7F) | 0x80)
            z >>= 7
        out.append(z)
        return bytes(out)

    records = b""
    for i, v in enumerate(values):
        body = b"\x00" + varint(i) + varint(i) + varint(-1) + varint(len(v)) + v + varint(0)
        records += varint(len(body)) + body
    n = len(values)
    after_crc = (
        struct.pack(">hiqqqhii", 0, n - 1, base_timestamp, base_timestamp + n - 1, -1, -1, -1, n)
        + records
    )
    crc = crc32c.crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", base_offset, batch_length, epoch, 2, crc) + after_crc


def offsets_of(data: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) of each complete batch in ``data``."""
    return [(h.base_offset, h.last_offset) for _pos, h in iter_headers(data)]


def new_log(
    path: Path,
    config: LogConfig | None = None,
    *,
    clock: list[int] | None = None,
    **kw: object,
) -> Log:
    """A Log on ``path/t-0`` with an optional mutable clock ``[now_ms]``."""
    cfg = config or LogConfig()
    if clock is not None:
        kw["clock_ms"] = lambda: clock[0]
    return Log(path / "t-0", cfg, topic="t", partition=0, **kw)  # type: ignore[arg-type]


def fill(
    lg: Log,
    batches: int,
    *,
    records: int = 1,
    value_size: int = 10,
    epoch: int = 0,
    ts: int = 1_000,
) -> None:
    for _ in range(batches):
        lg.append_as_leader(make_batch(records, value_size=value_size, timestamp=ts), epoch)


def read_all(
    lg: Log, start: int | None = None, max_offset: int | None = None
) -> list[tuple[int, int]]:
    """Every (base, last) batch from ``start`` to the end, following segments."""
    out: list[tuple[int, int]] = []
    offset = lg.log_start_offset if start is None else start
    while offset < (lg.log_end_offset if max_offset is None else max_offset):
        info = lg.read(offset, 1 << 20, max_offset=max_offset)
        got = offsets_of(info.read_bytes())
        if not got:
            break
        out.extend(got)
        offset = got[-1][1] + 1
    return out
