"""OffsetCommit / OffsetFetch: validation order, storage in __consumer_offsets, reload, expiry."""

from __future__ import annotations

import asyncio

from kafkalite.coordinator.group import OFFSETS_TOPIC
from kafkalite.coordinator.group import offset_codec as codec
from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing.embedded_broker import AsyncBroker
from tests.coordinator.group_helpers import COMMIT, FETCH, Member, commit, fetch, find_coordinator
from tests.coordinator.wire import Wire

SIMPLE = {
    "generation_id_or_member_epoch": -1,
    "member_id": "",
    "group_instance_id": None,
    "retention_time": -1,
}


async def setup(broker: AsyncBroker, group: str, topic: str = "t", partitions: int = 3) -> Wire:
    await broker.create_topic(topic, partitions=partitions)
    w = await Wire.connect(broker.bootstrap_servers)
    await find_coordinator(w, group)
    return w


def offsets_records(broker: AsyncBroker, group: str) -> list[tuple[object, bytes | None]]:
    p = codec.partition_for(group, 4)
    return [(codec.decode_key(r.key), r.value) for r in broker.records(OFFSETS_TOPIC, p)]


async def test_simple_commit_then_fetch_and_last_commit_wins(broker) -> None:
    w = await setup(broker, "simple")
    body = {"group_id": "simple", **SIMPLE}
    assert await commit(w, body, {("t", 0): (10, "m0"), ("t", 1): 5}) == {
        ("t", 0): ErrorCode.none,
        ("t", 1): ErrorCode.none,
    }
    error, got = await fetch(w, "simple", {"t": [0, 1, 2]})
    assert error == ErrorCode.none
    assert got == {("t", 0): (10, "m0", 0), ("t", 1): (5, "", 0), ("t", 2): (-1, "", 0)}
    await commit(w, body, {("t", 0): 3})  # lower offsets are fine: last commit wins
    assert (await fetch(w, "simple", {"t": [0]}))[1][("t", 0)][0] == 3


async def test_every_commit_is_a_record_in_the_groups_offsets_partition(broker) -> None:
    w = await setup(broker, "recorded")
    await commit(w, {"group_id": "recorded", **SIMPLE}, {("t", 2): (77, "meta")})
    key, value = offsets_records(broker, "recorded")[-1]
    assert key == codec.OffsetCommitKey("recorded", "t", 2)
    v = codec.decode_offset_commit_value(value)
    assert (v.offset, v.metadata, v.leader_epoch, v.expire_timestamp) == (77, "meta", -1, -1)
    assert value[:2] == b"\x00\x03"


async def test_retention_time_is_kept_in_a_v1_value(broker) -> None:
    w = await setup(broker, "retained")
    await commit(
        w, {"group_id": "retained", **SIMPLE, "retention_time": 60000}, {("t", 0): 1}, version=2
    )
    _, value = offsets_records(broker, "retained")[-1]
    v = codec.decode_offset_commit_value(value)
    assert value[:2] == b"\x00\x01" and v.expire_timestamp == v.commit_timestamp + 60000


async def test_null_metadata_fetches_as_empty_and_oversized_metadata_fails_alone(broker) -> None:
    w = await setup(broker, "meta")
    body = {"group_id": "meta", **SIMPLE}
    errors = await commit(
        w, body, {("t", 0): (1, None), ("t", 1): (2, "x" * 4097), ("t", 2): (3, "x" * 4096)}
    )
    assert errors == {
        ("t", 0): ErrorCode.none,
        ("t", 1): ErrorCode.offset_metadata_too_large,
        ("t", 2): ErrorCode.none,
    }
    _, got = await fetch(w, "meta", {"t": [0, 1, 2]})
    assert got[("t", 0)] == (1, "", 0) and got[("t", 1)][0] == -1 and got[("t", 2)][0] == 3


async def test_commit_to_unknown_topic_or_partition(broker) -> None:
    w = await setup(broker, "unknown-topic", partitions=1)
    errors = await commit(
        w, {"group_id": "unknown-topic", **SIMPLE}, {("nope", 0): 1, ("t", 5): 1, ("t", 0): 1}
    )
    assert errors == {
        ("nope", 0): ErrorCode.unknown_topic_or_partition,
        ("t", 5): ErrorCode.unknown_topic_or_partition,
        ("t", 0): ErrorCode.none,
    }


async def test_fetch_all_topics_and_the_old_versions(broker) -> None:
    w = await setup(broker, "all")
    await broker.create_topic("u", partitions=1)
    await commit(w, {"group_id": "all", **SIMPLE}, {("t", 1): 4, ("u", 0): 9})
    for version in (2, 5, 7, 8, 9):
        error, got = await fetch(w, "all", None, version=version)
        assert error == ErrorCode.none
        assert {k: v[0] for k, v in got.items()} == {("t", 1): 4, ("u", 0): 9}
    _, got = await fetch(w, "all", {"t": [1]}, version=1)
    assert got == {("t", 1): (4, "", 0)}
    _, nothing = await fetch(w, "no-commits", None)
    assert nothing == {}


async def test_topic_ids_in_offset_commit_and_fetch_v10(broker) -> None:
    w = await setup(broker, "by-id")
    topic_id = broker.broker.metadata_cache.get_topic("t").topic_id
    r = await w.call(
        COMMIT,
        10,
        {
            "group_id": "by-id",
            **SIMPLE,
            "topics": [
                {
                    "topic_id": topic_id,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 12,
                            "committed_leader_epoch": 3,
                            "committed_metadata": "x",
                        }
                    ],
                }
            ],
        },
    )
    assert (
        r.topics[0].topic_id == topic_id and r.topics[0].partitions[0].error_code == ErrorCode.none
    )
    f = await w.call(
        FETCH,
        10,
        {
            "groups": [
                {
                    "group_id": "by-id",
                    "member_id": None,
                    "member_epoch": -1,
                    "topics": [{"topic_id": topic_id, "partition_indexes": [0]}],
                }
            ],
            "require_stable": False,
        },
    )
    p = f.groups[0].topics[0].partitions[0]
    assert (p.committed_offset, p.committed_leader_epoch, p.metadata) == (12, 3, "x")
    _, by_name = await fetch(w, "by-id", {"t": [0]})
    assert by_name[("t", 0)] == (12, "x", 0)


async def test_member_commit_validation_order(broker) -> None:
    w = await setup(broker, "members")
    m = Member(w, "members")
    await m.join()
    # awaiting sync: the member has the generation but not its assignment
    assert await m.commit({("t", 0): 1}) == {("t", 0): ErrorCode.rebalance_in_progress}
    await m.sync({m.member_id: b""})
    assert await m.commit({("t", 0): 2}) == {("t", 0): ErrorCode.none}
    gen = m.generation
    m.generation = gen - 1
    assert await m.commit({("t", 0): 3}) == {("t", 0): ErrorCode.illegal_generation}
    m.generation, m.member_id = gen, "ghost"
    assert await m.commit({("t", 0): 3}) == {("t", 0): ErrorCode.unknown_member_id}
    # generation -1 from outside the group is refused while the group has members
    plain = await commit(w, {"group_id": "members", **SIMPLE}, {("t", 0): 4})
    assert plain == {("t", 0): ErrorCode.unknown_member_id}
    # a generation for a group that does not exist
    gone = {"group_id": "nobody", **SIMPLE, "generation_id_or_member_epoch": 1, "member_id": "x"}
    assert await commit(w, gone, {("t", 0): 1}, version=8) == {
        ("t", 0): ErrorCode.illegal_generation
    }
    assert await commit(w, gone, {("t", 0): 1}, version=9) == {
        ("t", 0): ErrorCode.group_id_not_found
    }


async def test_another_member_fetches_the_previous_owners_commits(broker) -> None:
    w = await setup(broker, "handover")
    a = Member(w, "handover")
    await a.join()
    await a.sync({a.member_id: b""})
    await a.commit({("t", 0): 40, ("t", 1): 41})
    await a.leave()
    w2 = await Wire.connect(broker.bootstrap_servers)
    b = Member(w2, "handover")
    await b.join()
    await b.sync({b.member_id: b""})
    _, got = await fetch(w2, "handover", {"t": [0, 1]})
    assert {k: v[0] for k, v in got.items()} == {("t", 0): 40, ("t", 1): 41}


async def test_not_coordinator_and_load_in_progress(broker) -> None:
    w = await setup(broker, "moving")
    coordinator = broker.broker.group_coordinator
    p = coordinator.manager.partition_for("moving")
    await commit(w, {"group_id": "moving", **SIMPLE}, {("t", 0): 8})
    coordinator.on_leadership_change((OFFSETS_TOPIC, p), False)
    assert await commit(w, {"group_id": "moving", **SIMPLE}, {("t", 0): 9}) == {
        ("t", 0): ErrorCode.not_coordinator
    }
    assert (await fetch(w, "moving", {"t": [0]}))[0] == ErrorCode.not_coordinator
    coordinator.manager.loading_partitions.add(p)
    assert (await fetch(w, "moving", {"t": [0]}))[0] == ErrorCode.coordinator_load_in_progress
    assert (await fetch(w, "moving", {"t": [0]}, version=1))[1][("t", 0)][
        2
    ] == ErrorCode.coordinator_load_in_progress
    coordinator.manager.loading_partitions.discard(p)
    # becoming leader again reloads the partition from the log
    coordinator.on_leadership_change((OFFSETS_TOPIC, p), True)
    for _ in range(100):
        if p in coordinator.manager.owned_partitions:
            break
        await asyncio.sleep(0.01)
    assert (await fetch(w, "moving", {"t": [0]}))[1][("t", 0)][0] == 8


async def test_offsets_and_groups_survive_a_restart_and_tombstones_stay_deleted(tmp_path) -> None:
    b = AsyncBroker(tmp_path)
    await b.start()
    try:
        w = await setup(b, "durable")
        await commit(
            w, {"group_id": "durable", **SIMPLE}, {("t", 0): 11, ("t", 1): 12, ("t", 2): 13}
        )
        await commit(w, {"group_id": "durable", **SIMPLE}, {("t", 0): 21})
        m = Member(w, "joined")
        await m.join()
        await m.sync({m.member_id: b"assigned"})
        await m.commit({("t", 2): 5})
        r = await w.call(
            47,
            0,
            {
                "group_id": "durable",
                "topics": [{"name": "t", "partitions": [{"partition_index": 1}]}],
            },
        )
        assert r.error_code == ErrorCode.none
        await w.close()
        await b.restart()
        w = await Wire.connect(b.bootstrap_servers)
        await find_coordinator(w, "durable")
        for _ in range(100):
            error, got = await fetch(w, "durable", {"t": [0, 1, 2]})
            if error != ErrorCode.coordinator_load_in_progress:
                break
            await asyncio.sleep(0.01)
        assert {k: v[0] for k, v in got.items()} == {("t", 0): 21, ("t", 1): -1, ("t", 2): 13}
        group = b.broker.group_coordinator.manager.get_group("joined")
        assert group.generation_id == 1 and group.state.value == "Stable"
        assert [mm.assignment for mm in group.members.values()] == [b"assigned"]
        assert (await fetch(w, "joined", {"t": [2]}))[1][("t", 2)][0] == 5
        await w.close()
    finally:
        await b.stop()


async def test_expired_offsets_are_removed_and_tombstoned(broker) -> None:
    w = await setup(broker, "old")
    await commit(w, {"group_id": "old", **SIMPLE}, {("t", 0): 1})
    manager = broker.broker.group_coordinator.manager
    now = broker.broker.clock_ms()
    assert await manager.cleanup_group_metadata(now) == 0
    assert await manager.cleanup_group_metadata(now + manager.config.offsets_retention_ms + 1) == 1
    assert (await fetch(w, "old", {"t": [0]}))[1][("t", 0)][0] == -1
    tail = offsets_records(broker, "old")[-2:]
    assert tail == [
        (codec.OffsetCommitKey("old", "t", 0), None),
        (codec.GroupMetadataKey("old"), None),
    ]
    assert manager.get_group("old") is None
