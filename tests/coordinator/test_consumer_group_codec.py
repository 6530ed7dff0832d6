"""The KIP-848 records of __consumer_offsets: Kafka's byte layout and a lossless round trip."""

from __future__ import annotations

import uuid

from kafkalite.coordinator.group import consumer_group_codec as codec
from kafkalite.coordinator.group.consumer_group import (
    ClassicMember,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    TopicInfo,
)

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def test_group_metadata_record_bytes_are_kafkas() -> None:
    g = ConsumerGroup("g")
    g.group_epoch = 7
    records = codec.group_level_records(g)
    key = codec.encode_key(codec.ConsumerKey(codec.GROUP_METADATA, "g"))
    assert key == b"\x00\x03\x00\x01g"  # version 3, group as an int16-length string
    # value version 0, Epoch int32, no tagged fields
    assert records[key] == b"\x00\x00\x00\x00\x00\x07\x00"
    member_key = codec.encode_key(codec.ConsumerKey(codec.MEMBER_METADATA, "g", "m"))
    assert member_key == b"\x00\x05\x00\x01g\x00\x01m"


def test_a_group_round_trips_through_its_records() -> None:
    g = ConsumerGroup("g")
    g.group_epoch, g.target_assignment_epoch = 5, 5
    g.subscription_metadata = {"a": TopicInfo(T1, "a", 3), "b": TopicInfo(T2, "b", 2)}
    g.update_member(
        ConsumerGroupMember(
            "m1",
            instance_id="i1",
            rack_id="r",
            client_id="c",
            client_host="/h",
            rebalance_timeout_ms=1234,
            subscribed_topic_names=("a", "b"),
            server_assignor="range",
            member_epoch=4,
            previous_member_epoch=3,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned={T1: {0, 1}},
            pending_revocation={T2: {1}},
        )
    )
    g.update_member(
        ConsumerGroupMember(
            "m2",
            subscribed_topic_regex="a.*",
            member_epoch=5,
            assigned={T1: {2}},
            classic=ClassicMember(6000, [("range", b"\x00\x01meta"), ("roundrobin", b"")]),
        )
    )
    g.target_assignment = {"m1": {T1: {0, 1}}, "m2": {T1: {2}, T2: {0, 1}}}
    records = codec.group_records(g)
    back = codec.rebuild("g", records)
    assert back is not None
    assert (back.group_epoch, back.target_assignment_epoch) == (5, 5)
    assert back.subscription_metadata == g.subscription_metadata
    assert back.target_assignment == g.target_assignment
    for mid, m in g.members.items():
        r = back.members[mid]
        for f in (
            "instance_id",
            "rack_id",
            "client_id",
            "client_host",
            "rebalance_timeout_ms",
            "subscribed_topic_names",
            "subscribed_topic_regex",
            "server_assignor",
            "member_epoch",
            "previous_member_epoch",
            "state",
            "assigned",
            "pending_revocation",
            "classic",
        ):
            assert getattr(r, f) == getattr(m, f), f
    assert back.static_members == {"i1": "m1"}
    assert back.partition_epochs == g.partition_epochs
    # tombstones delete: a member's keys, then the group
    gone = dict(records)
    for k in codec.member_keys("g", "m2"):
        gone[k] = None
    assert set(codec.rebuild("g", gone).members) == {"m1"}
    for k in codec.group_keys("g"):
        gone[k] = None
    assert codec.rebuild("g", gone) is None
