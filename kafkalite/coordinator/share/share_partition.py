"""One share partition: the records of one topic partition as one share group sees them.

Kafka's ``SharePartition``. Between the share-partition start offset (SPSO) and end
offset (the next offset never fetched, SPEO + 1) every record is *in flight*:

* ``AVAILABLE``: may be acquired (never delivered, released, or its lock ran out);
* ``ACQUIRED``: locked by one member for the record lock duration;
* ``ACKNOWLEDGED``: accepted, never delivered again;
* ``ARCHIVED``: rejected, a gap, or delivered ``delivery.count.limit`` times.

Records below the SPSO are done. The SPSO moves past acknowledged and archived
records; the number of offsets in flight (end - start) is bounded by
``group.share.partition.max.record.locks``, so a slow group stops acquiring new
records instead of holding unbounded state.

Everything runs on the broker's event loop: no locks. State changes that must survive a
restart (acknowledgements, releases, archiving, the SPSO) are handed to ``persist``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkalite.common.types import TopicPartition
from kafkalite.coordinator.share.iso_duration import parse_duration_ms
from kafkalite.coordinator.share.share_codec import ShareSnapshot, StateBatch
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.record_batch import iter_batch_positions, parse_header

if TYPE_CHECKING:
    import uuid

    from kafkalite.log.log import Log

log = logging.getLogger(__name__)

# Kafka's RecordState ids (also the persisted DeliveryState)
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
TERMINAL = (ACKNOWLEDGED, ARCHIVED)
# AcknowledgeType: 0 Gap, 1 Accept, 2 Release, 3 Reject, 4 Renew (ShareFetch/Ack v2)
ACK_GAP, ACK_ACCEPT, ACK_RELEASE, ACK_REJECT, ACK_RENEW = 0, 1, 2, 3, 4

_tokens = itertools.count(1)


class ShareError(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message


@dataclass(slots=True)
class InFlight:
    state: int
    count: int = 0
    member: str = ""
    #: the acquisition this lock belongs to (its timer releases only its own records)
    token: int = 0


@dataclass(slots=True)
class AcquiredRange:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(slots=True)
class Settings:
    """The group's effective settings, read at each use (group configs may change)."""

    lock_duration_ms: int
    delivery_count_limit: int
    max_record_locks: int
    auto_offset_reset: str
    read_committed: bool
    renew_enabled: bool = True


class SharePartition:
    def __init__(
        self,
        group_id: str,
        tp: TopicPartition,
        topic_id: uuid.UUID,
        settings: Callable[[], Settings],
        on_released: Callable[[SharePartition], None],
        persist: Callable[[SharePartition], None],
    ) -> None:
        self.group_id = group_id
        self.tp = tp
        self.topic_id = topic_id
        self.settings = settings
        self._on_released = on_released
        self._persist = persist
        self.initialized = False
        self.start_offset = 0
        self.end_offset = 0
        self.records: dict[int, InFlight] = {}
        self.n_available = 0
        #: states read back from a snapshot for offsets not fetched again yet
        self.restored: dict[int, tuple[int, int]] = {}
        self.state_epoch = 0
        #: the partition's leader epoch when this broker loaded it (sent with every
        #: state read and write, so a deposed leader's writes are fenced)
        self.leader_epoch = -1
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self.closed = False

    # ---- initialization -------------------------------------------------------------
    def initialize(self, snapshot: ShareSnapshot | None, plog: Log) -> None:
        """From the persisted state, or from share.auto.offset.reset for a new one."""
        if snapshot is not None and snapshot.start_offset >= 0:
            self.start_offset = snapshot.start_offset
            self.state_epoch = snapshot.state_epoch
            for b in snapshot.batches:
                for off in range(max(b.first_offset, self.start_offset), b.last_offset + 1):
                    self.restored[off] = (b.delivery_state, b.delivery_count)
        else:
            if snapshot is not None:  # initialized without a start offset
                self.state_epoch = snapshot.state_epoch
            self.start_offset = self.reset_offset(plog)
        self.start_offset = max(self.start_offset, plog.log_start_offset)
        self.end_offset = self.start_offset
        self.initialized = True
        self._advance()

    def reset_offset(self, plog: Log) -> int:
        reset = self.settings().auto_offset_reset
        if reset == "earliest":
            return plog.log_start_offset
        if reset.startswith("by_duration:"):
            ms = parse_duration_ms(reset.split(":", 1)[1])
            if ms is not None:
                found = plog.fetch_offset_by_timestamp(int(time.time() * 1000) - ms)
                if found is not None:
                    return min(found[0], self._fetch_limit(plog))
        return self._fetch_limit(plog)

    def _fetch_limit(self, plog: Log) -> int:
        return plog.last_stable_offset if self.settings().read_committed else plog.high_watermark

    # ---- acquisition ----------------------------------------------------------------
    def has_acquirable(self, plog: Log) -> bool:
        if self.n_available:
            return True
        s = self.settings()
        return (
            self.end_offset < self._fetch_limit(plog)
            and self.end_offset - self.start_offset < s.max_record_locks
        )

    def acquire(
        self, member_id: str, max_records: int, max_bytes: int, plog: Log
    ) -> tuple[bytes, list[AcquiredRange]]:
        """Lock up to ``max_records`` records (whole batches) for ``member_id``."""
        s = self.settings()
        if self.start_offset < plog.log_start_offset:
            self._move_start(plog.log_start_offset)
        token = next(_tokens)
        ranges: list[AcquiredRange] = []
        batches: dict[int, bytes] = {}
        budget = max_records

        def add(off: int, count: int) -> None:
            last = ranges[-1] if ranges else None
            if last is not None and last.last_offset == off - 1 and last.delivery_count == count:
                last.last_offset = off
            else:
                ranges.append(AcquiredRange(off, off, count))

        # 1. released or timed-out records first (lowest offsets)
        if self.n_available:
            runs: list[list[int]] = []
            for off, r in self.records.items():
                if budget <= 0:
                    break
                if r.state != AVAILABLE:
                    continue
                r.state, r.member, r.token = ACQUIRED, member_id, token
                r.count += 1
                self.n_available -= 1
                budget -= 1
                add(off, r.count)
                if runs and runs[-1][1] == off - 1:
                    runs[-1][1] = off
                else:
                    runs.append([off, off])
            for first, last in runs:
                self._read_batches(plog, first, last, max_bytes, batches)

        # 2. new records from the log, bounded by the record locks
        limit = self._fetch_limit(plog)
        room = s.max_record_locks - (self.end_offset - self.start_offset)
        if budget > 0 and room > 0 and self.end_offset < limit:
            data = plog.read(
                self.end_offset, max_bytes, max_offset=limit, min_one_message=True
            ).read_bytes()
            aborted = (
                [
                    (t.producer_id, t.first_offset, t.last_offset)
                    for t in plog.collect_aborted_transactions(self.end_offset, limit)
                ]
                if s.read_committed
                else []
            )
            for pos, size in iter_batch_positions(data):
                h = parse_header(data, pos)
                if h.last_offset < self.end_offset:
                    continue
                if budget <= 0 or room <= 0:
                    break
                off = max(self.end_offset, h.base_offset)
                if h.is_control:  # markers are never delivered
                    room -= h.last_offset + 1 - off
                    self.end_offset = h.last_offset + 1
                    continue
                if h.is_transactional and any(
                    pid == h.producer_id and first <= h.base_offset <= last
                    for pid, first, last in aborted
                ):
                    # read_committed: an aborted transaction's records are archived
                    for o in range(off, h.last_offset + 1):
                        self.records[o] = InFlight(ARCHIVED)
                    room -= h.last_offset + 1 - off
                    self.end_offset = h.last_offset + 1
                    continue
                batches[h.base_offset] = data[pos : pos + size]
                # record-level: a big batch is shared out, not taken whole by one member
                while off <= h.last_offset and budget > 0 and room > 0:
                    prior = self.restored.pop(off, None)
                    if prior is not None and prior[0] in TERMINAL:
                        self.records[off] = InFlight(prior[0], prior[1])
                    elif prior is not None and prior[1] >= s.delivery_count_limit:
                        # delivered to the limit before a restart, never acknowledged
                        self.records[off] = InFlight(ARCHIVED, prior[1])
                    else:
                        count = (prior[1] if prior is not None else 0) + 1
                        self.records[off] = InFlight(ACQUIRED, count, member_id, token)
                        budget -= 1
                        add(off, count)
                    off += 1
                    room -= 1
                self.end_offset = off
                if off <= h.last_offset:
                    break
        if ranges:
            self._timers[token] = asyncio.get_running_loop().call_later(
                s.lock_duration_ms / 1000, self._lock_expired, token
            )
        self._advance()
        return b"".join(batches[k] for k in sorted(batches)), ranges

    @staticmethod
    def _read_batches(
        plog: Log, first: int, last: int, max_bytes: int, out: dict[int, bytes]
    ) -> None:
        pos_off = first
        while pos_off <= last:
            try:
                data = plog.read(pos_off, max_bytes, max_offset=None, min_one_message=True)
            except Exception:  # deleted meanwhile: the client acknowledges a gap
                return
            raw = data.read_bytes()
            moved = False
            for pos, size in iter_batch_positions(raw):
                h = parse_header(raw, pos)
                if h.last_offset < pos_off:
                    continue
                if h.base_offset > last:
                    return
                if not h.is_control:
                    out[h.base_offset] = raw[pos : pos + size]
                pos_off = h.last_offset + 1
                moved = True
            if not moved:
                return

    # ---- locks ----------------------------------------------------------------------
    def _lock_expired(self, token: int) -> None:
        self._timers.pop(token, None)
        if self.closed:
            return
        released = 0
        for r in self.records.values():
            if r.token == token and r.state == ACQUIRED:
                self._release(r)
                released += 1
        if released:
            log.debug("%d records of %s/%s: lock timed out", released, self.group_id, self.tp)
            self._advance()
            self._persist(self)
            self._on_released(self)

    def _release(self, r: InFlight) -> None:
        r.member, r.token = "", 0
        if r.count >= self.settings().delivery_count_limit:
            r.state = ARCHIVED
        else:
            r.state = AVAILABLE
            self.n_available += 1

    def release_member(self, member_id: str) -> int:
        """A member's session closed: its acquired records are available again."""
        released = 0
        for r in self.records.values():
            if r.state == ACQUIRED and r.member == member_id:
                self._release(r)
                released += 1
        if released:
            self._advance()
            self._persist(self)
            self._on_released(self)
        return released

    # ---- acknowledgement --------------------------------------------------------------
    def acknowledge(
        self, member_id: str, batches: list[tuple[int, int, tuple[int, ...]]], allow_renew: bool
    ) -> None:
        """Apply one partition's acknowledgements, all or none (raises ShareError)."""
        plan: list[tuple[int, int]] = []
        for first, last, types in batches:
            if last < first or not types or len(types) not in (1, last - first + 1):
                raise ShareError(ErrorCode.invalid_request, "Invalid acknowledgement batch.")
            for i, off in enumerate(range(first, last + 1)):
                t = types[0] if len(types) == 1 else types[i]
                if t not in (ACK_GAP, ACK_ACCEPT, ACK_RELEASE, ACK_REJECT, ACK_RENEW) or (
                    t == ACK_RENEW and not allow_renew
                ):
                    raise ShareError(ErrorCode.invalid_request, f"Invalid acknowledge type: {t}.")
                r = self.records.get(off)
                if t == ACK_GAP and (r is None or r.state in TERMINAL):
                    continue
                if r is None or r.state != ACQUIRED or r.member != member_id:
                    raise ShareError(
                        ErrorCode.invalid_record_state,
                        f"The record at offset {off} is not acquired by this member.",
                    )
                plan.append((off, t))
        renewed: list[InFlight] = []
        for off, t in plan:
            r = self.records[off]
            if t in (ACK_ACCEPT,):
                r.state, r.member, r.token = ACKNOWLEDGED, "", 0
            elif t in (ACK_REJECT, ACK_GAP):
                r.state, r.member, r.token = ARCHIVED, "", 0
            elif t == ACK_RELEASE:
                self._release(r)
            else:
                renewed.append(r)
        if renewed:
            token = next(_tokens)
            for r in renewed:
                r.token = token
            self._timers[token] = asyncio.get_running_loop().call_later(
                self.settings().lock_duration_ms / 1000, self._lock_expired, token
            )
        self._advance()
        if any(t == ACK_RELEASE for _, t in plan):
            self._on_released(self)

    # ---- offsets --------------------------------------------------------------------
    def _advance(self) -> None:
        """Move the SPSO past every acknowledged, archived or missing offset."""
        start, end, records = self.start_offset, self.end_offset, self.records
        while start < end:
            r = records.get(start)
            if r is not None and r.state not in TERMINAL:
                break
            records.pop(start, None)
            start += 1
        if start == end:
            while start in self.restored and self.restored[start][0] in TERMINAL:
                del self.restored[start]
                start += 1
            self.end_offset = start
        self.start_offset = start

    def _move_start(self, offset: int) -> None:
        """Records below ``offset`` were deleted from the log: forget them."""
        for off in [o for o in self.records if o < offset]:
            r = self.records.pop(off)
            if r.state == AVAILABLE:
                self.n_available -= 1
        for off in [o for o in self.restored if o < offset]:
            del self.restored[off]
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)
        self._advance()

    def reset_to(self, offset: int) -> None:
        """AlterShareGroupOffsets: a new start offset, nothing in flight."""
        self.records.clear()
        self.restored.clear()
        self.n_available = 0
        self.start_offset = self.end_offset = offset
        self.state_epoch += 1

    def delivery_complete_count(self) -> int:
        return sum(1 for r in self.records.values() if r.state in TERMINAL) + sum(
            1 for s, _ in self.restored.values() if s in TERMINAL
        )

    def lag(self, plog: Log | None) -> int:
        if plog is None:
            return -1
        return max(0, plog.high_watermark - self.start_offset - self.delivery_complete_count())

    def snapshot(self) -> ShareSnapshot:
        """The state to persist: the SPSO and every offset whose state or count matters."""
        entries: dict[int, tuple[int, int]] = dict(self.restored)
        for off, r in self.records.items():
            if r.state in TERMINAL:
                entries[off] = (r.state, r.count)
            elif r.count:
                entries[off] = (AVAILABLE, r.count)  # acquired records come back available
        batches: list[StateBatch] = []
        for off in sorted(entries):
            if off < self.start_offset:
                continue
            state, count = entries[off]
            last = batches[-1] if batches else None
            if (
                last is not None
                and last.last_offset == off - 1
                and (last.delivery_state, last.delivery_count) == (state, count)
            ):
                batches[-1] = StateBatch(last.first_offset, off, state, count)
            else:
                batches.append(StateBatch(off, off, state, count))
        return ShareSnapshot(self.start_offset, self.state_epoch, batches, self.leader_epoch)

    def close(self) -> None:
        self.closed = True
        for h in self._timers.values():
            h.cancel()
        self._timers.clear()
