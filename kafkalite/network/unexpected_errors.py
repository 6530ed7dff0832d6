"""Unexpected exceptions on a connection: one concise line each, one traceback per cause.

A handler that raises, or a response that cannot be encoded, is a bug to fix
at its root. Until it is, the client that triggers it gets its connection
closed (Kafka closes too when it cannot answer), and the log gets one warning
line per occurrence. The traceback is logged once per distinct cause (the
exception type and the line that raised it), so a client repeating the request
cannot fill the log with stack traces.
"""

from __future__ import annotations

import logging
import os
import traceback

log = logging.getLogger("kafkalite.server.unexpected")

#: causes whose traceback was logged: (exception type, file, line)
_seen: set[tuple[str, str, int]] = set()
_MAX_CAUSES = 1000
_MAX_TEXT = 200


def cause_of(exc: BaseException) -> tuple[str, str, int]:
    """The exception type and the innermost frame that raised it."""
    tb = exc.__traceback__
    frames = traceback.extract_tb(tb) if tb is not None else []
    if not frames:
        return type(exc).__name__, "?", 0
    last = frames[-1]
    return type(exc).__name__, last.filename, last.lineno or 0


def describe_unexpected(what: str, exc: BaseException) -> str:
    """``what`` failed: one line naming the exception, its text (bounded) and where it was raised.

    Logs the traceback (at ERROR) the first time this cause is seen.
    """
    key = cause_of(exc)
    name, filename, line = key
    text = str(exc)
    if len(text) > _MAX_TEXT:
        text = text[:_MAX_TEXT] + "..."
    where = f"{os.path.basename(filename)}:{line}"
    if key not in _seen and len(_seen) < _MAX_CAUSES:
        _seen.add(key)
        log.error(
            "%s failed: %s at %s (this cause's traceback is logged once)",
            what,
            name,
            where,
            exc_info=exc,
        )
    return f"{what} failed: {name}: {text} ({where})"


def report_unexpected(peer: object, what: str, exc: BaseException) -> None:
    """Log that the connection from ``peer`` is closed because ``what`` raised ``exc``."""
    log.warning("closing connection from %s: %s", peer, describe_unexpected(what, exc))
