"""The console's writes, each a form, a confirmation page, then the change.

Creating a topic is validated first (CreateTopics' validate_only path) and shown for
confirmation; deleting one asks for its name to be typed; resetting a group's offsets
shows the plan (Kafka's ``--dry-run``) before ``--execute``, and, as Kafka's tool,
only for a group without members. Every form carries the console's token, so a page
of another site cannot post to it. None of this exists when the console is read-only.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from kafkalite.coordinator.group.group_metadata import GroupMetadata, OffsetAndMetadata
from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.console.deps import ConsoleDeps
from kafkalite.server.console.markup import Html, el, url
from kafkalite.server.console.pages import DASH, layout, table
from kafkalite.server.topic_names import INTERNAL_TOPICS

STRATEGIES = ("earliest", "latest", "to-offset", "to-datetime", "shift-by")


@dataclass(slots=True)
class _Config:
    name: str
    value: str


@dataclass(slots=True)
class _NewTopic:
    """The CreateTopics shape AdminManager.create_topics reads."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: list[_Config] = field(default_factory=list)
    assignments: tuple[Any, ...] = ()


def _hidden(values: dict[str, object]) -> list[Html]:
    return [el("input", type="hidden", name=k, value=v) for k, v in values.items()]


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)


# ---- create topic --------------------------------------------------------------------------
def parse_configs(text: str) -> list[_Config]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"not name=value: {line}")
        out.append(_Config(name.strip(), value.strip()))
    return out


def create_form(
    token: str,
    *,
    name: str = "",
    partitions: str = "",
    rf: str = "",
    configs: str = "",
    error: str | None = None,
) -> Html:
    return layout(
        "Create topic",
        [
            el("p", error, class_="error") if error else None,
            el(
                "form",
                _hidden({"token": token, "step": "review"}),
                el(
                    "label",
                    "Name ",
                    el("input", type="text", name="name", value=name, required=True),
                ),
                el(
                    "label",
                    "Partitions ",
                    el(
                        "input",
                        type="number",
                        name="partitions",
                        value=partitions,
                        min=1,
                        placeholder="num.partitions",
                    ),
                ),
                el(
                    "label",
                    "Replication factor ",
                    el(
                        "input",
                        type="number",
                        name="replication_factor",
                        value=rf,
                        min=1,
                        placeholder="default.replication.factor",
                    ),
                ),
                el(
                    "label",
                    "Configs (name=value, one a line) ",
                    el("textarea", configs, name="configs", rows=4, cols=40),
                ),
                el("button", "Review", type="submit"),
                method="post",
                action="/topics/new",
                class_="stacked",
                id="create-topic",
            ),
        ],
        active="topics",
        read_only=False,
    )


async def create_topic(
    deps: ConsoleDeps, token: str, form: dict[str, str]
) -> tuple[Html, str | None]:
    """(page, the created topic's name when it was created)."""
    name = form.get("name", "")
    raw = {
        "name": name,
        "partitions": form.get("partitions", ""),
        "rf": form.get("replication_factor", ""),
        "configs": form.get("configs", ""),
    }
    try:
        topic = _NewTopic(
            name,
            int(raw["partitions"]) if raw["partitions"].strip() else -1,
            int(raw["rf"]) if raw["rf"].strip() else -1,
            parse_configs(raw["configs"]),
        )
    except ValueError as e:
        return create_form(token, error=str(e), **raw), None
    confirm = form.get("step") == "create"
    [r] = await deps.admin.create_topics([topic], validate_only=not confirm, timeout_ms=10000)
    if r.error:
        msg = f"{_error_name(r.error)}: {r.message or 'topic ' + name + ' cannot be created'}"
        return create_form(token, error=msg, **raw), None
    if confirm:
        return Html(""), name
    summary = table(
        ["Name", "Partitions", "Replication factor", "Configs"],
        [
            [
                name,
                r.num_partitions,
                r.replication_factor,
                ", ".join(f"{c.name}={c.value}" for c in topic.configs) or DASH,
            ]
        ],
        id="review",
    )
    page = layout(
        "Create topic?",
        [
            summary,
            el(
                "form",
                _hidden(
                    {
                        "token": token,
                        "step": "create",
                        "name": name,
                        "partitions": raw["partitions"],
                        "replication_factor": raw["rf"],
                        "configs": raw["configs"],
                    }
                ),
                el("button", "Create topic", type="submit", id="confirm"),
                " ",
                el("a", "Cancel", href="/topics"),
                method="post",
                action="/topics/new",
            ),
        ],
        active="topics",
        read_only=False,
    )
    return page, None


# ---- delete topic --------------------------------------------------------------------------
def delete_form(token: str, topic: str, partitions: int, error: str | None = None) -> Html:
    return layout(
        f"Delete topic {topic}?",
        [
            el("p", error, class_="error") if error else None,
            el(
                "p",
                f"This deletes the topic's {partitions} partitions and all their records on every "
                "broker. It cannot be undone. Type the topic's name to confirm.",
                class_="warning",
            ),
            el(
                "form",
                _hidden({"token": token}),
                el(
                    "input",
                    type="text",
                    name="confirm",
                    value="",
                    placeholder=topic,
                    autocomplete="off",
                ),
                el("button", "Delete topic", type="submit", class_="danger", id="confirm"),
                " ",
                el("a", "Cancel", href=url("topics", topic)),
                method="post",
                action=url("topics", topic, "delete"),
                id="delete-topic",
            ),
        ],
        active="topics",
        read_only=False,
    )


async def delete_topic(deps: ConsoleDeps, token: str, topic: str, form: dict[str, str]) -> Html:
    t = deps.metadata_cache.get_topic(topic)
    n = 0 if t is None else len(t.partitions)
    if topic in INTERNAL_TOPICS:
        return delete_form(token, topic, n, f"{topic} is an internal topic")
    if form.get("confirm") != topic:
        return delete_form(token, topic, n, "The name typed does not match: nothing deleted.")
    result = await deps.admin.delete_topics([topic], timeout_ms=10000)
    code = result.get(topic, 0)
    if code:
        return delete_form(token, topic, n, f"{_error_name(code)}: topic {topic} was not deleted")
    return layout(
        "Topic deleted",
        el("p", f"Topic {topic} was deleted. ", el("a", "Back to topics", href="/topics")),
        active="topics",
        read_only=False,
    )


# ---- reset offsets ------------------------------------------------------------------------
def parse_time_ms(text: str) -> int:
    """Milliseconds since the epoch, or an ISO 8601 date-time (UTC when no zone)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    dt = datetime.datetime.fromisoformat(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.UTC)
    return int(dt.timestamp() * 1000)


def reset_form(
    token: str, g: GroupMetadata, topics: list[str], form: dict[str, str], error: str | None = None
) -> Html:
    chosen_topic = form.get("topic", "")
    chosen = form.get("strategy", "earliest")
    return layout(
        f"Reset offsets of {g.group_id}",
        [
            el("p", error, class_="error") if error else None,
            el(
                "p",
                "As Kafka's kafka-consumer-groups --reset-offsets: the group must have no "
                "members; the plan is shown before anything is written.",
                class_="note",
            ),
            el(
                "form",
                _hidden({"token": token, "step": "preview"}),
                el(
                    "label",
                    "Topic ",
                    el(
                        "select",
                        [el("option", t, value=t, selected=t == chosen_topic) for t in topics],
                        name="topic",
                    ),
                ),
                el(
                    "label",
                    "Strategy ",
                    el(
                        "select",
                        [el("option", s, value=s, selected=s == chosen) for s in STRATEGIES],
                        name="strategy",
                    ),
                ),
                el(
                    "label",
                    "Value (offset, date-time or shift) ",
                    el("input", type="text", name="value", value=form.get("value", "")),
                ),
                el("button", "Preview", type="submit"),
                method="post",
                action=url("groups", g.group_id, "reset"),
                class_="stacked",
                id="reset-offsets",
            ),
        ],
        active="groups",
        read_only=False,
    )


def plan_reset(
    deps: ConsoleDeps, g: GroupMetadata, topic: str, strategy: str, value: str
) -> list[tuple[int, int | None, int | None, str]]:
    """(partition, current committed, new offset or None, note) per partition of ``topic``."""
    t = deps.metadata_cache.get_topic(topic)
    if t is None:
        raise ValueError(f"unknown topic {topic}")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy}")
    out: list[tuple[int, int | None, int | None, str]] = []
    for p in sorted(t.partitions):
        current = g.offsets.get((topic, p))
        cur = None if current is None else current.offset
        log = deps.leader_log(topic, p)
        if log is None:
            out.append((p, cur, None, "not led by this broker: skipped"))
            continue
        lo, hi = log.log_start_offset, log.high_watermark
        if strategy == "earliest":
            new = lo
        elif strategy == "latest":
            new = hi
        elif strategy == "to-offset":
            new = int(value)
        elif strategy == "to-datetime":
            found = log.fetch_offset_by_timestamp(parse_time_ms(value))
            new = hi if found is None else found[0]
        else:
            if cur is None:
                out.append((p, cur, None, "no committed offset to shift: skipped"))
                continue
            new = cur + int(value)
        out.append((p, cur, min(max(new, lo), hi), ""))
    return out


async def reset_offsets(
    deps: ConsoleDeps, token: str, g: GroupMetadata, form: dict[str, str]
) -> Html:
    names = sorted(
        {tp[0] for tp in g.offsets}
        | {n for n in deps.metadata_cache.topics if n not in INTERNAL_TOPICS}
    )
    if form.get("step") not in ("preview", "execute"):
        return reset_form(token, g, names, form)
    topic, strategy, value = form.get("topic", ""), form.get("strategy", ""), form.get("value", "")
    if not g.is_empty:
        return reset_form(
            token,
            g,
            names,
            form,
            f"Assignments can only be reset if the group '{g.group_id}' is inactive, but the "
            f"current state is {g.state_name}.",
        )
    try:
        plan = plan_reset(deps, g, topic, strategy, value)
    except ValueError as e:
        return reset_form(token, g, names, form, f"Cannot plan the reset: {e}")
    rows = [
        [topic, p, DASH if cur is None else cur, DASH if new is None else new, note]
        for p, cur, new, note in plan
    ]
    if form.get("step") == "preview":
        return layout(
            f"Reset offsets of {g.group_id}?",
            [
                table(["Topic", "Partition", "Current offset", "New offset", ""], rows, id="plan"),
                el(
                    "form",
                    _hidden(
                        {
                            "token": token,
                            "step": "execute",
                            "topic": topic,
                            "strategy": strategy,
                            "value": value,
                        }
                    ),
                    el("button", "Reset offsets", type="submit", id="confirm", class_="danger"),
                    " ",
                    el("a", "Cancel", href=url("groups", g.group_id)),
                    method="post",
                    action=url("groups", g.group_id, "reset"),
                ),
            ],
            active="groups",
            read_only=False,
        )
    now = deps.clock_ms()
    offsets = {
        (topic, p): OffsetAndMetadata(new, commit_timestamp=now)
        for p, _c, new, _n in plan
        if new is not None
    }
    results = await deps.group_coordinator.handle_commit_offsets(
        g.group_id, "", None, -1, offsets, 9
    )
    done_rows = [
        [tp[0], tp[1], offsets[tp].offset, "ok" if not code else _error_name(code)]
        for tp, code in sorted(results.items())
    ]
    return layout(
        f"Offsets of {g.group_id} reset",
        [
            table(["Topic", "Partition", "New offset", "Result"], done_rows, id="result"),
            el("p", el("a", "Back to the group", href=url("groups", g.group_id))),
        ],
        active="groups",
        read_only=False,
    )
