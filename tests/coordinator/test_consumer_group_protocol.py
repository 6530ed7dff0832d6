"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) over the wire: epochs,
reconciliation (revoke before assign), fencing, static members, regexes, offsets."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator

import pytest

from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing.embedded_broker import AsyncBroker
from tests.coordinator.cg_helpers import (
    CG_FAST,
    assert_disjoint,
    cg_members,
    describe,
    flat,
    settle,
    topic_id,
)
from tests.coordinator.group_helpers import (
    DELETE,
    DESCRIBE,
    LIST,
    OFFSET_DELETE,
    Member,
    assignment,
    commit,
    find_coordinator,
    subscription,
)
from tests.coordinator.wire import Wire


@pytest.fixture
async def broker(tmp_path) -> AsyncIterator[AsyncBroker]:
    b = AsyncBroker(tmp_path, **CG_FAST)
    await b.start()
    try:
        yield b
    finally:
        await b.stop()


async def test_second_member_gets_partitions_only_after_the_first_revokes_them(broker) -> None:
    await broker.create_topic("t", partitions=6)
    tid = topic_id(broker, "t")
    a, b = await cg_members(broker, "g-recon", 2, topics=["t"])
    r = await a.join()
    assert r.error_code == 0 and r.member_epoch == 1
    assert r.heartbeat_interval == datetime.timedelta(milliseconds=100)
    assert a.owned == {tid: set(range(6))}

    r = await b.join()
    # target: three each, but all six are still a's: b waits at the new epoch with nothing
    assert r.error_code == 0 and r.member_epoch == 2
    assert b.owned == {}
    [g] = await describe(a.wire, "g-recon")
    assert (g.group_state, g.group_epoch, g.assignment_epoch) == ("Reconciling", 2, 2)

    r = await a.heartbeat()
    # a must revoke three first; it keeps its epoch until it has
    assert r.member_epoch == 1 and len(a.owned[tid]) == 3
    r = await b.heartbeat()
    assert b.owned == {}  # a has not acknowledged the revocation yet
    r = await a.heartbeat()  # reports only the three it kept
    assert r.member_epoch == 2
    r = await b.heartbeat()
    assert r.member_epoch == 2 and len(b.owned[tid]) == 3
    assert_disjoint([a, b])
    assert flat(a.owned) | flat(b.owned) == {(tid, p) for p in range(6)}

    [g] = await describe(a.wire, "g-recon")
    assert (g.group_state, g.group_epoch, g.assignment_epoch) == ("Stable", 2, 2)
    assert g.assignor_name == "uniform"
    by_id = {m.member_id: m for m in g.members}
    assert {p for tp in by_id[a.member_id].assignment.topic_partitions for p in tp.partitions} == (
        a.owned[tid]
    )
    assert by_id[b.member_id].assignment.topic_partitions[0].topic_name == "t"
    assert by_id[b.member_id].member_type == 1 and by_id[b.member_id].member_epoch == 2


async def test_leave_moves_partitions_and_bumps_the_group_epoch(broker) -> None:
    await broker.create_topic("t", partitions=6)
    ms = await cg_members(broker, "g-leave", 3, topics=["t"])
    for m in ms:
        await m.join()
    await settle(ms)
    assert sorted(len(flat(m.owned)) for m in ms) == [2, 2, 2]
    [g] = await describe(ms[0].wire, "g-leave")
    epoch = g.group_epoch
    r = await ms[2].leave()
    assert r.error_code == 0 and r.member_epoch == -1
    [g] = await describe(ms[0].wire, "g-leave")
    assert g.group_state == "Assigning"  # epoch bumped; the next heartbeat computes the target
    await settle(ms[:2])
    assert sorted(len(flat(m.owned)) for m in ms[:2]) == [3, 3]
    [g] = await describe(ms[0].wire, "g-leave")
    assert g.group_epoch == epoch + 1 and len(g.members) == 2 and g.group_state == "Stable"
    for m in ms[:2]:
        await m.leave()
    [g] = await describe(ms[0].wire, "g-leave")
    assert g.group_state == "Empty" and g.members == ()


async def test_session_timeout_fences_a_silent_member(broker) -> None:
    await broker.create_topic("t", partitions=4)
    a, b = await cg_members(broker, "g-session", 2, topics=["t"])
    await a.join()
    await b.join()
    await settle([a, b])
    deadline = asyncio.get_running_loop().time() + 10
    while True:  # only a heartbeats; b's session (2 s) runs out
        await a.heartbeat()
        if len(flat(a.owned)) == 4:
            break
        assert asyncio.get_running_loop().time() < deadline, "b was never fenced"
        await asyncio.sleep(0.1)
    r = await b.heartbeat()
    assert r.error_code == ErrorCode.unknown_member_id


async def test_fencing_and_request_validation_errors(broker) -> None:
    await broker.create_topic("t", partitions=2)
    [a] = await cg_members(broker, "g-errors", 1, topics=["t"])
    await a.join()
    assert (await a.call(epoch=a.epoch + 1)).error_code == ErrorCode.fenced_member_epoch
    # a subscription change bumps the epochs; the previous epoch is still accepted (the
    # response with the new one may have been lost), anything older is fenced
    assert (await a.heartbeat(subscribed_topic_names=["t", "u"])).member_epoch == 2
    assert (await a.heartbeat(subscribed_topic_names=["t"])).member_epoch == 3
    assert (await a.call(epoch=2)).error_code == ErrorCode.none
    assert (await a.call(epoch=1)).error_code == ErrorCode.fenced_member_epoch
    assert (await a.call(member_id="nobody")).error_code == ErrorCode.unknown_member_id
    [other] = await cg_members(broker, "g-errors-unknown", 1, topics=["t"])
    assert (await other.call(epoch=3)).error_code == ErrorCode.unknown_member_id
    assert (await a.call(epoch=-3)).error_code == ErrorCode.invalid_request
    r = await other.call(epoch=0, group_id="")
    assert (
        r.error_code == ErrorCode.invalid_request and r.error_message == "GroupId can't be empty."
    )
    r = await other.call(epoch=0, rebalance_timeout=-1)
    assert r.error_code == ErrorCode.invalid_request and "RebalanceTimeoutMs" in r.error_message
    r = await other.call(epoch=0, subscribed_topic_names=None)
    assert r.error_code == ErrorCode.invalid_request
    r = await other.call(epoch=0, member_id="")
    assert r.error_code == ErrorCode.invalid_request  # v1: the client makes its id
    r = await other.call(epoch=0, server_assignor="sticky")
    assert r.error_code == ErrorCode.unsupported_assignor
    for bad in ("t(?=x)", "(a)\\1", "t[", "a++"):
        r = await other.call(epoch=0, subscribed_topic_names=None, subscribed_topic_regex=bad)
        assert r.error_code == ErrorCode.invalid_regular_expression, bad
    # v0: the coordinator makes the member id
    [v0] = await cg_members(broker, "g-errors-v0", 1, topics=["t"], version=0)
    r = await v0.join()
    assert r.error_code == 0 and len(r.member_id) == 22 and r.member_epoch == 1


async def test_static_member_restarts_without_a_rebalance(broker) -> None:
    await broker.create_topic("t", partitions=4)
    a, b = await cg_members(broker, "g-static", 2, topics=["t"])
    a.instance_id, b.instance_id = "ia", "ib"
    await a.join()
    await b.join()
    await settle([a, b])
    [g] = await describe(a.wire, "g-static")
    epoch, a_parts = g.group_epoch, a.owned

    # another process with a's instance id cannot join while a is in the group
    [intruder] = await cg_members(broker, "g-static", 1, topics=["t"], instance_id="ia")
    assert (await intruder.join()).error_code == ErrorCode.unreleased_instance_id

    r = await a.leave(epoch=-2)  # a static member's temporary leave
    assert r.error_code == 0 and r.member_epoch == -2
    [restarted] = await cg_members(broker, "g-static", 1, topics=["t"], instance_id="ia")
    r = await restarted.join()
    assert r.error_code == 0 and restarted.owned == a_parts and r.member_epoch == epoch
    await settle([restarted, b])
    [g] = await describe(a.wire, "g-static")
    assert g.group_epoch == epoch and g.group_state == "Stable"
    assert {m.instance_id for m in g.members} == {"ia", "ib"}
    # the old member id is fenced
    assert (await a.call(epoch=epoch)).error_code == ErrorCode.fenced_instance_id


async def test_regex_subscription_picks_up_a_new_topic(broker) -> None:
    await broker.create_topic("rx-a", partitions=2)
    await broker.create_topic("other", partitions=2)
    [m] = await cg_members(broker, "g-regex", 1, regex="rx-.*")
    await m.join()
    assert m.owned == {topic_id(broker, "rx-a"): {0, 1}}
    await broker.create_topic("rx-b", partitions=3)
    await m.heartbeat()
    assert m.owned == {topic_id(broker, "rx-a"): {0, 1}, topic_id(broker, "rx-b"): {0, 1, 2}}
    [g] = await describe(m.wire, "g-regex")
    assert g.members[0].subscribed_topic_regex == "rx-.*"


async def test_range_assignor_chosen_by_the_members(broker) -> None:
    await broker.create_topic("ra", partitions=4)
    await broker.create_topic("rb", partitions=4)
    ms = await cg_members(broker, "g-range", 2, topics=["ra", "rb"], assignor="range")
    for m in ms:
        await m.join()
    await settle(ms)
    [g] = await describe(ms[0].wire, "g-range")
    assert g.assignor_name == "range"
    ids = {topic_id(broker, "ra"), topic_id(broker, "rb")}
    for m in ms:  # co-partitioned: the same two partitions of each topic
        assert set(m.owned) == ids and len({frozenset(p) for p in m.owned.values()}) == 1


async def test_member_that_does_not_revoke_is_fenced_after_its_rebalance_timeout(broker) -> None:
    await broker.create_topic("t", partitions=2)
    a, b = await cg_members(broker, "g-rebalance-timeout", 2, topics=["t"], rebalance_ms=300)
    await a.join()
    await b.join()
    held = dict(a.owned)
    r = await a.heartbeat(owned=held)  # asked to revoke one partition: it never does
    a.owned = held
    deadline = asyncio.get_running_loop().time() + 10
    while not b.owned:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.1)
        r = await b.heartbeat()
        if b.owned:
            break
        # a keeps heartbeating without revoking; its rebalance timeout fences it
        r = await a.call(owned=held)
        if r.error_code:
            assert r.error_code in (ErrorCode.unknown_member_id, ErrorCode.fenced_member_epoch)
    assert len(flat(b.owned)) >= 1


async def test_offset_commit_and_fetch_check_the_member_epoch(broker) -> None:
    await broker.create_topic("t", partitions=2)
    [m] = await cg_members(broker, "g-offsets", 1, topics=["t"])
    await m.join()

    def body(epoch: int, member: str | None = None) -> dict:
        return {
            "group_id": "g-offsets",
            "generation_id_or_member_epoch": epoch,
            "member_id": m.member_id if member is None else member,
            "group_instance_id": None,
            "retention_time": -1,
        }

    ok = await commit(m.wire, body(m.epoch), {("t", 0): 5}, version=9)
    assert ok == {("t", 0): ErrorCode.none}
    stale = await commit(m.wire, body(m.epoch + 1), {("t", 0): 6}, version=9)
    assert stale == {("t", 0): ErrorCode.stale_member_epoch}
    unknown = await commit(m.wire, body(m.epoch, "nobody"), {("t", 0): 6}, version=9)
    assert unknown == {("t", 0): ErrorCode.unknown_member_id}
    old = await commit(m.wire, body(m.epoch), {("t", 0): 6}, version=8)
    assert old == {("t", 0): ErrorCode.unsupported_version}

    async def fetch(member_id: str | None, epoch: int) -> tuple[int, list]:
        r = await m.wire.call(
            9,
            9,
            {
                "groups": [
                    {
                        "group_id": "g-offsets",
                        "member_id": member_id,
                        "member_epoch": epoch,
                        "topics": [{"name": "t", "partition_indexes": [0]}],
                    }
                ],
                "require_stable": False,
            },
        )
        g = r.groups[0]
        return g.error_code, [p.committed_offset for t in g.topics for p in t.partitions]

    assert await fetch(m.member_id, m.epoch) == (0, [5])
    assert await fetch(None, -1) == (0, [5])  # admin clients
    assert (await fetch(m.member_id, m.epoch + 1))[0] == ErrorCode.stale_member_epoch
    assert (await fetch("nobody", m.epoch))[0] == ErrorCode.unknown_member_id


async def test_both_group_types_side_by_side(broker) -> None:
    await broker.create_topic("t", partitions=2)
    [cm] = await cg_members(broker, "g-consumer", 1, topics=["t"])
    await cm.join()
    w = await Wire.connect(broker.bootstrap_servers)
    classic = Member(w, "g-classic", protocols=[("range", subscription("t"))])
    await classic.join()
    await classic.sync({classic.member_id: b""})

    async def listed(types: list[str]) -> dict[str, tuple[str, str]]:
        r = await w.call(LIST, 5, {"states_filter": [], "types_filter": types})
        return {g.group_id: (g.group_type, g.group_state) for g in r.groups}

    everything = await listed([])
    assert everything["g-consumer"] == ("consumer", "Stable")
    assert everything["g-classic"] == ("classic", "Stable")
    assert set(await listed(["consumer"])) == {"g-consumer"}
    assert "g-consumer" not in await listed(["classic"])

    # DescribeGroups is for classic groups, ConsumerGroupDescribe for consumer groups
    r = await w.call(
        DESCRIBE, 5, {"groups": ["g-consumer"], "include_authorized_operations": False}
    )
    assert r.groups[0].group_state == "Dead"  # before v6: no error, a Dead group
    r = await w.call(
        DESCRIBE, 6, {"groups": ["g-consumer"], "include_authorized_operations": False}
    )
    assert r.groups[0].error_code == ErrorCode.group_id_not_found
    assert "not a classic group" in r.groups[0].error_message
    [g] = await describe(w, "g-classic")
    assert g.error_code == ErrorCode.group_id_not_found
    [g] = await describe(w, "nope")
    assert g.error_code == ErrorCode.group_id_not_found

    # a classic member of another protocol type cannot join a consumer group
    intruder = Member(w, "g-consumer", protocols=[("x", b"")], protocol_type="connect")
    assert (await intruder.join()).error_code == ErrorCode.inconsistent_group_protocol

    # OffsetDelete: not the offsets of a topic a live consumer group subscribes to
    await broker.create_topic("other", partitions=1)
    body = {
        "group_id": "g-consumer",
        "generation_id_or_member_epoch": cm.epoch,
        "member_id": cm.member_id,
        "group_instance_id": None,
        "retention_time": -1,
    }
    assert await commit(w, body, {("t", 0): 1, ("other", 0): 1}, version=9) == {
        ("t", 0): ErrorCode.none,
        ("other", 0): ErrorCode.none,
    }
    r = await w.call(
        OFFSET_DELETE,
        0,
        {
            "group_id": "g-consumer",
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 0}]},
                {"name": "other", "partitions": [{"partition_index": 0}]},
            ],
        },
    )
    assert {t.name: t.partitions[0].error_code for t in r.topics} == {
        "t": ErrorCode.group_subscribed_to_topic,
        "other": ErrorCode.none,
    }

    # DeleteGroups: not while it has members
    r = await w.call(DELETE, 2, {"groups_names": ["g-consumer"]})
    assert r.results[0].error_code == ErrorCode.non_empty_group
    await cm.leave()
    r = await w.call(DELETE, 2, {"groups_names": ["g-consumer"]})
    assert r.results[0].error_code == ErrorCode.none
    assert "g-consumer" not in await listed([])


async def test_empty_groups_convert_between_protocols(broker) -> None:
    await broker.create_topic("t", partitions=2)
    w = await Wire.connect(broker.bootstrap_servers)
    await find_coordinator(w, "g-convert")
    # offsets only (an empty classic group): a consumer member turns it into a consumer group
    body = {
        "group_id": "g-convert",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "retention_time": -1,
    }
    assert await commit(w, body, {("t", 0): 3}, version=9) == {("t", 0): ErrorCode.none}
    [cm] = await cg_members(broker, "g-convert", 1, topics=["t"])
    assert (await cm.join()).error_code == 0
    await cm.leave()
    # empty again: a classic member turns it back into a classic group, offsets kept
    classic = Member(w, "g-convert", protocols=[("range", subscription("t"))])
    assert (await classic.join()).error_code == ErrorCode.none
    r = await w.call(LIST, 5, {"states_filter": [], "types_filter": ["classic"]})
    assert "g-convert" in {g.group_id for g in r.groups}


async def test_group_max_size(tmp_path) -> None:
    async with AsyncBroker(tmp_path, **CG_FAST, **{"group.consumer.max.size": 1}) as b:
        await b.create_topic("t", partitions=1)
        a, c = await cg_members(b, "g-max", 2, topics=["t"])
        assert (await a.join()).error_code == 0
        assert (await c.join()).error_code == ErrorCode.group_max_size_reached


def test_consumer_timeouts_must_lie_within_their_bounds(tmp_path) -> None:
    from kafkalite.common.errors import ConfigError
    from kafkalite.coordinator.group.group_metadata_manager import GroupConfig

    with pytest.raises(ConfigError, match="group.consumer.session.timeout.ms"):
        GroupConfig.from_broker_config({"group.consumer.session.timeout.ms": 1000})
    with pytest.raises(ConfigError, match="group.consumer.heartbeat.interval.ms"):
        GroupConfig.from_broker_config({"group.consumer.heartbeat.interval.ms": 100})
    with pytest.raises(ConfigError, match="group.consumer.assignors"):
        GroupConfig.from_broker_config({"group.consumer.assignors": "sticky"})
    cfg = GroupConfig.from_broker_config(
        {"group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor"}
    )
    assert cfg.consumer_assignors == ("range",)


async def test_consumer_group_survives_a_coordinator_restart(tmp_path) -> None:
    b = AsyncBroker(tmp_path, **CG_FAST)
    await b.start()
    try:
        await b.create_topic("t", partitions=4)
        ms = await cg_members(b, "g-durable", 2, topics=["t"], instance_id=None)
        ms[1].instance_id = "static-1"
        for m in ms:
            await m.join()
        await settle(ms)
        [before] = await describe(ms[0].wire, "g-durable")
        # Kafka's record types, keys 3 to 8, are in the group's offsets partition
        versions = {
            int.from_bytes(r.key[:2], "big") for r in b.records("__consumer_offsets") if r.key
        }
        assert set(range(3, 9)) <= versions

        await b.restart()
        for m in ms:
            m.wire = await Wire.connect(b.bootstrap_servers)
        await find_coordinator(ms[0].wire, "g-durable")
        [after] = await describe(ms[0].wire, "g-durable")
        assert (after.group_epoch, after.assignment_epoch, after.group_state) == (
            before.group_epoch,
            before.assignment_epoch,
            "Stable",
        )

        def members(g) -> dict:
            return {
                m.member_id: (
                    m.member_epoch,
                    m.instance_id,
                    {(t.topic_id, p) for t in m.assignment.topic_partitions for p in t.partitions},
                )
                for m in g.members
            }

        assert members(after) == members(before)
        owned = [dict(m.owned) for m in ms]
        for m, o in zip(ms, owned, strict=True):  # the members carry on, epochs unchanged
            r = await m.heartbeat()
            assert r.error_code == 0 and m.owned == o
    finally:
        await b.stop()


def _classic_parts(broker: AsyncBroker, assignment_bytes: bytes) -> set:
    from kafkalite.coordinator.group.consumer_protocol import assigned_partitions

    parts = assigned_partitions(assignment_bytes) or {}
    return {(topic_id(broker, t), p) for t, ps in parts.items() for p in ps}


async def test_online_upgrade_and_downgrade_with_classic_members(broker) -> None:
    await broker.create_topic("t", partitions=4)
    tid = topic_id(broker, "t")
    w1 = await Wire.connect(broker.bootstrap_servers, client_id="classic-1")
    w2 = await Wire.connect(broker.bootstrap_servers, client_id="classic-2")
    await find_coordinator(w1, "g-mig")
    c1 = Member(w1, "g-mig", protocols=[("range", subscription("t"))])
    c2 = Member(w2, "g-mig", protocols=[("range", subscription("t"))])
    await c1.join()
    await c1.sync({c1.member_id: assignment({"t": [0, 1, 2, 3]})})
    # c2 joins: a classic rebalance; the leader gives each two partitions
    j2 = asyncio.create_task(c2.join())
    await asyncio.sleep(0.05)
    await c1.join()
    await j2
    leader, follower = (c1, c2) if c1.is_leader else (c2, c1)
    s_f = asyncio.create_task(follower.sync())
    s_l = await leader.sync(
        {leader.member_id: assignment({"t": [0, 1]}), follower.member_id: assignment({"t": [2, 3]})}
    )
    held = {leader: _classic_parts(broker, s_l.assignment)}
    held[follower] = _classic_parts(broker, (await s_f).assignment)

    # a consumer-protocol member joins: the group is upgraded, the classic members keep
    # their partitions until they rejoin, and the newcomer gets nothing held by them
    [cm] = await cg_members(broker, "g-mig", 1, topics=["t"])
    r = await cm.join()
    assert r.error_code == 0
    [g] = await describe(cm.wire, "g-mig")
    assert g.group_state == "Reconciling" and len(g.members) == 3
    assert sorted(m.member_type for m in g.members) == [0, 0, 1]
    assert not flat(cm.owned) & (held[c1] | held[c2])

    async def classic_round(m: Member) -> None:
        hb = await m.heartbeat()
        if hb == ErrorCode.rebalance_in_progress:
            held[m] = set()  # an eager client revokes everything, then rejoins
            r = await m.join()
            assert r.error_code == 0 and r.leader == "" and r.members == ()
            m.generation = r.generation_id
            s = await m.sync()
            assert s.error_code == 0
            held[m] = _classic_parts(broker, s.assignment)
        else:
            assert hb == ErrorCode.none

    for _ in range(6):
        for m in (c1, c2):
            await classic_round(m)
            assert not held[c1] & held[c2] and not (held[c1] | held[c2]) & flat(cm.owned)
        await cm.heartbeat()
        assert not (held[c1] | held[c2]) & flat(cm.owned)
    assert held[c1] | held[c2] | flat(cm.owned) == {(tid, p) for p in range(4)}
    assert sorted(map(len, (held[c1], held[c2], flat(cm.owned)))) == [1, 1, 2]
    [g] = await describe(cm.wire, "g-mig")
    assert g.group_state == "Stable"

    # a classic member commits with its generation
    ok = await commit(
        c1.wire,
        {
            "group_id": "g-mig",
            "generation_id_or_member_epoch": c1.generation,
            "member_id": c1.member_id,
            "group_instance_id": None,
            "retention_time": -1,
        },
        {("t", 0): 1},
    )
    assert ok == {("t", 0): ErrorCode.none}

    # the last consumer-protocol member leaves: back to a classic group, which rebalances
    await cm.leave()
    r = await w1.call(LIST, 5, {"states_filter": [], "types_filter": []})
    [(typ, state)] = [(x.group_type, x.group_state) for x in r.groups if x.group_id == "g-mig"]
    assert typ == "classic" and state == "PreparingRebalance"
    assert await c1.heartbeat() == ErrorCode.rebalance_in_progress


async def test_migration_disabled_answers_as_kafka(tmp_path) -> None:
    async with AsyncBroker(
        tmp_path, **CG_FAST, **{"group.consumer.migration.policy": "disabled"}
    ) as b:
        await b.create_topic("t", partitions=2)
        w = await Wire.connect(b.bootstrap_servers)
        await find_coordinator(w, "g-classic")
        classic = Member(w, "g-classic", protocols=[("range", subscription("t"))])
        await classic.join()
        await classic.sync({classic.member_id: b""})
        [upgrader] = await cg_members(b, "g-classic", 1, topics=["t"])
        r = await upgrader.join()
        assert r.error_code == ErrorCode.group_id_not_found
        assert "not a consumer group" in r.error_message
        [cm] = await cg_members(b, "g-consumer", 1, topics=["t"])
        await cm.join()
        intruder = Member(w, "g-consumer", protocols=[("range", subscription("t"))])
        assert (await intruder.join()).error_code == ErrorCode.inconsistent_group_protocol


async def test_classic_member_that_never_syncs_is_fenced_after_its_rebalance_timeout(broker):
    await broker.create_topic("t", partitions=2)
    [cm] = await cg_members(broker, "g-sync-timeout", 1, topics=["t"])
    await cm.join()
    w = await Wire.connect(broker.bootstrap_servers)
    slow = Member(w, "g-sync-timeout", protocols=[("range", subscription("t"))], rebalance_ms=300)
    assert (await slow.join()).error_code == ErrorCode.none  # ... and no SyncGroup
    [g] = await describe(w, "g-sync-timeout")
    assert len(g.members) == 2
    deadline = asyncio.get_running_loop().time() + 10
    while len(g.members) == 2:
        assert asyncio.get_running_loop().time() < deadline, "never fenced"
        await asyncio.sleep(0.1)
        [g] = await describe(w, "g-sync-timeout")
    assert [m.member_id for m in g.members] == [cm.member_id]
    # a member that syncs in time stays
    ok = Member(w, "g-sync-timeout", protocols=[("range", subscription("t"))], rebalance_ms=300)
    await ok.join()
    assert (await ok.sync()).error_code == ErrorCode.none
    await asyncio.sleep(0.6)
    [g] = await describe(w, "g-sync-timeout")
    assert ok.member_id in {m.member_id for m in g.members}
