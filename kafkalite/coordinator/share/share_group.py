"""A share group's membership: members, their subscriptions and the group epoch.

Share groups reuse the KIP-848 shape (group epoch, member epochs, server-side
assignment) without its reconciliation: nothing is revoked, since a partition may be
read by every member at once. The ``simple`` assignor gives every member every
partition of the topics it subscribes to.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from kafkalite.coordinator.share.share_codec import ShareSnapshot

SHARE_GROUP_TYPE = "share"
LEAVE_GROUP_MEMBER_EPOCH = -1


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    #: topic id -> partitions
    assigned: dict[uuid.UUID, list[int]] = field(default_factory=dict)
    session_timer: asyncio.TimerHandle | None = None

    def cancel_timers(self) -> None:
        if self.session_timer is not None:
            self.session_timer.cancel()
            self.session_timer = None


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    #: subscribed topic name -> (topic id, partition count), as last assigned
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    dead: bool = False
    #: the epoch last written to __consumer_offsets
    persisted_epoch: int = -1
    #: member id -> what its ShareGroupMemberMetadata/CurrentMemberAssignment records
    #: last said (share_loader.persisted_view)
    persisted_members: dict[str, tuple[object, ...]] = field(default_factory=dict)
    #: (topic id, partition) -> the share-partition state last written (or read back)
    snapshots: dict[tuple[uuid.UUID, int], ShareSnapshot] = field(default_factory=dict)
    #: (topic id, partition) -> the highest leader epoch that read or wrote its state
    state_leader_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)

    @property
    def is_empty(self) -> bool:
        return not self.members

    @property
    def state(self) -> str:
        if self.dead:
            return "Dead"
        return "Empty" if not self.members else "Stable"

    def subscribed_topics(self) -> set[str]:
        out: set[str] = set()
        for m in self.members.values():
            out.update(m.subscribed_topic_names)
        return out
