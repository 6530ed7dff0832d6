"""``kafkalite groups``: list, describe and reset the offsets of consumer groups of both
types (classic and consumer), as ``kafka-consumer-groups.sh`` does; share groups are
listed and described too (members, start offsets and lag: :mod:`share_groups`).

kafkalite groups --bootstrap-server HOST:PORT --list [--type classic|consumer|share] [--state S]
kafkalite groups --bootstrap-server HOST:PORT --describe --group G [--members]
kafkalite groups --bootstrap-server HOST:PORT --reset-offsets --group G --topic T[:P,P]
                 (--to-earliest | --to-latest | --to-offset N | --to-datetime ISO)
                 [--dry-run | --execute]
"""

from __future__ import annotations

import argparse
import datetime
import sys
from typing import Any

from kafkalite.cli.share_groups import describe_share_group, is_share_group, reset_share_offsets
from kafkalite.cli.wire_client import WireClient
from kafkalite.coordinator.group.consumer_protocol import assigned_partitions

LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 2, 3, 8, 9, 10
DESCRIBE_GROUPS, LIST_GROUPS, CG_DESCRIBE = 15, 16, 69
EARLIEST, LATEST = -2, -1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", required=True)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--list", action="store_true")
    g.add_argument("--describe", action="store_true")
    g.add_argument("--reset-offsets", action="store_true")
    p.add_argument("--group")
    p.add_argument(
        "--type", choices=("classic", "consumer", "share"), help="--list: only this type"
    )
    p.add_argument("--state", help="--list: only groups in this state")
    p.add_argument("--members", action="store_true", help="--describe: members, not offsets")
    p.add_argument("--topic", action="append", help="--reset-offsets: TOPIC or TOPIC:P,P")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int)
    to.add_argument("--to-datetime", help="ISO 8601, e.g. 2026-01-31T12:00:00.000Z")
    p.add_argument("--execute", action="store_true")
    p.add_argument("--dry-run", action="store_true")


class _Cluster:
    """Connections to the bootstrap broker, the group's coordinator and partition leaders."""

    def __init__(self, bootstrap: str) -> None:
        self.boot = WireClient(bootstrap)
        self._clients: dict[int, WireClient] = {}
        md = self.boot.call(METADATA, self.boot.version_for(METADATA, 12), {"topics": None})
        self.brokers = {b.node_id: f"{b.host}:{b.port}" for b in md.brokers}
        self.leaders = {
            (t.name, p.partition_index): p.leader_id for t in md.topics for p in t.partitions
        }
        self.partitions = {
            t.name: sorted(p.partition_index for p in t.partitions) for t in md.topics
        }

    def broker(self, node: int) -> WireClient:
        if node not in self._clients:
            self._clients[node] = WireClient(self.brokers[node])
        return self._clients[node]

    def coordinator(self, group: str) -> WireClient:
        r = self.boot.call(
            FIND_COORDINATOR,
            self.boot.version_for(FIND_COORDINATOR, 4),
            {"key_type": 0, "coordinator_keys": [group], "key": group},
        )
        c = r.coordinators[0] if hasattr(r, "coordinators") else r
        if c.error_code:
            raise RuntimeError(f"no coordinator for group {group}: {c.error_code.name}")
        return self.broker(c.node_id)

    def list_offsets(
        self, tps: list[tuple[str, int]], timestamp: int
    ) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for tp in tps:
            by_leader.setdefault(self.leaders.get(tp, -1), []).append(tp)
        for leader, group in by_leader.items():
            if leader < 0:
                continue
            c = self.broker(leader)
            topics: dict[str, list[dict[str, Any]]] = {}
            for t, p in group:
                topics.setdefault(t, []).append(
                    {"partition_index": p, "timestamp": timestamp, "current_leader_epoch": -1}
                )
            r = c.call(
                LIST_OFFSETS,
                c.version_for(LIST_OFFSETS, 7),
                {
                    "replica_id": -1,
                    "isolation_level": 0,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                },
            )
            for t in r.topics:
                for p in t.partitions:
                    if not p.error_code:
                        out[(t.name, p.partition_index)] = int(p.offset)
        return out

    def close(self) -> None:
        for c in [self.boot, *self._clients.values()]:
            c.close()


def _committed(coord: WireClient, group: str) -> tuple[int, dict[tuple[str, int], int]]:
    r = coord.call(
        OFFSET_FETCH,
        coord.version_for(OFFSET_FETCH, 8),
        {
            "groups": [{"group_id": group, "topics": None, "member_id": None, "member_epoch": -1}],
            "require_stable": False,
        },
    )
    g = r.groups[0]
    return int(g.error_code), {
        (t.name, p.partition_index): int(p.committed_offset)
        for t in g.topics
        for p in t.partitions
        if p.committed_offset >= 0
    }


def _describe(coord: WireClient, group: str) -> dict[str, Any] | None:
    """The group as {type, state, members: [(member, instance, client, host, {topic: [p]})]}."""
    if CG_DESCRIBE in coord.versions:
        r = coord.call(
            CG_DESCRIBE,
            coord.version_for(CG_DESCRIBE, 1),
            {"group_ids": [group], "include_authorized_operations": False},
        )
        g = r.groups[0]
        if not g.error_code:
            members = []
            for m in g.members:
                parts: dict[str, list[int]] = {}
                for tp in m.assignment.topic_partitions:
                    parts.setdefault(tp.topic_name, []).extend(tp.partitions)
                members.append((m.member_id, m.instance_id, m.client_id, m.client_host, parts))
            return {
                "type": "consumer",
                "state": g.group_state,
                "epoch": g.group_epoch,
                "assignor": g.assignor_name,
                "members": members,
            }
    r = coord.call(
        DESCRIBE_GROUPS,
        coord.version_for(DESCRIBE_GROUPS, 5),
        {"groups": [group], "include_authorized_operations": False},
    )
    g = r.groups[0]
    if g.error_code or g.group_state == "Dead":
        return None
    members = []
    for m in g.members:
        parts = assigned_partitions(bytes(m.member_assignment)) or {}
        members.append((m.member_id, m.group_instance_id, m.client_id, m.client_host, parts))
    return {
        "type": "classic",
        "state": g.group_state,
        "epoch": None,
        "assignor": g.protocol_data,
        "members": members,
    }


def _list(cluster: _Cluster, args: argparse.Namespace) -> int:
    rows = []
    for node in sorted(cluster.brokers):
        c = cluster.broker(node)
        r = c.call(
            LIST_GROUPS,
            c.version_for(LIST_GROUPS, 5),
            {
                "states_filter": [args.state] if args.state else [],
                "types_filter": [args.type] if args.type else [],
            },
        )
        rows += [(g.group_id, g.group_type or "classic", g.group_state) for g in r.groups]
    print(f"{'GROUP':<40} {'TYPE':<10} STATE")
    for gid, typ, state in sorted(rows):
        print(f"{gid:<40} {typ:<10} {state}")
    return 0


def _describe_cmd(cluster: _Cluster, args: argparse.Namespace) -> int:
    coord = cluster.coordinator(args.group)
    shared = describe_share_group(coord, args.group, args.members)
    if shared is not None:
        return shared
    d = _describe(coord, args.group)
    error, committed = _committed(coord, args.group)
    if d is None and not committed:
        print(f"Error: Consumer group '{args.group}' does not exist.", file=sys.stderr)
        return 1
    if d is None:
        d = {"type": "classic", "state": "Empty", "epoch": None, "assignor": "", "members": []}
    print(
        f"GROUP {args.group}  TYPE {d['type']}  STATE {d['state']}"
        + (f"  EPOCH {d['epoch']}  ASSIGNOR {d['assignor']}" if d["epoch"] is not None else "")
    )
    owner: dict[tuple[str, int], tuple[str, str, str]] = {}
    for mid, _inst, client, host, parts in d["members"]:
        for t, ps in parts.items():
            for p in ps:
                owner[(t, p)] = (mid, host, client)
    if args.members:
        print(
            f"{'CONSUMER-ID':<40} {'GROUP-INSTANCE-ID':<20} {'HOST':<20} {'CLIENT-ID':<20} ASSIGNMENT"
        )
        for mid, inst, client, host, parts in d["members"]:
            a = ",".join(
                f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(parts.items())
            )
            print(f"{mid:<40} {inst or '-':<20} {host:<20} {client:<20} {a or '-'}")
        return 0
    tps = sorted(set(committed) | set(owner))
    ends = cluster.list_offsets(tps, LATEST)
    print(
        f"{'TOPIC':<30} {'PARTITION':>9} {'CURRENT-OFFSET':>14} {'LOG-END-OFFSET':>14} "
        f"{'LAG':>6} {'CONSUMER-ID':<40} {'HOST':<16} CLIENT-ID"
    )
    for tp in tps:
        cur = committed.get(tp)
        end = ends.get(tp)
        lag = "-" if cur is None or end is None else str(max(end - cur, 0))
        mid, host, client = owner.get(tp, ("-", "-", "-"))
        print(
            f"{tp[0]:<30} {tp[1]:>9} {cur if cur is not None else '-':>14} "
            f"{end if end is not None else '-':>14} {lag:>6} {mid:<40} {host:<16} {client}"
        )
    return 0


def _parse_datetime(s: str) -> int:
    d = datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
    if d.tzinfo is None:
        d = d.replace(tzinfo=datetime.UTC)
    return int(d.timestamp() * 1000)


def _reset(cluster: _Cluster, args: argparse.Namespace) -> int:
    if not args.topic:
        print("--reset-offsets needs --topic", file=sys.stderr)
        return 2
    tps: list[tuple[str, int]] = []
    for spec in args.topic:
        name, _, parts = spec.partition(":")
        if name not in cluster.partitions:
            print(f"Error: topic {name} does not exist", file=sys.stderr)
            return 1
        ps = [int(p) for p in parts.split(",")] if parts else cluster.partitions[name]
        tps += [(name, p) for p in ps]
    coord = cluster.coordinator(args.group)
    share, busy = is_share_group(coord, args.group)
    d = None if share else _describe(coord, args.group)
    if busy or (d is not None and d["members"]):
        print(
            f"Error: Assignments can only be reset if the group '{args.group}' is inactive, "
            f"but the current state is {'Stable' if busy or d is None else d['state']}.",
            file=sys.stderr,
        )
        return 1
    if args.to_offset is not None:
        lo, hi = cluster.list_offsets(tps, EARLIEST), cluster.list_offsets(tps, LATEST)
        target = {tp: min(max(args.to_offset, lo.get(tp, 0)), hi.get(tp, 0)) for tp in tps}
    elif args.to_datetime:
        target = cluster.list_offsets(tps, _parse_datetime(args.to_datetime))
        latest = cluster.list_offsets(tps, LATEST)
        target = {tp: target[tp] if target.get(tp, -1) >= 0 else latest.get(tp, 0) for tp in tps}
    elif args.to_latest:
        target = cluster.list_offsets(tps, LATEST)
    elif args.to_earliest:
        target = cluster.list_offsets(tps, EARLIEST)
    else:
        print("choose --to-earliest, --to-latest, --to-offset or --to-datetime", file=sys.stderr)
        return 2
    print(f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':>9} NEW-OFFSET")
    for tp in tps:
        print(f"{args.group:<30} {tp[0]:<30} {tp[1]:>9} {target.get(tp, '-')}")
    if not args.execute:
        return 0
    if share:
        return reset_share_offsets(coord, args.group, target)
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), off in target.items():
        topics.setdefault(t, []).append(
            {
                "partition_index": p,
                "committed_offset": off,
                "committed_leader_epoch": -1,
                "committed_metadata": "",
            }
        )
    r = coord.call(
        OFFSET_COMMIT,
        coord.version_for(OFFSET_COMMIT, 9),
        {
            "group_id": args.group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "retention_time": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        },
    )
    failed = [
        (t.name, p.partition_index, p.error_code.name)
        for t in r.topics
        for p in t.partitions
        if p.error_code
    ]
    for t, p, e in failed:
        print(f"Error: {t}-{p}: {e}", file=sys.stderr)
    return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    if (args.describe or args.reset_offsets) and not args.group:
        print("--group is required", file=sys.stderr)
        return 2
    cluster = _Cluster(args.bootstrap_server)
    try:
        if args.list:
            return _list(cluster, args)
        if args.describe:
            return _describe_cmd(cluster, args)
        return _reset(cluster, args)
    finally:
        cluster.close()
