"""MetadataCache: what this broker tells clients about brokers, topics and leaders.

Filled only by UpdateMetadata from the controller (never by reading the
metadata store directly), as in Kafka's ZooKeeper mode: :meth:`update_metadata`
applies it. Admin requests wait here (:meth:`wait_for_topics` and friends) until
the controller's update shows what they wrote to the store.

It also keeps each topic's encoded Metadata response entry per version, built
on first use and dropped when the topic's partitions or the set of live
brokers change: a Metadata request for 10,000 partitions is then a join of
cached bytes.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.metadata_response import encode_topic
from kafkalite.server.topic_names import INTERNAL_TOPICS
from kafkalite.timer import loop_slices


@dataclass(slots=True)
class BrokerEndpointInfo:
    broker_id: int
    endpoints: dict[str, tuple[str, int]]  # listener -> (host, port)
    rack: str | None = None


@dataclass(slots=True)
class PartitionMetadata:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = field(default_factory=list)


@dataclass(slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)
    is_internal: bool = False


class MetadataCache:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.brokers: dict[int, BrokerEndpointInfo] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.topic_ids: dict[uuid.UUID, str] = {}
        self.controller_id = -1
        self.controller_epoch = 0
        self.cluster_id: str | None = None
        #: topic -> {Metadata version: encoded topic entry}
        self._encoded: dict[str, dict[int, bytes]] = {}
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []

    # ---- UpdateMetadata -------------------------------------------------------
    async def update_metadata(
        self,
        controller_id: int,
        controller_epoch: int,
        states: list[dict[str, Any]],
        live_brokers: list[dict[str, Any]],
        deleted_topics: list[str],
    ) -> None:
        """Apply an (admitted) UpdateMetadata.

        Build the changed topics aside (the loop runs between slices of a big
        request), then apply everything in one step, as Kafka swaps in a new metadata
        snapshot: a client never sees half of a topic's partitions."""
        if controller_epoch < self.controller_epoch:
            return
        brokers = []
        for b in live_brokers:
            eps = {}
            for e in b.get("endpoints", []):
                name, rest = e.split("://", 1)
                host, port = rest.rsplit(":", 1)
                eps[name] = (host.strip("[]"), int(port))
            brokers.append(BrokerEndpointInfo(int(b["id"]), eps, b.get("rack")))
        deleted = set(deleted_topics)
        staged: dict[str, TopicMetadata] = {}
        for s in states:
            name = s["topic"]
            t = staged.get(name)
            if t is None:
                t = self.staged_topic(
                    name, s["topic_id"], name in INTERNAL_TOPICS, fresh=name in deleted
                )
                staged[name] = t
            t.partitions[s["partition"]] = PartitionMetadata(
                s["partition"],
                s["leader"],
                s["leader_epoch"],
                list(s["replicas"]),
                list(s["isr"]),
                list(s.get("offline_replicas") or ()),
            )
            await loop_slices.pause()
        if controller_epoch < self.controller_epoch:
            return  # a newer controller's update came in meanwhile
        self.controller_epoch = controller_epoch
        self.controller_id = controller_id
        self.update_brokers(brokers)
        for name in deleted_topics:
            self.remove_topic(name)
        for t in staged.values():
            self.put_topic(t)
        self._notify_waiters()

    def update_brokers(self, brokers: list[BrokerEndpointInfo]) -> None:
        new = {b.broker_id: b for b in brokers}
        if new.keys() != self.brokers.keys():
            self._encoded.clear()  # leaders and offline replicas depend on who is alive
        self.brokers = new

    def staged_topic(
        self, name: str, topic_id: uuid.UUID, internal: bool, *, fresh: bool = False
    ) -> TopicMetadata:
        """A copy of the topic to change aside and :meth:`put_topic` back; a new, empty
        one for a new topic, a new topic id, or ``fresh`` (deleted and re-created)."""
        t = None if fresh else self.topics.get(name)
        if t is None or t.topic_id != topic_id:
            return TopicMetadata(name, topic_id, is_internal=internal)
        return TopicMetadata(name, topic_id, dict(t.partitions), t.is_internal)

    def put_topic(self, t: TopicMetadata) -> None:
        """Replace a topic's metadata as a whole."""
        old = self.topics.get(t.name)
        if old is not None and old.topic_id != t.topic_id:
            self.topic_ids.pop(old.topic_id, None)
        self.topics[t.name] = t
        self.topic_ids[t.topic_id] = t.name
        self._encoded.pop(t.name, None)

    def remove_topic(self, topic: str) -> None:
        self._encoded.pop(topic, None)
        t = self.topics.pop(topic, None)
        if t is not None:
            self.topic_ids.pop(t.topic_id, None)

    def alive_broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def get_topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def has_partition(self, tp: tuple[str, int]) -> bool:
        t = self.topics.get(tp[0])
        return t is not None and tp[1] in t.partitions

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.topic_ids.get(topic_id)

    def encoded_topic(self, name: str, version: int) -> bytes | None:
        """The topic's Metadata response entry for ``version``; None if unknown."""
        per_version = self._encoded.get(name)
        if per_version is not None:
            cached = per_version.get(version)
            if cached is not None:
                return cached
        t = self.topics.get(name)
        if t is None:
            return None
        alive = self.brokers
        parts = []
        for p in sorted(t.partitions.values(), key=lambda p: p.partition):
            leader = p.leader if p.leader in alive else -1
            # dead brokers' replicas, and live ones in a failed log dir (from the controller)
            offline = [r for r in p.replicas if r not in alive or r in p.offline_replicas]
            err = ErrorCode.none if leader >= 0 else ErrorCode.leader_not_available
            parts.append(
                (int(err), p.partition, leader, p.leader_epoch, p.replicas, p.isr, offline)
            )
        data = encode_topic(version, 0, name, t.topic_id, t.is_internal, parts)
        self._encoded.setdefault(name, {})[version] = data
        return data

    # ---- waiting for the controller's updates ---------------------------------------
    def _notify_waiters(self) -> None:
        still = []
        for pred, fut in self._waiters:
            if fut.done():
                continue
            if pred():
                fut.set_result(None)
            else:
                still.append((pred, fut))
        self._waiters = still

    async def wait_for(self, pred: Callable[[], bool], timeout_s: float) -> bool:
        """Whether ``pred`` held within ``timeout_s``, checked after every update."""
        if pred():
            return True
        if timeout_s <= 0:
            return False
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((pred, fut))
        try:
            await asyncio.wait_for(fut, timeout_s)
            return True
        except TimeoutError:
            return False

    def _partitions_online(self, name: str, count: int = 1) -> bool:
        t = self.topics.get(name)
        return (
            t is not None
            and len(t.partitions) >= count
            and all(p.leader >= 0 for p in t.partitions.values())
        )

    async def wait_for_topics(self, names: list[str], timeout_s: float) -> bool:
        """Until every topic has all its partitions with a leader."""
        return await self.wait_for(
            lambda: all(self._partitions_online(n) for n in names), timeout_s
        )

    async def wait_for_topics_gone(self, names: list[str], timeout_s: float) -> set[str]:
        """Until the topics are deleted; returns those that are."""
        await self.wait_for(lambda: all(n not in self.topics for n in names), timeout_s)
        return {n for n in names if n not in self.topics}

    async def wait_for_partitions(self, topic: str, count: int, timeout_s: float) -> bool:
        """Until the topic has ``count`` partitions, each with a leader."""
        return await self.wait_for(lambda: self._partitions_online(topic, count), timeout_s)
