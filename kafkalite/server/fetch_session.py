"""Incremental fetch sessions (KIP-227): Kafka's FetchSessionCache and FetchManager.

A full fetch (epoch 0) may create a session: the broker remembers the partition
set, and later requests carry (session_id, epoch) with only the partitions that
changed; the response then carries only partitions with news (data, a moved
high watermark / LSO / log start offset, or an error). Epoch -1 means "no
session" (and closes the named one).

The cache holds at most ``max.incremental.fetch.session.cache.slots`` sessions.
When it is full, a new session may evict, in Kafka's order:

1. the least recently used session, if unused for longer than the eviction
   time (``min.incremental.fetch.session.eviction.ms``, 120000 as in Kafka);
2. otherwise the least valuable evictable session, if the new one is worth at
   least as much — worth is (privileged, partition count, id), where followers'
   sessions are privileged. A consumer's session may only evict sessions older
   than the eviction time; a follower's may also evict any consumer's session.

If nothing can be evicted the fetch is served without a session (session id 0).
Kafka shards this cache by session id across its request threads (KAFKA-9401);
kafkalite answers from one event loop, so it keeps a single shard with the
same rules.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from kafkalite.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_SESSION_ID = 0
_INT_MAX = 2**31 - 1

TopicPartition = tuple[str, int]


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: 1, 2, ... wrapping to 1."""
    if epoch < 0:
        return INITIAL_EPOCH
    return 1 if epoch == _INT_MAX else epoch + 1


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
    privileged: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    uses_topic_ids: bool = False
    partitions: dict[TopicPartition, CachedPartition] = field(default_factory=dict)
    #: partition count as of the last touch (Kafka's cachedSize), and the eviction
    #: sets the session was in then
    cached_size: int = -1
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    @property
    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)


class FetchSessionCache:
    def __init__(self, max_slots: int = 1000, eviction_ms: int = 120000) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def _new_id(self) -> int:
        while True:
            sid = random.randint(1, _INT_MAX - 1)
            if sid not in self.sessions:
                return sid

    def maybe_create_session(
        self,
        now_ms: int,
        privileged: bool,
        partitions: dict[TopicPartition, CachedPartition],
        *,
        uses_topic_ids: bool = False,
    ) -> FetchSession | None:
        """A new session holding ``partitions``, or None when the cache has no room."""
        size = len(partitions)
        if len(self.sessions) >= self.max_slots and not self._try_evict(
            privileged, (privileged, size, 0), now_ms
        ):
            return None
        if self.max_slots <= 0:
            return None
        s = FetchSession(
            self._new_id(),
            privileged,
            now_ms,
            now_ms,
            next_epoch(INITIAL_EPOCH),
            uses_topic_ids,
            partitions,
        )
        self.sessions[s.id] = s
        self.touch(s, now_ms)
        return s

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now_ms: int) -> bool:
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            self.remove(stalest.id)
            self.evictions += 1
            return True
        candidates = [
            s
            for s in self.sessions.values()
            if (s.evictable_by_privileged if privileged else s.evictable_by_all)
        ]
        if not candidates:
            return False
        least = min(candidates, key=lambda s: s.evictable_key)
        if key < least.evictable_key:
            return False
        self.remove(least.id)
        self.evictions += 1
        return True

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Mark the session used; its eviction standing is decided here, as in Kafka."""
        session.last_used_ms = now_ms
        session.cached_size = len(session.partitions)
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = (not session.privileged) or old
        session.evictable_by_all = old

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)


@dataclass(slots=True)
class FetchContext:
    """What a Fetch request means for sessions (Kafka's FetchContext kinds)."""

    kind: str  # "full" (maybe new session), "sessionless", "incremental", "error"
    session: FetchSession | None = None
    error: int = 0

    @property
    def response_session_id(self) -> int:
        return self.session.id if self.session is not None else INVALID_SESSION_ID


def new_context(
    cache: FetchSessionCache,
    session_id: int,
    epoch: int,
    *,
    is_follower: bool,
    uses_topic_ids: bool,
    requested: list[tuple[TopicPartition, CachedPartition]],
    forgotten: list[TopicPartition],
    now_ms: int,
) -> FetchContext:
    """Kafka's FetchManager.newContext: resolve (session_id, epoch) to a context."""
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full request
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)  # any session named in a full request is closed
        if epoch == FINAL_EPOCH:
            return FetchContext("sessionless")
        session = cache.maybe_create_session(
            now_ms, is_follower, dict(requested), uses_topic_ids=uses_topic_ids
        )
        return FetchContext("full", session)
    # incremental: session_id 0 is never a session, so it is "not found" too
    session = cache.get(session_id)
    if session is None:
        return FetchContext("error", error=ErrorCode.fetch_session_id_not_found)
    if session.epoch != epoch:
        return FetchContext("error", error=ErrorCode.invalid_fetch_session_epoch)
    if session.uses_topic_ids != uses_topic_ids:
        return FetchContext("error", error=ErrorCode.fetch_session_topic_id_error)
    for tp, cp in requested:
        cached = session.partitions.get(tp)
        if cached is None:
            session.partitions[tp] = cp
        else:
            cached.fetch_offset = cp.fetch_offset
            cached.max_bytes = cp.max_bytes
            cached.log_start_offset = cp.log_start_offset
            cached.current_leader_epoch = cp.current_leader_epoch
    for tp in forgotten:
        session.partitions.pop(tp, None)
    if not session.partitions:
        # nothing left to follow: close the session, answer sessionless
        cache.remove(session.id)
        return FetchContext("sessionless")
    cache.touch(session, now_ms)
    session.epoch = next_epoch(session.epoch)
    return FetchContext("incremental", session)
