"""FetchSessionCache eviction rules (Kafka's tryEvict), with explicit clocks."""

from __future__ import annotations

from kafkalite.server.fetch_session import CachedPartition, FetchSessionCache, next_epoch


def parts(n: int) -> dict:
    return {("t", i): CachedPartition(0, 1024) for i in range(n)}


def test_room_then_full_of_new_sessions():
    cache = FetchSessionCache(2, eviction_ms=1000)
    assert cache.maybe_create_session(0, False, parts(1)) is not None
    assert cache.maybe_create_session(1, False, parts(5)) is not None
    # both are younger than the eviction time: a consumer cannot evict them
    assert cache.maybe_create_session(2, False, parts(9)) is None
    assert len(cache) == 2 and cache.evictions == 0


def test_stale_sessions_go_first_regardless_of_size():
    cache = FetchSessionCache(1, eviction_ms=1000)
    big = cache.maybe_create_session(0, True, parts(50))
    s = cache.maybe_create_session(1001, False, parts(0))
    assert s is not None and cache.get(big.id) is None and cache.evictions == 1


def test_privileged_may_evict_new_unprivileged_but_not_new_privileged():
    cache = FetchSessionCache(1, eviction_ms=1000)
    consumer = cache.maybe_create_session(0, False, parts(10))
    follower = cache.maybe_create_session(1, True, parts(0))
    assert follower is not None and cache.get(consumer.id) is None
    assert cache.maybe_create_session(2, True, parts(100)) is None


def test_old_sessions_compare_by_privilege_then_size():
    cache = FetchSessionCache(1, eviction_ms=1000)
    s = cache.maybe_create_session(0, False, parts(3))
    cache.touch(s, 1500)  # used recently, but older than the eviction time
    assert cache.maybe_create_session(1600, False, parts(2)) is None  # smaller: no
    assert cache.maybe_create_session(1600, False, parts(3)) is None  # tie (id 0 < id): no
    t = cache.maybe_create_session(1600, False, parts(4))
    assert t is not None and cache.get(s.id) is None


def test_eviction_standing_is_decided_when_the_session_is_touched():
    cache = FetchSessionCache(1, eviction_ms=1000)
    s = cache.maybe_create_session(0, False, parts(1))
    cache.touch(s, 900)  # touched while still young: not evictable by all
    assert cache.maybe_create_session(1200, False, parts(10)) is None


def test_zero_slots_never_create_sessions():
    assert FetchSessionCache(0).maybe_create_session(0, True, parts(1)) is None


def test_epochs_wrap_to_one():
    assert next_epoch(0) == 1 and next_epoch(5) == 6
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(-1) == 0
