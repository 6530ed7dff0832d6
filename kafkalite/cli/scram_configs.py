"""``kafkalite configs --entity-type users``'s SCRAM credentials, as kafka-configs.sh:
``--add-config 'SCRAM-SHA-256=[iterations=8192,password=secret]'``,
``--delete-config SCRAM-SHA-256``, and ``--describe`` printing the mechanisms and
iterations (never a secret). The password is salted here, on the client, as
kafka-configs.sh does: only the salted password crosses the wire
(AlterUserScramCredentials), and the broker stores only keys derived from it.
"""

from __future__ import annotations

import os
from typing import Any

from kafkalite.cli.wire_client import WireClient
from kafkalite.protocol import scram

DESCRIBE, ALTER = 50, 51
DEFAULT_ITERATIONS = 4096


def split_configs(texts: list[str] | None) -> list[str]:
    """``k=v`` entries split on the commas outside ``[...]`` (Kafka's ConfigCommand)."""
    out: list[str] = []
    for text in texts or []:
        depth, cur = 0, ""
        for ch in text:
            if ch == "[":
                depth += 1
            elif ch == "]":
                depth -= 1
            if ch == "," and depth == 0:
                if cur.strip():
                    out.append(cur.strip())
                cur = ""
            else:
                cur += ch
        if cur.strip():
            out.append(cur.strip())
    return out


def is_scram(key: str) -> bool:
    return key.split("=", 1)[0].strip() in scram.MECHANISMS


def upsertion(user: str, entry: str) -> dict[str, Any]:
    """``SCRAM-SHA-256=[iterations=8192,password=pw]`` -> an AlterUserScramCredentials upsertion."""
    name, _, value = entry.partition("=")
    mech = scram.MECHANISMS[name.strip()]
    value = value.strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    fields = dict(kv.split("=", 1) for kv in value.split(",") if "=" in kv)
    if "password" not in fields:
        raise ValueError(f"{mech.name} needs a password: {mech.name}=[password=...]")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise ValueError(f"{mech.name}: iterations must be a number") from None
    salt = os.urandom(32)
    salted = scram.salted_password(mech, fields["password"].encode(), salt, iterations)
    return {
        "name": user,
        "mechanism": mech.type_id,
        "iterations": iterations,
        "salt": salt,
        "salted_password": salted,
    }


def alter(
    c: WireClient, user: str, upserts: list[str], deletes: list[str]
) -> tuple[int, str | None]:
    body = {
        "deletions": [
            {"name": user, "mechanism": scram.MECHANISMS[d.strip()].type_id} for d in deletes
        ],
        "upsertions": [upsertion(user, u) for u in upserts],
    }
    r = c.call(ALTER, 0, body)
    for res in r.results:
        if res.error_code:
            return int(res.error_code), f"{res.error_code.name} {res.error_message or ''}"
    return 0, None


def describe_lines(c: WireClient, users: list[str] | None) -> list[str]:
    """kafka-configs.sh's lines: ``SCRAM credential configs for user-principal 'alice' are
    SCRAM-SHA-256=iterations=8192``."""
    r = c.call(DESCRIBE, 0, {"users": None if users is None else [{"name": u} for u in users]})
    lines = []
    for res in r.results:
        if res.error_code:
            continue  # a user without credentials: only its quotas (if any) are printed
        infos = ", ".join(
            f"{scram.BY_TYPE[int(i.mechanism)].name}=iterations={int(i.iterations)}"
            for i in sorted(res.credential_infos, key=lambda i: int(i.mechanism))
            if int(i.mechanism) in scram.BY_TYPE
        )
        lines.append(f"SCRAM credential configs for user-principal '{res.user}' are {infos}")
    return lines
