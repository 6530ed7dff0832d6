"""Property tests of the server-side assignors (uniform, range) and of reconciliation:
balance, stickiness, and never two owners of a partition."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.coordinator.group.assignors import (
    Assignment,
    MemberSpec,
    RangeAssignor,
    UniformAssignor,
)
from kafkalite.coordinator.group.consumer_coordinator import (
    ConsumerGroupCoordinator,
    HeartbeatRequest,
)
from kafkalite.coordinator.group.consumer_group import ConsumerGroupState
from kafkalite.coordinator.group.group_metadata import GroupMetadata
from kafkalite.coordinator.group.group_metadata_manager import GroupConfig, GroupMetadataManager

TOPICS = [uuid.UUID(int=i + 1) for i in range(4)]


def flat(a: Assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in a.items() for p in ps}


def owners(result: dict[str, Assignment]) -> dict[tuple[uuid.UUID, int], list[str]]:
    out: dict[tuple[uuid.UUID, int], list[str]] = {}
    for m, a in result.items():
        for tp in flat(a):
            out.setdefault(tp, []).append(m)
    return out


topics_st = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 12), min_size=1)


@st.composite
def groups(draw: Any, homogeneous: bool = False) -> tuple[dict[str, MemberSpec], dict]:
    topics = draw(topics_st)
    n = draw(st.integers(1, 9))
    members = {}
    all_ids = frozenset(topics)
    for i in range(n):
        subs = (
            all_ids
            if homogeneous
            else frozenset(draw(st.sets(st.sampled_from(sorted(topics, key=str)), min_size=1)))
        )
        members[f"m{i:02d}"] = MemberSpec(subs)
    return members, topics


def check_complete(members: dict[str, MemberSpec], topics: dict, result: dict) -> None:
    own = owners(result)
    for tid, n in topics.items():
        subscribed = any(tid in s.subscribed_topic_ids for s in members.values())
        for p in range(n):
            if subscribed:
                assert len(own.get((tid, p), [])) == 1, (tid, p, own.get((tid, p)))
            else:
                assert (tid, p) not in own
    for (tid, _), ms in own.items():
        assert all(tid in members[m].subscribed_topic_ids for m in ms)


@settings(max_examples=150, deadline=None)
@given(groups(homogeneous=True))
def test_uniform_balances_identical_subscriptions(g) -> None:
    members, topics = g
    result = UniformAssignor().assign(members, topics)
    check_complete(members, topics, result)
    counts = [len(flat(result[m])) for m in members]
    assert max(counts) - min(counts) <= 1


@settings(max_examples=150, deadline=None)
@given(groups())
def test_uniform_leaves_no_move_that_would_balance_better(g) -> None:
    members, topics = g
    result = UniformAssignor().assign(members, topics)
    check_complete(members, topics, result)
    load = {m: len(flat(a)) for m, a in result.items()}
    for m, a in result.items():
        for tid, _ in flat(a):
            for other, spec in members.items():
                if tid in spec.subscribed_topic_ids:
                    assert load[other] >= load[m] - 1, (m, other, load)


def _with_previous(members: dict[str, MemberSpec], prev: dict[str, Assignment]) -> dict:
    return {
        m: MemberSpec(s.subscribed_topic_ids, assignment=prev.get(m, {}))
        for m, s in members.items()
    }


@settings(max_examples=150, deadline=None)
@given(groups(homogeneous=True), st.data())
def test_uniform_is_sticky_when_members_come_and_go(g, data) -> None:
    members, topics = g
    a = UniformAssignor()
    first = a.assign(members, topics)
    # the same group again: nothing moves
    assert a.assign(_with_previous(members, first), topics) == first
    # one member leaves: every other member keeps all it had
    gone = data.draw(st.sampled_from(sorted(members)))
    rest = {m: s for m, s in members.items() if m != gone}
    if rest:
        after = a.assign(_with_previous(rest, first), topics)
        check_complete(rest, topics, after)
        for m in rest:
            assert flat(first[m]) <= flat(after[m])
    # one member joins: only as many partitions move as the newcomer needs
    joined = dict(members)
    joined["zz-new"] = MemberSpec(next(iter(members.values())).subscribed_topic_ids)
    after = a.assign(_with_previous(joined, first), topics)
    check_complete(joined, topics, after)
    moved = sum(len(flat(first[m]) - flat(after[m])) for m in members)
    assert moved == len(flat(after["zz-new"]))
    total = sum(topics.values())
    assert len(flat(after["zz-new"])) == total // len(joined)


@settings(max_examples=150, deadline=None)
@given(groups(), st.data())
def test_range_balances_each_topic_and_is_sticky(g, data) -> None:
    members, topics = g
    a = RangeAssignor()
    result = a.assign(members, topics)
    check_complete(members, topics, result)
    for tid, n in topics.items():
        subs = [m for m, s in members.items() if tid in s.subscribed_topic_ids]
        counts = [len(result[m].get(tid, ())) for m in subs]
        if subs:
            assert max(counts) - min(counts) <= 1 and sum(counts) == n
    assert a.assign(_with_previous(members, result), topics) == result
    gone = data.draw(st.sampled_from(sorted(members)))
    rest = {m: s for m, s in members.items() if m != gone}
    if rest:
        check_complete(rest, topics, a.assign(_with_previous(rest, result), topics))


def test_range_gives_contiguous_ranges_when_fresh() -> None:
    t = TOPICS[0]
    members = {f"m{i}": MemberSpec(frozenset({t})) for i in range(3)}
    result = RangeAssignor().assign(members, {t: 7})
    assert [sorted(result[m][t]) for m in sorted(members)] == [[0, 1, 2], [3, 4], [5, 6]]


# ---- reconciliation: the coordinator's state machine driven by simulated clients ------


@dataclass
class _Topic:
    topic_id: uuid.UUID
    partitions: dict[int, object]
    is_internal: bool = False


@dataclass
class _FakeManager:
    groups: dict[str, GroupMetadata] = field(default_factory=dict)

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.groups.setdefault(group.group_id, group)

    # The real find-or-create, run over this in-memory map (it only uses
    # ``groups`` and ``add_group``), so the fake cannot drift from it.
    live_group = GroupMetadataManager.live_group


def _coordinator(topics: dict[str, int]) -> ConsumerGroupCoordinator:
    fake: Any = SimpleNamespace(
        config=GroupConfig(consumer_session_timeout_ms=600_000),
        manager=_FakeManager(),
        clock_ms=lambda: 0,
        metadata=SimpleNamespace(
            topics={
                name: _Topic(uuid.UUID(int=i + 1), dict.fromkeys(range(n)))
                for i, (name, n) in enumerate(topics.items())
            }
        ),
        _validate_group_status=lambda group_id: 0,
        is_active=True,
    )
    return ConsumerGroupCoordinator(fake)


@dataclass
class _Client:
    member_id: str
    topics: tuple[str, ...]
    epoch: int = 0
    owned: Assignment = field(default_factory=dict)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("join"), st.sampled_from([("a",), ("b",), ("a", "b")])),
        st.tuples(st.just("heartbeat"), st.integers(0, 20)),
        st.tuples(st.just("leave"), st.integers(0, 20)),
    ),
    max_size=60,
)


@settings(max_examples=120, deadline=None)
@given(ops, st.sampled_from(["uniform", "range"]))
def test_reconciliation_never_gives_a_partition_to_two_members(script, assignor) -> None:
    asyncio.run(_reconcile(script, assignor))


async def _reconcile(script: list, assignor: str) -> None:
    cc = _coordinator({"a": 5, "b": 3})
    clients: list[_Client] = []
    n = 0

    def check() -> None:
        seen: set[tuple[uuid.UUID, int]] = set()
        for c in clients:
            mine = flat(c.owned)
            assert not (mine & seen), "a partition is owned by two members"
            seen |= mine

    def beat(c: _Client, join: bool = False) -> Any:
        r = cc.heartbeat(
            HeartbeatRequest(
                "g",
                c.member_id,
                0 if join else c.epoch,
                rebalance_timeout_ms=60_000 if join else -1,
                subscribed_topic_names=c.topics if join else None,
                server_assignor=assignor if join else None,
                owned={t: set(p) for t, p in c.owned.items()},
            )
        )
        assert r.error == 0, r
        c.epoch = r.member_epoch
        if r.assignment is not None:
            # the client revokes what is gone and takes what is new
            c.owned = {t: set(p) for t, p in r.assignment.items() if p}
        return r

    for op, arg in script:
        if op == "join":
            n += 1
            c = _Client(f"m{n}", arg)
            clients.append(c)
            beat(c, join=True)
        elif op == "heartbeat" and clients:
            beat(clients[arg % len(clients)])
        elif op == "leave" and clients:
            c = clients.pop(arg % len(clients))
            r = cc.heartbeat(HeartbeatRequest("g", c.member_id, -1))
            assert r.error == 0
        check()
    # everyone heartbeats until the group is stable: then every partition is owned once
    for _ in range(10):
        for c in clients:
            beat(c)
            check()
    container = cc.gc.manager.get_group("g")
    if clients:
        assert container is not None and container.consumer is not None
        assert container.consumer.state == ConsumerGroupState.STABLE
        subscribed = {t for c in clients for t in c.topics}
        expected = {
            (uuid.UUID(int=1 if t == "a" else 2), p)
            for t in subscribed
            for p in range(5 if t == "a" else 3)
        }
        assert set().union(*(flat(c.owned) for c in clients)) == expected
    for c in clients:
        cc.heartbeat(HeartbeatRequest("g", c.member_id, -1))


def test_records_not_written_go_with_the_next_write() -> None:
    async def run() -> None:
        cc = _coordinator({"a": 2})
        writes: list[list] = []
        fail = [True]

        async def store_records(group_id: str, records: list) -> int:
            writes.append(records)
            if fail[0]:
                fail[0] = False
                return 16  # NOT_COORDINATOR: nothing was written
            return 0

        cc.gc.manager.store_records = store_records
        r = await cc.heartbeat_and_store(
            HeartbeatRequest(
                "g", "m1", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("a",), owned={}
            )
        )
        assert r.error == 16
        g = cc.gc.manager.get_group("g").consumer
        assert await cc.store(g) == 0
        assert {k for k, _ in writes[1]} == {k for k, _ in writes[0]}  # all of it again
        assert await cc.store(g) == 0 and len(writes) == 2  # and then nothing is pending
        # a member that leaves while its tombstones fail is tombstoned by the next write
        fail[0] = True
        r = await cc.heartbeat_and_store(HeartbeatRequest("g", "m1", -1))
        tombstones = {k for k, v in writes[-1] if v is None}
        assert len(tombstones) == 3
        assert await cc.store(g) == 0
        assert {k for k, v in writes[-1] if v is None} == tombstones

    asyncio.run(run())
