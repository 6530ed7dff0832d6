"""SharePartition's state machine on an in-memory log: acquisition, acknowledgement,
the delivery-count limit, the start offset, and a snapshot read back after a restart."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from kafkalite.coordinator.share import share_codec
from kafkalite.coordinator.share.share_partition import (
    ACK_ACCEPT,
    ACK_GAP,
    ACK_REJECT,
    ACK_RELEASE,
    ACK_RENEW,
    ACQUIRED,
    Settings,
    ShareError,
    SharePartition,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import build_batch


@dataclass
class _Read:
    records: bytes

    def read_bytes(self) -> bytes:
        return self.records


@dataclass
class FakeLog:
    """Batches by base offset; reads return whole batches from the one holding ``start``."""

    batches: list[tuple[int, int, bytes]] = field(default_factory=list)
    log_start_offset: int = 0

    def append(self, n: int, *, control: bool = False) -> None:
        base = self.high_watermark
        recs = [(None, b"v%d" % (base + i)) for i in range(n)]
        self.batches.append(
            (base, base + n - 1, build_batch(recs, base_offset=base, is_control=control))
        )

    @property
    def high_watermark(self) -> int:
        return self.batches[-1][1] + 1 if self.batches else 0

    last_stable_offset = high_watermark

    def read(
        self, start: int, max_length: int, *, max_offset: Any = None, min_one_message: bool = True
    ) -> _Read:
        limit = self.high_watermark if max_offset is None else max_offset
        return _Read(
            b"".join(b for base, last, b in self.batches if last >= start and base < limit)
        )


def _partition(
    log: FakeLog,
    *,
    limit: int = 3,
    locks: int = 100,
    lock_ms: int = 60_000,
    reset: str = "earliest",
) -> tuple[SharePartition, list[int]]:
    persisted: list[int] = []
    sp = SharePartition(
        "g",
        ("t", 0),
        uuid.uuid4(),
        lambda: Settings(lock_ms, limit, locks, reset, False),
        lambda _sp: None,
        lambda _sp: persisted.append(1),
    )
    sp.initialize(None, log)  # type: ignore[arg-type]
    return sp, persisted


def _run(fn: Callable[[], None]) -> None:
    async def go() -> None:
        fn()

    asyncio.run(go())


def test_release_until_the_delivery_limit_archives() -> None:
    def body() -> None:
        log = FakeLog()
        log.append(3)
        sp, _ = _partition(log, limit=2)
        _, got = sp.acquire("a", 10, 1 << 20, log)  # type: ignore[arg-type]
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got] == [(0, 2, 1)]
        sp.acknowledge(
            "a", [(0, 0, (ACK_RELEASE,)), (1, 1, (ACK_REJECT,)), (2, 2, (ACK_ACCEPT,))], False
        )
        _, got = sp.acquire("b", 10, 1 << 20, log)  # type: ignore[arg-type]
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got] == [(0, 0, 2)]
        sp.acknowledge("b", [(0, 0, (ACK_RELEASE,))], False)
        assert sp.acquire("b", 10, 1 << 20, log)[1] == []  # type: ignore[arg-type]
        assert (sp.start_offset, sp.end_offset) == (3, 3)

    _run(body)


def test_acknowledging_records_of_another_member_is_invalid_record_state() -> None:
    def body() -> None:
        log = FakeLog()
        log.append(2)
        sp, _ = _partition(log)
        sp.acquire("a", 1, 1 << 20, log)  # type: ignore[arg-type]
        with pytest.raises(ShareError) as e:
            sp.acknowledge("b", [(0, 0, (ACK_ACCEPT,))], False)
        assert e.value.code == ErrorCode.invalid_record_state
        with pytest.raises(ShareError) as e:
            sp.acknowledge("a", [(0, 1, (ACK_ACCEPT,))], False)  # offset 1 never acquired
        assert e.value.code == ErrorCode.invalid_record_state
        with pytest.raises(ShareError) as e:
            sp.acknowledge("a", [(0, 0, (ACK_ACCEPT, ACK_ACCEPT))], False)  # types/offsets
        assert e.value.code == ErrorCode.invalid_request
        sp.acknowledge("a", [(0, 0, (ACK_GAP,))], False)  # a gap archives
        assert sp.start_offset == 1

    _run(body)


def test_control_batches_are_skipped_and_latest_starts_at_the_end() -> None:
    def body() -> None:
        log = FakeLog()
        log.append(2)
        sp, _ = _partition(log, reset="latest")
        assert sp.start_offset == 2
        log.append(1, control=True)
        log.append(2)
        _, got = sp.acquire("a", 10, 1 << 20, log)  # type: ignore[arg-type]
        assert [(r.first_offset, r.last_offset) for r in got] == [(3, 4)]

    _run(body)


def test_snapshot_restores_acknowledged_and_delivery_counts() -> None:
    def body() -> None:
        log = FakeLog()
        log.append(6)
        sp, _ = _partition(log, limit=5)
        sp.acquire("a", 6, 1 << 20, log)  # type: ignore[arg-type]
        sp.acknowledge(
            "a", [(0, 0, (ACK_ACCEPT,)), (2, 2, (ACK_ACCEPT,)), (3, 3, (ACK_REJECT,))], False
        )
        snap = share_codec.decode_snapshot(share_codec.encode_snapshot(sp.snapshot()))
        assert snap.start_offset == 1
        # a restarted broker: offsets 1, 4, 5 come back with delivery count 2, 2 and 3 never
        sp2 = SharePartition(
            "g", ("t", 0), sp.topic_id, sp.settings, lambda _s: None, lambda _s: None
        )
        sp2.initialize(snap, log)  # type: ignore[arg-type]
        _, got = sp2.acquire("b", 10, 1 << 20, log)  # type: ignore[arg-type]
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got] == [
            (1, 1, 2),
            (4, 5, 2),
        ]

    _run(body)


def test_log_start_moving_past_the_start_offset() -> None:
    def body() -> None:
        log = FakeLog()
        log.append(4)
        sp, _ = _partition(log)
        log.log_start_offset = 3
        log.batches = [(0, 3, log.batches[0][2])]
        sp.acquire("a", 10, 1 << 20, log)  # type: ignore[arg-type]
        assert sp.start_offset == 3

    _run(body)


def test_records_delivered_to_the_limit_before_a_restart_are_archived() -> None:
    def body() -> None:
        log = FakeLog()
        log.append(2)
        snap = share_codec.ShareSnapshot(0, 0, [share_codec.StateBatch(0, 0, 0, 3)])
        sp = SharePartition(
            "g",
            ("t", 0),
            uuid.uuid4(),
            lambda: Settings(60_000, 3, 100, "earliest", False),
            lambda _s: None,
            lambda _s: None,
        )
        sp.initialize(snap, log)  # type: ignore[arg-type]
        _, got = sp.acquire("a", 10, 1 << 20, log)  # type: ignore[arg-type]
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got] == [(1, 1, 1)]
        assert sp.start_offset == 1

    _run(body)


def test_renew_moves_the_lock_to_a_new_acquisition() -> None:
    """RENEW (v2): the records stay acquired when their first lock runs out."""

    def body() -> None:
        log = FakeLog()
        log.append(2)
        sp, _ = _partition(log)
        sp.acquire("a", 10, 1 << 20, log)  # type: ignore[arg-type]
        first = sp.records[0].token
        with pytest.raises(ShareError) as e:
            sp.acknowledge("a", [(0, 1, (ACK_RENEW,))], False)  # RENEW needs v2
        assert e.value.code == ErrorCode.invalid_request
        sp.acknowledge("a", [(0, 1, (ACK_RENEW,))], True)
        sp._lock_expired(first)  # the old lock's timer fires: nothing released
        assert [r.state for r in sp.records.values()] == [ACQUIRED, ACQUIRED]
        sp._lock_expired(sp.records[0].token)  # the renewed lock runs out
        assert sp.n_available == 2
        sp.close()

    _run(body)


# ---- records and keys of the share-state coordinator -----------------------------------


def test_member_records_round_trip_through_the_loader() -> None:
    from kafkalite.coordinator.share import share_loader

    tid = uuid.uuid4()
    records = {
        share_codec.group_metadata_key("g"): share_codec.group_metadata_value(7),
        share_codec.member_key(share_codec.SHARE_MEMBER_METADATA, "g", "m1"): (
            share_codec.member_metadata_value(None, "client", "/10.0.0.1", ("a", "b"))
        ),
        share_codec.member_key(share_codec.SHARE_CURRENT_MEMBER_ASSIGNMENT, "g", "m1"): (
            share_codec.member_assignment_value(7, 6, {tid: [0, 2]})
        ),
        # a member gone: tombstoned
        share_codec.member_key(share_codec.SHARE_MEMBER_METADATA, "g", "m2"): None,
        share_codec.snapshot_key("g", tid, 0): share_codec.encode_snapshot(
            share_codec.ShareSnapshot(5, 1, [share_codec.StateBatch(5, 6, 2, 1)], 3)
        ),
    }
    g = share_loader.rebuild("g", records)
    assert g is not None and g.group_epoch == 7
    [m] = g.members.values()
    assert (m.member_id, m.member_epoch, m.client_id, m.client_host, m.rack_id) == (
        "m1",
        7,
        "client",
        "/10.0.0.1",
        None,
    )
    assert m.subscribed_topic_names == ("a", "b") and m.assigned == {tid: [0, 2]}
    assert g.persisted_members == {"m1": share_loader.persisted_view(m)}
    snap = g.snapshots[(tid, 0)]
    assert (snap.start_offset, snap.state_epoch, snap.leader_epoch) == (5, 1, 3)


def test_version_0_snapshots_still_decode() -> None:
    """Snapshots written before the leader epoch was kept (value version 0)."""
    v1 = share_codec.encode_snapshot(share_codec.ShareSnapshot(4, 2, [], 9))
    v0 = b"\x00\x00" + v1[2:-4]
    snap = share_codec.decode_snapshot(v0)
    assert (snap.start_offset, snap.state_epoch, snap.leader_epoch) == (4, 2, -1)


def test_share_coordinator_keys() -> None:
    from kafkalite.coordinator.share.share_state import group_of_share_key, share_coordinator_key

    tid = uuid.UUID(int=1)
    key = share_coordinator_key("a:b", tid, 3)
    assert key == "a:b:AAAAAAAAAAAAAAAAAAAAAQ:3"  # Kafka prints topic ids in base64
    assert group_of_share_key(key) == "a:b"
    assert group_of_share_key("g:x") is None and group_of_share_key("g:t:p") is None
