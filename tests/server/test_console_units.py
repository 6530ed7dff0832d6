"""The console's parts without a browser: escaping, value rendering, the sampler and its
sources (today's broker state and Kafka's metric names), and the HTTP server's limits."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Histogram

from kafkalite.server.config import BrokerConfig
from kafkalite.server.console.http import HttpRequest, HttpResponse, HttpServer
from kafkalite.server.console.markup import Html, el, url
from kafkalite.server.console.messages import render_bytes
from kafkalite.server.console.sampler import (
    BrokerStateSource,
    Counters,
    FallbackSource,
    RegistrySource,
    Sampler,
)


def test_markup_escapes_text_and_attributes_but_not_markup() -> None:
    evil = "<script>alert('x')</script>\"&"
    page = el("td", evil, el("b", "ok"), title=evil)
    assert "<script>" not in page
    assert page == (
        '<td title="&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&quot;&amp;">'
        "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&quot;&amp;<b>ok</b></td>"
    )
    assert el("p", Html("<i>kept</i>")) == "<p><i>kept</i></p>"
    assert url("groups", "a/b<c>", q="x y", page=None) == "/groups/a%2Fb%3Cc%3E?q=x%20y"


def test_values_render_as_json_text_or_hex() -> None:
    assert render_bytes(b'{"a": 1}', "auto") == ('{\n  "a": 1\n}', "json")
    assert render_bytes(b"plain words", "auto") == ("plain words", "text")
    assert render_bytes(b"\x00\x01\xff", "auto") == ("0001ff", "hex")
    assert render_bytes(b"abcdef", "hex") == ("61626364 6566", "hex")
    assert render_bytes(b"42", "json") == ("42", "json")
    assert render_bytes(b"42", "auto") == ("42", "text")
    assert render_bytes(None, "auto") == ("null", "null")
    text, fmt = render_bytes(b"x" * 10000, "text")
    assert fmt == "text" and text.endswith("… (10000 bytes)") and len(text) < 8300


class _Log:
    def __init__(self, leo: int, size: int) -> None:
        self.log_end_offset, self.size_in_bytes = leo, size


async def test_sampler_turns_broker_state_into_rates() -> None:
    logs = [_Log(0, 0), _Log(0, 0)]
    requests = {0: 0}
    sampler = Sampler(BrokerStateSource(lambda: logs, lambda: requests), size=3)
    assert await sampler.tick(now=100.0) is None
    logs[0].log_end_offset, logs[0].size_in_bytes = 50, 5000
    requests[0] = 20
    s = await sampler.tick(now=102.0)
    assert s is not None and (s.messages_in, s.bytes_in, s.requests) == (25.0, 2500.0, 10.0)
    assert s.bytes_out is None and s.latency_ms is None and s.seconds == 2.0
    # a log that goes (deleted, or led elsewhere now) does not make the counts fall
    logs.pop(0)
    logs[0].log_end_offset = 10
    s = await sampler.tick(now=103.0)
    assert s is not None and s.messages_in == 10.0
    await sampler.tick(now=104.0)
    await sampler.tick(now=105.0)
    series = sampler.series()
    assert len(series["time"]) == 3  # a ring of the last 3
    assert series["time"] == [103.0, 104.0, 105.0]
    json.dumps(series)


async def test_kafka_named_metrics_take_over_when_the_registry_has_them() -> None:
    registry = CollectorRegistry()
    logs = [_Log(7, 700)]
    fallback = BrokerStateSource(lambda: logs, lambda: {0: 3})
    source = FallbackSource(RegistrySource(registry), fallback)
    assert await source.read() == Counters(messages_in=7, bytes_in=700, requests=3)
    assert "log end offsets" in source.description
    # the names of issue 20's metrics: per-topic meters and a TotalTimeMs histogram
    msgs = Counter(
        "kafka_server_brokertopicmetrics_messagesinpersec", "m", ["topic"], registry=registry
    )
    out = Counter("kafka_server_brokertopicmetrics_bytesoutpersec", "b", registry=registry)
    total = Histogram(
        "kafka_network_requestmetrics_totaltimems", "t", ["request"], registry=registry
    )
    msgs.labels("a").inc(5)
    msgs.labels("b").inc(6)
    out.inc(1234)
    total.labels("Produce").observe(4.0)
    total.labels("Fetch").observe(2.0)
    c = await source.read()
    assert (c.messages_in, c.bytes_out) == (11, 1234)
    assert (c.request_time_ms, c.timed_requests) == (6.0, 2)
    assert c.bytes_in == 700  # not in the registry: still from the broker's state
    assert "Kafka's metrics" in source.description
    sampler = Sampler(source)
    await sampler.tick(now=1.0)
    total.labels("Produce").observe(10.0)
    total.labels("Produce").observe(20.0)
    s = await sampler.tick(now=2.0)
    assert s is not None and s.latency_ms == 15.0


async def test_http_server_limits_and_routing() -> None:
    seen: list[HttpRequest] = []

    async def handler(req: HttpRequest) -> HttpResponse:
        seen.append(req)
        return HttpResponse(f"<p>{req.segments}</p>")

    server = HttpServer(handler, "127.0.0.1", 0)
    await server.start()

    async def send(raw: bytes) -> bytes:
        r, w = await asyncio.open_connection("127.0.0.1", server.port)
        w.write(raw)
        await w.drain()
        data = await r.read()
        w.close()
        return data

    try:
        ok = await send(b"GET /groups/a%2Fb?x=1 HTTP/1.1\r\nHost: h\r\n\r\n")
        assert ok.startswith(b"HTTP/1.1 200 OK") and b"X-Frame-Options: DENY" in ok
        assert ok.count(b"Cache-Control") == 1
        assert seen[-1].segments == ["groups", "a/b"] and seen[-1].query == {"x": "1"}
        form = b"token=t&name=a+b"
        posted = await send(
            b"POST /topics/new HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(form), form)
        )
        assert posted.startswith(b"HTTP/1.1 200") and seen[-1].form == {"token": "t", "name": "a b"}
        assert (await send(b"DELETE / HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405")
        assert (await send(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n")).startswith(
            b"HTTP/1.1 400"
        )
        big = b"POST / HTTP/1.1\r\nContent-Length: 999999\r\n\r\n"
        assert (await send(big)).startswith(b"HTTP/1.1 413")
        assert (await send(b"nonsense\r\n\r\n")).startswith(b"HTTP/1.1 400")
        # idle connections hold at most MAX_CONNECTIONS slots; one more is closed at once
        idle = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(32)]
        r, w = await asyncio.open_connection("127.0.0.1", server.port)
        assert await asyncio.wait_for(r.read(), 5) == b""
        w.close()
        for _r, iw in idle:
            iw.close()
        # their slots come back as the server sees them close
        for _ in range(100):
            try:
                if (await send(b"GET / HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 200"):
                    break
            except ConnectionError:
                pass  # refused while the slots were still taken
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the closed connections' slots never came back")
    finally:
        await server.stop()


async def test_stopping_the_server_ends_idle_connections() -> None:
    """A browser keeps idle connections open; stop() must end them, not leave their
    tasks pending on a loop that is about to close."""

    async def handler(req: HttpRequest) -> HttpResponse:
        return HttpResponse("<p>x</p>")

    server = HttpServer(handler, "127.0.0.1", 0)
    await server.start()
    idle = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(3)]
    await asyncio.sleep(0.05)  # the server has accepted them
    serving = [t for t in asyncio.all_tasks() if t.get_coro().__qualname__ == "HttpServer._serve"]
    assert len(serving) == 3
    await server.stop()
    assert all(t.done() for t in serving)
    for r, w in idle:
        assert await asyncio.wait_for(r.read(), 5) == b""
        w.close()


def test_make_run_config_turns_the_console_on_read_only() -> None:
    cfg = BrokerConfig.load(Path(__file__).resolve().parents[2] / "config" / "server.yaml")
    assert cfg["kafkalite.console.port"] == 9080
    assert cfg["kafkalite.console.read.only"] is True
    assert BrokerConfig({})["kafkalite.console.port"] is None  # off by default


def test_a_cluster_console_shows_every_broker_and_what_it_holds() -> None:
    """Three brokers: each console lists all three and the controller; a partition led
    elsewhere is browsed on its leader's console, and its sizes show there."""
    import urllib.request

    from kafkalite.testing import cluster

    with cluster(3, **{"kafkalite.console.port": 0}) as c:
        c.create_topic("spread", partitions=3, replication_factor=1)
        for b in (0, 1, 2):
            console = c.kafka(b).console
            assert console is not None
            base = f"http://127.0.0.1:{console.port}"
            page = urllib.request.urlopen(base + "/brokers").read().decode()
            for other in (0, 1, 2):
                assert f"<td>{other}</td><td>PLAINTEXT://127.0.0.1:" in page
            assert f"broker {c.controller_id} (epoch" in page
        leader = c.leader_of("spread", 0)
        other = next(b for b in (0, 1, 2) if b != leader)
        console = c.kafka(other).console
        assert console is not None
        base = f"http://127.0.0.1:{console.port}"
        page = urllib.request.urlopen(base + "/topics/spread/messages?partition=0").read().decode()
        assert f"Partition 0 is led by broker {leader}" in page
        leader_console = c.kafka(leader).console
        assert leader_console is not None
        page = urllib.request.urlopen(
            f"http://127.0.0.1:{leader_console.port}/topics/spread/messages?partition=0"
        ).read()
        assert b'id="messages"' in page


class _KafkaNamedCollector:
    """The shape of the broker's Kafka-named collectors: untyped meters (the JMX Count,
    all-topics sample without a label), per-API histograms with Kafka's FetchConsumer
    split, and no describe()."""

    def __init__(self) -> None:
        self.calls = 0

    def collect(self):  # type: ignore[no-untyped-def]
        from prometheus_client.core import HistogramMetricFamily, UnknownMetricFamily

        self.calls += 1
        m = UnknownMetricFamily("kafka_server_brokertopicmetrics_messagesinpersec", "m")
        m.add_sample(m.name, {}, 40)
        m.add_sample(m.name, {"topic": "a"}, 40)
        yield m
        r = UnknownMetricFamily("kafka_network_requestmetrics_requestspersec", "r")
        for request, n in (("Produce", 10), ("Fetch", 5), ("FetchConsumer", 5)):
            r.add_sample(r.name, {"request": request}, n)
        yield r
        h = HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltimems", "t", labels=["request"]
        )
        h.add_metric(["Produce"], [("1.0", 10), ("+Inf", 10)], 5.0)
        h.add_metric(["Fetch"], [("1.0", 0), ("+Inf", 5)], 2500.0)
        h.add_metric(["FetchConsumer"], [("1.0", 0), ("+Inf", 5)], 2500.0)
        yield h


class _PerPartition:
    def __init__(self) -> None:
        self.calls = 0

    def collect(self):  # type: ignore[no-untyped-def]
        from prometheus_client.core import GaugeMetricFamily

        self.calls += 1
        yield GaugeMetricFamily("kafka_log_log_size", "s", value=1)


async def test_collectors_without_describe_are_found_once_and_read_alone() -> None:
    registry = CollectorRegistry(auto_describe=False)
    named, per_partition = _KafkaNamedCollector(), _PerPartition()
    registry.register(per_partition)  # type: ignore[arg-type]
    registry.register(named)  # type: ignore[arg-type]
    source = RegistrySource(registry)
    c = await source.read()
    assert (c.messages_in, c.requests) == (40, 15)  # FetchConsumer not counted twice
    assert (c.request_time_ms, c.timed_requests) == (2505.0, 15)
    for _ in range(3):
        await source.read()
    assert named.calls == 5 and per_partition.calls == 1  # discovery + 4 reads; discovery
