"""DescribeGroups, ListGroups, DeleteGroups and OffsetDelete over the wire."""

from __future__ import annotations

from kafkalite.coordinator.group import OFFSETS_TOPIC
from kafkalite.coordinator.group import offset_codec as codec
from kafkalite.protocol.errors import ErrorCode
from tests.coordinator.group_helpers import (
    DELETE,
    DESCRIBE,
    LIST,
    OFFSET_DELETE,
    Member,
    commit,
    fetch,
    find_coordinator,
    subscription,
)
from tests.coordinator.wire import Wire

SIMPLE = {
    "generation_id_or_member_epoch": -1,
    "member_id": "",
    "group_instance_id": None,
    "retention_time": -1,
}


async def stable_member(broker, group: str, topics: tuple[str, ...] = ("t",)) -> Member:
    w = await Wire.connect(broker.bootstrap_servers, client_id="describe-me")
    await find_coordinator(w, group)
    m = Member(w, group, protocols=[("range", subscription(*topics))])
    await m.join()
    await m.sync({m.member_id: b"assignment"})
    return m


async def test_describe_stable_group_and_missing_group(broker) -> None:
    m = await stable_member(broker, "described")
    r = await m.wire.call(
        DESCRIBE, 5, {"groups": ["described", "missing"], "include_authorized_operations": True}
    )
    g, missing = r.groups
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (
        ErrorCode.none,
        "Stable",
        "consumer",
        "range",
    )
    [member] = g.members
    assert (member.member_id, member.client_id, member.client_host) == (
        m.member_id,
        "describe-me",
        "/127.0.0.1",
    )
    assert member.member_metadata == subscription("t") and member.member_assignment == b"assignment"
    assert g.authorized_operations > 0
    assert (missing.error_code, missing.group_state, missing.members) == (
        ErrorCode.none,
        "Dead",
        (),
    )
    r6 = await m.wire.call(
        DESCRIBE, 6, {"groups": ["missing"], "include_authorized_operations": False}
    )
    assert r6.groups[0].error_code == ErrorCode.group_id_not_found and r6.groups[0].error_message


async def test_list_groups_with_state_and_type_filters(broker) -> None:
    await broker.create_topic("t", partitions=1)
    m = await stable_member(broker, "listed-stable")
    await commit(m.wire, {"group_id": "listed-simple", **SIMPLE}, {("t", 0): 1})
    r = await m.wire.call(LIST, 3, {})
    assert {(g.group_id, g.protocol_type) for g in r.groups} >= {
        ("listed-stable", "consumer"),
        ("listed-simple", ""),
    }
    r = await m.wire.call(LIST, 4, {"states_filter": ["stable"]})
    assert [(g.group_id, g.group_state) for g in r.groups] == [("listed-stable", "Stable")]
    r = await m.wire.call(LIST, 5, {"states_filter": [], "types_filter": ["classic"]})
    assert {g.group_type for g in r.groups} == {"classic"} and len(r.groups) == 2
    r = await m.wire.call(LIST, 5, {"states_filter": [], "types_filter": ["consumer"]})
    assert r.groups == ()


async def test_delete_groups(broker) -> None:
    await broker.create_topic("t", partitions=1)
    m = await stable_member(broker, "busy")
    await commit(m.wire, {"group_id": "idle", **SIMPLE}, {("t", 0): 5})
    r = await m.wire.call(DELETE, 2, {"groups_names": ["busy", "idle", "ghost"]})
    assert [(x.group_id, x.error_code) for x in r.results] == [
        ("busy", ErrorCode.non_empty_group),
        ("idle", ErrorCode.none),
        ("ghost", ErrorCode.group_id_not_found),
    ]
    assert (await fetch(m.wire, "idle", {"t": [0]}))[1][("t", 0)][0] == -1
    records = broker.records(OFFSETS_TOPIC, codec.partition_for("idle", 4))
    tail = [(codec.decode_key(r.key), r.value) for r in records][-2:]
    assert tail == [
        (codec.OffsetCommitKey("idle", "t", 0), None),
        (codec.GroupMetadataKey("idle"), None),
    ]


async def test_offset_delete(broker) -> None:
    await broker.create_topic("t", partitions=2)
    await broker.create_topic("other", partitions=1)
    m = await stable_member(broker, "od", topics=("t",))
    await m.commit({("t", 0): 1, ("other", 0): 2})

    def req(group: str, topics: dict[str, list[int]]) -> dict:
        return {
            "group_id": group,
            "topics": [
                {"name": t, "partitions": [{"partition_index": p} for p in ps]}
                for t, ps in topics.items()
            ],
        }

    r = await m.wire.call(OFFSET_DELETE, 0, req("od", {"t": [0], "other": [0], "gone": [0]}))
    errors = {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}
    assert r.error_code == ErrorCode.none
    assert errors == {
        ("t", 0): ErrorCode.group_subscribed_to_topic,
        ("other", 0): ErrorCode.none,
        ("gone", 0): ErrorCode.unknown_topic_or_partition,
    }
    _, got = await fetch(m.wire, "od", {"t": [0], "other": [0]})
    assert got[("t", 0)][0] == 1 and got[("other", 0)][0] == -1
    await m.leave()
    r = await m.wire.call(OFFSET_DELETE, 0, req("od", {"t": [0]}))
    assert r.topics[0].partitions[0].error_code == ErrorCode.none
    assert (
        await m.wire.call(OFFSET_DELETE, 0, req("nope", {"t": [0]}))
    ).error_code == ErrorCode.group_id_not_found
