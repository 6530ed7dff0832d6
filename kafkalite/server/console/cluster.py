"""What the console asks the other brokers of a cluster: the sizes of the partitions
they lead (DescribeLogDirs) and the groups they coordinate (ListGroups).

A console renders from its own broker's metadata cache (every topic, partition,
leader, replica set and ISR of the cluster, every live broker), but logs and groups
live on their brokers. So for the rows of the page shown it asks each broker
concerned over the inter-broker listener, with a short timeout: an answer that does
not come is shown as "n/a", never as a number this broker guessed.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kafkalite.common.types import TopicPartition
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.sasl_client import SaslClientCredentials
from kafkalite.server.broker_connections import BrokerConnectionPool, list_offsets_body

__all__ = ["ClusterReader", "RemoteFigures", "RemoteGroup"]

log = logging.getLogger(__name__)

#: seconds a page waits for another broker (then shows "n/a")
TIMEOUT_S = 2.0


@dataclass(frozen=True, slots=True)
class RemoteGroup:
    group_id: str
    coordinator: int
    state: str
    group_type: str
    protocol_type: str


@dataclass(slots=True)
class RemoteFigures:
    """What the leaders of a page's partitions told: leader replica sizes, and
    (log start offset, high watermark) pairs."""

    sizes: dict[TopicPartition, int] = field(default_factory=dict)
    offsets: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)


class ClusterReader:
    """Calls to the other live brokers, one cached connection each."""

    def __init__(
        self,
        broker_id: int,
        endpoint: Callable[[int], tuple[str, int] | None],
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslClientCredentials | None = None,
    ) -> None:
        self.broker_id = broker_id
        self._pool = BrokerConnectionPool(endpoint, ssl_context, sasl, TIMEOUT_S)

    async def _call(self, broker: int, api_key: int, version: int, body: dict) -> object | None:
        return await self._pool.call(broker, api_key, version, body)

    async def sizes(
        self, by_broker: Mapping[int, Iterable[TopicPartition]]
    ) -> dict[TopicPartition, int]:
        """Bytes of each partition's replica on the broker named for it (DescribeLogDirs
        on that broker, only the partitions asked); missing when it did not answer."""

        async def one(broker: int, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
            topics: dict[str, list[int]] = {}
            for t, p in tps:
                topics.setdefault(t, []).append(p)
            body = {"topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}
            resp = await self._call(broker, ApiKey.DESCRIBE_LOG_DIRS, 1, body)
            out: dict[TopicPartition, int] = {}
            if resp is None or int(getattr(resp, "error_code", 0)):
                return out
            wanted = set(tps)
            for d in resp.results:  # type: ignore[attr-defined]
                if int(d.error_code):
                    continue
                for t in d.topics:
                    for p in t.partitions:
                        tp = (t.name, int(p.partition_index))
                        if tp in wanted and not p.is_future_key:
                            out[tp] = int(p.partition_size)
            return out

        jobs = [one(b, list(tps)) for b, tps in by_broker.items() if b != self.broker_id]
        merged: dict[TopicPartition, int] = {}
        for part in await asyncio.gather(*jobs):
            merged.update(part)
        return merged

    async def offsets(
        self, by_broker: Mapping[int, Iterable[TopicPartition]]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """(log start offset, high watermark) of each partition, asked of the broker named
        for it (its leader): ListOffsets v5 for the earliest and for the latest offset
        (read_uncommitted: the high watermark); missing when it did not answer."""

        async def ask(broker: int, tps: list[TopicPartition], ts: int) -> dict[TopicPartition, int]:
            body = list_offsets_body(tps, ts)
            resp = await self._call(broker, ApiKey.LIST_OFFSETS, 5, body)
            out: dict[TopicPartition, int] = {}
            if resp is None:
                return out
            for t in resp.topics:  # type: ignore[attr-defined]
                for p in t.partitions:
                    if not int(p.error_code):
                        out[(t.name, int(p.partition_index))] = int(p.offset)
            return out

        async def one(
            broker: int, tps: list[TopicPartition]
        ) -> dict[TopicPartition, tuple[int, int]]:
            start, end = await asyncio.gather(ask(broker, tps, -2), ask(broker, tps, -1))
            return {tp: (start[tp], end[tp]) for tp in tps if tp in start and tp in end}

        jobs = [one(b, list(tps)) for b, tps in by_broker.items() if b != self.broker_id]
        merged: dict[TopicPartition, tuple[int, int]] = {}
        for part in await asyncio.gather(*jobs):
            merged.update(part)
        return merged

    async def groups(self, brokers: Iterable[int]) -> tuple[list[RemoteGroup], list[int]]:
        """The groups the other brokers coordinate (ListGroups v5 to each), and the
        brokers that did not answer."""

        async def one(broker: int) -> tuple[int, list[RemoteGroup] | None]:
            body: dict[str, list[str]] = {"states_filter": [], "types_filter": []}
            resp = await self._call(broker, ApiKey.LIST_GROUPS, 5, body)
            if resp is None or int(resp.error_code):  # type: ignore[attr-defined]
                return broker, None
            return broker, [
                RemoteGroup(g.group_id, broker, g.group_state, g.group_type, g.protocol_type)
                for g in resp.groups  # type: ignore[attr-defined]
            ]

        found: list[RemoteGroup] = []
        silent: list[int] = []
        for broker, gs in await asyncio.gather(
            *(one(b) for b in sorted(brokers) if b != self.broker_id)
        ):
            if gs is None:
                silent.append(broker)
            else:
                found += gs
        return found, silent

    async def figures(self, by_broker: Mapping[int, list[TopicPartition]]) -> RemoteFigures:
        """Sizes and offsets of the partitions led by other brokers, asked at once."""
        sizes, offsets = await asyncio.gather(self.sizes(by_broker), self.offsets(by_broker))
        return RemoteFigures(sizes, offsets)

    def close(self) -> None:
        self._pool.close()
