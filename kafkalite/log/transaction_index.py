"""``.txnindex``: the aborted transactions whose data lies in one segment.

Unlike the offset and time indexes this is a plain append-only file (as in
Kafka), created on the first entry. Each entry is 34 bytes, big-endian:
version int16 (0), producerId int64, firstOffset int64, lastOffset int64,
lastStableOffset int64. The transactions work fills it when an abort marker
is appended; read_committed fetches collect from it.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from kafkalite.log.abstract_index import CorruptIndexError
from kafkalite.log.fetch_data import AbortedTxn

__all__ = ["TransactionIndex", "TxnIndexSearchResult"]

#: version, producer id, first offset, last offset, last stable offset: one .txnindex entry
TXN_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = TXN_ENTRY.size  # 34
CURRENT_VERSION = 0


class TxnIndexSearchResult:
    __slots__ = ("aborted", "is_complete")

    def __init__(self, aborted: list[AbortedTxn], is_complete: bool) -> None:
        self.aborted = aborted
        self.is_complete = is_complete


class TransactionIndex:
    __slots__ = ("path", "start_offset", "_fd", "_last_offset")

    def __init__(self, path: Path, start_offset: int) -> None:
        self.path = path
        self.start_offset = start_offset
        self._fd: int | None = None
        self._last_offset: int | None = None
        if path.exists():
            self._open()
            entries = self._read_all()
            if entries:
                self._last_offset = entries[-1].last_offset

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def append(self, txn: AbortedTxn) -> None:
        if self._last_offset is not None and txn.last_offset < self._last_offset:
            raise ValueError(
                f"last offset {txn.last_offset} of an aborted transaction is below the previous {self._last_offset}"
            )
        self._last_offset = txn.last_offset
        os.write(
            self._open(),
            TXN_ENTRY.pack(
                txn.version,
                txn.producer_id,
                txn.first_offset,
                txn.last_offset,
                txn.last_stable_offset,
            ),
        )

    def _read_all(self) -> list[AbortedTxn]:
        if self._fd is None:
            return []
        size = os.fstat(self._fd).st_size
        data = os.pread(self._fd, size, 0)
        out = []
        for pos in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
            version, pid, first, last, lso = TXN_ENTRY.unpack_from(data, pos)
            out.append(AbortedTxn(pid, first, last, lso, version))
        return out

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return self._read_all()

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> TxnIndexSearchResult:
        """Transactions overlapping [fetch_offset, upper_bound_offset).

        ``is_complete`` is true when an entry's LSO reaches the upper bound, so
        later segments cannot hold more relevant aborts.
        """
        aborted = []
        for txn in self._read_all():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                aborted.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(aborted, True)
        return TxnIndexSearchResult(aborted, False)

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose last offset is >= ``offset``."""
        if self._fd is None:
            return
        kept = 0
        last = None
        for txn in self._read_all():
            if txn.last_offset >= offset:
                break
            kept += 1
            last = txn.last_offset
        os.ftruncate(self._fd, kept * ENTRY_SIZE)
        self._last_offset = last

    def reset(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
        self._last_offset = None

    def sanity_check(self) -> None:
        if self._fd is None:
            return
        size = os.fstat(self._fd).st_size
        if size % ENTRY_SIZE:
            raise CorruptIndexError(
                f"transaction index {self.path} length {size} is not a multiple of 34"
            )
        for txn in self._read_all():
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"last offset {txn.last_offset} of an aborted transaction in {self.path}"
                    f" is below the start offset {self.start_offset}"
                )

    @property
    def size_in_bytes(self) -> int:
        return 0 if self._fd is None else os.fstat(self._fd).st_size

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def rename_to(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def delete_if_exists(self) -> bool:
        self.close()
        try:
            self.path.unlink()
            return True
        except FileNotFoundError:
            return False
