"""Idempotent-producer state per partition (Kafka's ProducerStateManager).

For every producer id the leader remembers the epoch and the metadata of the
last five batches it appended (first/last sequence, first/last offset). A
retried batch that matches one of them is a duplicate: it is not appended
again and the producer gets the original offsets back. A gap in the sequence
is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH.

The state is rebuilt from the batch headers of the log when the partition is
loaded, so it survives restarts without snapshot files (Kafka's ``.snapshot``
files are an optimisation of the same rebuild).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.record_batch import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchHeader,
)

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


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}

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

    def update(self, headers: list[BatchHeader]) -> None:
        """Record appended batches (their base offsets are assigned by now)."""
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
            if h.base_sequence == NO_SEQUENCE or h.is_control:
                continue
            entry.batches.append(
                BatchMetadata(
                    h.base_sequence, h.last_sequence, h.base_offset, h.last_offset, h.max_timestamp
                )
            )

    def truncate(self) -> None:
        """Forget everything (after a log truncation the state is rebuilt from the log)."""
        self.producers.clear()
