"""Incremental fetch sessions (KIP-227).

A full fetch with session_id 0 and epoch 0 creates a session and the broker
remembers the partition set; later requests carry (session_id, epoch) and
only the partitions that changed, and the response carries only partitions
with news (data, a moved high watermark / LSO / log start offset, or an
error). epoch -1 means "no session" (and closes the named one). The cache is
bounded by max.incremental.fetch.session.cache.slots; a full cache evicts the
least recently used session idle for min.incremental.fetch.session.eviction.ms.
"""

from __future__ import annotations

import collections
import random
import time
from dataclasses import dataclass, field

from kafkalite.protocol.errors import ErrorCode, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_SESSION_ID = 0

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class CachedPartition:
    fetch_offset: int
    max_bytes: int
    log_start_offset: int = -1
    current_leader_epoch: int = -1
    # what the client was last told
    high_watermark: int = -1
    last_stable_offset: int = -1
    response_log_start_offset: int = -1


@dataclass(slots=True)
class FetchSession:
    id: int
    epoch: int
    partitions: dict[TopicPartition, CachedPartition] = field(default_factory=dict)
    last_used: float = 0.0


class FetchSessionCache:
    def __init__(self, max_slots: int = 1000, eviction_ms: int = 120000) -> None:
        self.max_slots = max_slots
        self.eviction_s = eviction_ms / 1000
        self.sessions: collections.OrderedDict[int, FetchSession] = collections.OrderedDict()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def _new_id(self) -> int:
        while True:
            sid = random.randint(1, 2**31 - 1)
            if sid not in self.sessions:
                return sid

    def create(self) -> FetchSession | None:
        now = time.monotonic()
        if len(self.sessions) >= self.max_slots:
            if not self.sessions:
                return None
            oldest_id, oldest = next(iter(self.sessions.items()))
            if now - oldest.last_used < self.eviction_s:
                return None  # cache full of active sessions: serve sessionless
            del self.sessions[oldest_id]
            self.evictions += 1
        s = FetchSession(self._new_id(), 1, last_used=now)
        self.sessions[s.id] = s
        return s

    def get(self, session_id: int, epoch: int) -> FetchSession:
        s = self.sessions.get(session_id)
        if s is None:
            raise KafkaError(ErrorCode.fetch_session_id_not_found)
        if s.epoch != epoch:
            raise KafkaError(ErrorCode.invalid_fetch_session_epoch)
        s.last_used = time.monotonic()
        self.sessions.move_to_end(session_id)
        return s

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)
