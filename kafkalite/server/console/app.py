"""The console: routes, static files, the sampler, and its HTTP server on the broker's loop."""

from __future__ import annotations

import json
import logging
import secrets
from importlib import resources
from typing import Any

from kafkalite.server.console import actions, pages
from kafkalite.server.console.cluster import RemoteFigures
from kafkalite.server.console.deps import ConsoleDeps
from kafkalite.server.console.http import HttpRequest, HttpResponse, HttpServer
from kafkalite.server.console.markup import url
from kafkalite.server.console.messages import FORMATS, BrowseResult, browse
from kafkalite.server.console.sampler import (
    BrokerStateSource,
    FallbackSource,
    RegistrySource,
    Sampler,
)
from kafkalite.server.topic_names import INTERNAL_TOPICS

__all__ = ["ConsoleApp", "ConsoleServer"]

log = logging.getLogger(__name__)

_STATIC_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
}
_STATIC_FILES = (
    "console.css",
    "console.js",
    "uplot/uPlot.iife.min.js",
    "uplot/uPlot.min.css",
    "uplot/LICENSE",
)
MAX_LIMIT = 500
#: "all partitions" reads each partition: offered up to this many partitions
ALL_PARTITIONS_MAX = 64
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def _int(text: str, default: int) -> int:
    try:
        return int(text)
    except ValueError:
        return default


def _static(name: str) -> bytes:
    return resources.files("kafkalite.server.console").joinpath("static", name).read_bytes()


def _led_logs(deps: ConsoleDeps) -> list[Any]:
    return [
        p.log
        for (topic, _), p in list(deps.replica_manager.partitions.items())
        if p.is_leader and p.log is not None and topic not in INTERNAL_TOPICS
    ]


class ConsoleApp:
    """Request handler: one method per route, each a page render or a form action."""

    def __init__(
        self, deps: ConsoleDeps, *, read_only: bool, sampler: Sampler, loopback_only: bool = False
    ) -> None:
        self.deps = deps
        self.read_only = read_only
        self.sampler = sampler
        #: bound to a loopback address: answer only requests naming one (a page of another
        #: site whose name was re-pointed at 127.0.0.1 must not read the console)
        self.loopback_only = loopback_only
        #: proves a form was served by this console (no cross-site posts)
        self.token = secrets.token_urlsafe(24)
        self._static_cache: dict[str, bytes] = {}

    def _html(self, page: str, status: int = 200) -> HttpResponse:
        return HttpResponse(page, status)

    def _not_found(self, what: str, active: str = "overview") -> HttpResponse:
        return self._html(
            pages.message("Not found", what, read_only=self.read_only, active=active, error=True),
            404,
        )

    def _forbidden(self, active: str) -> HttpResponse:
        return self._html(
            pages.message(
                "Read-only console",
                "This console is read-only (kafkalite.console.read.only=true).",
                read_only=True,
                active=active,
                error=True,
            ),
            403,
        )

    async def handle(self, req: HttpRequest) -> HttpResponse:
        s = req.segments
        head = s[0] if s else ""
        if self.loopback_only:
            host = req.headers.get("host", "")
            name = host if host.endswith("]") else host.rsplit(":", 1)[0]
            if name not in _LOOPBACK:
                return HttpResponse("unexpected Host\n", 403, "text/plain; charset=utf-8")
        if req.method == "POST":
            if self.read_only:
                return self._forbidden(head or "overview")
            if not secrets.compare_digest(req.form.get("token", ""), self.token):
                return HttpResponse("bad or missing form token\n", 403, "text/plain; charset=utf-8")
        if not s:
            return self._html(
                pages.overview(
                    self.deps, read_only=self.read_only, source=self.sampler.source.description
                )
            )
        if head == "static" and len(s) >= 2:
            return self._static_file("/".join(s[1:]))
        if head == "api" and s[1:] == ["samples"]:
            return HttpResponse(json.dumps(self.sampler.series()), content_type="application/json")
        if head == "topics":
            return await self._topics(req, s[1:])
        if head == "groups":
            return await self._groups(req, s[1:])
        if head == "brokers" and len(s) == 1:
            return self._html(pages.brokers_page(self.deps, read_only=self.read_only))
        return self._not_found(f"No page at /{'/'.join(s)}.")

    def _static_file(self, name: str) -> HttpResponse:
        if name not in _STATIC_FILES:
            return HttpResponse("not found\n", 404, "text/plain; charset=utf-8")
        body = self._static_cache.get(name)
        if body is None:
            body = self._static_cache[name] = _static(name)
        ctype = next(
            (t for ext, t in _STATIC_TYPES.items() if name.endswith(ext)),
            "text/plain; charset=utf-8",
        )
        resp = HttpResponse(body, content_type=ctype)
        resp.headers["Cache-Control"] = "max-age=3600"
        return resp

    async def _topics(self, req: HttpRequest, rest: list[str]) -> HttpResponse:
        deps, ro = self.deps, self.read_only
        if not rest:
            q, internal = req.query.get("q", ""), req.query.get("internal") == "1"
            page = _int(req.query.get("page", "1"), 1)
            shown = pages.page_of(pages.topic_names(deps, q, internal), page, pages.PAGE_SIZE)[0]
            cache = deps.metadata_cache.topics
            remote = await self._remote(
                pages.remote_led(deps, [cache[n] for n in shown if n in cache])
            )
            return self._html(
                pages.topics_page(
                    deps, read_only=ro, q=q, internal=internal, page=page, remote=remote
                )
            )
        if rest == ["new"]:
            if ro:
                return self._forbidden("topics")
            if req.method == "GET":
                return self._html(actions.create_form(self.token))
            html, created = await actions.create_topic(deps, self.token, req.form)
            return HttpResponse.redirect(url("topics", created)) if created else self._html(html)
        t = deps.metadata_cache.get_topic(rest[0])
        if t is None:
            return self._not_found(f"No topic {rest[0]}.", "topics")
        if len(rest) == 1:
            pno = _int(req.query.get("page", "1"), 1)
            # every partition's figures: the topic's totals need them all
            remote = await self._remote(pages.remote_led(deps, [t]))
            return self._html(pages.topic_page(deps, t, read_only=ro, page=pno, remote=remote))
        if rest[1:] == ["delete"]:
            if ro:
                return self._forbidden("topics")
            if req.method == "GET":
                return self._html(actions.delete_form(self.token, t.name, len(t.partitions)))
            return self._html(await actions.delete_topic(deps, self.token, t.name, req.form))
        if rest[1:] == ["messages"]:
            return await self._messages(req, t)
        return self._not_found(f"No page at /topics/{'/'.join(rest)}.", "topics")

    @staticmethod
    def _start(log_: Any, offset_arg: str, ts_arg: str, limit: int) -> tuple[int, str | None]:
        """Where to read from: a time, ``earliest``/``latest`` or an offset."""
        start, note = log_.log_start_offset, None
        if ts_arg:
            try:
                found = log_.fetch_offset_by_timestamp(actions.parse_time_ms(ts_arg))
            except ValueError:
                note = f"Not a time: {ts_arg} (use ms since the epoch or ISO 8601)."
            else:
                start = log_.high_watermark if found is None else found[0]
                note = None if found is not None else f"No record at or after {ts_arg}."
        elif offset_arg:
            if offset_arg.lower() in ("latest", "newest", "end"):
                start = log_.high_watermark - limit
            elif offset_arg.lower() not in ("earliest", "beginning", "start"):
                start = _int(offset_arg, log_.log_start_offset)
        return max(start, log_.log_start_offset), note

    async def _messages(self, req: HttpRequest, t: Any) -> HttpResponse:
        deps = self.deps
        q = req.query
        limit = min(max(_int(q.get("limit", "20"), 20), 1), MAX_LIMIT)
        fmt = q.get("format", "auto")
        fmt = fmt if fmt in FORMATS else "auto"
        offset_arg, ts_arg = q.get("offset", "").strip(), q.get("timestamp", "").strip()
        if q.get("partition", "all") == "all" and len(t.partitions) <= ALL_PARTITIONS_MAX:
            return await self._all_partitions(t, offset_arg, ts_arg, limit, fmt)
        partition = _int(q.get("partition", "0"), 0)
        if partition not in t.partitions:
            partition = min(t.partitions, default=0)
        log_ = deps.leader_log(t.name, partition)
        result, note, start = None, None, 0
        if log_ is not None:
            start, note = self._start(log_, offset_arg, ts_arg, limit)
            result = await browse(log_, start, limit)
        leader = t.partitions[partition].leader if t.partitions else -1
        return self._html(
            pages.messages_page(
                deps,
                t,
                read_only=self.read_only,
                partition=partition,
                offset_arg=offset_arg,
                timestamp_arg=ts_arg,
                limit=limit,
                fmt=fmt,
                result=result,
                leader=leader,
                start_offset=start,
                note=note,
            )
        )

    async def _all_partitions(
        self, t: Any, offset_arg: str, ts_arg: str, limit: int, fmt: str
    ) -> HttpResponse:
        """Up to ``limit`` records of each partition led here, merged by timestamp: the
        first ``limit`` of them, or the last for ``latest``."""
        records, notes, elsewhere = [], [], []
        for i in sorted(t.partitions):
            log_ = self.deps.leader_log(t.name, i)
            if log_ is None:
                elsewhere.append(i)
                continue
            start, note = self._start(log_, offset_arg, ts_arg, limit)
            if note and note not in notes:
                notes.append(note)
            r = await browse(log_, start, limit)
            for rec in r.records:
                rec.partition = i
            records += r.records
            if r.error:
                notes.append(f"partition {i}: {r.error}")
        records.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
        newest = offset_arg.lower() in ("latest", "newest", "end") and not ts_arg
        records = records[-limit:] if newest else records[:limit]
        if elsewhere:
            notes.append(f"Partitions {', '.join(map(str, elsewhere))} are led by other brokers.")
        return self._html(
            pages.messages_page(
                self.deps,
                t,
                read_only=self.read_only,
                partition=None,
                offset_arg=offset_arg,
                timestamp_arg=ts_arg,
                limit=limit,
                fmt=fmt,
                result=BrowseResult(records=records),
                leader=-1,
                start_offset=0,
                note=" ".join(notes) or None,
            )
        )

    async def _remote(self, led: dict[int, list[tuple[str, int]]]) -> RemoteFigures | None:
        """What the leaders of ``led`` tell of their partitions (None: nothing to ask)."""
        reader = self.deps.cluster
        if reader is None or not led:
            return None
        return await reader.figures(led)

    async def _other_groups(self) -> tuple[list[Any], list[int]]:
        reader = self.deps.cluster
        if reader is None:
            return [], []
        return await reader.groups(self.deps.metadata_cache.brokers)

    async def _groups(self, req: HttpRequest, rest: list[str]) -> HttpResponse:
        deps, ro = self.deps, self.read_only
        if not rest:
            remote, silent = await self._other_groups()
            return self._html(
                pages.groups_page(
                    deps,
                    read_only=ro,
                    q=req.query.get("q", ""),
                    page=_int(req.query.get("page", "1"), 1),
                    remote=remote,
                    silent=silent,
                )
            )
        g = deps.group_coordinator.manager.get_group(rest[0])
        if g is None or g.state_name == "Dead":
            remote, _ = await self._other_groups()
            elsewhere = next((r for r in remote if r.group_id == rest[0]), None)
            if elsewhere is not None:
                return self._html(
                    pages.message(
                        f"Group {rest[0]}",
                        f"Group {rest[0]} ({elsewhere.state}) is coordinated by broker "
                        f"{elsewhere.coordinator}: its members, offsets and lag are on that "
                        "broker's console.",
                        read_only=ro,
                        active="groups",
                    )
                )
            return self._not_found(f"No group {rest[0]} on broker {deps.broker_id}.", "groups")
        if len(rest) == 1:
            return self._html(pages.group_page(deps, g, read_only=ro))
        if rest[1:] == ["lag.json"]:
            return HttpResponse(
                json.dumps(pages.lag_json(deps, g)), content_type="application/json"
            )
        if rest[1:] == ["reset"]:
            if ro:
                return self._forbidden("groups")
            form = req.form if req.method == "POST" else {}
            return self._html(await actions.reset_offsets(deps, self.token, g, form))
        return self._not_found(f"No page at /groups/{'/'.join(rest)}.", "groups")


class ConsoleServer:
    """``kafkalite.console.port``: the web console, on the broker's event loop."""

    def __init__(self, host: str, port: int, *, read_only: bool) -> None:
        self.host = host
        self.read_only = read_only
        self._port = port
        self.app: ConsoleApp | None = None
        self.sampler: Sampler | None = None
        self._http: HttpServer | None = None

    @property
    def port(self) -> int:
        return self._port if self._http is None else self._http.port

    async def start(self, deps: ConsoleDeps) -> None:
        source = FallbackSource(
            RegistrySource(deps.registry),
            BrokerStateSource(
                lambda: _led_logs(deps),
                lambda: deps.channel.requests_total,
            ),
        )
        self.sampler = Sampler(source)
        self.app = ConsoleApp(
            deps,
            read_only=self.read_only,
            sampler=self.sampler,
            loopback_only=self.host in _LOOPBACK,
        )
        self._http = HttpServer(self.app.handle, self.host, self._port)
        await self._http.start()
        self.sampler.start()
        log.info(
            "console on http://%s:%d/ (%s)",
            self.host,
            self.port,
            "read-only" if self.read_only else "read-write",
        )

    async def stop(self) -> None:
        if self.app is not None and self.app.deps.cluster is not None:
            self.app.deps.cluster.close()
        if self.sampler is not None:
            await self.sampler.stop()
        if self._http is not None:
            await self._http.stop()
