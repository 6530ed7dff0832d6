"""``kafkalite dump-log FILE...``: print segment files as Kafka's kafka-dump-log.sh does.

Reads the files directly (no broker): ``.log`` batches (and records with
``--print-data-log``), ``.index`` and ``.timeindex`` entries checked against
their ``.log``, ``.txnindex`` aborted transactions. The output lines have the
shape of Kafka's DumpLogSegments, so scripts written for one work on the other.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from kafkalite.common import structs
from kafkalite.log.abstract_index import CorruptIndexError
from kafkalite.log.offset_index import OFFSET_ENTRY, OffsetIndex
from kafkalite.log.time_index import TIME_ENTRY, TimeIndex
from kafkalite.log.transaction_index import TXN_ENTRY
from kafkalite.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_SEQUENCE,
    BatchHeader,
    compute_crc,
    parse_header,
)
from kafkalite.protocol.records import Record, decode_batch, parse_control_record

__all__ = ["add_arguments", "main"]

INT32_MAX = 2**31 - 1
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``dump-log`` (Kafka's names; files may also be given positionally)."""
    parser.add_argument("paths", nargs="*", metavar="FILE", help="segment files to dump")
    parser.add_argument(
        "--files",
        action="append",
        default=[],
        help="comma-separated data and index files to dump (Kafka's spelling)",
    )
    parser.add_argument(
        "--print-data-log", action="store_true", help="print the records of each batch"
    )
    parser.add_argument(
        "--deep-iteration", action="store_true", help="iterate the records of each batch"
    )
    parser.add_argument(
        "--verify-index-only",
        action="store_true",
        help="check index entries against the log without printing them",
    )
    parser.add_argument(
        "--index-sanity-check", action="store_true", help="only run the index sanity check"
    )
    parser.add_argument(
        "--max-bytes",
        type=int,
        default=INT32_MAX,
        help="read at most this many bytes of a .log file",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="kafkalite dump-log", description="Print the contents of log segment files."
    )
    add_arguments(ap)
    args = ap.parse_args(argv)
    files = list(args.paths)
    for f in args.files:
        files.extend(x for x in f.split(",") if x)
    if not files:
        ap.error("give at least one file (positionally or with --files)")
    out = sys.stdout
    status = 0
    try:
        for name in files:
            path = Path(name)
            print(f"Dumping {path}", file=out)
            try:
                status |= _dump_file(path, args, out)
            except BrokenPipeError:
                raise
            except FileNotFoundError:
                print(f"File {path} does not exist", file=sys.stderr)
                status = 1
            except OSError as e:
                print(f"Cannot read {path}: {e}", file=sys.stderr)
                status = 1
        out.flush()
    except BrokenPipeError:
        # the reader (``| head``) went away: stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return status


def _dump_file(path: Path, args: argparse.Namespace, out: TextIO) -> int:
    name = path.name
    for suffix in (".deleted", ".cleaned", ".swap"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    if name.endswith(".log"):
        deep = args.print_data_log or args.deep_iteration
        return dump_log_file(
            path, deep=deep, print_contents=args.print_data_log, max_bytes=args.max_bytes, out=out
        )
    if name.endswith(".timeindex"):
        return dump_time_index(
            path, verify_only=args.verify_index_only, sanity_only=args.index_sanity_check, out=out
        )
    if name.endswith(".index"):
        return dump_index(
            path, verify_only=args.verify_index_only, sanity_only=args.index_sanity_check, out=out
        )
    if name.endswith(".txnindex"):
        return dump_txn_index(path, out=out)
    print(f"Ignoring unknown file {path}", file=out)
    return 0


def _base_offset(path: Path) -> int:
    stem = path.name.split(".", 1)[0]
    if not stem.isdigit():
        raise OSError(f"{path.name} is not named by a base offset")
    return int(stem)


def _log_file_for(path: Path) -> Path:
    return path.with_name(path.name.split(".", 1)[0] + ".log")


# --------------------------------------------------------------------- .log


def _iter_file_batches(
    fd: int, size: int, start: int = 0
) -> Iterator[tuple[int, bytes | None, int]]:
    """``(position, batch bytes, batch size)``; bytes None for a partial or garbage tail."""
    pos = start
    while pos + LOG_OVERHEAD <= size:
        head = os.pread(fd, LOG_OVERHEAD, pos)
        length = structs.I32.unpack_from(head, 8)[0]
        total = length + LOG_OVERHEAD
        if length < HEADER_SIZE - LOG_OVERHEAD or pos + total > size:
            yield pos, None, size - pos
            return
        yield pos, os.pread(fd, total, pos), total
        pos += total
    if pos < size:
        yield pos, None, size - pos


def _batch_line(h: BatchHeader, position: int, valid: bool) -> str:
    count = h.records_count
    last_seq = h.last_sequence if h.base_sequence != NO_SEQUENCE else NO_SEQUENCE
    horizon = f"OptionalLong[{h.base_timestamp}]" if h.has_delete_horizon else "OptionalLong.empty"
    ts_type = "LogAppendTime" if h.is_log_append_time else "CreateTime"
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {count}"
        f" baseSequence: {h.base_sequence} lastSequence: {last_seq}"
        f" producerId: {h.producer_id} producerEpoch: {h.producer_epoch}"
        f" partitionLeaderEpoch: {h.partition_leader_epoch}"
        f" isTransactional: {str(h.is_transactional).lower()}"
        f" isControl: {str(h.is_control).lower()} deleteHorizonMs: {horizon}"
        f" position: {position} {ts_type}: {h.max_timestamp} size: {h.size}"
        f" magic: {h.magic} compresscodec: {CODEC_NAMES.get(h.compression, h.compression)}"
        f" crc: {h.crc} isvalid: {str(valid).lower()}"
    )


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _record_line(h: BatchHeader, r: Record, print_contents: bool) -> str:
    ts_type = "LogAppendTime" if h.is_log_append_time else "CreateTime"
    key_size = -1 if r.key is None else len(r.key)
    value_size = -1 if r.value is None else len(r.value)
    seq = (
        NO_SEQUENCE
        if h.base_sequence == NO_SEQUENCE
        else (h.base_sequence + r.offset - h.base_offset) & 0x7FFFFFFF
    )
    parts = [
        f"| offset: {r.offset} {ts_type}: {r.timestamp} keySize: {key_size} valueSize: {value_size}"
        f" sequence: {seq} headerKeys: [{','.join(k for k, _v in r.headers)}]"
    ]
    if h.is_control:
        try:
            ctype, epoch = parse_control_record(r)
            name = CONTROL_TYPES.get(ctype)
            if name is not None:
                parts.append(f" endTxnMarker: {name} coordinatorEpoch: {epoch}")
            else:
                parts.append(f" controlType: UNKNOWN({ctype})")
        except Exception as e:  # noqa: BLE001 - a bad marker is printed, not fatal
            parts.append(f" controlRecord: invalid ({e})")
    elif print_contents:
        if r.key is not None:
            parts.append(f" key: {_text(r.key)}")
        if r.value is not None:
            parts.append(f" payload: {_text(r.value)}")
    return "".join(parts)


def dump_log_file(
    path: Path,
    *,
    deep: bool = False,
    print_contents: bool = False,
    max_bytes: int = INT32_MAX,
    out: TextIO = sys.stdout,
) -> int:
    """Every batch of a ``.log`` (and its records when ``deep``)."""
    base = _base_offset(path)
    print(f"Log starting offset: {base}", file=out)
    status = 0
    with open(path, "rb", buffering=0) as f:
        fd = f.fileno()
        size = min(os.fstat(fd).st_size, max_bytes)
        for pos, batch, n in _iter_file_batches(fd, size):
            if batch is None:
                print(f"Found {n} invalid bytes at the end of {path.name}", file=out)
                status = 1
                break
            h = parse_header(batch, 0)
            valid = h.magic == 2 and compute_crc(batch, 0, len(batch)) == h.crc
            print(_batch_line(h, pos, valid), file=out)
            if not valid:
                status = 1
            if not deep:
                continue
            try:
                _h, records = decode_batch(batch, 0, check_crc=False)
            except Exception as e:  # noqa: BLE001 - report and go on with the next batch
                print(f"| cannot decode the records of this batch: {e}", file=out)
                status = 1
                continue
            for r in records:
                print(_record_line(h, r, print_contents), file=out)
    return status


# --------------------------------------------------------------------- indexes


def _read_entries(path: Path, entry: struct.Struct) -> Iterator[tuple[int, int]]:
    """Entries in file order, read lazily: a preallocated index is mostly zeros."""
    chunk = entry.size * 8192
    with open(path, "rb") as f:
        while data := f.read(chunk):
            yield from entry.iter_unpack(data[: len(data) - len(data) % entry.size])


def _batch_at(fd: int, size: int, position: int) -> BatchHeader | None:
    if position + HEADER_SIZE > size:
        return None
    return parse_header(os.pread(fd, HEADER_SIZE, position), 0)


def _sanity(index: OffsetIndex | TimeIndex, path: Path, log_size: int | None, out: TextIO) -> int:
    try:
        if isinstance(index, OffsetIndex):
            index.sanity_check(log_size)
        else:
            index.sanity_check()
    except CorruptIndexError as e:
        print(f"{path} failed sanity check: {e}", file=out)
        return 1
    print(f"{path} passed sanity check.", file=out)
    return 0


def dump_index(
    path: Path, *, verify_only: bool = False, sanity_only: bool = False, out: TextIO = sys.stdout
) -> int:
    """``offset: N position: P`` per entry; entries whose batch does not end at N are mismatches."""
    base = _base_offset(path)
    log_path = _log_file_for(path)
    if sanity_only:
        log_size = log_path.stat().st_size if log_path.exists() else None
        return _sanity(OffsetIndex(path, base), path, log_size, out)
    mismatches: list[tuple[int, int]] = []
    with open(log_path, "rb", buffering=0) as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        for i, (rel, position) in enumerate(_read_entries(path, OFFSET_ENTRY)):
            offset = base + rel
            h = _batch_at(fd, size, position)
            if rel == 0 and (i > 0 or h is None or h.last_offset != offset):
                break  # the zero-filled tail of a preallocated (active or crashed) index
            if h is None or h.last_offset != offset:
                mismatches.append((offset, -1 if h is None else h.last_offset))
            if not verify_only:
                print(f"offset: {offset} position: {position}", file=out)
    if mismatches:
        print(f"Mismatches in :{path.absolute()}", file=out)
        for index_offset, log_offset in mismatches:
            print(f"  Index offset: {index_offset}, log offset: {log_offset}", file=out)
        return 1
    return 0


def dump_time_index(
    path: Path, *, verify_only: bool = False, sanity_only: bool = False, out: TextIO = sys.stdout
) -> int:
    """``timestamp: T offset: N`` per entry, checked against the batch ending at N."""
    base = _base_offset(path)
    if sanity_only:
        return _sanity(TimeIndex(path, base), path, None, out)
    log_path = _log_file_for(path)
    index_path = log_path.with_name(log_path.name[: -len(".log")] + ".index")
    offsets: list[tuple[int, int]] = []
    if index_path.exists():
        for i, (rel, pos) in enumerate(_read_entries(index_path, OFFSET_ENTRY)):
            if rel == 0 and i > 0:
                break
            offsets.append((base + rel, pos))
    not_found: list[tuple[int, int]] = []
    ts_mismatch: list[tuple[int, int]] = []
    out_of_order: list[tuple[int, int]] = []
    prev_ts = -1
    with open(log_path, "rb", buffering=0) as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        for i, (ts, rel) in enumerate(_read_entries(path, TIME_ENTRY)):
            offset = base + rel
            if rel == 0 and (i > 0 or ts <= 0):
                break  # the zero-filled tail of a preallocated index
            start = 0
            for off, pos in offsets:
                if off > offset:
                    break
                start = pos
            found: BatchHeader | None = None
            for _pos, batch, _n in _iter_file_batches(fd, size, start):
                if batch is None:
                    break
                h = parse_header(batch, 0)
                if h.last_offset >= offset:
                    found = h
                    break
            if found is None or found.last_offset != offset:
                not_found.append((offset, -1 if found is None else found.last_offset))
            elif found.max_timestamp != ts:
                ts_mismatch.append((ts, found.max_timestamp))
            if prev_ts >= ts:
                out_of_order.append((ts, prev_ts))
            if not verify_only:
                print(f"timestamp: {ts} offset: {offset}", file=out)
            prev_ts = ts
    status = 0
    for ts, log_ts in ts_mismatch:
        print(f"Found timestamp mismatch in :{path.absolute()}", file=out)
        print(f"  Index timestamp: {ts}, log timestamp: {log_ts}", file=out)
        status = 1
    for ts, prev in out_of_order:
        print(f"Found out of order timestamp in :{path.absolute()}", file=out)
        print(f"  Index timestamp: {ts}, Previously indexed timestamp: {prev}", file=out)
        status = 1
    if not_found:
        print("The following indexed offsets are not found in the log.", file=out)
        for offset, log_offset in not_found:
            print(f"Indexed offset: {offset}, found log offset: {log_offset}", file=out)
        status = 1
    return status


def dump_txn_index(path: Path, *, out: TextIO = sys.stdout) -> int:
    """One line per aborted transaction."""
    data = path.read_bytes()
    for pos in range(0, len(data) - len(data) % TXN_ENTRY.size, TXN_ENTRY.size):
        version, pid, first, last, lso = TXN_ENTRY.unpack_from(data, pos)
        print(
            f"version: {version} producerId: {pid} firstOffset: {first}"
            f" lastOffset: {last} lastStableOffset: {lso}",
            file=out,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
