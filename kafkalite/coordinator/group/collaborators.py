"""What the group coordinator needs of the broker, as Protocols.

The coordinator sits below the server layer and never names it: the broker
passes its MetadataCache and ReplicaManager, which match these structurally,
and a callable that creates topics (for ``__consumer_offsets``). Kafka's
``GroupCoordinator`` likewise takes a ``ReplicaManager`` and a metadata view
rather than the ``KafkaServer``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from kafkalite.common.types import TopicPartition
from kafkalite.protocol.record_validator import WritableBuffer

if TYPE_CHECKING:
    from kafkalite.log.log import Log


class PartitionLeader(Protocol):
    @property
    def leader(self) -> int: ...


class TopicPartitions(Protocol):
    @property
    def partitions(self) -> Mapping[int, PartitionLeader]: ...


class TopicDescription(Protocol):
    """A topic as the consumer protocol assigns it: by id, with its partition count."""

    @property
    def topic_id(self) -> uuid.UUID: ...

    @property
    def partitions(self) -> Mapping[int, PartitionLeader]: ...

    @property
    def is_internal(self) -> bool: ...


class ClusterMetadata(Protocol):
    """The broker's metadata cache: live brokers, the offsets topic's leaders, the
    topics (the consumer protocol's subscriptions and regexes resolve against them)."""

    @property
    def brokers(self) -> Mapping[int, object]: ...

    @property
    def topics(self) -> Mapping[str, TopicDescription]: ...

    def get_topic(self, name: str) -> TopicPartitions | None: ...

    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...

    def alive_broker_ids(self) -> list[int]: ...

    async def wait_for_topics(self, names: list[str], timeout_s: float) -> bool: ...


class HostedPartition(Protocol):
    @property
    def is_leader(self) -> bool: ...

    @property
    def log(self) -> Log | None: ...


class Replicas(Protocol):
    """The broker's ReplicaManager: appends to and reads of ``__consumer_offsets``."""

    @property
    def partitions(self) -> Mapping[TopicPartition, HostedPartition]: ...

    @property
    def on_leadership_change(self) -> list[Callable[[TopicPartition, bool], None]]: ...

    def get_partition(self, tp: TopicPartition) -> HostedPartition | None: ...

    def append_records(
        self, timeout_ms: int, required_acks: int, entries: dict[TopicPartition, WritableBuffer]
    ) -> Any: ...


#: creates topics as CreateTopics does; returns results with ``error`` and ``message``
CreateTopics = Callable[[Sequence[Any]], Awaitable[Sequence[Any]]]
