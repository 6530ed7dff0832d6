"""DelayedJoin and InitialDelayedJoin: the PreparingRebalance phase of a classic group.

A rebalance waits until every known member has rejoined, or until the longest
rebalance timeout among them has passed; members that did not rejoin by then
are dropped when the join completes. The first rebalance of an empty group
waits ``group.initial.rebalance.delay.ms`` instead, and keeps extending that
delay (up to the rebalance timeout) while new members keep arriving, so a
fleet of consumers starting together gets one rebalance rather than many.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalite.timer.delayed_operation import DelayedOperation

if TYPE_CHECKING:
    from kafkalite.coordinator.group.group_coordinator import GroupCoordinator
    from kafkalite.coordinator.group.group_metadata import GroupMetadata


class DelayedJoin(DelayedOperation):
    def __init__(
        self, coordinator: GroupCoordinator, group: GroupMetadata, rebalance_timeout_ms: int
    ) -> None:
        super().__init__(rebalance_timeout_ms)
        self.coordinator = coordinator
        self.group = group

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_join(self.group, self.force_complete)

    def on_complete(self) -> None:
        self.coordinator.on_complete_join(self.group)


class InitialDelayedJoin(DelayedJoin):
    """Completes only by its timer; re-arms itself while new members keep joining."""

    def __init__(
        self, coordinator: GroupCoordinator, group: GroupMetadata, delay_ms: int, remaining_ms: int
    ) -> None:
        super().__init__(coordinator, group, delay_ms)
        self.configured_delay_ms = delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        group = self.group
        if group.new_member_added and self.remaining_ms > 0:
            group.new_member_added = False
            delay = min(self.configured_delay_ms, self.remaining_ms)
            remaining = max(self.remaining_ms - delay, 0)
            nxt = InitialDelayedJoin(self.coordinator, group, delay, remaining)
            nxt.configured_delay_ms = self.configured_delay_ms
            self.coordinator.watch_join(nxt)
        else:
            self.coordinator.on_complete_join(group)


class DelayedSync(DelayedOperation):
    """After a join completes, members have one rebalance timeout to send SyncGroup."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        group: GroupMetadata,
        generation_id: int,
        rebalance_timeout_ms: int,
    ) -> None:
        super().__init__(rebalance_timeout_ms)
        self.coordinator = coordinator
        self.group = group
        self.generation_id = generation_id

    def try_complete(self) -> bool:
        g = self.group
        if g.generation_id != self.generation_id or not g.pending_sync_members:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_pending_sync(self.group, self.generation_id)
