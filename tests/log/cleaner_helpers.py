"""Shared helpers of the cleaner tests: a LogManager on a fake clock and record views."""

from __future__ import annotations

from pathlib import Path

from kafkalite.log.cleaner import CleanerConfig
from kafkalite.log.log import Log
from kafkalite.log.log_config import LogConfig
from kafkalite.log.log_manager import LogManager
from kafkalite.protocol.records import build_batch, iter_batches

NOW = 1_700_000_000_000

Rec = tuple[bytes | None, bytes | None]


class Clock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def compact_config(**kw: object) -> LogConfig:
    base = {
        "cleanup.policy": "compact",
        "segment.bytes": 1024,
        "min.cleanable.dirty.ratio": 0.01,
        "file.delete.delay.ms": 0,
    }
    base.update({k: v for k, v in kw.items()})
    return LogConfig.from_properties(base)


def new_manager(
    tmp_path: Path,
    config: LogConfig | None = None,
    *,
    clock: Clock | None = None,
    cleaner: CleanerConfig | None = None,
) -> LogManager:
    lm = LogManager(
        [tmp_path / "logs"],
        config or compact_config(),
        clock_ms=clock or Clock(),
        cleaner_config=cleaner or CleanerConfig(enable_cleaner=False),
    )
    lm.startup()
    return lm


def append(
    lg: Log,
    records: list[Rec],
    *,
    ts: int = NOW,
    compression: int = 0,
    producer_id: int = -1,
    base_sequence: int = -1,
) -> None:
    batch = build_batch(
        [(k, v, [], ts) for k, v in records],
        compression=compression,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_sequence,
    )
    lg.append_as_leader(bytearray(batch), 0)
    lg.update_high_watermark(lg.log_end_offset)


def append_each(lg: Log, records: list[Rec], **kw: object) -> None:
    """One batch per record."""
    for r in records:
        append(lg, [r], **kw)  # type: ignore[arg-type]


def batches(lg: Log) -> list[tuple[object, list[object]]]:
    """Every (header, records) from the log start, following segments."""
    out = []
    for seg in lg.segments:
        data = seg.read_batch_bytes(0, seg.size)
        out.extend(iter_batches(data))
    return out


def records(lg: Log, start: int | None = None) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record a consumer reading from ``start`` gets."""
    out = []
    offset = lg.log_start_offset if start is None else start
    while offset < lg.log_end_offset:
        info = lg.read(offset, 1 << 20)
        raw = info.records if isinstance(info.records, bytes) else info.records.read_bytes()
        if not raw:
            break
        last = offset
        for h, recs in iter_batches(raw):
            for r in recs:
                if r.offset >= offset and not h.is_control:
                    out.append((r.offset, r.key, r.value))
            last = h.last_offset
        offset = last + 1
    return out


def latest(
    recs: list[tuple[int, bytes | None, bytes | None]],
) -> dict[bytes | None, tuple[int, bytes | None]]:
    out: dict[bytes | None, tuple[int, bytes | None]] = {}
    for off, k, v in recs:
        out[k] = (off, v)
    return out
