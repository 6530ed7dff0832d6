"""JoinGroup / SyncGroup / Heartbeat / LeaveGroup over the wire, with Kafka's error codes."""

from __future__ import annotations

import asyncio

import pytest

from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing.embedded_broker import AsyncBroker
from tests.coordinator.group_helpers import (
    FIND,
    LEAVE,
    Member,
    assignment,
    find_coordinator,
    subscription,
)
from tests.coordinator.wire import Wire


async def members(broker: AsyncBroker, group: str, n: int, **kw) -> list[Member]:
    out = []
    for i in range(n):
        w = await Wire.connect(broker.bootstrap_servers, client_id=f"client-{i}")
        out.append(Member(w, group, **kw))
    await find_coordinator(out[0].wire, group)
    return out


async def form_group(ms: list[Member]) -> None:
    """First member alone, then the others join while it rejoins; each gets its own id as assignment."""
    first = ms[0]
    await first.join()
    await first.sync({first.member_id: first.member_id.encode()})
    if len(ms) == 1:
        return
    others = [asyncio.create_task(m.join()) for m in ms[1:]]
    await asyncio.sleep(0.05)
    await first.join()
    await asyncio.gather(*others)
    leader = next(m for m in ms if m.is_leader)
    followers = [asyncio.create_task(m.sync()) for m in ms if m is not leader]
    await leader.sync({m.member_id: m.member_id.encode() for m in ms})
    await asyncio.gather(*followers)


async def test_single_member_join_sync_is_leader_and_gets_everything(broker) -> None:
    [m] = await members(broker, "g-single", 1, protocols=[("range", subscription("t"))])
    first = await m.join_once()
    assert first.error_code == ErrorCode.member_id_required  # KIP-394, v4+
    assert first.member_id.startswith("client-0-")
    r = await m.join_once()
    assert r.error_code == ErrorCode.none
    assert r.member_id == first.member_id and r.leader == r.member_id and r.generation_id == 1
    assert r.protocol_name == "range"
    assert [(x.member_id, x.metadata) for x in r.members] == [(m.member_id, subscription("t"))]
    a = assignment({"t": [0, 1, 2]})
    s = await m.sync({m.member_id: a})
    assert s.error_code == ErrorCode.none and s.assignment == a
    assert await m.heartbeat() == ErrorCode.none


async def test_join_before_v4_gets_a_member_id_at_once(broker) -> None:
    [m] = await members(broker, "g-v3", 1, join_version=3)
    r = await m.join_once()
    assert r.error_code == ErrorCode.none and r.member_id and r.generation_id == 1


async def test_second_member_triggers_rebalance_and_assignments_are_per_member(broker) -> None:
    a, b = await members(broker, "g-two", 2)
    await a.join()
    await a.sync({a.member_id: b"all"})
    b_join = asyncio.create_task(b.join())
    await asyncio.sleep(0.05)
    assert await a.heartbeat() == ErrorCode.rebalance_in_progress
    ra = await a.join()
    rb = await b_join
    assert ra.generation_id == rb.generation_id == 2
    assert ra.leader == rb.leader == a.member_id  # the old leader stays leader
    assert {x.member_id for x in ra.members} == {a.member_id, b.member_id}
    assert list(rb.members) == []  # only the leader sees the members
    # the follower's SyncGroup waits for the leader's
    b_sync = asyncio.create_task(b.sync())
    await asyncio.sleep(0.05)
    assert not b_sync.done()
    sa = await a.sync({a.member_id: b"for-a", b.member_id: b"for-b"})
    sb = await b_sync
    assert (sa.assignment, sb.assignment) == (b"for-a", b"for-b")
    assert await a.heartbeat() == ErrorCode.none and await b.heartbeat() == ErrorCode.none


async def test_error_codes_for_bad_joins(tmp_path) -> None:
    async with AsyncBroker(tmp_path) as broker:  # default group.min/max.session.timeout.ms
        [m] = await members(broker, "g-bad", 1)
        m.group = ""
        assert (await m.join_once()).error_code == ErrorCode.invalid_group_id
        m.group = "g-bad"
        m.session_ms = 5999
        assert (await m.join_once()).error_code == ErrorCode.invalid_session_timeout
        m.session_ms = 1800001
        assert (await m.join_once()).error_code == ErrorCode.invalid_session_timeout
        m.session_ms = 6000
        m.member_id = "nobody"
        assert (await m.join_once()).error_code == ErrorCode.unknown_member_id
        m.member_id = ""
        m.protocol_type = ""
        assert (await m.join_once()).error_code == ErrorCode.inconsistent_group_protocol


async def test_inconsistent_protocols_are_rejected(broker) -> None:
    a, b, c = await members(broker, "g-proto", 3)
    await a.join()
    b.protocols = [("roundrobin", b"x")]
    assert (await b.join()).error_code == ErrorCode.inconsistent_group_protocol
    c.protocol_type = "connect"
    assert (await c.join()).error_code == ErrorCode.inconsistent_group_protocol


async def test_protocol_is_chosen_by_votes(broker) -> None:
    a, b, c = await members(broker, "g-votes", 3)
    a.protocols = [("range", b"a"), ("roundrobin", b"a")]
    b.protocols = [("roundrobin", b"b"), ("range", b"b")]
    c.protocols = [("roundrobin", b"c"), ("range", b"c"), ("sticky", b"c")]
    await a.join()
    await a.sync({})
    others = asyncio.gather(b.join(), c.join())
    await asyncio.sleep(0.05)  # both are in the group, waiting for the leader to rejoin
    results = [await a.join(), *await others]
    assert {r.protocol_name for r in results} == {"roundrobin"}
    leader = next(r for r in results if r.members)
    assert sorted(x.metadata for x in leader.members) == [b"a", b"b", b"c"]


async def test_heartbeat_and_sync_errors(broker) -> None:
    [m] = await members(broker, "g-hb", 1)
    await m.join()
    gen, mid = m.generation, m.member_id
    m.generation = gen + 5
    assert await m.heartbeat() == ErrorCode.illegal_generation
    assert (await m.sync()).error_code == ErrorCode.illegal_generation
    m.generation, m.member_id = gen, "ghost"
    assert await m.heartbeat() == ErrorCode.unknown_member_id
    m.member_id = mid
    s = await m.sync({mid: b"x"}, version=5)
    assert (
        s.error_code == ErrorCode.none
        and s.protocol_name == "range"
        and s.protocol_type == "consumer"
    )
    m.group = "no-such-group"
    assert await m.heartbeat() == ErrorCode.unknown_member_id


async def test_leaving_member_triggers_rebalance(broker) -> None:
    a, b = await members(broker, "g-leave", 2)
    await form_group([a, b])
    r = await b.leave()
    assert r.error_code == ErrorCode.none and [x.error_code for x in r.members] == [ErrorCode.none]
    assert await a.heartbeat() == ErrorCode.rebalance_in_progress
    ra = await a.join()
    assert ra.generation_id == 3 and [x.member_id for x in ra.members] == [a.member_id]
    # leaving twice, and leaving a group that does not exist
    again = await b.leave()
    assert [x.error_code for x in again.members] == [ErrorCode.unknown_member_id]
    b.group = "never-existed"
    assert (await b.leave()).error_code == ErrorCode.unknown_member_id


async def test_leave_group_v0_reports_the_member_error(broker) -> None:
    [m] = await members(broker, "g-leave0", 1)
    await m.join()
    r = await m.wire.call(LEAVE, 0, {"group_id": "g-leave0", "member_id": "ghost"})
    assert r.error_code == ErrorCode.unknown_member_id
    r = await m.wire.call(LEAVE, 0, {"group_id": "g-leave0", "member_id": m.member_id})
    assert r.error_code == ErrorCode.none


async def test_session_expiry_removes_the_silent_member(broker) -> None:
    a, b = await members(broker, "g-expire", 2, session_ms=300, rebalance_ms=5000)
    await form_group([a, b])
    # only a heartbeats; b's session runs out
    for _ in range(10):
        await asyncio.sleep(0.1)
        err = await a.heartbeat()
    assert err == ErrorCode.rebalance_in_progress
    ra = await a.join()
    assert [x.member_id for x in ra.members] == [a.member_id]
    assert await b.heartbeat() == ErrorCode.unknown_member_id


async def test_member_that_does_not_rejoin_is_dropped_after_rebalance_timeout(broker) -> None:
    a, b, c = await members(broker, "g-rebal", 3, rebalance_ms=300, session_ms=10000)
    await form_group([a, b])
    # c joins; a rejoins; b never does and is removed when the rebalance timeout passes
    ra, rc = await asyncio.gather(a.join(), c.join())
    assert ra.generation_id == rc.generation_id == 3
    leader = ra if ra.members else rc
    assert {x.member_id for x in leader.members} == {a.member_id, c.member_id}


async def test_pending_member_that_never_returns_expires(broker) -> None:
    a, b = await members(broker, "g-pending", 2, session_ms=200)
    await a.join()
    await a.sync({})
    first = await b.join_once()
    assert first.error_code == ErrorCode.member_id_required
    group = broker.broker.group_coordinator.manager.get_group("g-pending")
    assert first.member_id in group.pending_members
    await asyncio.sleep(0.5)
    assert first.member_id not in group.pending_members


async def test_initial_rebalance_delay_lets_a_starting_fleet_join_one_generation(tmp_path) -> None:
    async with AsyncBroker(tmp_path, **{"group.initial.rebalance.delay.ms": 300}) as broker:
        a, b, c = await members(broker, "g-delay", 3)
        results = await asyncio.gather(a.join(), b.join(), c.join())
        assert {r.generation_id for r in results} == {1}
        leader = next(r for r in results if r.members)
        assert len(leader.members) == 3


async def test_static_member_rejoin_keeps_assignment_without_rebalance(broker) -> None:
    a, b = await members(broker, "g-static", 2, session_ms=5000)
    a.instance_id, b.instance_id = "inst-a", "inst-b"
    first = await a.join_once()
    assert first.error_code == ErrorCode.none  # static members skip MEMBER_ID_REQUIRED
    assert first.member_id.startswith("inst-a-")
    a.member_id = ""
    await form_group([a, b])
    generation = b.generation

    # b restarts: a new process, same group.instance.id, no member id yet
    w2 = await Wire.connect(broker.bootstrap_servers, client_id="client-1")
    b2 = Member(w2, "g-static", instance_id="inst-b", session_ms=5000)
    r = await b2.join_once()
    assert r.error_code == ErrorCode.none and r.generation_id == generation
    assert r.member_id != b.member_id and r.members == ()
    s = await b2.sync()
    assert s.error_code == ErrorCode.none and s.assignment == b.member_id.encode()
    assert await a.heartbeat() == ErrorCode.none  # no rebalance for the others
    # the replaced process is fenced
    assert await b.heartbeat() == ErrorCode.fenced_instance_id
    assert (await b.sync()).error_code == ErrorCode.fenced_instance_id


async def test_static_leader_rejoin_with_v9_skips_assignment(broker) -> None:
    [a] = await members(broker, "g-static9", 1, session_ms=5000, join_version=9)
    a.instance_id = "leader"
    await a.join()
    await a.sync({a.member_id: b"mine"})
    w2 = await Wire.connect(broker.bootstrap_servers)
    a2 = Member(w2, "g-static9", instance_id="leader", session_ms=5000, join_version=9)
    r = await a2.join_once()
    assert r.error_code == ErrorCode.none and r.leader == r.member_id and r.skip_assignment
    assert len(r.members) == 1
    assert (await a2.sync()).assignment == b"mine"


async def test_administrative_leave_by_instance_id(broker) -> None:
    [a] = await members(broker, "g-admin-leave", 1)
    a.instance_id = "i-1"
    await a.join()
    r = await a.wire.call(
        LEAVE,
        4,
        {
            "group_id": "g-admin-leave",
            "members": [
                {"member_id": "", "group_instance_id": "i-1"},
                {"member_id": "", "group_instance_id": "i-2"},
            ],
        },
    )
    assert [m.error_code for m in r.members] == [ErrorCode.none, ErrorCode.unknown_member_id]


async def test_not_coordinator_and_loading(broker) -> None:
    [m] = await members(broker, "g-owner", 1)
    coordinator = broker.broker.group_coordinator
    p = coordinator.manager.partition_for("g-owner")
    await m.join()
    coordinator.on_leadership_change(("__consumer_offsets", p), False)
    assert await m.heartbeat() == ErrorCode.not_coordinator
    assert (await m.join_once()).error_code == ErrorCode.not_coordinator
    coordinator.manager.loading_partitions.add(p)
    assert (await m.join_once()).error_code == ErrorCode.coordinator_load_in_progress
    assert await m.heartbeat() == ErrorCode.none  # Kafka answers heartbeats blindly while loading
    coordinator.manager.loading_partitions.discard(p)


@pytest.mark.parametrize("version", [0, 3])
async def test_find_coordinator_then_join_with_old_sync_versions(broker, version: int) -> None:
    [m] = await members(broker, f"g-sync{version}", 1)
    await m.join()
    s = await m.sync({m.member_id: b"z"}, version=version)
    assert s.error_code == ErrorCode.none and s.assignment == b"z"
    _ = FIND
