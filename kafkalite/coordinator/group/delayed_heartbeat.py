"""DelayedHeartbeat: a member's session timeout.

One is scheduled after every heartbeat (and join, sync and commit). A later
heartbeat completes the earlier operation (the member is alive); if none
arrives within ``session.timeout.ms`` the operation expires and the member is
removed, which starts a rebalance. Pending members (told MEMBER_ID_REQUIRED)
get one too, so a client that never comes back does not hold up the group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalite.timer.delayed_operation import DelayedOperation

if TYPE_CHECKING:
    from kafkalite.coordinator.group.group_coordinator import GroupCoordinator
    from kafkalite.coordinator.group.group_metadata import GroupMetadata


class DelayedHeartbeat(DelayedOperation):
    def __init__(
        self,
        coordinator: GroupCoordinator,
        group: GroupMetadata,
        member_id: str,
        is_pending: bool,
        timeout_ms: int,
    ) -> None:
        super().__init__(timeout_ms)
        self.coordinator = coordinator
        self.group = group
        self.member_id = member_id
        self.is_pending = is_pending

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_heartbeat(
            self.group, self.member_id, self.is_pending, self.force_complete
        )

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_heartbeat(self.group, self.member_id, self.is_pending)
