"""``kafkalite groups`` for share groups (KIP-932): ``--describe`` shows the members, the
partitions each may read (every member may read every subscribed partition) and per
share partition the start offset (SPSO) and lag, from ShareGroupDescribe (77) and
DescribeShareGroupOffsets (90); ``--reset-offsets`` of an empty share group moves its
start offsets with AlterShareGroupOffsets (91)."""

from __future__ import annotations

import sys

from kafkalite.cli.wire_client import WireClient

SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS = 77, 90


def describe_share_group(coord: WireClient, group: str, members_only: bool) -> int | None:
    """Print the share group; None when ``group`` is not a share group."""
    if SHARE_GROUP_DESCRIBE not in coord.versions:
        return None
    r = coord.call(
        SHARE_GROUP_DESCRIBE,
        coord.version_for(SHARE_GROUP_DESCRIBE, 1),
        {"group_ids": [group], "include_authorized_operations": False},
    )
    g = r.groups[0]
    if g.error_code:
        return None
    print(
        f"GROUP {group}  TYPE share  STATE {g.group_state}  EPOCH {g.group_epoch}  "
        f"ASSIGNOR {g.assignor_name}"
    )
    if members_only:
        print(f"{'CONSUMER-ID':<40} {'HOST':<20} {'CLIENT-ID':<20} ASSIGNMENT")
        for m in g.members:
            a = ",".join(
                f"{tp.topic_name}({','.join(map(str, sorted(tp.partitions)))})"
                for tp in sorted(m.assignment.topic_partitions, key=lambda t: t.topic_name)
            )
            print(f"{m.member_id:<40} {m.client_host:<20} {m.client_id:<20} {a or '-'}")
        return 0
    o = coord.call(
        DESCRIBE_SHARE_GROUP_OFFSETS,
        coord.version_for(DESCRIBE_SHARE_GROUP_OFFSETS, 1),
        {"groups": [{"group_id": group, "topics": None}]},
    )
    print(f"{'TOPIC':<30} {'PARTITION':>9} {'START-OFFSET':>12} {'LAG':>8} MEMBERS")
    for t in sorted(o.groups[0].topics, key=lambda t: t.topic_name):
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            readers = sum(
                1
                for m in g.members
                for tp in m.assignment.topic_partitions
                if tp.topic_name == t.topic_name and p.partition_index in tp.partitions
            )
            lag = getattr(p, "lag", -1)
            print(
                f"{t.topic_name:<30} {p.partition_index:>9} {p.start_offset:>12} "
                f"{lag if lag >= 0 else '-':>8} {readers}"
            )
    return 0


ALTER_SHARE_GROUP_OFFSETS = 91


def is_share_group(coord: WireClient, group: str) -> tuple[bool, bool]:
    """(a share group, it has members)."""
    if SHARE_GROUP_DESCRIBE not in coord.versions:
        return False, False
    r = coord.call(
        SHARE_GROUP_DESCRIBE,
        coord.version_for(SHARE_GROUP_DESCRIBE, 1),
        {"group_ids": [group], "include_authorized_operations": False},
    )
    g = r.groups[0]
    return (not g.error_code, bool(g.members))


def reset_share_offsets(coord: WireClient, group: str, target: dict[tuple[str, int], int]) -> int:
    """AlterShareGroupOffsets: the share partitions start at ``target``."""
    topics: dict[str, list[dict[str, int]]] = {}
    for (t, p), off in target.items():
        topics.setdefault(t, []).append({"partition_index": p, "start_offset": off})
    r = coord.call(
        ALTER_SHARE_GROUP_OFFSETS,
        coord.version_for(ALTER_SHARE_GROUP_OFFSETS, 0),
        {
            "group_id": group,
            "topics": [{"topic_name": t, "partitions": ps} for t, ps in topics.items()],
        },
    )
    if r.error_code:
        print(f"Error: {r.error_code.name} {r.error_message or ''}".rstrip(), file=sys.stderr)
        return 1
    failed = [
        (t.topic_name, p.partition_index, p.error_code.name)
        for t in r.responses
        for p in t.partitions
        if p.error_code
    ]
    for t, p, e in failed:
        print(f"Error: {t}-{p}: {e}", file=sys.stderr)
    return 1 if failed else 0
