"""Open transactions of one log: the last stable offset and the aborted-transaction index.

Kafka keeps this in its ProducerStateManager (``ongoingTxns``, ``firstUnstableOffset``):
every transactional data batch opens a transaction for its producer id at the
batch's first offset (if none is open), and a control batch (a COMMIT or ABORT
marker written for WriteTxnMarkers) closes it. An ABORT adds a ``.txnindex``
entry to the segment the marker lands in, with the LSO once the transaction is
gone: read_committed fetches collect these to tell consumers what to drop.

The state is rebuilt by scanning batch headers (not records) the first time it
is needed after the log is opened or truncated; that rebuild also rewrites the
``.txnindex`` of any segment whose index does not match its data (crash recovery
resets the indexes of the segments it re-validates).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkalite.log.fetch_data import AbortedTxn
from kafkalite.protocol.record_batch import BatchHeader
from kafkalite.protocol.records import ControlRecordType, decode_batch, parse_control_record

if TYPE_CHECKING:
    from kafkalite.log.log_segment import LogSegment

__all__ = ["TxnTracker", "control_type"]


def control_type(batch: bytes | bytearray | memoryview, pos: int = 0) -> int | None:
    """The marker type (ABORT 0, COMMIT 1) of the control batch at ``pos``; None if unreadable."""
    try:
        _h, records = decode_batch(batch, pos, check_crc=False)
        if not records:
            return None
        return parse_control_record(records[0])[0]
    except Exception:
        return None


@dataclass(slots=True)
class TxnTracker:
    """Producer id -> first offset of its open transaction (dicts keep insertion order)."""

    ongoing: dict[int, int] = field(default_factory=dict)

    @property
    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing.values()) if self.ongoing else None

    def on_data(self, h: BatchHeader) -> None:
        if h.is_transactional and not h.is_control and h.producer_id >= 0:
            self.ongoing.setdefault(h.producer_id, h.base_offset)

    def on_marker(self, h: BatchHeader, marker: int | None) -> AbortedTxn | None:
        """Close the producer's transaction; the index entry if the marker is an ABORT."""
        first = self.ongoing.pop(h.producer_id, None)
        if marker != ControlRecordType.ABORT or first is None:
            return None
        last = h.base_offset + h.last_offset_delta
        fuo = self.first_unstable_offset
        return AbortedTxn(h.producer_id, first, last, last + 1 if fuo is None else fuo)

    @classmethod
    def rebuild(cls, segments: Iterable[LogSegment], start_offset: int) -> TxnTracker:
        """Scan every segment's batch headers; rewrite ``.txnindex`` files that disagree."""
        t = cls()
        for seg in segments:
            expected: list[AbortedTxn] = []
            for pos, h in seg.iter_batches():
                if h.base_offset + h.last_offset_delta < start_offset:
                    continue
                if h.is_control:
                    if h.is_transactional:
                        raw = seg.read_batch_bytes(pos, h.batch_length + 12)
                        aborted = t.on_marker(h, control_type(raw))
                        if aborted is not None:
                            expected.append(aborted)
                else:
                    t.on_data(h)
            idx = seg.txn_index
            if [(a.producer_id, a.first_offset, a.last_offset) for a in idx.all_aborted_txns()] != [
                (a.producer_id, a.first_offset, a.last_offset) for a in expected
            ]:
                idx.reset()
                for a in expected:
                    idx.append(a)
        return t
