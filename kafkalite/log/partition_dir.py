"""A partition's directory: ``<log dir>/<topic>-<partition>``, and never anywhere else.

Topic names come off the network (LeaderAndIsr, CreateTopics, auto-creation) and
become directory names, so a name such as ``../x``, ``a/b`` or one with a NUL
would make ``mkdir``/``rename``/``rmtree`` act outside ``log.dirs``. Kafka's topic
rules (``Topic.validate``: ASCII letters, digits, ``.``, ``_``, ``-``; at most 249
characters; not ``.`` or ``..``) make every legal name one safe path component.
The request handlers check those rules and answer with an error code; this module
is the storage layer's own line of defence: every path the log manager creates,
renames or deletes is built here, from a legal name, and checked to be a direct
child of its log dir.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from kafkalite.log.errors import LogError
from kafkalite.protocol.errors import ErrorCode

#: Kafka's Topic.validate rules (kafkalite.server.topic_names gives clients the messages)
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


class UnsafeLogDir(LogError):
    """A topic name or partition that cannot be a directory inside a log dir."""

    error_code = ErrorCode.invalid_topic_exception


def is_legal_topic_name(topic: str) -> bool:
    """Kafka's Topic.validate, as a predicate: the names that are safe path components."""
    # fullmatch: "$" would also match before a trailing newline
    return _LEGAL_TOPIC.fullmatch(topic) is not None and topic not in (".", "..")


def direct_child(log_dir: Path, name: str) -> Path:
    """``log_dir / name`` after checking it resolves to a direct child of ``log_dir``
    (no separator, NUL, ``.`` or ``..`` in ``name``)."""
    if not name or "\x00" in name or os.sep in name or (os.altsep and os.altsep in name):
        raise UnsafeLogDir(f"{name!r} is not a directory name")
    path = log_dir / name
    if name in (".", "..") or os.path.dirname(os.path.normpath(path)) != os.path.normpath(log_dir):
        raise UnsafeLogDir(f"{name!r} would not be inside log dir {log_dir}")
    return path


def partition_dir(log_dir: Path, topic: str, partition: int) -> Path:
    """``<log_dir>/<topic>-<partition>`` for a legal topic and a partition >= 0."""
    if not is_legal_topic_name(topic):
        raise UnsafeLogDir(f"illegal topic name {topic!r}: refusing to make it a directory")
    if partition < 0:
        raise UnsafeLogDir(f"partition {partition} of {topic} cannot be a directory")
    return direct_child(log_dir, f"{topic}-{partition}")
