"""MetadataCache: what this broker tells clients about brokers, topics and leaders.

Filled only by UpdateMetadata from the controller (never by reading the
metadata store directly), as in Kafka's ZooKeeper mode.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


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

    def update_brokers(self, brokers: list[BrokerEndpointInfo]) -> None:
        self.brokers = {b.broker_id: b for b in brokers}

    def update_partition(
        self, topic: str, topic_id: uuid.UUID, pm: PartitionMetadata, *, internal: bool = False
    ) -> None:
        t = self.topics.get(topic)
        if t is None or t.topic_id != topic_id:
            if t is not None:
                self.topic_ids.pop(t.topic_id, None)
            t = TopicMetadata(topic, topic_id, is_internal=internal)
            self.topics[topic] = t
            self.topic_ids[topic_id] = topic
        t.partitions[pm.partition] = pm

    def remove_topic(self, topic: str) -> None:
        t = self.topics.pop(topic, None)
        if t is not None:
            self.topic_ids.pop(t.topic_id, None)

    def alive_broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def get_topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.topic_ids.get(topic_id)
