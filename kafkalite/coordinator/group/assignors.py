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
        # 2. eligible members per topic
        eligible: dict[uuid.UUID, list[str]] = {
            tid: [m for m in order if tid in members[m].subscribed_topic_ids] for tid in topics
        }
        # 3. give each free partition to its least loaded eligible member
        for tid in sorted(topics, key=str):
            cands = eligible[tid]
            if not cands:
                continue
            for p in range(topics[tid]):
                tp = (tid, p)
                if tp in taken:
                    continue
                best = min(cands, key=lambda m: (len(owned[m]), rank[m]))
                owned[best].add(tp)
                taken.add(tp)
        # 4. move partitions from the most to the least loaded eligible member until no
        # move brings two members closer (each move strictly lowers the sum of squares)
        changed = True
        while changed:
            changed = False
            for m in sorted(order, key=lambda x: (-len(owned[x]), rank[x])):
                load = len(owned[m])
                best_move: tuple[int, str, tuple[uuid.UUID, int]] | None = None
                for tp in sorted(owned[m], key=lambda t: (str(t[0]), -t[1])):
                    for other in eligible[tp[0]]:
                        if len(owned[other]) <= load - 2 and (
                            best_move is None
                            or (len(owned[other]), rank[other]) < (best_move[0], rank[best_move[1]])
                        ):
                            best_move = (len(owned[other]), other, tp)
                if best_move is not None:
                    _, other, tp = best_move
                    owned[m].discard(tp)
                    owned[other].add(tp)
                    changed = True
                    break
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
