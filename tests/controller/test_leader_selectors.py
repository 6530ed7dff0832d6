"""Leader selectors (seed 002 §7, seed 000 §6.4.3) on a hand-built ControllerContext."""

from __future__ import annotations

import pytest

from kafkalite.controller.controller_context import (
    ControllerContext,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReassignedPartitionsContext,
)
from kafkalite.controller.leader_selectors import (
    ControlledShutdownLeaderSelector,
    LeaderElectionNotNeededException,
    NoOpLeaderSelector,
    NoReplicaOnlineException,
    OfflinePartitionLeaderSelector,
    PreferredReplicaPartitionLeaderSelector,
    ReassignedPartitionLeaderSelector,
    StateChangeFailedException,
)
from kafkalite.metadata.kafka_zk_client import BrokerInfo

TP = ("t", 0)


def _ctx(ar: list[int], leader: int, isr: list[int], live: list[int]) -> ControllerContext:
    ctx = ControllerContext(epoch=3)
    ctx.live_brokers = {b: BrokerInfo(b, (), 100 + b) for b in live}
    ctx.all_topics.add("t")
    ctx.assignments["t"] = {0: list(ar)}
    ctx.partition_leadership_info[TP] = LeaderIsrAndControllerEpoch(
        LeaderAndIsr(leader, 7, tuple(isr), 4), 2
    )
    return ctx


def _current(ctx: ControllerContext) -> LeaderAndIsr:
    return ctx.partition_leadership_info[TP].leader_and_isr


async def _offline(ctx: ControllerContext, unclean: set[str] = frozenset()):  # type: ignore[assignment]
    async def load(topics):
        return set(topics) & set(unclean)

    selector = OfflinePartitionLeaderSelector(ctx, load)
    await selector.prepare([TP])
    return selector


@pytest.mark.parametrize(
    ("ar", "isr", "live", "leader", "new_isr", "receivers"),
    [
        # seed 002 #12: the leader dies, the next AR replica in the ISR leads
        ([1, 2, 3], [1, 2, 3], [2, 3], 2, [2, 3], [2, 3]),
        # seed 002 #13: AR order, not ISR order
        ([3, 1, 2], [2, 1, 3], [1, 2], 1, [2, 1], [1, 2]),
        # seed 000 #46
        ([1, 2, 0], [2, 0, 1], [0, 2], 2, [2, 0], [2, 0]),
        ([0, 1, 2], [0, 2, 1], [1, 2], 1, [2, 1], [1, 2]),
    ],
)
async def test_offline_selector_takes_the_first_live_ar_replica_in_the_isr(
    ar, isr, live, leader, new_isr, receivers
):
    ctx = _ctx(ar, ar[0], isr, live)
    selector = await _offline(ctx)
    new, to = selector.select_leader(TP, _current(ctx))
    assert (new.leader, list(new.isr), to) == (leader, new_isr, receivers)
    assert new.leader_epoch == 8 and new.zk_version == 4
    assert selector.unclean_elections == 0


async def test_offline_selector_without_live_isr_and_unclean_disabled_elects_nobody():
    ctx = _ctx([1, 2, 3], 1, [1], [2, 3])
    selector = await _offline(ctx)
    with pytest.raises(NoReplicaOnlineException):
        selector.select_leader(TP, _current(ctx))


async def test_offline_selector_unclean_takes_the_first_live_ar_replica_alone():
    ctx = _ctx([1, 2, 3], 1, [1], [3, 2])
    selector = await _offline(ctx, unclean={"t"})
    new, to = selector.select_leader(TP, _current(ctx))
    assert (new.leader, list(new.isr), to, new.leader_epoch) == (2, [2], [2, 3], 8)
    assert selector.unclean_elections == 1


async def test_offline_selector_unclean_with_no_live_replica_elects_nobody():
    ctx = _ctx([1, 2], 1, [1], [3])
    selector = await _offline(ctx, unclean={"t"})
    with pytest.raises(NoReplicaOnlineException):
        selector.select_leader(TP, _current(ctx))


async def test_offline_selector_asks_for_the_unclean_setting_only_without_live_isr():
    asked: list[set[str]] = []

    async def load(topics):
        asked.append(set(topics))
        return set()

    ctx = _ctx([1, 2, 3], 1, [1, 2], [2, 3])
    await OfflinePartitionLeaderSelector(ctx, load).prepare([TP])
    assert asked == []
    ctx = _ctx([1, 2, 3], 1, [1], [2, 3])
    await OfflinePartitionLeaderSelector(ctx, load).prepare([TP])
    assert asked == [{"t"}]


async def test_offline_selector_ignores_shutting_down_brokers():
    ctx = _ctx([1, 2, 3], 1, [1, 2, 3], [2, 3])
    ctx.shutting_down_broker_ids.add(2)
    new, _ = (await _offline(ctx)).select_leader(TP, _current(ctx))
    assert (new.leader, list(new.isr)) == (3, [3])


def test_reassigned_selector_takes_the_first_rar_replica_live_and_in_isr():
    ctx = _ctx([4, 5, 6, 1, 2, 3], 1, [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6])
    ctx.partitions_being_reassigned[TP] = ReassignedPartitionsContext([5, 4, 6])
    selector = ReassignedPartitionLeaderSelector(ctx)
    new, to = selector.select_leader(TP, _current(ctx))
    assert (new.leader, list(new.isr), to, new.leader_epoch) == (
        5,
        [1, 2, 3, 4, 5, 6],
        [5, 4, 6],
        8,
    )
    del ctx.live_brokers[5]
    assert selector.select_leader(TP, _current(ctx))[0].leader == 4


def test_reassigned_selector_fails_when_no_new_replica_is_in_sync():
    ctx = _ctx([1, 2, 3, 4], 1, [1, 2, 3], [1, 2, 3, 4])
    ctx.partitions_being_reassigned[TP] = ReassignedPartitionsContext([4])
    with pytest.raises(NoReplicaOnlineException):
        ReassignedPartitionLeaderSelector(ctx).select_leader(TP, _current(ctx))


def test_preferred_selector_moves_leadership_to_ar0_when_live_and_in_sync():
    ctx = _ctx([1, 2, 3], 2, [2, 3, 1], [1, 2, 3])
    new, to = PreferredReplicaPartitionLeaderSelector(ctx).select_leader(TP, _current(ctx))
    assert (new.leader, list(new.isr), to, new.leader_epoch) == (1, [2, 3, 1], [1, 2, 3], 8)


def test_preferred_selector_is_not_needed_when_ar0_leads():
    ctx = _ctx([1, 2, 3], 1, [1, 2, 3], [1, 2, 3])
    with pytest.raises(LeaderElectionNotNeededException):
        PreferredReplicaPartitionLeaderSelector(ctx).select_leader(TP, _current(ctx))


@pytest.mark.parametrize(("isr", "live"), [([2, 3], [1, 2, 3]), ([1, 2, 3], [2, 3])])
def test_preferred_selector_fails_when_ar0_is_dead_or_out_of_sync(isr, live):
    ctx = _ctx([1, 2, 3], 2, isr, live)
    with pytest.raises(StateChangeFailedException):
        PreferredReplicaPartitionLeaderSelector(ctx).select_leader(TP, _current(ctx))


def test_controlled_shutdown_selector_moves_off_and_shrinks_the_isr():
    ctx = _ctx([1, 2, 3], 1, [1, 2, 3], [1, 2, 3])
    ctx.shutting_down_broker_ids.add(1)
    new, to = ControlledShutdownLeaderSelector(ctx).select_leader(TP, _current(ctx))
    # the shutting-down broker still receives LeaderAndIsr (as a follower)
    assert (new.leader, list(new.isr), to, new.leader_epoch) == (2, [2, 3], [1, 2, 3], 8)


def test_controlled_shutdown_selector_fails_when_every_isr_member_is_shutting_down():
    ctx = _ctx([1, 2, 3], 1, [1, 2], [1, 2, 3])
    ctx.shutting_down_broker_ids |= {1, 2}
    with pytest.raises(StateChangeFailedException):
        ControlledShutdownLeaderSelector(ctx).select_leader(TP, _current(ctx))


def test_noop_selector_keeps_everything_and_tells_the_ar():
    ctx = _ctx([3, 1, 2], 1, [1, 2], [1, 2, 3])
    new, to = NoOpLeaderSelector(ctx).select_leader(TP, _current(ctx))
    assert new == _current(ctx) and to == [3, 1, 2]


# ---- replicas in failed log dirs (ControllerContext.replicas_on_offline_dirs) ----------


def test_a_replica_in_a_failed_log_dir_is_not_online():
    ctx = _ctx([1, 2, 3], 1, [1, 2, 3], [1, 2, 3])
    ctx.replicas_on_offline_dirs[2] = {TP}
    assert [r for r in (1, 2, 3) if ctx.is_replica_online(r, TP)] == [1, 3]
    assert ctx.is_replica_online(2, ("t", 1))  # only that partition's replica
    assert ctx.offline_replicas(TP, [1, 2, 3]) == (2,)
    ctx.shutting_down_broker_ids.add(3)
    assert not ctx.is_replica_online(3, TP)
    assert ctx.is_replica_online(3, TP, include_shutting_down=True)
    assert not ctx.is_replica_online(4, TP, include_shutting_down=True)


async def test_offline_selector_skips_a_leader_and_followers_in_failed_log_dirs():
    ctx = _ctx([1, 2, 3], 1, [1, 2, 3], [1, 2, 3])
    ctx.replicas_on_offline_dirs.update({1: {TP}, 2: {TP}})
    new, to = (await _offline(ctx)).select_leader(TP, _current(ctx))
    assert (new.leader, list(new.isr), to) == (3, [3], [3])


async def test_offline_selector_unclean_never_picks_a_replica_in_a_failed_log_dir():
    ctx = _ctx([1, 2, 3], 1, [1], [1, 2, 3])
    ctx.replicas_on_offline_dirs.update({1: {TP}, 2: {TP}})
    selector = await _offline(ctx, unclean={"t"})
    new, to = selector.select_leader(TP, _current(ctx))
    assert (new.leader, list(new.isr), to) == (3, [3], [3])
    ctx.replicas_on_offline_dirs[3] = {TP}
    with pytest.raises(NoReplicaOnlineException):
        selector.select_leader(TP, _current(ctx))


def test_preferred_selector_fails_when_ar0_is_in_a_failed_log_dir():
    ctx = _ctx([1, 2, 3], 2, [1, 2, 3], [1, 2, 3])
    ctx.replicas_on_offline_dirs[1] = {TP}
    with pytest.raises(StateChangeFailedException):
        PreferredReplicaPartitionLeaderSelector(ctx).select_leader(TP, _current(ctx))


def test_reassigned_and_controlled_shutdown_selectors_skip_failed_log_dirs():
    ctx = _ctx([4, 5, 1], 1, [1, 4, 5], [1, 4, 5])
    ctx.partitions_being_reassigned[TP] = ReassignedPartitionsContext([4, 5])
    ctx.replicas_on_offline_dirs[4] = {TP}
    assert ReassignedPartitionLeaderSelector(ctx).select_leader(TP, _current(ctx))[0].leader == 5
    ctx.shutting_down_broker_ids.add(1)
    new, to = ControlledShutdownLeaderSelector(ctx).select_leader(TP, _current(ctx))
    assert (new.leader, to) == (5, [5, 1])
