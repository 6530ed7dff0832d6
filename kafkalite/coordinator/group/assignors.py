"""Server-side assignors of the consumer group protocol (KIP-848): ``uniform`` and ``range``.

An assignor maps the group's members (each with the topic ids it subscribes to)
and the subscribed topics' partition counts to a target assignment, given the
previous target assignment, which it keeps wherever it can: a rebalance moves
only the partitions it must (sticky across group epochs).

* ``uniform`` (Kafka's default) balances the number of partitions per member
  over all topics: a partition goes only to a member subscribed to its topic;
  with identical subscriptions no two members differ by more than one
  partition, and in general no partition could move from a member to a less
  loaded eligible one and leave the two closer than one apart.
* ``range`` balances each topic on its own, giving the members subscribed to it
  ``n // m`` partitions (the first ``n % m`` one more); a fresh assignment gives
  each member contiguous ranges, so co-partitioned topics line up.

Both are deterministic: members are ordered by (instance id or member id).
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

#: topic id -> partitions
Assignment = dict[uuid.UUID, set[int]]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What an assignor knows of a member."""

    subscribed_topic_ids: frozenset[uuid.UUID]
    instance_id: str | None = None
    rack_id: str | None = None
    #: the member's previous target assignment (sticky input)
    assignment: Mapping[uuid.UUID, frozenset[int] | set[int]] = field(default_factory=dict)


class PartitionAssignor(Protocol):
    name: str

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]: ...


def _order(members: Mapping[str, MemberSpec]) -> list[str]:
    return sorted(members, key=lambda m: (members[m].instance_id or m, m))


class UniformAssignor:
    """Balance partition counts across members; keep previous owners where possible."""

    name = "uniform"

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        order = _order(members)
        rank = {m: i for i, m in enumerate(order)}
        owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in order}
        taken: set[tuple[uuid.UUID, int]] = set()
        # 1. keep every previous partition that is still valid and owned once
        for m in order:
            spec = members[m]
            for tid, parts in spec.assignment.items():
                if tid not in spec.subscribed_topic_ids or tid not in topics:
                    continue
                for p in parts:
                    tp = (tid, p)
                    if p < topics[tid] and tp not in taken:
                        owned[m].add(tp)
                        taken.add(tp)
        # 2. eligible members per topic; per member, what it holds of each topic
        eligible: dict[uuid.UUID, list[str]] = {
            tid: [m for m in order if tid in members[m].subscribed_topic_ids] for tid in topics
        }
        load = {m: len(owned[m]) for m in order}
        by_topic: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in order}
        for m in order:
            for tid, p in owned[m]:
                by_topic[m].setdefault(tid, set()).add(p)
        # per topic, a heap of (load, rank, member) with stale entries skipped lazily:
        # an entry is current when its load is the member's load now
        heaps: dict[uuid.UUID, list[tuple[int, int, str]]] = {}
        member_topics: dict[str, list[uuid.UUID]] = {m: [] for m in order}
        for tid in sorted(topics, key=str):
            heaps[tid] = [(load[m], rank[m], m) for m in eligible[tid]]
            heapq.heapify(heaps[tid])
            for m in eligible[tid]:
                member_topics[m].append(tid)

        def least_loaded(tid: uuid.UUID) -> str:
            h = heaps[tid]
            while h[0][0] != load[h[0][2]]:
                heapq.heappop(h)
            return h[0][2]

        def move(tid: uuid.UUID, p: int, src: str | None, dst: str) -> None:
            if src is not None:
                by_topic[src][tid].discard(p)
                load[src] -= 1
                for t in member_topics[src]:
                    heapq.heappush(heaps[t], (load[src], rank[src], src))
            by_topic[dst].setdefault(tid, set()).add(p)
            load[dst] += 1
            for t in member_topics[dst]:
                heapq.heappush(heaps[t], (load[dst], rank[dst], dst))

        # 3. give each free partition to its least loaded eligible member
        for tid in sorted(topics, key=str):
            if not eligible[tid]:
                continue
            for p in range(topics[tid]):
                if (tid, p) not in taken:
                    move(tid, p, None, least_loaded(tid))
                    taken.add((tid, p))
        # 4. one partition at a time from the most loaded member that has one to give
        # (to the least loaded member eligible for it, when the two differ by two or
        # more), until no member has: each move lowers the sum of squared loads
        top: dict[tuple[str, uuid.UUID], list[int]] = {}  # max-heaps of held partitions

        def highest(m: str, tid: uuid.UUID) -> int:
            h = top.get((m, tid))
            if h is None:
                h = top[(m, tid)] = [-p for p in by_topic[m][tid]]
                heapq.heapify(h)
            while -h[0] not in by_topic[m][tid]:
                heapq.heappop(h)
            return -h[0]

        moved = True
        while moved:
            moved = False
            top.clear()
            donors = [(-load[m], rank[m], m) for m in order]
            heapq.heapify(donors)
            stuck: set[str] = set()
            while donors:
                neg, _, m = heapq.heappop(donors)
                if -neg != load[m] or m in stuck:
                    continue
                best: tuple[uuid.UUID, str] | None = None
                for tid in member_topics[m]:
                    if not by_topic[m].get(tid):
                        continue
                    other = least_loaded(tid)
                    if load[other] <= load[m] - 2 and (
                        best is None or (load[other], rank[other]) < (load[best[1]], rank[best[1]])
                    ):
                        best = (tid, other)
                if best is None:
                    stuck.add(m)
                    continue
                tid, other = best
                p = highest(m, tid)
                move(tid, p, m, other)
                h = top.get((other, tid))
                if h is not None:
                    heapq.heappush(h, -p)
                moved = True
                heapq.heappush(donors, (-load[m], rank[m], m))
                heapq.heappush(donors, (-load[other], rank[other], other))
        owned = {m: {(tid, p) for tid, ps in by_topic[m].items() for p in ps} for m in order}
        return {m: _to_assignment(owned[m]) for m in order}


class RangeAssignor:
    """Per topic: ``n // m`` partitions each (the first ``n % m`` members one more)."""

    name = "range"

    def assign(
        self, members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        order = _order(members)
        out: dict[str, Assignment] = {m: {} for m in order}
        for tid in sorted(topics, key=str):
            n = topics[tid]
            subs = [m for m in order if tid in members[m].subscribed_topic_ids]
            if not subs or n == 0:
                continue
            base, extra = divmod(n, len(subs))
            prev = {m: sorted(p for p in members[m].assignment.get(tid, ()) if p < n) for m in subs}
            kept: dict[str, list[int]] = {}
            taken: set[int] = set()
            for m in subs:
                mine = [p for p in prev[m] if p not in taken][:base]
                kept[m] = mine
                taken.update(mine)
            # members that had more than the base keep one more, while extra slots last
            slots = extra
            quota = dict.fromkeys(subs, base)
            for m in subs:
                if slots == 0:
                    break
                more = [p for p in prev[m] if p not in taken]
                if len(kept[m]) == base and more:
                    kept[m].append(more[0])
                    taken.add(more[0])
                    quota[m] = base + 1
                    slots -= 1
            for m in subs:
                if slots == 0:
                    break
                if quota[m] == base:
                    quota[m] = base + 1
                    slots -= 1
            free = [p for p in range(n) if p not in taken]
            for m in subs:
                need = quota[m] - len(kept[m])
                kept[m].extend(free[:need])
                free = free[need:]
                if kept[m]:
                    out[m][tid] = set(kept[m])
        return out


def _to_assignment(tps: set[tuple[uuid.UUID, int]]) -> Assignment:
    out: Assignment = {}
    for tid, p in tps:
        out.setdefault(tid, set()).add(p)
    return out


ASSIGNORS: dict[str, PartitionAssignor] = {
    UniformAssignor.name: UniformAssignor(),
    RangeAssignor.name: RangeAssignor(),
}
