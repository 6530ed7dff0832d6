"""The console's pages: read broker state, render escaped HTML.

Every list is paginated (PAGE_SIZE rows), and per-row figures (sizes, offsets, lag)
are read only for the rows of the page shown: a page costs the broker the same on a
cluster of ten topics as on one of ten thousand, apart from sorting the names.
Topics, partitions (leader, replicas, ISR) and brokers are the whole cluster's, from
the metadata cache. A partition's size and offsets are its leader replica's: read here
when this broker leads it, else asked of the leader (``cluster.ClusterReader``:
DescribeLogDirs, ListOffsets) by the app before rendering, "n/a" when unknown.
Groups coordinated elsewhere are listed from ListGroups, with their coordinator.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kafkalite.coordinator.group.consumer_protocol import assigned_partitions
from kafkalite.coordinator.group.group_metadata import GroupMetadata, GroupState
from kafkalite.server.config import CONFIG_DEFS
from kafkalite.server.console.cluster import RemoteFigures, RemoteGroup
from kafkalite.server.console.deps import ConsoleDeps
from kafkalite.server.console.markup import Html, el, esc, url
from kafkalite.server.console.messages import FORMATS, BrowseResult, render_bytes
from kafkalite.server.metadata_cache import TopicMetadata
from kafkalite.server.topic_names import INTERNAL_TOPICS

PAGE_SIZE = 50
PARTITION_PAGE_SIZE = 100
DASH = "—"
#: a figure another broker holds and did not give
NA = "n/a"


# ---- helpers ------------------------------------------------------------------------------
def human_bytes(n: float | None) -> str:
    if n is None:
        return DASH
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def fmt_ts(ms: int) -> str:
    if ms < 0:
        return DASH
    dt = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return dt.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}Z"


def page_of(items: Sequence[Any], page: int, size: int) -> tuple[Sequence[Any], int, int]:
    """(the page's items, the page number clamped, the number of pages)."""
    pages = max(1, -(-len(items) // size))
    page = min(max(page, 1), pages)
    return items[(page - 1) * size : page * size], page, pages


def pager(page: int, pages: int, link: Any) -> Html:
    """Previous/next links; ``link(n)`` is the URL of page n."""
    if pages <= 1:
        return Html("")
    return el(
        "nav",
        el("a", "← previous", href=link(page - 1)) if page > 1 else None,
        el("span", f" page {page} of {pages} "),
        el("a", "next →", href=link(page + 1)) if page < pages else None,
        class_="pager",
    )


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], **attrs: object) -> Html:
    return el(
        "table",
        el("thead", el("tr", [el("th", h) for h in headers])),
        el("tbody", [el("tr", [el("td", c) for c in r]) for r in rows]),
        **attrs,
    )


def dl(pairs: Iterable[tuple[str, Any]]) -> Html:
    return el("dl", [el("div", el("dt", k), el("dd", v)) for k, v in pairs], class_="facts")


def layout(title: str, body: Any, *, active: str, read_only: bool, scripts: bool = False) -> Html:
    nav = [
        ("/", "Overview", "overview"),
        ("/topics", "Topics", "topics"),
        ("/groups", "Consumer groups", "groups"),
        ("/brokers", "Brokers", "brokers"),
    ]
    return Html(
        "<!doctype html>"
        + el(
            "html",
            el(
                "head",
                el("meta", charset="utf-8"),
                el("title", f"{title} · kafkalite console"),
                el("link", rel="stylesheet", href="/static/console.css"),
                el("link", rel="stylesheet", href="/static/uplot/uPlot.min.css")
                if scripts
                else None,
            ),
            el(
                "body",
                el(
                    "header",
                    el("a", "kafkalite", href="/", class_="brand"),
                    el(
                        "nav",
                        [
                            el("a", label, href=href, class_="active" if key == active else None)
                            for href, label, key in nav
                        ],
                    ),
                    el(
                        "span",
                        "read-only" if read_only else "read-write",
                        class_="mode " + ("ro" if read_only else "rw"),
                    ),
                ),
                el("main", el("h1", title), body),
                el("script", src="/static/uplot/uPlot.iife.min.js") if scripts else None,
                el("script", src="/static/console.js") if scripts else None,
            ),
            lang="en",
        )
    )


# ---- reads ---------------------------------------------------------------------------------
@dataclass(slots=True)
class PartitionRow:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    log_start: int | None
    high_watermark: int | None
    log_end: int | None
    size: int | None
    segments: int | None


def partition_rows(
    deps: ConsoleDeps,
    t: TopicMetadata,
    ids: Iterable[int],
    remote: RemoteFigures | None = None,
) -> list[PartitionRow]:
    """The partitions' metadata, and their leader replica's figures: read here when led
    here, else what the leader told (``remote``: size, log start, high watermark)."""
    rows = []
    for i in ids:
        p = t.partitions[i]
        log = deps.leader_log(t.name, i)
        figures: tuple[int | None, ...]
        if log is not None:
            figures = (
                log.log_start_offset,
                log.high_watermark,
                log.log_end_offset,
                log.size_in_bytes,
                log.num_segments,
            )
        else:
            offsets = remote.offsets.get((t.name, i)) if remote is not None else None
            size = remote.sizes.get((t.name, i)) if remote is not None else None
            start, hw = offsets if offsets is not None else (None, None)
            figures = (start, hw, None, size, None)
        rows.append(
            PartitionRow(
                i, p.leader, list(p.replicas), list(p.isr), list(p.offline_replicas), *figures
            )
        )
    return rows


def remote_led(
    deps: ConsoleDeps, topics: Iterable[TopicMetadata], ids: set[int] | None = None
) -> dict[int, list[tuple[str, int]]]:
    """Partitions of ``topics`` (only ``ids`` when given) led by another broker, by
    leader: what the app asks the leaders about before rendering."""
    out: dict[int, list[tuple[str, int]]] = {}
    for t in topics:
        for i, p in t.partitions.items():
            if p.leader >= 0 and p.leader != deps.broker_id and (ids is None or i in ids):
                out.setdefault(p.leader, []).append((t.name, i))
    return out


def topic_size(
    deps: ConsoleDeps, t: TopicMetadata, remote: RemoteFigures | None = None
) -> int | None:
    """Bytes of the topic's leader replicas (None: one of them is not known here)."""
    total = 0
    for i in t.partitions:
        log = deps.leader_log(t.name, i)
        if log is not None:
            total += log.size_in_bytes
            continue
        size = remote.sizes.get((t.name, i)) if remote is not None else None
        if size is None:
            return None
        total += size
    return total


def topic_messages(
    deps: ConsoleDeps, t: TopicMetadata, remote: RemoteFigures | None = None
) -> int | None:
    """Records a consumer can read (HW minus log start), None when a partition's leader
    did not tell."""
    total = 0
    for i in t.partitions:
        log = deps.leader_log(t.name, i)
        if log is not None:
            total += max(0, log.high_watermark - log.log_start_offset)
            continue
        offsets = remote.offsets.get((t.name, i)) if remote is not None else None
        if offsets is None:
            return None
        total += max(0, offsets[1] - offsets[0])
    return total


def na(v: object) -> object:
    return NA if v is None else v


def na_bytes(n: int | None) -> str:
    return NA if n is None else human_bytes(n)


def under_replicated(t: TopicMetadata) -> int:
    return sum(1 for p in t.partitions.values() if len(p.isr) < len(p.replicas))


def offline_partitions(t: TopicMetadata) -> int:
    return sum(1 for p in t.partitions.values() if p.leader < 0)


def live_groups(deps: ConsoleDeps) -> list[GroupMetadata]:
    return [
        g
        for g in deps.group_coordinator.manager.current_groups()
        if not g.is_state(GroupState.DEAD)
    ]


@dataclass(slots=True)
class OffsetRow:
    topic: str
    partition: int
    committed: int
    log_end: int | None
    lag: int | None
    owner: str


def group_members(
    deps: ConsoleDeps, g: GroupMetadata
) -> list[tuple[str, str, str, str, dict[str, list[int]]]]:
    """(member id, instance id, client id, host, assignment) of either protocol."""
    out: list[tuple[str, str, str, str, dict[str, list[int]]]] = []
    if g.consumer is not None:
        for m in g.consumer.members.values():
            assignment: dict[str, list[int]] = {}
            for tid, parts in m.assigned.items():
                name = deps.metadata_cache.topic_name(tid) or str(tid)
                assignment[name] = sorted(parts)
            out.append((m.member_id, m.instance_id or "", m.client_id, m.client_host, assignment))
    else:
        stable = g.is_state(GroupState.STABLE)
        for cm in g.members.values():
            decoded = assigned_partitions(cm.assignment) if stable and cm.assignment else None
            out.append(
                (
                    cm.member_id,
                    cm.group_instance_id or "",
                    cm.client_id,
                    cm.client_host,
                    decoded or {},
                )
            )
    return out


def group_offsets(deps: ConsoleDeps, g: GroupMetadata) -> list[OffsetRow]:
    """Committed offsets with the log end (HW, as Kafka's tool shows) and lag."""
    owners: dict[tuple[str, int], str] = {}
    for member_id, _i, client_id, _h, assignment in group_members(deps, g):
        for topic, parts in assignment.items():
            for p in parts:
                owners[(topic, p)] = f"{client_id} ({member_id})" if client_id else member_id
    rows = []
    for (topic, partition), om in sorted(g.offsets.items()):
        log = deps.leader_log(topic, partition)
        end = None if log is None else log.high_watermark
        lag = None if end is None else max(0, end - om.offset)
        rows.append(
            OffsetRow(topic, partition, om.offset, end, lag, owners.get((topic, partition), ""))
        )
    return rows


def total_lag(rows: Iterable[OffsetRow]) -> int | None:
    lags = [r.lag for r in rows if r.lag is not None]
    return sum(lags) if lags else None


def ids(xs: Iterable[int]) -> str:
    return ", ".join(str(x) for x in xs) or DASH


def kafka_value(v: object) -> str:
    """A config value as Kafka's tools print it (lists comma-separated, booleans lower)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list | tuple | set | frozenset):
        return ",".join(kafka_value(x) for x in v)
    return str(v)


def opt(v: object) -> object:
    return DASH if v is None else v


# ---- pages ---------------------------------------------------------------------------------
def overview(deps: ConsoleDeps, *, read_only: bool, source: str) -> Html:
    cache = deps.metadata_cache
    topics = list(cache.topics.values())
    user = [t for t in topics if t.name not in INTERNAL_TOPICS]
    partitions = sum(len(t.partitions) for t in topics)
    local = deps.replica_manager.partitions.values()
    local_size = sum(p.log.size_in_bytes for p in local if p.log is not None)
    leaders = sum(1 for p in local if p.is_leader)
    facts = dl(
        [
            ("Cluster id", cache.cluster_id or DASH),
            ("Controller", el("a", f"broker {cache.controller_id}", href="/brokers")),
            ("This broker", deps.broker_id),
            ("Brokers", el("a", len(cache.brokers), href="/brokers")),
            (
                "Topics",
                el("a", f"{len(user)} (+{len(topics) - len(user)} internal)", href="/topics"),
            ),
            ("Partitions", partitions),
            ("Under-replicated", sum(under_replicated(t) for t in topics)),
            ("Offline", sum(offline_partitions(t) for t in topics)),
            ("Consumer groups", el("a", len(live_groups(deps)), href="/groups")),
            ("Led here", leaders),
            ("Data on this broker", human_bytes(local_size)),
            ("Up", _uptime(time.time() - deps.started_at)),
        ]
    )
    charts = el(
        "section",
        el("h2", "Live throughput and latency"),
        el(
            "div",
            el("div", class_="chart", id="chart-messages"),
            el("div", class_="chart", id="chart-bytes"),
            el("div", class_="chart", id="chart-requests"),
            el("div", class_="chart", id="chart-latency"),
            id="charts",
            data_src="/api/samples",
        ),
        el(
            "p",
            "Sampled once a second from: ",
            el("span", source, id="chart-source"),
            class_="note",
        ),
    )
    return layout("Overview", [facts, charts], active="overview", read_only=read_only, scripts=True)


def _uptime(s: float) -> str:
    s = int(s)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return (f"{d}d " if d else "") + f"{h:02d}:{m:02d}:{s:02d}"


def topic_names(deps: ConsoleDeps, q: str, internal: bool) -> list[str]:
    return sorted(
        n
        for n in deps.metadata_cache.topics
        if (internal or n not in INTERNAL_TOPICS) and q.lower() in n.lower()
    )


def topics_page(
    deps: ConsoleDeps,
    *,
    read_only: bool,
    q: str,
    internal: bool,
    page: int,
    remote: RemoteFigures | None = None,
) -> Html:
    names = topic_names(deps, q, internal)
    shown, page, pages = page_of(names, page, PAGE_SIZE)
    rows = []
    for n in shown:
        t = deps.metadata_cache.topics.get(n)
        if t is None:
            continue
        rf = max((len(p.replicas) for p in t.partitions.values()), default=0)
        rows.append(
            [
                el("a", n, href=url("topics", n)),
                len(t.partitions),
                rf,
                under_replicated(t),
                na(topic_messages(deps, t, remote)),
                na_bytes(topic_size(deps, t, remote)),
                el("a", "browse", href=url("topics", n, "messages")),
            ]
        )
    search = el(
        "form",
        el("input", type="search", name="q", value=q, placeholder="filter by name"),
        el(
            "label",
            el("input", type="checkbox", name="internal", value="1", checked=internal),
            " internal",
        ),
        el("button", "Filter", type="submit"),
        method="get",
        action="/topics",
        class_="inline",
    )
    actions = None if read_only else el("a", "Create topic", href="/topics/new", class_="button")
    body = [
        el("div", search, actions, class_="toolbar"),
        el(
            "p",
            f"{len(names)} topics. Size: the leader replicas' bytes; Messages: high watermark "
            "minus log start; both from each partition's leader (n/a: it did not answer).",
            class_="note",
        ),
        table(
            ["Topic", "Partitions", "RF", "Under-replicated", "Messages", "Size", ""],
            rows,
            id="topics",
        ),
        pager(
            page,
            pages,
            lambda n: url("topics", q=q or None, internal=1 if internal else None, page=n),
        ),
    ]
    return layout("Topics", body, active="topics", read_only=read_only)


def topic_page(
    deps: ConsoleDeps,
    t: TopicMetadata,
    *,
    read_only: bool,
    page: int,
    remote: RemoteFigures | None = None,
) -> Html:
    all_ids = sorted(t.partitions)
    shown, page, pages = page_of(all_ids, page, PARTITION_PAGE_SIZE)
    rows = [
        [
            r.partition,
            r.leader if r.leader >= 0 else "none",
            ids(r.replicas),
            ids(r.isr),
            ids(r.offline) if r.offline else "",
            na(r.log_start),
            na(r.high_watermark),
            na(r.log_end),
            na_bytes(r.size),
            na(r.segments),
        ]
        for r in partition_rows(deps, t, shown, remote)
    ]
    rf = max((len(p.replicas) for p in t.partitions.values()), default=0)
    facts = dl(
        [
            ("Topic id", t.topic_id),
            ("Partitions", len(t.partitions)),
            ("Replication factor", rf),
            ("Internal", "yes" if t.is_internal or t.name in INTERNAL_TOPICS else "no"),
            ("Under-replicated", under_replicated(t)),
            ("Messages", na(topic_messages(deps, t, remote))),
            ("Size (leader replicas)", na_bytes(topic_size(deps, t, remote))),
        ]
    )
    overrides = deps.admin.topic_configs.get(t.name, {})
    props = deps.admin.log_config(t.name).to_properties()
    config_rows = [
        [k, v, "topic override" if k in overrides else "default"] for k, v in sorted(props.items())
    ]
    group_rows = []
    for g in sorted(live_groups(deps), key=lambda g: g.group_id):
        mine = [r for r in group_offsets(deps, g) if r.topic == t.name]
        if mine:
            group_rows.append(
                [
                    el("a", g.group_id, href=url("groups", g.group_id)),
                    g.state_name,
                    len(mine),
                    opt(total_lag(mine)),
                ]
            )
    actions = [el("a", "Browse messages", href=url("topics", t.name, "messages"), class_="button")]
    if not read_only and t.name not in INTERNAL_TOPICS:
        actions.append(
            el("a", "Delete topic", href=url("topics", t.name, "delete"), class_="button danger")
        )
    body = [
        el("div", actions, class_="toolbar"),
        facts,
        el("h2", "Partitions"),
        table(
            [
                "Partition",
                "Leader",
                "Replicas",
                "ISR",
                "Offline",
                "Log start",
                "High watermark",
                "Log end",
                "Size",
                "Segments",
            ],
            rows,
            id="partitions",
        ),
        el(
            "p",
            "Each partition's figures are its leader's: read here for those led by this "
            f"broker (broker {deps.broker_id}), asked of the leader for the others (log "
            "start, high watermark, size; n/a: not told, such as their log end and segments).",
            class_="note",
        ),
        pager(page, pages, lambda n: url("topics", t.name, page=n)),
        el("h2", "Consumer groups"),
        table(["Group", "State", "Partitions committed", "Lag"], group_rows, id="topic-groups")
        if group_rows
        else el("p", "No group has committed offsets for this topic.", class_="note"),
        el("h2", "Configs"),
        el("p", f"{len(overrides)} overrides; the rest are the broker's defaults.", class_="note"),
        table(["Name", "Value", "Source"], config_rows, id="configs"),
    ]
    return layout(f"Topic {t.name}", body, active="topics", read_only=read_only)


def messages_page(
    deps: ConsoleDeps,
    t: TopicMetadata,
    *,
    read_only: bool,
    partition: int | None,
    offset_arg: str,
    timestamp_arg: str,
    limit: int,
    fmt: str,
    result: BrowseResult | None,
    leader: int,
    start_offset: int,
    note: str | None,
) -> Html:
    """``partition`` None: every partition led here, merged by timestamp."""
    part_opts = [
        el("option", f"{i}", value=i, selected=i == partition) for i in sorted(t.partitions)
    ]
    if len(t.partitions) <= 64:
        part_opts.insert(0, el("option", "all", value="all", selected=partition is None))
    fmt_opts = [el("option", f, value=f, selected=f == fmt) for f in FORMATS]
    form = el(
        "form",
        el("label", "Partition ", el("select", part_opts, name="partition")),
        el(
            "label",
            "Offset ",
            el(
                "input",
                type="text",
                name="offset",
                value=offset_arg,
                placeholder="earliest",
                size=10,
            ),
        ),
        el(
            "label",
            "or time ",
            el(
                "input",
                type="text",
                name="timestamp",
                value=timestamp_arg,
                placeholder="2026-01-31T12:00:00Z or ms",
                size=24,
            ),
        ),
        el(
            "label", "Limit ", el("input", type="number", name="limit", value=limit, min=1, max=500)
        ),
        el("label", "Show as ", el("select", fmt_opts, name="format")),
        el("button", "Show", type="submit"),
        method="get",
        action=url("topics", t.name, "messages"),
        class_="inline",
        id="browse",
    )
    body: list[Any] = [form]
    if note:
        body.append(el("p", note, class_="note"))
    if result is None:
        body.append(
            el(
                "p",
                f"Partition {partition} is led by broker {leader}: browse it on that broker's console.",
                class_="error",
            )
        )
    else:
        if result.error:
            body.append(el("p", result.error, class_="error"))
        summary = (
            f"All partitions led here, merged by timestamp: {len(result.records)} records."
            if partition is None
            else f"Partition {partition}: log start {result.log_start_offset}, "
            f"high watermark {result.high_watermark}; {len(result.records)} records from offset {start_offset}."
        )
        body.append(el("p", summary, class_="note"))
        rows = []
        for r in result.records:
            key, key_fmt = render_bytes(r.key, fmt)
            value, value_fmt = render_bytes(r.value, fmt)
            headers = [
                el(
                    "div",
                    el("span", k, class_="hkey"),
                    ": ",
                    el("span", render_bytes(v, fmt)[0], class_="hval"),
                )
                for k, v in r.headers
            ]
            rows.append(
                [
                    *([r.partition] if partition is None else []),
                    r.offset,
                    el(
                        "span",
                        fmt_ts(r.timestamp),
                        title="LogAppendTime" if r.log_append_time else "CreateTime",
                    ),
                    el("pre", key, class_=f"v {key_fmt}"),
                    el("pre", value, class_=f"v {value_fmt}"),
                    headers,
                ]
            )
        columns = ["Offset", "Timestamp", "Key", "Value", "Headers"]
        if partition is None:
            columns.insert(0, "Partition")
        body.append(table(columns, rows, id="messages"))

        def link(offset: int | str) -> str:
            return url(
                "topics",
                t.name,
                "messages",
                partition=partition,
                offset=offset,
                limit=limit,
                format=fmt,
            )

        if partition is None:
            body.append(
                el(
                    "nav",
                    el("a", "earliest", href=link("earliest")),
                    " ",
                    el("a", "newest", href=link("latest")),
                    class_="pager",
                )
            )
            return layout(f"Messages of {t.name}", body, active="topics", read_only=read_only)
        nav = [
            el("a", "← earlier", href=link(max(result.log_start_offset, start_offset - limit)))
            if start_offset > result.log_start_offset
            else None,
            " ",
            el("a", "later →", href=link(result.next_offset))
            if result.next_offset < result.high_watermark
            else None,
            " ",
            el(
                "a",
                "newest",
                href=link(max(result.log_start_offset, result.high_watermark - limit)),
            ),
        ]
        body.append(el("nav", nav, class_="pager"))
    return layout(f"Messages of {t.name}", body, active="topics", read_only=read_only)


def groups_page(
    deps: ConsoleDeps,
    *,
    read_only: bool,
    q: str,
    page: int,
    remote: Sequence[RemoteGroup] = (),
    silent: Sequence[int] = (),
) -> Html:
    local = sorted(
        (g for g in live_groups(deps) if q.lower() in g.group_id.lower()), key=lambda g: g.group_id
    )
    others = sorted(
        (g for g in remote if q.lower() in g.group_id.lower()), key=lambda g: g.group_id
    )
    groups: list[GroupMetadata | RemoteGroup] = sorted([*local, *others], key=lambda g: g.group_id)
    shown, page, pages = page_of(groups, page, PAGE_SIZE)
    rows: list[list[Any]] = []
    for g in shown:
        if isinstance(g, RemoteGroup):
            rows.append(
                [
                    g.group_id,
                    g.group_type or g.protocol_type or DASH,
                    g.state,
                    NA,
                    NA,
                    NA,
                    NA,
                    el("a", f"broker {g.coordinator}", href=url("brokers")),
                ]
            )
            continue
        members = len(g.consumer.members) if g.consumer is not None else len(g.members)
        topics = sorted({tp[0] for tp in g.offsets})
        rows.append(
            [
                el("a", g.group_id, href=url("groups", g.group_id)),
                g.group_type,
                g.state_name,
                g.protocol_name or "",
                members,
                ", ".join(topics),
                opt(total_lag(group_offsets(deps, g))),
                f"broker {deps.broker_id} (this one)",
            ]
        )
    search = el(
        "form",
        el("input", type="search", name="q", value=q, placeholder="filter by group id"),
        el("button", "Filter", type="submit"),
        method="get",
        action="/groups",
        class_="inline",
    )
    body = [
        el("div", search, class_="toolbar"),
        el(
            "p",
            f"{len(groups)} groups: {len(local)} coordinated by this broker (broker "
            f"{deps.broker_id}), {len(others)} by others (their members, offsets and lag are "
            "on their coordinator's console)."
            + (
                f" Brokers {', '.join(map(str, silent))} did not answer: their groups are "
                "not listed."
                if silent
                else ""
            ),
            class_="note",
        ),
        table(
            ["Group", "Type", "State", "Assignor", "Members", "Topics", "Lag", "Coordinator"],
            rows,
            id="groups",
        ),
        pager(page, pages, lambda n: url("groups", q=q or None, page=n)),
    ]
    return layout("Consumer groups", body, active="groups", read_only=read_only)


def lag_json(deps: ConsoleDeps, g: GroupMetadata) -> dict[str, Any]:
    rows = group_offsets(deps, g)
    return {
        "state": g.state_name,
        "total_lag": total_lag(rows),
        "partitions": [
            {
                "topic": r.topic,
                "partition": r.partition,
                "committed": r.committed,
                "log_end": r.log_end,
                "lag": r.lag,
            }
            for r in rows
        ],
    }


def group_page(deps: ConsoleDeps, g: GroupMetadata, *, read_only: bool) -> Html:
    members = group_members(deps, g)
    offsets = group_offsets(deps, g)
    facts = dl(
        [
            ("Group id", g.group_id),
            ("Type", g.group_type),
            ("State", el("span", g.state_name, id="group-state")),
            ("Protocol", f"{g.protocol_type or ''} {g.protocol_name or ''}".strip() or DASH),
            ("Generation", g.generation_id if g.consumer is None else g.consumer.group_epoch),
            ("Coordinator", f"broker {deps.broker_id}"),
            ("Total lag", el("span", opt(total_lag(offsets)), id="total-lag")),
        ]
    )
    member_rows = [
        [
            mid,
            iid,
            cid,
            host,
            "; ".join(f"{t}: {ids(ps)}" for t, ps in sorted(assignment.items())),
        ]
        for mid, iid, cid, host, assignment in members
    ]
    offset_rows = [
        [
            r.topic,
            r.partition,
            el("span", r.committed, data_cell="committed"),
            el("span", opt(r.log_end), data_cell="log_end"),
            el("span", opt(r.lag), data_cell="lag"),
            r.owner,
        ]
        for r in offsets
    ]
    offsets_table = el(
        "table",
        el(
            "thead",
            el(
                "tr",
                [
                    el("th", h)
                    for h in ["Topic", "Partition", "Committed", "Log end", "Lag", "Member"]
                ],
            ),
        ),
        el(
            "tbody",
            [
                el("tr", [el("td", c) for c in row], data_tp=f"{r.topic}:{r.partition}")
                for row, r in zip(offset_rows, offsets, strict=True)
            ],
        ),
        id="offsets",
        data_live=url("groups", g.group_id, "lag.json"),
    )
    actions = []
    if not read_only:
        actions.append(
            el("a", "Reset offsets", href=url("groups", g.group_id, "reset"), class_="button")
        )
    body = [
        el("div", actions, class_="toolbar"),
        facts,
        el("h2", f"Members ({len(members)})"),
        table(
            ["Member id", "Instance id", "Client id", "Host", "Assignment"],
            member_rows,
            id="members",
        ),
        el("h2", "Offsets and lag"),
        el(
            "p",
            "Lag = log end (high watermark) − committed offset; updated every 2 s.",
            class_="note",
        ),
        offsets_table,
    ]
    return layout(f"Group {g.group_id}", body, active="groups", read_only=read_only, scripts=True)


def brokers_page(deps: ConsoleDeps, *, read_only: bool) -> Html:
    cache = deps.metadata_cache
    rows = []
    for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id):
        roles = []
        if b.broker_id == cache.controller_id:
            roles.append("controller")
        if b.broker_id == deps.broker_id:
            roles.append("this broker")
        leaders = replicas = out_of_isr = 0
        for t in cache.topics.values():
            for p in t.partitions.values():
                leaders += p.leader == b.broker_id
                if b.broker_id in p.replicas:
                    replicas += 1
                    out_of_isr += b.broker_id not in p.isr
        rows.append(
            [
                b.broker_id,
                ", ".join(f"{name}://{h}:{p}" for name, (h, p) in sorted(b.endpoints.items())),
                b.rack or DASH,
                leaders,
                replicas,
                out_of_isr,
                ", ".join(roles),
            ]
        )
    lm = deps.log_manager
    dirs = [[str(d), "offline" if d in lm.offline_dirs else "online"] for d in lm.log_dirs]
    cfg = deps.config
    config_rows = []
    for name, value in cfg.items():
        d = CONFIG_DEFS.get(name)
        if d is None or not cfg.is_explicit(name):
            continue
        config_rows.append([name, "(hidden)" if d.type == "password" else kafka_value(value)])
    body = [
        dl(
            [
                ("Controller", f"broker {cache.controller_id} (epoch {cache.controller_epoch})"),
                ("Cluster id", cache.cluster_id or DASH),
                ("Live brokers", len(cache.brokers)),
            ]
        ),
        table(
            ["Broker", "Endpoints", "Rack", "Leaders", "Replicas", "Out of ISR", "Role"],
            rows,
            id="brokers",
        ),
        el("h2", f"Broker {deps.broker_id} (this one)"),
        dl(
            [
                ("Up", _uptime(time.time() - deps.started_at)),
                ("Client connections", len(deps.channel.connections)),
                ("Replicas held", len(deps.replica_manager.partitions)),
            ]
        ),
        el("h3", "Log dirs"),
        table(["Dir", "State"], dirs, id="logdirs"),
        el("h3", "Configs set (file or dynamic; the rest are Kafka's defaults)"),
        table(["Name", "Value"], config_rows, id="brokerconfigs"),
    ]
    return layout("Brokers", body, active="brokers", read_only=read_only)


def message(title: str, text: Any, *, read_only: bool, active: str, error: bool = False) -> Html:
    return layout(
        title,
        el("p", text, class_="error" if error else "note"),
        active=active,
        read_only=read_only,
    )


__all__ = [
    "brokers_page",
    "esc",
    "group_page",
    "groups_page",
    "lag_json",
    "layout",
    "message",
    "messages_page",
    "overview",
    "topic_page",
    "topics_page",
]
