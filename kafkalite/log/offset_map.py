"""The cleaner's key -> last offset map (Kafka's SkimpyOffsetMap), bounded by memory.

Kafka stores a 16-byte MD5 of each key plus an 8-byte offset (24 bytes an
entry) in a fixed buffer of ``log.cleaner.dedupe.buffer.size`` bytes filled to
``log.cleaner.io.buffer.load.factor``. The entry budget here is computed the
same way, so a config that lets Kafka build its map over N records lets this
one too. The keys themselves are stored (a dict), not their hashes: no hash
collision can ever make the cleaner drop a live record.
"""

from __future__ import annotations

__all__ = ["BYTES_PER_ENTRY", "OffsetMap"]

#: Kafka's per-entry cost: MD5 digest (16) + offset (8)
BYTES_PER_ENTRY = 24


class OffsetMap:
    """Latest offset of every key seen in the dirty section of one log."""

    __slots__ = ("slots", "_map", "latest_offset")

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        #: how many keys the map may hold
        self.slots = max(int(memory // BYTES_PER_ENTRY * load_factor), 1)
        self._map: dict[bytes, int] = {}
        #: offset of the last record put, -1 when empty
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> None:
        """Record ``offset`` as the latest for ``key``; offsets arrive in increasing order."""
        self._map[key] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, or -1 when the key is not in the dirty section."""
        return self._map.get(key, -1)

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1

    @property
    def size(self) -> int:
        return len(self._map)

    @property
    def utilization(self) -> float:
        """Fraction of the slots in use (Kafka's max-buffer-utilization-percent / 100)."""
        return len(self._map) / self.slots

    def __len__(self) -> int:
        return len(self._map)

    def __contains__(self, key: object) -> bool:
        return key in self._map
