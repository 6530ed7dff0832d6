"""The message browser's reads: records of one partition from an offset, bounded.

Reads go through ``Log.read`` up to the high watermark (what a consumer may see), a
bounded number of bytes per step, yielding to the event loop between steps, so a
browsed partition costs the broker a few small reads and never a scan.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkalite.protocol.record_batch import InvalidRecordBatch
from kafkalite.protocol.records import iter_batches

if TYPE_CHECKING:
    from kafkalite.log.log import Log

__all__ = ["FORMATS", "BrowseResult", "BrowsedRecord", "browse", "render_bytes"]

FORMATS = ("auto", "text", "json", "hex")
READ_BYTES = 256 * 1024
MAX_READS = 8
MAX_DECOMPRESSED = 16 * 1024 * 1024
SHOWN_BYTES = 8 * 1024


@dataclass(slots=True)
class BrowsedRecord:
    offset: int
    timestamp: int
    log_append_time: bool
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    partition: int = -1


@dataclass(slots=True)
class BrowseResult:
    records: list[BrowsedRecord] = field(default_factory=list)
    #: where the next page starts
    next_offset: int = 0
    log_start_offset: int = 0
    high_watermark: int = 0
    error: str | None = None


async def browse(log: Log, start_offset: int, limit: int) -> BrowseResult:
    """Up to ``limit`` records from ``start_offset`` (clamped to the log's range)."""
    hw = log.high_watermark
    start = max(start_offset, log.log_start_offset)
    out = BrowseResult(next_offset=start, log_start_offset=log.log_start_offset, high_watermark=hw)
    offset = start
    for step in range(MAX_READS):
        if offset >= hw or len(out.records) >= limit:
            break
        if step:
            await asyncio.sleep(0)  # one bounded read per loop iteration
        try:
            info = log.read(offset, READ_BYTES, max_offset=hw)
            data = info.read_bytes()
        except Exception as e:  # the log moved under us (retention, truncation)
            out.error = f"read at offset {offset} failed: {e}"
            break
        if not data:
            break
        try:
            for header, records in iter_batches(data, max_decompressed_size=MAX_DECOMPRESSED):
                offset = max(offset, header.next_offset)
                if header.is_control:
                    continue
                for r in records:
                    if r.offset < start or r.offset >= hw:
                        continue
                    if len(out.records) >= limit:
                        offset = r.offset
                        break
                    out.records.append(
                        BrowsedRecord(
                            r.offset,
                            r.timestamp,
                            header.is_log_append_time,
                            r.key,
                            r.value,
                            [(k, v) for k, v in r.headers],
                        )
                    )
                if len(out.records) >= limit:
                    break
        except InvalidRecordBatch as e:
            out.error = f"cannot decode the batch at offset {offset}: {e}"
            break
    out.next_offset = out.records[-1].offset + 1 if out.records else min(offset, hw)
    return out


def _printable(text: str) -> bool:
    return all(c.isprintable() or c in "\r\n\t" for c in text)


def _hex(data: bytes) -> str:
    return " ".join(data[i : i + 4].hex() for i in range(0, len(data), 4))


def render_bytes(data: bytes | None, fmt: str) -> tuple[str, str]:
    """``data`` as text in ``fmt`` (auto: JSON, else UTF-8 text, else hex); returns
    (text, the format used). Long values are cut at SHOWN_BYTES."""
    if data is None:
        return "null", "null"
    cut = len(data) > SHOWN_BYTES
    shown = data[:SHOWN_BYTES]
    suffix = f" … ({len(data)} bytes)" if cut else ""
    if fmt == "hex":
        return _hex(shown) + suffix, "hex"
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError:
        if fmt == "text":
            return shown.decode("utf-8", "replace") + suffix, "text"
        return _hex(shown) + suffix, "hex"
    if fmt in ("auto", "json") and not cut:
        try:
            doc = json.loads(text)
        except ValueError:
            pass
        else:
            if fmt == "json" or isinstance(doc, dict | list):
                return json.dumps(doc, indent=2, ensure_ascii=False), "json"
    if fmt == "auto" and not _printable(text):
        return _hex(shown) + suffix, "hex"
    return text + suffix, "text"
