"""The partition leader's side of the share-state RPCs: Kafka's network persister.

A leader serving a share group whose coordinator is another broker reads
(ReadShareGroupState, 84) and writes (WriteShareGroupState, 85) the share-partition
state there, over the inter-broker listener, one connection per coordinator. Finding
the coordinator is FindCoordinator key type SHARE resolved locally: the group's
``__consumer_offsets`` leader from the metadata cache. Retries (coordinator moved,
loading, connection lost) are the caller's (:class:`SharePartitionManager`).
"""

from __future__ import annotations

import logging
import ssl
import uuid
from typing import TYPE_CHECKING, Any

from kafkalite.coordinator.share.share_codec import ShareSnapshot, StateBatch
from kafkalite.coordinator.share.share_state import StateResult
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.sasl_client import SaslClientCredentials
from kafkalite.server.broker_connections import (
    BrokerConnectionPool,
    list_offsets_body,
    listener_endpoints,
)

if TYPE_CHECKING:
    from kafkalite.coordinator.group.group_coordinator import GroupCoordinator
    from kafkalite.server.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

READ_VERSION = 0
WRITE_VERSION = 1


class ShareStateSender:
    def __init__(
        self,
        coordinator: GroupCoordinator,
        metadata_cache: MetadataCache,
        listener_name: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        request_timeout_ms: int = 30000,
        sasl: SaslClientCredentials | None = None,
    ) -> None:
        self.gc = coordinator
        self.cache = metadata_cache
        self._pool = BrokerConnectionPool(
            listener_endpoints(metadata_cache, listener_name),
            ssl_context,
            sasl,
            request_timeout_ms / 1000,
        )
        self.requests_sent = 0

    async def _call(self, group_id: str, api_key: int, version: int, body: dict[str, Any]) -> Any:
        resp = await self._pool.call(self.gc.coordinator_for(group_id), api_key, version, body)
        if resp is not None:
            self.requests_sent += 1
        return resp

    @staticmethod
    def _partition(resp: Any) -> Any:
        for t in resp.results:
            for p in t.partitions:
                return p
        return None

    async def read(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> StateResult:
        body = {
            "group_id": group_id,
            "topics": [
                {
                    "topic_id": topic_id,
                    "partitions": [{"partition": partition, "leader_epoch": leader_epoch}],
                }
            ],
        }
        resp = await self._call(group_id, ApiKey.READ_SHARE_GROUP_STATE, READ_VERSION, body)
        p = None if resp is None else self._partition(resp)
        if p is None:
            return StateResult(int(ErrorCode.coordinator_not_available))
        if int(p.error_code):
            return StateResult(int(p.error_code), p.error_message)
        return StateResult(
            snapshot=ShareSnapshot(
                int(p.start_offset),
                int(p.state_epoch),
                [
                    StateBatch(
                        int(b.first_offset),
                        int(b.last_offset),
                        int(b.delivery_state),
                        int(b.delivery_count),
                    )
                    for b in p.state_batches
                ],
                leader_epoch,
            )
        )

    async def write(
        self, group_id: str, topic_id: uuid.UUID, partition: int, snapshot: ShareSnapshot
    ) -> StateResult:
        complete = sum(
            b.last_offset - b.first_offset + 1
            for b in snapshot.batches
            if b.delivery_state in (2, 4)
        )
        body = {
            "group_id": group_id,
            "topics": [
                {
                    "topic_id": topic_id,
                    "partitions": [
                        {
                            "partition": partition,
                            "state_epoch": snapshot.state_epoch,
                            "leader_epoch": snapshot.leader_epoch,
                            "start_offset": snapshot.start_offset,
                            "delivery_complete_count": complete,
                            "state_batches": [
                                {
                                    "first_offset": b.first_offset,
                                    "last_offset": b.last_offset,
                                    "delivery_state": b.delivery_state,
                                    "delivery_count": b.delivery_count,
                                }
                                for b in snapshot.batches
                            ],
                        }
                    ],
                }
            ],
        }
        resp = await self._call(group_id, ApiKey.WRITE_SHARE_GROUP_STATE, WRITE_VERSION, body)
        p = None if resp is None else self._partition(resp)
        if p is None:
            return StateResult(int(ErrorCode.coordinator_not_available))
        return StateResult(int(p.error_code), p.error_message)

    async def high_watermarks(
        self, leader: int, tps: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """The high watermarks of partitions led by ``leader`` (ListOffsets latest,
        read_uncommitted), for a share partition's lag when its log is elsewhere, as
        Kafka's group coordinator asks the leaders (KIP-1226); missing ones are left out."""
        if not tps:
            return {}
        resp = await self._pool.call(leader, ApiKey.LIST_OFFSETS, 5, list_offsets_body(tps, -1))
        if resp is None:
            return {}
        self.requests_sent += 1
        return {
            (t.name, int(p.partition_index)): int(p.offset)
            for t in resp.topics
            for p in t.partitions
            if not int(p.error_code)
        }

    async def close(self) -> None:
        self._pool.close()
