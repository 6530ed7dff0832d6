"""Helpers for wire-level tests of the consumer group protocol (KIP-848): a member that
speaks ConsumerGroupHeartbeat and keeps what a client would (epoch, owned partitions)."""

from __future__ import annotations

import uuid
from typing import Any

from kafkalite.testing.embedded_broker import AsyncBroker
from tests.coordinator.group_helpers import find_coordinator
from tests.coordinator.wire import Wire

CG_HEARTBEAT, CG_DESCRIBE = 68, 69

#: short consumer-protocol timeouts so expiry tests take about a second
CG_FAST: dict[str, Any] = {
    "group.min.session.timeout.ms": 50,
    "group.consumer.session.timeout.ms": 2000,
    "group.consumer.min.session.timeout.ms": 100,
    "group.consumer.heartbeat.interval.ms": 100,
    "group.consumer.min.heartbeat.interval.ms": 50,
}

Owned = dict[uuid.UUID, set[int]]


def topic_id(broker: AsyncBroker, name: str) -> uuid.UUID:
    assert broker.broker is not None
    t = broker.broker.metadata_cache.get_topic(name)
    assert t is not None, name
    return t.topic_id


def as_owned(topic_partitions: Any) -> Owned:
    return {t.topic_id: set(t.partitions) for t in topic_partitions if t.partitions}


def flat(owned: Owned) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in owned.items() for p in ps}


class CgMember:
    """One consumer-protocol member. ``owned`` is what it holds; ``heartbeat`` reports it
    and takes the assignment in the response the way a client does (revoking first)."""

    def __init__(
        self,
        wire: Wire,
        group: str,
        *,
        topics: list[str] | None = None,
        regex: str | None = None,
        instance_id: str | None = None,
        assignor: str | None = None,
        rebalance_ms: int = 10000,
        version: int = 1,
    ) -> None:
        self.wire = wire
        self.group = group
        self.topics = topics
        self.regex = regex
        self.instance_id = instance_id
        self.assignor = assignor
        self.rebalance_ms = rebalance_ms
        self.version = version
        self.member_id = uuid.uuid4().hex[:22] if version >= 1 else ""
        self.epoch = 0
        self.owned: Owned = {}
        self.last: Any = None

    async def call(self, epoch: int | None = None, owned: Owned | None = None, **over: Any) -> Any:
        epoch = self.epoch if epoch is None else epoch
        body: dict[str, Any] = {
            "group_id": self.group,
            "member_id": self.member_id,
            "member_epoch": epoch,
            "instance_id": self.instance_id,
            "rack_id": None,
            "rebalance_timeout": self.rebalance_ms if epoch == 0 else -1,
            "subscribed_topic_names": self.topics if epoch == 0 else None,
            "server_assignor": self.assignor if epoch == 0 else None,
            "topic_partitions": [
                {"topic_id": t, "partitions": sorted(ps)}
                for t, ps in (self.owned if owned is None else owned).items()
            ],
        }
        if self.version >= 1:
            body["subscribed_topic_regex"] = self.regex if epoch == 0 else None
        body.update(over)
        r = await self.wire.call(CG_HEARTBEAT, self.version, body)
        self.last = r
        return r

    async def heartbeat(self, **over: Any) -> Any:
        """Heartbeat and apply the response: a new assignment replaces what is owned."""
        r = await self.call(**over)
        if r.error_code == 0:
            self.member_id = r.member_id
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.owned = as_owned(r.assignment.topic_partitions)
        return r

    async def join(self) -> Any:
        self.epoch = 0
        self.owned = {}
        return await self.heartbeat()

    async def leave(self, epoch: int = -1) -> Any:
        r = await self.call(epoch=epoch, owned={})
        self.owned = {}
        return r


async def cg_members(broker: AsyncBroker, group: str, n: int, **kw: Any) -> list[CgMember]:
    out = []
    for i in range(n):
        w = await Wire.connect(broker.bootstrap_servers, client_id=f"cg-client-{i}")
        out.append(CgMember(w, group, **kw))
    await find_coordinator(out[0].wire, group)  # creates __consumer_offsets
    return out


async def describe(wire: Wire, *groups: str, version: int = 1) -> Any:
    r = await wire.call(
        CG_DESCRIBE, version, {"group_ids": list(groups), "include_authorized_operations": False}
    )
    return r.groups


async def settle(members: list[CgMember], rounds: int = 8) -> None:
    """Heartbeat every member in turn until nothing changes (each step checks ownership)."""
    for _ in range(rounds):
        before = [(m.epoch, {t: set(p) for t, p in m.owned.items()}) for m in members]
        for m in members:
            r = await m.heartbeat()
            assert r.error_code == 0, r
            assert_disjoint(members)
        if before == [(m.epoch, m.owned) for m in members]:
            return


def assert_disjoint(members: list[CgMember]) -> None:
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for m in members:
        for tp in flat(m.owned):
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {m.member_id}"
            seen[tp] = m.member_id
