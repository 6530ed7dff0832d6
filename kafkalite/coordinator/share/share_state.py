"""The share-state coordinator: Kafka's ``ShareCoordinatorShard`` over kafkalite's store.

A share partition is served by the partition's leader, which reads its state when it
loads the partition and writes it after every change that matters. The state is kept
by the *share-state coordinator*, reached with Kafka's inter-broker RPCs
InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85),
DeleteShareGroupState (86) and ReadShareGroupStateSummary (87). In kafkalite that
coordinator is the share group's group coordinator: the state of (group, topic id,
partition) is a record in the group's ``__consumer_offsets`` partition (see
docs/share-groups.md for why that is as safe as ``__share_group_state``), so
FindCoordinator key type SHARE with key ``group:topicId:partition`` answers the
group's coordinator.

Fencing is Kafka's: a read records the reader's leader epoch, and a write (or read)
with a lower leader epoch answers FENCED_LEADER_EPOCH, one with a lower state epoch
FENCED_STATE_EPOCH; so a deposed leader cannot overwrite what its successor loaded.
A write carries the full state of the share partition (kafkalite's leaders always
send the whole snapshot), which replaces the stored one.
"""

from __future__ import annotations

import base64
import dataclasses
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkalite.coordinator.share import share_codec
from kafkalite.coordinator.share.share_codec import ShareSnapshot
from kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.coordinator.group.group_coordinator import GroupCoordinator
    from kafkalite.coordinator.share.share_group import ShareGroup

#: Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET and DEFAULT_STATE_EPOCH
UNINITIALIZED_START_OFFSET = -1
DEFAULT_STATE_EPOCH = 0


@dataclass(slots=True)
class StateResult:
    error: int = 0
    message: str | None = None
    snapshot: ShareSnapshot | None = None


class ShareStateStore:
    """The coordinator side of APIs 83–87, for the groups this broker coordinates."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.gc = coordinator

    def _group(self, group_id: str) -> tuple[ShareGroup | None, StateResult | None]:
        error = self.gc._validate_group_status(group_id)
        if error:
            return None, StateResult(error)
        group = self.gc.share.share_group(group_id)
        if group is None:
            return None, StateResult(
                int(ErrorCode.group_id_not_found), f"Share group {group_id} not found."
            )
        return group, None

    def _known_partition(self, topic_id: uuid.UUID | None, partition: int) -> StateResult | None:
        if topic_id is None or topic_id.int == 0:
            return StateResult(int(ErrorCode.invalid_request), "The topic id is null.")
        if partition < 0:
            return StateResult(int(ErrorCode.invalid_request), "The partition id is negative.")
        cache = self.gc.metadata
        name = cache.topic_name(topic_id)
        meta = None if name is None else cache.topics.get(name)
        if meta is None or partition not in meta.partitions:
            return StateResult(int(ErrorCode.unknown_topic_or_partition))
        return None

    def _lookup(
        self, group_id: str, topic_id: uuid.UUID | None, partition: int
    ) -> ShareGroup | StateResult:
        """The share group, or the error of the group or of the partition named."""
        group, bad = self._group(group_id)
        if bad is not None:
            return bad
        assert group is not None
        bad = self._known_partition(topic_id, partition)
        return group if bad is None else bad

    def read(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> StateResult:
        """ReadShareGroupState: the state (start offset -1 when none), recording the
        reader's leader epoch so older leaders are fenced from then on."""
        group = self._lookup(group_id, topic_id, partition)
        if isinstance(group, StateResult):
            return group
        key = (topic_id, partition)
        snap = group.snapshots.get(key)
        known = group.state_leader_epochs.get(key, -1 if snap is None else snap.leader_epoch)
        if leader_epoch != -1 and known > leader_epoch:
            return StateResult(int(ErrorCode.fenced_leader_epoch))
        if leader_epoch != -1:
            group.state_leader_epochs[key] = leader_epoch
            if snap is not None and leader_epoch > snap.leader_epoch:
                # Kafka's readStateAndMaybeUpdateLeaderEpoch: the new leader epoch is
                # written too, so the fencing survives a coordinator move
                snap = group.snapshots[key] = dataclasses.replace(snap, leader_epoch=leader_epoch)
                self.gc._spawn(
                    self.gc.manager.store_records(
                        group_id,
                        [
                            (
                                share_codec.snapshot_key(group_id, topic_id, partition),
                                share_codec.encode_snapshot(snap),
                            )
                        ],
                    )
                )
        if snap is None:
            return StateResult(
                snapshot=ShareSnapshot(UNINITIALIZED_START_OFFSET, DEFAULT_STATE_EPOCH)
            )
        return StateResult(snapshot=snap)

    def summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> StateResult:
        """ReadShareGroupStateSummary: like a read, without touching the leader epoch."""
        group = self._lookup(group_id, topic_id, partition)
        if isinstance(group, StateResult):
            return group
        snap = group.snapshots.get((topic_id, partition))
        return StateResult(
            snapshot=snap or ShareSnapshot(UNINITIALIZED_START_OFFSET, DEFAULT_STATE_EPOCH)
        )

    async def write(
        self, group_id: str, topic_id: uuid.UUID, partition: int, snapshot: ShareSnapshot
    ) -> StateResult:
        """WriteShareGroupState: fenced by leader and state epochs, then persisted
        (``acks=all`` append); answered once written."""
        group = self._lookup(group_id, topic_id, partition)
        if isinstance(group, StateResult):
            return group
        key = (topic_id, partition)
        current = group.snapshots.get(key)
        known_leader = group.state_leader_epochs.get(
            key, -1 if current is None else current.leader_epoch
        )
        if snapshot.leader_epoch != -1 and known_leader > snapshot.leader_epoch:
            return StateResult(int(ErrorCode.fenced_leader_epoch))
        if current is not None and current.state_epoch > snapshot.state_epoch:
            return StateResult(int(ErrorCode.fenced_state_epoch))
        if snapshot.leader_epoch == -1 and current is not None:
            snapshot.leader_epoch = current.leader_epoch
        if snapshot.start_offset == UNINITIALIZED_START_OFFSET and current is not None:
            snapshot.start_offset = current.start_offset
        if snapshot.leader_epoch != -1:
            group.state_leader_epochs[key] = max(known_leader, snapshot.leader_epoch)
        group.snapshots[key] = snapshot
        error = await self.gc.manager.store_records(
            group_id,
            [
                (
                    share_codec.snapshot_key(group_id, topic_id, partition),
                    share_codec.encode_snapshot(snapshot),
                )
            ],
        )
        return StateResult(error)

    async def initialize(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        start_offset: int,
    ) -> StateResult:
        """InitializeShareGroupState: a fresh state (no batches) at ``start_offset`` with
        a state epoch no lower than the stored one (FENCED_STATE_EPOCH otherwise)."""
        group = self._lookup(group_id, topic_id, partition)
        if isinstance(group, StateResult):
            return group
        current = group.snapshots.get((topic_id, partition))
        if current is not None and current.state_epoch > state_epoch:
            return StateResult(int(ErrorCode.fenced_state_epoch))
        leader_epoch = -1 if current is None else current.leader_epoch
        return await self.write(
            group_id,
            topic_id,
            partition,
            ShareSnapshot(start_offset, state_epoch, [], leader_epoch),
        )

    async def delete(self, group_id: str, keys: list[tuple[uuid.UUID, int]]) -> StateResult:
        """DeleteShareGroupState: tombstones; deleting an absent state is no error."""
        group, bad = self._group(group_id)
        if bad is not None:
            return bad
        assert group is not None
        for k in keys:
            group.snapshots.pop(k, None)
            group.state_leader_epochs.pop(k, None)
        if not keys:
            return StateResult()
        error = await self.gc.manager.store_records(
            group_id, [(share_codec.snapshot_key(group_id, t, p), None) for t, p in keys]
        )
        return StateResult(error)


def share_coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """FindCoordinator's key for key type SHARE (2), as Kafka spells it (its topic ids
    print as unpadded URL-safe base64)."""
    tid = base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()
    return f"{group_id}:{tid}:{partition}"


def group_of_share_key(key: str) -> str | None:
    """The group id of a ``group:topicId:partition`` key (group ids may hold ':')."""
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[0] or not parts[1]:
        return None
    try:
        int(parts[2])
    except ValueError:
        return None
    return parts[0]


__all__ = [
    "ShareStateStore",
    "StateResult",
    "group_of_share_key",
    "share_coordinator_key",
]
