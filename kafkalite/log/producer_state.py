"""Producer state of one partition's log (Kafka's ProducerStateManager).

For every producer id the log remembers the epoch and the metadata of the
last five batches it appended (first/last sequence, first/last offset). A
retried batch that matches one of them is a duplicate: it is not appended
again and the producer gets the original offsets back. A gap in the sequence
is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH.

It also tracks open transactions: a transactional data batch opens one for its
producer at its first offset, a control batch (COMMIT/ABORT marker) closes it.
The earliest open one is the first unstable offset, which bounds the last
stable offset (LSO); an ABORT yields the ``.txnindex`` entry of the
transaction.

The state is saved in ``<offset>.snapshot`` files (Kafka's format, below) when
a segment rolls and when the log is closed cleanly; loading it reads the latest
snapshot and then only the batch headers after it (the whole log's without one).
After an unclean shutdown the log keeps only the snapshots up to the first
segment recovery re-validated, and the load rewrites the ``.txnindex`` of the
segments it scans in full, which recovery had reset.

Snapshot file, version 1, big-endian: version int16, crc uint32 (CRC-32C of
what follows), then an int32 count of entries, each: producerId int64,
epoch int16, lastSequence int32, lastOffset int64, offsetDelta int32,
timestamp int64, coordinatorEpoch int32, currentTxnFirstOffset int64.
"""

from __future__ import annotations

import collections
import logging
import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import crc32c

from kafkalite.log.fetch_data import AbortedTxn
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.record_batch import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchHeader,
)
from kafkalite.protocol.records import ControlRecordType, decode_batch, parse_control_record

if TYPE_CHECKING:
    from kafkalite.log.log_segment import LogSegment

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAP_HEAD = struct.Struct(">hI")
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")

NUM_BATCHES_TO_RETAIN = 5
INT_MAX = 2**31 - 1


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: collections.deque[BatchMetadata] = field(
        default_factory=lambda: collections.deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    coordinator_epoch: int = -1
    #: when it last wrote (its last batch's max timestamp; producer.id.expiration.ms)
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, h: BatchHeader) -> BatchMetadata | None:
        if h.producer_epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == h.base_sequence and b.last_seq == h.last_sequence:
                return b
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT_MAX)


def control_marker(batch: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int | None, int]:
    """(marker type: ABORT 0 / COMMIT 1, coordinator epoch) of the control batch at ``pos``;
    (None, -1) if unreadable."""
    try:
        _h, records = decode_batch(batch, pos, check_crc=False)
        if not records:
            return None, -1
        return parse_control_record(records[0])
    except Exception:
        return None, -1


def snapshot_file(dir: Path, offset: int) -> Path:
    return dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshots(dir: Path) -> list[tuple[int, Path]]:
    """``(offset, path)`` of the snapshot files in ``dir``, oldest first."""
    out = []
    try:
        names = os.listdir(dir)
    except FileNotFoundError:
        return []
    for name in names:
        if name.endswith(SNAPSHOT_SUFFIX) and name[: -len(SNAPSHOT_SUFFIX)].isdigit():
            out.append((int(name[: -len(SNAPSHOT_SUFFIX)]), dir / name))
    return sorted(out)


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        #: producer id -> first offset of its open transaction (insertion ordered)
        self.ongoing: dict[int, int] = {}

    @property
    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing.values()) if self.ongoing else None

    def check(self, headers: list[BatchHeader]) -> BatchMetadata | None:
        """Validate the batches of one produce; return the duplicate's metadata if it is a retry.

        Raises KafkaError for a fenced epoch or a sequence gap.
        """
        for h in headers:
            pid = h.producer_id
            if pid == NO_PRODUCER_ID:
                continue
            if h.base_sequence == NO_SEQUENCE:
                # transaction markers and transactional offset commits carry no sequence;
                # a marker of an older epoch comes from a fenced coordinator request
                entry = self.producers.get(pid)
                if entry is not None and h.producer_epoch < entry.epoch:
                    raise KafkaError(
                        ErrorCode.invalid_producer_epoch,
                        f"producer {pid} epoch {h.producer_epoch} is older than {entry.epoch}",
                    )
                continue
            entry = self.producers.get(pid)
            if entry is None:
                continue  # unknown producer (new, or its state expired): accept any first sequence
            if h.producer_epoch < entry.epoch:
                raise KafkaError(
                    ErrorCode.invalid_producer_epoch,
                    f"producer {pid} epoch {h.producer_epoch} is older than {entry.epoch}",
                )
            dup = entry.find_duplicate(h)
            if dup is not None:
                if len(headers) == 1:
                    return dup
                raise KafkaError(ErrorCode.duplicate_sequence_number)
            if h.producer_epoch != entry.epoch:
                if h.base_sequence != 0:
                    raise KafkaError(
                        ErrorCode.out_of_order_sequence_number,
                        f"new epoch {h.producer_epoch} for producer {pid} must start at sequence 0",
                    )
            elif entry.last_seq != NO_SEQUENCE and not _in_sequence(
                entry.last_seq, h.base_sequence
            ):
                raise KafkaError(
                    ErrorCode.out_of_order_sequence_number,
                    f"producer {pid}: expected sequence {entry.last_seq + 1}, got {h.base_sequence}",
                )
        return None

    def update(self, headers: Sequence[BatchHeader]) -> None:
        """Record appended batches (their base offsets are assigned by now).

        Control batches go through :meth:`complete_txn` instead (their marker type
        is in their record), but still move the producer's epoch here.
        """
        for h in headers:
            pid = h.producer_id
            if pid == NO_PRODUCER_ID:
                continue
            entry = self.producers.get(pid)
            if entry is None:
                entry = self.producers[pid] = ProducerStateEntry(pid)
            if h.producer_epoch != entry.epoch:
                entry.epoch = h.producer_epoch
                entry.batches.clear()
            if h.max_timestamp > entry.last_timestamp:
                entry.last_timestamp = h.max_timestamp
            if h.is_control:
                continue
            if h.is_transactional:
                self.ongoing.setdefault(pid, h.base_offset)
            if h.base_sequence == NO_SEQUENCE:
                continue
            entry.batches.append(
                BatchMetadata(
                    h.base_sequence, h.last_sequence, h.base_offset, h.last_offset, h.max_timestamp
                )
            )

    def complete_txn(
        self, h: BatchHeader, marker: int | None, coordinator_epoch: int = -1
    ) -> AbortedTxn | None:
        """A marker closes the producer's open transaction; the index entry of an ABORT."""
        entry = self.producers.get(h.producer_id)
        if entry is not None and coordinator_epoch > entry.coordinator_epoch:
            entry.coordinator_epoch = coordinator_epoch
        first = self.ongoing.pop(h.producer_id, None)
        if marker != ControlRecordType.ABORT or first is None:
            return None
        last = h.base_offset + h.last_offset_delta
        fuo = self.first_unstable_offset
        return AbortedTxn(h.producer_id, first, last, last + 1 if fuo is None else fuo)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """producer.id.expiration.ms: forget producers idle that long, with no open transaction."""
        doomed = [
            pid
            for pid, e in self.producers.items()
            if pid not in self.ongoing and 0 <= e.last_timestamp < now_ms - expiration_ms
        ]
        for pid in doomed:
            del self.producers[pid]
        return len(doomed)

    def truncate(self) -> None:
        """Forget everything (after a log truncation the state is rebuilt from the log)."""
        self.producers.clear()
        self.ongoing.clear()

    # ---- snapshots ----------------------------------------------------------
    def write_snapshot(self, dir: Path, offset: int, *, sync: bool = True) -> Path:
        """Save the state as of ``offset`` (the log end offset now) in Kafka's format."""
        pids = set(self.producers) | set(self.ongoing)
        body = bytearray(struct.pack(">i", len(pids)))
        for pid in sorted(pids):
            e = self.producers.get(pid) or ProducerStateEntry(pid)
            last = e.batches[-1] if e.batches else None
            body += _SNAP_ENTRY.pack(
                pid,
                e.epoch,
                last.last_seq if last else NO_SEQUENCE,
                last.last_offset if last else -1,
                (last.last_seq - last.first_seq) if last else 0,
                e.last_timestamp,
                e.coordinator_epoch,
                self.ongoing.get(pid, -1),
            )
        data = _SNAP_HEAD.pack(SNAPSHOT_VERSION, crc32c.crc32c(bytes(body))) + body
        path = snapshot_file(dir, offset)
        tmp = path.with_suffix(".snapshot.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        return path

    @classmethod
    def read_snapshot(cls, path: Path) -> ProducerStateManager:
        """Raises ValueError for a file that is not a valid version-1 snapshot."""
        data = path.read_bytes()
        if len(data) < _SNAP_HEAD.size + 4:
            raise ValueError(f"{path} is too short for a producer snapshot")
        version, crc = _SNAP_HEAD.unpack_from(data, 0)
        body = data[_SNAP_HEAD.size :]
        if version != SNAPSHOT_VERSION or crc32c.crc32c(body) != crc:
            raise ValueError(f"{path}: bad version {version} or CRC")
        (n,) = struct.unpack_from(">i", body, 0)
        if n < 0 or 4 + n * _SNAP_ENTRY.size != len(body):
            raise ValueError(f"{path}: {n} entries do not match its size")
        state = cls()
        for i in range(n):
            pid, epoch, last_seq, last_off, delta, ts, coord, txn_first = _SNAP_ENTRY.unpack_from(
                body, 4 + i * _SNAP_ENTRY.size
            )
            e = state.producers[pid] = ProducerStateEntry(pid, epoch)
            e.last_timestamp = ts
            e.coordinator_epoch = coord
            if last_seq != NO_SEQUENCE and last_off >= 0:
                first_seq = last_seq - delta
                e.batches.append(BatchMetadata(first_seq, last_seq, last_off - delta, last_off, ts))
            if txn_first >= 0:
                state.ongoing[pid] = txn_first
        # insertion order = transaction start order (first_unstable_offset takes the min anyway)
        state.ongoing = dict(sorted(state.ongoing.items(), key=lambda kv: kv[1]))
        return state

    @classmethod
    def load(
        cls,
        dir: Path,
        segments: Sequence[LogSegment],
        log_start_offset: int,
        log_end_offset: int,
        *,
        use_snapshot: bool = True,
        rebuild_indexes: bool = False,
    ) -> ProducerStateManager:
        """The latest usable snapshot, then the batch headers after it; or a full scan,
        which with ``rebuild_indexes`` (after crash recovery) also rewrites the ``.txnindex``
        of every segment whose entries do not match its markers."""
        state: ProducerStateManager | None = None
        start = log_start_offset
        if use_snapshot:
            for offset, path in reversed(list_snapshots(dir)):
                if offset > log_end_offset or offset < log_start_offset:
                    continue
                try:
                    state = cls.read_snapshot(path)
                except (OSError, ValueError) as e:
                    log.warning("ignoring producer snapshot %s: %s", path, e)
                    continue
                start = offset
                break
        if state is None:
            state = cls()
        state._scan(segments, start, rebuild_indexes=rebuild_indexes)
        return state

    def _scan(
        self, segments: Iterable[LogSegment], start_offset: int, *, rebuild_indexes: bool
    ) -> None:
        for seg in segments:
            expected: list[AbortedTxn] = []
            for pos, h in seg.iter_batches():
                if h.base_offset + h.last_offset_delta < start_offset:
                    continue
                if h.producer_id == NO_PRODUCER_ID:
                    continue
                self.update([h])
                if h.is_control and h.is_transactional:
                    raw = seg.read_batch_bytes(pos, h.batch_length + 12)
                    aborted = self.complete_txn(h, *control_marker(raw))
                    if aborted is not None:
                        expected.append(aborted)
            if not rebuild_indexes or seg.base_offset < start_offset:
                continue  # (a segment scanned only in part keeps its index)
            idx = seg.txn_index
            have = [(a.producer_id, a.first_offset, a.last_offset) for a in idx.all_aborted_txns()]
            if have != [(a.producer_id, a.first_offset, a.last_offset) for a in expected]:
                idx.reset()
                for a in expected:
                    idx.append(a)
