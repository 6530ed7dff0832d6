"""Topic name rules (Kafka's ``Topic.validate``): error 17 INVALID_TOPIC_EXCEPTION.

Messages follow Kafka 4's wording, so admin tools print the same text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def validate_topic_name(name: str) -> str | None:
    """Return why the name is illegal, or None."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"Topic name: {name}"
        )
    # fullmatch, not match with "$": "$" also matches before a trailing newline
    if _LEGAL.fullmatch(name) is None:
        return (
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def has_collision_chars(name: str) -> bool:
    return "." in name or "_" in name


def unify_collision_chars(name: str) -> str:
    return name.replace(".", "_")


def colliding_topic(name: str, existing: Iterable[str]) -> str | None:
    """An existing topic that differs from ``name`` only by '.' vs '_' (their metric
    names would collide, so Kafka refuses the second one), or None."""
    if not has_collision_chars(name):
        return None
    unified = unify_collision_chars(name)
    clashes = sorted(
        t
        for t in existing
        if t != name and has_collision_chars(t) and unify_collision_chars(t) == unified
    )
    return clashes[0] if clashes else None
