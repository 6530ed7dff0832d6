"""``kafkalite consumer-groups``: Kafka's ``kafka-consumer-groups.sh``
(ConsumerGroupCommand) on confluent-kafka's AdminClient: --list, --describe
(--offsets, --members [--verbose], --state), --delete, --reset-offsets,
--delete-offsets (kafka-python's admin: confluent-kafka's has no OffsetDelete).

Columns and widths are ConsumerGroupCommand's (``%-Ns`` widths grown to the longest
value; every table starts with a blank line, as Kafka's ``%n``-first formats do).
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
import time
from typing import Any

from kafkalite.cli.common import (
    CliError,
    add_bootstrap,
    admin,
    error_text,
    kadmin,
    parse_tp_list,
    result,
    timeout_kw,
)

MISSING = "-"
#: librdkafka's state names -> Kafka's ConsumerGroupState.toString()
_STATES = {
    "UNKNOWN": "Unknown",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "STABLE": "Stable",
    "DEAD": "Dead",
    "EMPTY": "Empty",
}
_TYPES = {"UNKNOWN": "Unknown", "CONSUMER": "Consumer", "CLASSIC": "Classic"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--list", action="store_true")
    g.add_argument("--describe", action="store_true")
    g.add_argument("--delete", action="store_true")
    g.add_argument("--reset-offsets", action="store_true")
    g.add_argument("--delete-offsets", action="store_true")
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--all-groups", action="store_true")
    p.add_argument("--topic", action="append", default=[], help="TOPIC or TOPIC:P,P")
    p.add_argument("--all-topics", action="store_true")
    p.add_argument("--members", action="store_true")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--offsets", action="store_true")
    p.add_argument(
        "--state", nargs="?", const="", help="--describe: the group's state; --list: filter"
    )
    p.add_argument("--type", nargs="?", const="", help="--list: filter by classic,consumer")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-current", action="store_true")
    to.add_argument("--to-offset", type=int)
    to.add_argument("--to-datetime", help="YYYY-MM-DDTHH:mm:SS.sss[+HH:MM|Z]")
    to.add_argument("--by-duration", help="ISO 8601 duration, e.g. PT10M, P1DT2H")
    to.add_argument("--shift-by", type=int)
    to.add_argument("--from-file", help="CSV of topic,partition,offset (group,... for several)")
    p.add_argument("--execute", action="store_true")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--export", action="store_true", help="--reset-offsets: print CSV")
    p.add_argument("--timeout", type=int, default=5000, help="ms (accepted for compatibility)")


def run(args: argparse.Namespace) -> int:
    a = admin(args)
    if args.list:
        return _list(a, args)
    groups = list(args.group)
    if args.all_groups:
        groups = sorted(x.group_id for x in _listings(a, None, None))
    if not groups:
        raise CliError("Option --group (or --all-groups) is required", 2)
    if args.describe:
        return _describe(a, args, groups)
    if args.delete:
        return _delete(a, groups)
    if args.reset_offsets:
        return _reset(a, args, groups)
    return _delete_offsets(a, args, groups)


def _state(s: Any) -> str:
    name = getattr(s, "name", str(s))
    return _STATES.get(name, name.title())


def _listings(a: Any, states: set[str] | None, types: set[str] | None) -> list[Any]:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType

    kw: dict[str, Any] = dict(timeout_kw())
    if states:
        rev = {v.lower(): k for k, v in _STATES.items()}
        try:
            kw["states"] = {ConsumerGroupState[rev[s.lower()]] for s in states}
        except KeyError:
            raise CliError(
                f"unknown state in {sorted(states)}; known: {sorted(_STATES.values())}", 2
            ) from None
    if types:
        try:
            kw["types"] = {ConsumerGroupType[t.upper()] for t in types}
        except KeyError:
            raise CliError(f"unknown type in {sorted(types)}: classic, consumer", 2) from None
    r = result(a.list_consumer_groups(**kw), "list groups")
    if r.errors:
        raise CliError(error_text(r.errors[0]))
    return list(r.valid)


def _csv(v: str | None) -> set[str]:
    return {x.strip() for x in (v or "").split(",") if x.strip()}


def _list(a: Any, args: argparse.Namespace) -> int:
    with_state, with_type = args.state is not None, args.type is not None
    rows = sorted(_listings(a, _csv(args.state), _csv(args.type)), key=lambda x: x.group_id)
    if not (with_state or with_type):
        for x in rows:
            print(x.group_id)
        return 0
    width = max([15, *(len(x.group_id) for x in rows)]) + 10
    fmt = f"%-{width}s" + (" %-20s" if with_type else "") + (" %-20s" if with_state else "")
    header = ["GROUP", *(["TYPE"] if with_type else []), *(["STATE"] if with_state else [])]
    print(fmt % tuple(header))
    for x in rows:
        vals = [x.group_id]
        if with_type:
            vals.append(_TYPES.get(getattr(x.type, "name", ""), "Unknown"))
        if with_state:
            vals.append(_state(x.state))
        print(fmt % tuple(vals))
    return 0


def _describe_groups(a: Any, groups: list[str]) -> dict[str, Any]:
    return {
        g: result(f, f"describe group {g}")
        for g, f in a.describe_consumer_groups(groups, **timeout_kw()).items()
    }


def _committed(a: Any, group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    f = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], **timeout_kw())
    r = result(f[group], f"offsets of group {group}")
    return {
        (tp.topic, tp.partition): tp.offset for tp in r.topic_partitions or () if tp.offset >= 0
    }


def _offsets(a: Any, tps: list[tuple[str, int]], spec: Any) -> dict[tuple[str, int], int]:
    from confluent_kafka import TopicPartition

    if not tps:
        return {}
    fs = a.list_offsets({TopicPartition(t, p): spec for t, p in tps}, **timeout_kw())
    out = {}
    for tp, f in fs.items():
        try:
            out[(tp.topic, tp.partition)] = f.result(timeout=timeout_kw()["request_timeout"]).offset
        except Exception:
            continue  # a partition without a leader: shown as "-"
    return out


def _check_state(group: str, state: str, rows: int | None) -> bool:
    """ConsumerGroupCommand.shouldPrintMemberState: the messages and whether to print."""
    if rows is None or state == "Dead":
        print(f"\nError: Consumer group '{group}' does not exist.")
        return False
    if state == "Empty":
        print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
    elif state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
    return rows > 0


def _describe(a: Any, args: argparse.Namespace, groups: list[str]) -> int:
    descs = _describe_groups(a, groups)
    missing = 0
    for g in groups:
        d = descs[g]
        state = _state(d.state)
        if args.state is not None:
            if not _check_state(g, state, 1):
                missing += 1
                continue
            coord = f"{d.coordinator.host}:{d.coordinator.port}  ({d.coordinator.id})"
            fmt = f"\n%-{max(25, len(coord))}s %-25s %-20s %-15s %s"
            print(
                fmt % ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                end="",
            )
            print(fmt % (g, coord, d.partition_assignor or "", state, len(d.members)))
        elif args.members:
            if not _describe_members(g, d, state, args.verbose):
                missing += 1
        else:
            if not _describe_offsets(a, g, d, state):
                missing += 1
    return 1 if missing else 0


def _describe_members(g: str, d: Any, state: str, verbose: bool) -> bool:
    if state == "Dead":
        _check_state(g, state, None)
        return False
    members = list(d.members)
    _check_state(g, state, len(members))  # the messages; Kafka prints the header anyway
    w = {"g": 15, "c": 15, "i": 17, "h": 15, "cl": 15}
    with_instance = any(m.group_instance_id for m in members)
    for m in members:
        w["g"] = max(w["g"], len(g))
        w["c"] = max(w["c"], len(m.member_id))
        w["i"] = max(w["i"], len(m.group_instance_id or ""))
        w["h"] = max(w["h"], len(m.host))
        w["cl"] = max(w["cl"], len(m.client_id))
    if with_instance:
        fmt = f"%-{w['g']}s %-{w['c']}s %-{w['i']}s %-{w['h']}s %-{w['cl']}s %-15s "
        header: tuple[str, ...] = (
            "GROUP",
            "CONSUMER-ID",
            "GROUP-INSTANCE-ID",
            "HOST",
            "CLIENT-ID",
            "#PARTITIONS",
        )
    else:
        fmt = f"%-{w['g']}s %-{w['c']}s %-{w['h']}s %-{w['cl']}s %-15s "
        header = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
    print("\n" + fmt % header + ("ASSIGNMENT" if verbose else ""))
    for m in members:
        tps = list(m.assignment.topic_partitions or ()) if m.assignment else []
        vals: tuple[Any, ...] = (g, m.member_id, m.host, m.client_id, len(tps))
        if with_instance:
            vals = (g, m.member_id, m.group_instance_id or "", m.host, m.client_id, len(tps))
        line = fmt % vals
        if verbose:
            by: dict[str, list[int]] = {}
            for tp in tps:
                by.setdefault(tp.topic, []).append(tp.partition)
            line += (
                ", ".join(sorted(f"{t}({','.join(sorted(map(str, ps)))})" for t, ps in by.items()))
                or MISSING
            )
        print(line)
    return True


def _describe_offsets(a: Any, g: str, d: Any, state: str) -> bool:
    committed = _committed(a, g)
    rows: list[tuple[str, str, str, str, str, str, str, str, str]] = []
    owner: dict[tuple[str, int], Any] = {}
    idle = []
    for m in d.members:
        tps = list(m.assignment.topic_partitions or ()) if m.assignment else []
        if not tps:
            idle.append(m)
        for tp in tps:
            owner[(tp.topic, tp.partition)] = m
    if state == "Dead" and not committed:
        _check_state(g, state, None)
        return False
    tps = sorted(set(owner) | set(committed))
    ends = _offsets(a, tps, _spec("latest"))
    for tp in tps:
        cur, end = committed.get(tp), ends.get(tp)
        m = owner.get(tp)
        rows.append(
            (
                g,
                tp[0],
                str(tp[1]),
                MISSING if cur is None else str(cur),
                MISSING if end is None else str(end),
                MISSING if cur is None or end is None else str(max(end - cur, 0)),
                m.member_id if m else MISSING,
                m.host if m else MISSING,
                m.client_id if m else MISSING,
            )
        )
    for m in idle:
        rows.append(
            (g, MISSING, MISSING, MISSING, MISSING, MISSING, m.member_id, m.host, m.client_id)
        )
    if not _check_state(g, state, len(rows)):
        return True
    wg = max([15, *(len(r[0]) for r in rows)])
    wt = max([15, *(len(r[1]) for r in rows)])
    wc = max([15, *(len(r[6]) for r in rows)])
    wh = max([15, *(len(r[7]) for r in rows)])
    fmt = f"%-{wg}s %-{wt}s %-10s %-15s %-15s %-15s %-{wc}s %-{wh}s %s"
    print()
    print(
        fmt
        % (
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        )
    )
    for r in rows:
        print(fmt % r)
    return True


def _delete(a: Any, groups: list[str]) -> int:
    done, failed = [], {}
    for g, f in a.delete_consumer_groups(groups, **timeout_kw()).items():
        try:
            result(f)
            done.append(g)
        except CliError as err:
            failed[g] = str(err)
    if not failed:
        print(f"Deletion of requested consumer groups ('{', '.join(done)}') was successful.")
        return 0
    print("Error: Deletion of some consumer groups failed:", file=sys.stderr)
    for g, why in failed.items():
        print(f"* Group '{g}' could not be deleted due to: {why}", file=sys.stderr)
    if done:
        print(f"\nThese consumer groups were deleted successfully: '{', '.join(done)}'")
    return 1


def _spec(kind: str, ts: int = 0) -> Any:
    from confluent_kafka.admin import OffsetSpec

    if kind == "earliest":
        return OffsetSpec.earliest()
    if kind == "latest":
        return OffsetSpec.latest()
    return OffsetSpec.for_timestamp(ts)


def parse_datetime(s: str) -> int:
    """Kafka's --to-datetime: ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone; local
    time without one, as Kafka's Utils.getDateTime."""
    try:
        d = datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise CliError(
            f"Error parsing datetime '{s}': expected YYYY-MM-DDTHH:mm:SS.sss", 2
        ) from None
    if d.tzinfo is None:
        d = d.astimezone()
    return int(d.timestamp() * 1000)


_DURATION = re.compile(
    r"^(?P<sign>-)?P(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?"
    r"(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE,
)


def parse_duration_ms(s: str) -> int:
    """java.time.Duration.parse's ISO 8601 form (PnDTnHnMn.nS)."""
    m = _DURATION.match(s.strip())
    if not m or s.strip().upper() in ("P", "PT"):
        raise CliError(f"Error parsing duration '{s}': expected e.g. PT10M or P1DT2H", 2)
    secs = (
        float(m["d"] or 0) * 86400
        + float(m["h"] or 0) * 3600
        + float(m["m"] or 0) * 60
        + float(m["s"] or 0)
    )
    return int(secs * 1000) * (-1 if m["sign"] else 1)


def _from_file(path: str, group: str, with_group: bool) -> dict[tuple[str, int], int]:
    """--from-file: what --export wrote (``topic,partition,offset``, with the group first
    when the export covered several groups)."""
    out: dict[tuple[str, int], int] = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror}") from None
    for line in lines:
        cells = line.split(",")
        if with_group or len(cells) == 4:
            if len(cells) != 4:
                raise CliError(f"--from-file line {line!r}: expected group,topic,partition,offset")
            if cells[0] != group:
                continue
            cells = cells[1:]
        if len(cells) != 3:
            raise CliError(f"--from-file line {line!r}: expected topic,partition,offset")
        try:
            out[(cells[0], int(cells[1]))] = int(cells[2])
        except ValueError:
            raise CliError(f"--from-file line {line!r}: partition and offset are numbers") from None
    return out


def _scope(a: Any, args: argparse.Namespace, group: str) -> list[tuple[str, int]]:
    if args.all_topics:
        return sorted(_committed(a, group))
    if not args.topic:
        raise CliError("--reset-offsets needs --all-topics or --topic", 2)
    md = a.list_topics(timeout=timeout_kw()["request_timeout"])
    tps: list[tuple[str, int]] = []
    for spec in args.topic:
        name, parts = parse_tp_list(spec)
        if name not in md.topics or md.topics[name].error is not None:
            raise CliError(f"Topic '{name}' does not exist")
        tps += [(name, p) for p in (parts or sorted(md.topics[name].partitions))]
    return tps


def _targets(
    a: Any, args: argparse.Namespace, group: str, tps: list[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    lo, hi = _offsets(a, tps, _spec("earliest")), _offsets(a, tps, _spec("latest"))

    def clamp(tp: tuple[str, int], off: int) -> int:
        if tp in lo and off < lo[tp]:
            return lo[tp]
        if tp in hi and off > hi[tp]:
            return hi[tp]
        return off

    if args.to_earliest:
        return {tp: lo[tp] for tp in tps if tp in lo}
    if args.to_latest:
        return {tp: hi[tp] for tp in tps if tp in hi}
    if args.to_offset is not None:
        return {tp: clamp(tp, args.to_offset) for tp in tps}
    if args.to_current or args.shift_by is not None:
        cur = _committed(a, group)
        shift = args.shift_by or 0
        # no committed offset: the shift starts from the latest offset, as Kafka does
        return {tp: clamp(tp, cur.get(tp, hi.get(tp, 0)) + shift) for tp in tps}
    if args.to_datetime or args.by_duration:
        ts = (
            parse_datetime(args.to_datetime)
            if args.to_datetime
            else int(time.time() * 1000) - parse_duration_ms(args.by_duration)
        )
        found = _offsets(a, tps, _spec("timestamp", ts))
        return {tp: found[tp] if found.get(tp, -1) >= 0 else hi.get(tp, 0) for tp in tps}
    raise CliError(
        "Option --reset-offsets requires one of: --to-datetime, --by-duration, --to-earliest, "
        "--to-latest, --shift-by, --from-file, --to-current, --to-offset",
        2,
    )


def _reset(a: Any, args: argparse.Namespace, groups: list[str]) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    if args.execute and args.dry_run:
        raise CliError("Option --execute cannot be used with --dry-run", 2)
    if not args.execute and not args.dry_run and not args.export:
        print(
            "WARN: No action will be performed as the --execute option is missing. "
            "In a future major release, the default behavior of this command will be to "
            "prompt the user before executing the reset rather than doing a dry run. You "
            "should add the --dry-run option explicitly if you are scripting this command "
            "and want to keep the current default behavior without prompting."
        )
    descs = _describe_groups(a, groups)
    plan: dict[str, dict[tuple[str, int], int]] = {}
    for g in groups:
        state = _state(descs[g].state)
        if state not in ("Empty", "Dead"):
            raise CliError(
                f"Assignments can only be reset if the group '{g}' is inactive, but the "
                f"current state is {state}."
            )
        if args.from_file:
            plan[g] = _from_file(args.from_file, g, len(groups) > 1)
        else:
            plan[g] = _targets(a, args, g, _scope(a, args, g))
    if args.export:
        for g, offs in plan.items():
            for (t, p), o in sorted(offs.items()):
                print(f"{t},{p},{o}" if len(groups) == 1 else f"{g},{t},{p},{o}")
    else:
        fmt = "%-30s %-30s %-10s %-15s"
        print()
        print(fmt % ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"))
        for g, offs in plan.items():
            for (t, p), o in sorted(offs.items()):
                print(fmt % (g, t, p, o))
    if not args.execute:
        return 0
    for g, offs in plan.items():
        req = ConsumerGroupTopicPartitions(
            g, [TopicPartition(t, p, o) for (t, p), o in sorted(offs.items())]
        )
        r = result(a.alter_consumer_group_offsets([req], **timeout_kw())[g], f"group {g}")
        bad = [tp for tp in r.topic_partitions or () if tp.error is not None]
        if bad:
            raise CliError("; ".join(f"{tp.topic}-{tp.partition}: {tp.error.str()}" for tp in bad))
    return 0


def _delete_offsets(a: Any, args: argparse.Namespace, groups: list[str]) -> int:
    from kafka import TopicPartition as KTP

    if len(groups) != 1 or not args.topic:
        raise CliError("--delete-offsets needs one --group and --topic", 2)
    md = a.list_topics(timeout=timeout_kw()["request_timeout"])
    topics = [parse_tp_list(s) for s in args.topic]
    tps = []
    for n, ps in topics:
        known = sorted(md.topics[n].partitions) if n in md.topics else []
        tps += [KTP(n, p) for p in (ps or known or [-1])]
    k = kadmin(args)
    try:
        try:
            res = k.delete_group_offsets(groups[0], [tp for tp in tps if tp.partition >= 0])
        except Exception as e:
            name = type(e).__name__
            msg = {
                "GroupIdNotFoundError": f"'{groups[0]}' does not exist.",
                "NonEmptyGroupError": f"Deleting offsets of a consumer group '{groups[0]}' is "
                "forbidden if the group is not empty.",
            }.get(name, f"Encounter some unknown error: {e}")
            print(f"\nError: {msg}")
            return 1
    finally:
        k.close()
    errors = {
        (tp.topic, tp.partition): err
        for tp, err in (res or {}).items()
        if err is not None and getattr(err, "errno", 0) != 0
    }
    if errors:
        print("\nError: Encounter some partition level error, see the follow-up details:")
    else:
        print(
            f"Request succeed for deleting offsets with topic {', '.join(n for n, _ in topics)} "
            f"group {groups[0]}"
        )
    fmt = "%-30s %-15s %-15s"
    print()
    print(fmt % ("TOPIC", "PARTITION", "STATUS"))
    for tp in sorted(tps, key=lambda tp: f"{tp.topic}{tp.partition}"):
        err = errors.get((tp.topic, tp.partition))
        status = "Successful" if err is None else f"Error: :{getattr(err, 'description', err)}"
        if tp.partition < 0:
            status = f"Error: :topic {tp.topic} does not exist"
        print(fmt % (tp.topic, tp.partition if tp.partition >= 0 else "Not Provided", status))
    return 1 if errors or any(tp.partition < 0 for tp in tps) else 0
