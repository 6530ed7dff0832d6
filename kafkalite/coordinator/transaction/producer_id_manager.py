"""ProducerIdManager: hands out producer ids from blocks claimed in the metadata store.

Like Kafka's ZooKeeper mode, a broker claims a block of 1000 ids by a
version-conditional write of /latest_producer_id_block, so ids are unique
across brokers and restarts without any other coordination.
"""

from __future__ import annotations

import json

from kafkalite.metadata import zk_paths
from kafkalite.metadata.store import BadVersionError, MetadataStore, NodeExistsError, NoNodeError

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, broker_id: int, store: MetadataStore) -> None:
        self.broker_id = broker_id
        self.store = store
        self._next = 0
        self._end = -1  # inclusive

    async def generate_producer_id(self) -> int:
        if self._next > self._end:
            await self._claim_block()
        pid = self._next
        self._next += 1
        return pid

    async def _claim_block(self) -> None:
        while True:
            try:
                raw, stat = await self.store.get(zk_paths.LATEST_PRODUCER_ID_BLOCK)
                cur = json.loads(raw) if raw else None
                start = int(cur["block_end"]) + 1 if cur else 0
                data = self._encode(start)
                await self.store.set(zk_paths.LATEST_PRODUCER_ID_BLOCK, data, version=stat.version)
            except NoNodeError:
                start = 0
                try:
                    await self.store.create(
                        zk_paths.LATEST_PRODUCER_ID_BLOCK, self._encode(0), makepath=True
                    )
                except NodeExistsError:
                    continue
            except BadVersionError:
                continue
            self._next, self._end = start, start + BLOCK_SIZE - 1
            return

    def _encode(self, start: int) -> bytes:
        return json.dumps(
            {
                "version": 1,
                "broker": self.broker_id,
                "block_start": str(start),
                "block_end": str(start + BLOCK_SIZE - 1),
            }
        ).encode()
