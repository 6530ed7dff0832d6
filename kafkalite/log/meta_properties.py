"""``meta.properties`` in every log dir: which broker (and cluster) owns the data.

Kafka's ZooKeeper-mode format (a Java properties file)::

    #
    #<date>
    broker.id=0
    cluster.id=...
    version=0

Rules at startup (KafkaServer.getOrGenerateBrokerId): ids stored in different
dirs must agree; a configured id must equal the stored one; with no configured
id the stored one is used; with neither the caller supplies one (generated).
Dirs without the file then get one written (atomically).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkalite.log.checkpoint import atomic_write
from kafkalite.log.errors import InconsistentBrokerIdError, InconsistentClusterIdError

__all__ = [
    "META_PROPERTIES_FILE",
    "MetaProperties",
    "check_log_dirs",
    "ensure_meta_properties",
    "read_meta_properties",
    "resolve_broker_id",
    "write_meta_properties",
]

META_PROPERTIES_FILE = "meta.properties"


@dataclass(slots=True)
class MetaProperties:
    broker_id: int
    cluster_id: str | None = None
    version: int = 0
    extra: dict[str, str] = field(default_factory=dict)

    def to_properties(self) -> dict[str, str]:
        props = dict(self.extra)
        props["version"] = str(self.version)
        props["broker.id"] = str(self.broker_id)
        if self.cluster_id is not None:
            props["cluster.id"] = self.cluster_id
        return props


def _escape(s: str, key: bool) -> str:
    out = []
    for i, ch in enumerate(s):
        if ch in "\\=:#!" or (ch == " " and (key or i == 0)):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def _java_date(epoch_s: float) -> str:
    """``java.util.Date.toString()``: ``Sat Nov 22 07:33:00 UTC 2025``."""
    return time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(epoch_s))


def render_properties(props: Mapping[str, str], *, now_s: float | None = None) -> bytes:
    """Java ``Properties.store(writer, "")`` output with keys sorted."""
    lines = ["#", "#" + _java_date(time.time() if now_s is None else now_s)]
    lines += [f"{_escape(k, True)}={_escape(v, False)}" for k, v in sorted(props.items())]
    return ("\n".join(lines) + "\n").encode("utf-8")


def parse_properties(text: str) -> dict[str, str]:
    """Enough of Java's properties syntax for files Kafka writes (and hand edits)."""
    props: dict[str, str] = {}
    logical: list[str] = []
    for raw in text.splitlines():
        line = raw.lstrip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical.append(line[:-1])
            continue
        logical.append(line)
        full = "".join(logical)
        logical = []
        key, value = _split_kv(full)
        props[_unescape(key)] = _unescape(value)
    return props


def _split_kv(line: str) -> tuple[str, str]:
    i = 0
    n = len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t":
            key = line[:i]
            j = i
            while j < n and line[j] in " \t":
                j += 1
            if j < n and line[j] in "=:" and ch in " \t":
                j += 1
            elif ch in "=:":
                j = i + 1
            while j < n and line[j] in " \t":
                j += 1
            return key, line[j:]
        i += 1
    return line, ""


def _unescape(s: str) -> str:
    out = []
    i = 0
    while i < len(s):
        ch = s[i]
        if ch == "\\" and i + 1 < len(s):
            nxt = s[i + 1]
            if nxt == "u" and i + 5 < len(s) + 0:
                out.append(chr(int(s[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append({"n": "\n", "t": "\t", "r": "\r", "f": "\f"}.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def read_meta_properties(log_dir: Path) -> MetaProperties | None:
    """The dir's meta.properties, or None when absent."""
    path = Path(log_dir) / META_PROPERTIES_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    props = parse_properties(text)
    try:
        version = int(props.pop("version"))
        broker_id = (
            int(props.pop("broker.id")) if "broker.id" in props else int(props.pop("node.id"))
        )
    except (KeyError, ValueError) as e:
        raise ValueError(f"{path}: invalid meta.properties ({e})") from None
    cluster_id = props.pop("cluster.id", None)
    return MetaProperties(broker_id, cluster_id, version, props)


def check_log_dirs(log_dirs: Iterable[Path]) -> tuple[list[Path], dict[Path, str]]:
    """(healthy dirs, {failed dir: why}): Kafka's MetaPropertiesEnsemble at start-up.

    A dir that cannot be created, or whose meta.properties cannot be read or
    parsed, starts offline (Kafka's errorLogDirs); the broker runs on the rest.
    """
    healthy: list[Path] = []
    failed: dict[Path, str] = {}
    for d in log_dirs:
        d = Path(d)
        if d.exists() and not d.is_dir():
            failed[d] = f"{d} is a file, not a directory"
            continue
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            failed[d] = _why_not_created(d, e)
            continue
        try:
            read_meta_properties(d)
        except (OSError, ValueError, UnicodeDecodeError) as e:
            failed[d] = f"{d / META_PROPERTIES_FILE}: {e}"
            continue
        healthy.append(d)
    return healthy, failed


def _why_not_created(d: Path, e: OSError) -> str:
    """One line: why ``d`` could not be created (the file in its way, or the OS's reason)."""
    if isinstance(e, NotADirectoryError | FileExistsError):
        for parent in [d, *d.parents]:
            if parent.exists() and not parent.is_dir():
                return f"cannot create {d}: {parent} is a file"
    return f"cannot create {d}: {e.strerror or e}"


def write_meta_properties(
    log_dir: Path, meta: MetaProperties, *, now_s: float | None = None
) -> None:
    atomic_write(
        Path(log_dir) / META_PROPERTIES_FILE, render_properties(meta.to_properties(), now_s=now_s)
    )


def resolve_broker_id(
    log_dirs: Iterable[Path],
    configured_id: int | None,
    generate: Callable[[], int] | None = None,
) -> int:
    """The broker id to run with, following Kafka's rules (see module doc)."""
    stored: dict[int, list[Path]] = {}
    for d in log_dirs:
        meta = read_meta_properties(d)
        if meta is not None:
            stored.setdefault(meta.broker_id, []).append(Path(d))
    if len(stored) > 1:
        detail = ", ".join(
            f"broker.id={i} in {[str(p) for p in ps]}" for i, ps in sorted(stored.items())
        )
        raise InconsistentBrokerIdError(
            f"failed to match broker.id across log.dirs ({detail}); an incorrect log.dirs or a"
            " log dir holding data of another broker is likely"
        )
    if configured_id is not None and configured_id >= 0:
        if stored and configured_id not in stored:
            (only,) = stored
            raise InconsistentBrokerIdError(
                f"configured broker.id {configured_id} doesn't match stored broker.id {only} in"
                " meta.properties; if you moved your data, make sure the configured broker.id matches"
            )
        return configured_id
    if stored:
        (only,) = stored
        return only
    if generate is None:
        raise InconsistentBrokerIdError(
            "no broker.id configured and none stored in meta.properties"
        )
    return generate()


def ensure_meta_properties(
    log_dirs: Iterable[Path],
    broker_id: int,
    cluster_id: str | None = None,
    *,
    now_s: float | None = None,
    on_write_error: Callable[[Path, OSError], object] | None = None,
) -> None:
    """Check stored cluster ids agree, then write meta.properties where missing (or id-less).

    A write that fails goes to ``on_write_error`` (the dir goes offline) when given.
    """
    dirs = [Path(d) for d in log_dirs]
    metas = {d: read_meta_properties(d) for d in dirs}
    stored_clusters = {
        m.cluster_id for m in metas.values() if m is not None and m.cluster_id is not None
    }
    if len(stored_clusters) > 1:
        raise InconsistentClusterIdError(
            f"cluster.id differs across log.dirs: {sorted(stored_clusters)}"
        )
    if cluster_id is not None and stored_clusters and cluster_id not in stored_clusters:
        raise InconsistentClusterIdError(
            f"the cluster id {cluster_id} doesn't match the stored cluster.id {next(iter(stored_clusters))}"
            " in meta.properties; the broker is trying to join the wrong cluster"
        )
    effective_cluster = cluster_id if cluster_id is not None else next(iter(stored_clusters), None)
    for d, meta in metas.items():
        if meta is not None and meta.broker_id != broker_id:
            raise InconsistentBrokerIdError(
                f"{d}: stored broker.id {meta.broker_id} != {broker_id}"
            )
        if meta is None or (meta.cluster_id is None and effective_cluster is not None):
            extra = meta.extra if meta is not None else {}
            try:
                d.mkdir(parents=True, exist_ok=True)
                write_meta_properties(
                    d, MetaProperties(broker_id, effective_cluster, 0, extra), now_s=now_s
                )
            except OSError as e:
                if on_write_error is None:
                    raise
                on_write_error(d, e)
