"""The web console in headless Chromium (Debian's chromium + chromium-driver, Selenium).

One live broker (console read-write) and one browser for the module. Each view is
loaded with real data produced by confluent-kafka; screenshots of every view go to
build/console-screenshots/ (docs/img/console/ holds copies for docs/operations.md).
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from kafkalite.server.console import pages
from kafkalite.testing import ThreadedBroker

SHOTS = Path(__file__).resolve().parents[2] / "build" / "console-screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_S = 20


@pytest.fixture(scope="module")
def broker() -> Iterator[ThreadedBroker]:
    b = ThreadedBroker(
        **{
            "kafkalite.console.port": 0,
            "kafkalite.console.read.only": False,
            "offsets.topic.num.partitions": 1,
        }
    ).start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    if shutil.which(CHROMIUM) is None or shutil.which(CHROMEDRIVER) is None:
        pytest.fail(
            "the console tests need Debian's chromium and chromium-driver (make system-deps)"
        )
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,900",
        "--hide-scrollbars",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


def base(b: ThreadedBroker) -> str:
    console = b.kafka.console
    assert console is not None
    return f"http://127.0.0.1:{console.port}"


def shot(driver: webdriver.Chrome, name: str) -> None:
    """A full-page screenshot: the window grows to the page's height first."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(int(height) + 40, 600), 2400))
    driver.save_screenshot(str(SHOTS / f"{name}.png"))
    driver.set_window_size(1280, 900)


def wait_text(driver: webdriver.Chrome, css: str, pred: Any) -> str:
    """Waits until the element's text satisfies ``pred``; returns it."""
    seen: list[str] = []

    def ok(d: Any) -> bool:
        els = d.find_elements(By.CSS_SELECTOR, css)
        seen[:] = [e.text for e in els]
        return bool(els) and pred(els[0].text)

    try:
        WebDriverWait(driver, WAIT_S, poll_frequency=0.2).until(ok)
    except Exception:
        raise AssertionError(f"{css}: text stayed {seen!r}") from None
    return seen[0]


def go(driver: webdriver.Chrome, by: str, what: str) -> None:
    """Clicks a link or button and waits for the next page to replace this one.

    A mark on the old page's window tells the pages apart. Not ``staleness_of``: on
    chromedriver 134 and later it sometimes fails with a generic WebDriverException
    ("Node with given id does not belong to the document") while the old page is
    going (SeleniumHQ/selenium#15401; it failed this suite's CI once), so errors
    while the page is switching are retried.
    """
    driver.execute_script("window.__oldPage = true")
    driver.find_element(by, what).click()
    WebDriverWait(driver, WAIT_S, ignored_exceptions=(WebDriverException,)).until(
        lambda d: d.execute_script("return !window.__oldPage && document.readyState === 'complete'")
    )


def produce(b: ThreadedBroker, topic: str, records: list[tuple[Any, ...]]) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
    for rec in records:
        key, value, *rest = rec
        kw: dict[str, Any] = {}
        if rest:
            kw["headers"] = rest[0]
        if len(rest) > 1:
            kw["partition"] = rest[1]
        if len(rest) > 2:
            kw["timestamp"] = rest[2]
        p.produce(topic, key=key, value=value, **kw)
    assert p.flush(10) == 0


def consume_and_commit(b: ThreadedBroker, topic: str, group: str, n: int) -> None:
    """Reads ``n`` records in ``group``, commits, and leaves: a stopped consumer."""
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "client.id": "console-test",
        }
    )
    c.subscribe([topic])
    got, deadline = 0, time.monotonic() + WAIT_S
    while got < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    assert got == n
    c.commit(asynchronous=False)
    c.close()


@pytest.fixture(scope="module")
def orders(broker: ThreadedBroker) -> str:
    """3 partitions of JSON orders, 10 of them consumed by group "billing"."""
    broker.create_topic("orders", partitions=3)
    produce(
        broker,
        "orders",
        [
            (
                f"order-{i}",
                json.dumps({"id": i, "item": "book", "qty": i % 4 + 1}),
                [("source", b"web")],
                i % 3,
                int(time.time() * 1000) - 60_000 + i,  # one ms apart, in order
            )
            for i in range(30)
        ],
    )
    broker.create_topic("payments", partitions=2)
    produce(broker, "payments", [(None, bytes([0, 1, 2, 250, 251, i])) for i in range(8)])
    consume_and_commit(broker, "orders", "billing", 30)
    return "orders"


def test_each_view_loads_with_real_data(
    broker: ThreadedBroker, browser: webdriver.Chrome, orders: str
) -> None:
    url = base(broker)
    browser.get(url + "/")
    assert "Overview" in browser.title
    facts = browser.find_element(By.CSS_SELECTOR, "dl.facts").text
    assert "Cluster id" in facts and str(broker.kafka.cluster_id) in facts
    # the live charts: uPlot drew its canvases and the samples arrive every second
    WebDriverWait(browser, WAIT_S).until(
        lambda d: int(d.find_element(By.ID, "charts").get_attribute("data-samples") or 0) >= 3
    )
    assert len(browser.find_elements(By.CSS_SELECTOR, "#charts canvas")) == 4
    # the samples add up to every record produced since the broker started
    produced = sum(
        p.log.log_end_offset
        for (topic, _), p in broker.kafka.replica_manager.partitions.items()
        if not topic.startswith("__")
    )
    assert produced >= 38
    counted, deadline = 0.0, time.monotonic() + WAIT_S
    while counted != pytest.approx(produced) and time.monotonic() < deadline:
        time.sleep(0.2)
        series = json.loads(urllib.request.urlopen(url + "/api/samples").read())
        counted = sum(
            r * s for r, s in zip(series["messages_in"], series["seconds"], strict=True) if r
        )
    assert counted == pytest.approx(produced)
    assert any(v for v in series["requests"])

    browser.get(url + "/topics")
    rows = {
        r.find_element(By.CSS_SELECTOR, "td").text: r.text
        for r in browser.find_elements(By.CSS_SELECTOR, "#topics tbody tr")
    }
    assert {"orders", "payments"} <= set(rows)
    assert rows["orders"].split()[1:5] == ["3", "1", "0", "30"]  # partitions, RF, URP, messages
    shot(browser, "topics")

    go(browser, By.LINK_TEXT, "orders")
    parts = [r.text.split() for r in browser.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")]
    assert [p[:4] for p in parts] == [
        [str(i), "0", "0", "0"] for i in range(3)
    ]  # leader, replicas, ISR
    assert [p[6] for p in parts] == ["10", "10", "10"]  # high watermarks
    configs = browser.find_element(By.ID, "configs").text
    assert "retention.ms 604800000 default" in configs
    assert "billing Empty 3 0" in browser.find_element(By.ID, "topic-groups").text.splitlines()
    shot(browser, "topic")

    browser.get(url + "/topics/orders/messages?partition=1&offset=2&limit=5")
    offsets = [
        r.find_element(By.CSS_SELECTOR, "td").text
        for r in browser.find_elements(By.CSS_SELECTOR, "#messages tbody tr")
    ]
    assert offsets == ["2", "3", "4", "5", "6"]
    first = browser.find_element(By.CSS_SELECTOR, "#messages tbody tr").text
    assert "order-7" in first and '"item": "book"' in first and "source: web" in first
    shot(browser, "messages")
    # every partition, merged by timestamp (the default), with a partition column
    browser.get(url + "/topics/orders/messages?limit=30")
    rows = [r.text.split() for r in browser.find_elements(By.CSS_SELECTOR, "#messages tbody tr")]
    assert len(rows) == 30 and {r[0] for r in rows} == {"0", "1", "2"}
    assert [int(r[4].removeprefix("order-")) for r in rows] == list(range(30))  # by time
    browser.get(url + "/topics/orders/messages?partition=all&offset=latest&limit=3")
    rows = [
        r.text.split()[:2] for r in browser.find_elements(By.CSS_SELECTOR, "#messages tbody tr")
    ]
    assert rows == [["0", "9"], ["1", "9"], ["2", "9"]]  # orders 27, 28, 29
    # as hex, and a binary value shown as hex by itself
    browser.get(url + "/topics/orders/messages?partition=1&offset=2&limit=1&format=hex")
    assert "6f726465 722d37" in browser.find_element(By.ID, "messages").text  # "order-7"
    browser.get(url + "/topics/payments/messages?partition=0")
    assert "000102fa" in browser.find_element(By.ID, "messages").text

    # a live member: its assignment and the partitions it owns are shown
    reader = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "analytics",
            "client.id": "analytics-reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        reader.subscribe(["orders"])
        deadline = time.monotonic() + WAIT_S
        while not reader.assignment() and time.monotonic() < deadline:
            reader.poll(0.2)
        for _ in range(7):
            reader.poll(0.2)
        reader.commit(asynchronous=False)
        browser.get(url + "/groups/analytics")
        members = browser.find_element(By.ID, "members").text
        assert "analytics-reader" in members and "orders: 0, 1, 2" in members
        assert browser.find_element(By.ID, "group-state").text == "Stable"
        shot(browser, "group")
    finally:
        reader.close()

    browser.get(url + "/groups?q=billing")
    row = browser.find_element(By.CSS_SELECTOR, "#groups tbody tr").text
    assert row.split() == [
        "billing",
        "classic",
        "Empty",
        "0",
        "orders",
        "0",
        "broker",
        "0",
        "(this",
        "one)",
    ]  # no assignor when Empty
    shot(browser, "groups")

    go(browser, By.LINK_TEXT, "billing")
    offsets_rows = [
        r.text.split() for r in browser.find_elements(By.CSS_SELECTOR, "#offsets tbody tr")
    ]
    assert offsets_rows == [["orders", str(p), "10", "10", "0"] for p in range(3)]

    browser.get(url + "/brokers")
    brokers = browser.find_element(By.CSS_SELECTOR, "#brokers tbody tr").text
    assert brokers.startswith("0 PLAINTEXT://127.0.0.1:") and "controller, this broker" in brokers
    configs = browser.find_element(By.ID, "brokerconfigs").text.splitlines()
    assert "kafkalite.console.read.only false" in configs
    assert "listeners PLAINTEXT://127.0.0.1:0" in configs
    shot(browser, "brokers")


def test_a_produced_message_appears_in_the_browser(
    broker: ThreadedBroker, browser: webdriver.Chrome
) -> None:
    broker.create_topic("news", partitions=3)
    produce(broker, "news", [(f"k{i}", f"old {i}", [], 2) for i in range(5)])
    marker = f"fresh-{uuid.uuid4().hex[:8]}"
    page = base(broker) + "/topics/news/messages?partition=2&offset=latest&limit=3"
    browser.get(page)
    assert [
        r.text.split()[0] for r in browser.find_elements(By.CSS_SELECTOR, "#messages tbody tr")
    ] == ["2", "3", "4"]
    assert marker not in browser.find_element(By.ID, "messages").text
    produce(broker, "news", [("new-key", json.dumps({"note": marker}), [], 2)])
    browser.get(page)
    rows = browser.find_elements(By.CSS_SELECTOR, "#messages tbody tr")
    assert marker in rows[-1].text and "new-key" in rows[-1].text


def test_browse_from_a_time(broker: ThreadedBroker, browser: webdriver.Chrome) -> None:
    broker.create_topic("events", partitions=1)
    t0 = 1767225600000  # 2026-01-01T00:00:00Z
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i, ts in enumerate((t0 - 60_000, t0, t0 + 60_000)):
        p.produce("events", value=f"event {i}", timestamp=ts)
    assert p.flush(10) == 0
    url = base(broker) + "/topics/events/messages?partition=0&timestamp="
    browser.get(url + "2026-01-01T00:00:00Z")
    rows = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#messages tbody tr")]
    assert [r.split()[0] for r in rows] == ["1", "2"]
    assert "2026-01-01 00:00:00.000Z" in rows[0] and "event 1" in rows[0]
    browser.get(url + str(t0 + 1))  # epoch ms: the first record at or after it
    rows = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#messages tbody tr")]
    assert [r.split()[0] for r in rows] == ["2"]
    browser.get(url + "2027-01-01T00:00:00Z")
    assert "No record at or after" in browser.find_element(By.CSS_SELECTOR, "main").text


def test_lists_are_paginated(
    broker: ThreadedBroker,
    browser: webdriver.Chrome,
    orders: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pages, "PAGE_SIZE", 1)
    monkeypatch.setattr(pages, "PARTITION_PAGE_SIZE", 2)
    browser.get(base(broker) + "/topics/orders")
    assert [
        r.text.split()[0] for r in browser.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")
    ] == ["0", "1"]
    go(browser, By.LINK_TEXT, "next →")
    assert [
        r.text.split()[0] for r in browser.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")
    ] == ["2"]
    assert "page 2 of 2" in browser.find_element(By.CSS_SELECTOR, "nav.pager").text
    browser.get(base(broker) + "/topics")
    first = browser.find_element(By.CSS_SELECTOR, "#topics tbody tr td").text
    go(browser, By.LINK_TEXT, "next →")
    second = browser.find_element(By.CSS_SELECTOR, "#topics tbody tr td").text
    assert first < second and len(browser.find_elements(By.CSS_SELECTOR, "#topics tbody tr")) == 1


def test_the_lag_of_a_stopped_consumer_grows_on_screen(
    broker: ThreadedBroker, browser: webdriver.Chrome
) -> None:
    broker.create_topic("clicks", partitions=1)
    produce(broker, "clicks", [(None, f"click {i}") for i in range(5)])
    consume_and_commit(broker, "clicks", "dashboard", 5)
    browser.get(base(broker) + "/groups/dashboard")
    assert wait_text(browser, "#total-lag", lambda t: t == "0") == "0"
    produce(broker, "clicks", [(None, f"click {i}") for i in range(5, 30)])
    # no reload: the page polls lag.json and the cells change on screen
    wait_text(browser, "#total-lag", lambda t: t == "25")
    wait_text(browser, '#offsets tr[data-tp="clicks:0"] [data-cell="lag"]', lambda t: t == "25")
    produce(broker, "clicks", [(None, "one more")])
    wait_text(browser, "#total-lag", lambda t: t == "26")
    shot(browser, "group-lag")
    # the charts after some traffic (the seconds of this test and the ones before)
    browser.get(base(broker) + "/")
    WebDriverWait(browser, WAIT_S).until(
        lambda d: int(d.find_element(By.ID, "charts").get_attribute("data-samples") or 0) >= 5
    )
    shot(browser, "overview")


def test_html_in_names_keys_values_and_headers_is_escaped(
    broker: ThreadedBroker, browser: webdriver.Chrome
) -> None:
    evil = "<img src=x onerror=\"document.title='pwned'\">"
    broker.create_topic("escapes", partitions=1)
    produce(
        broker,
        "escapes",
        [
            (
                f"<b>{evil}</b>",
                f"<script>document.title='pwned'</script>{evil}",
                [(evil, evil.encode())],
            )
        ],
    )
    consume_and_commit(broker, "escapes", f"group{evil}", 1)
    url = base(broker)
    browser.get(url + "/topics/escapes/messages")
    row = browser.find_element(By.CSS_SELECTOR, "#messages tbody tr").text
    assert f"<b>{evil}</b>" in row and "<script>document.title='pwned'</script>" in row
    browser.get(url + "/groups")
    assert f"group{evil}" in browser.find_element(By.ID, "groups").text
    browser.get(url + "/groups/" + urllib.parse.quote(f"group{evil}", safe=""))
    assert browser.find_element(By.CSS_SELECTOR, "h1").text == f"Group group{evil}"
    # a topic name is checked by Kafka's rules; the error echoes it, escaped
    browser.get(url + "/topics/new")
    browser.find_element(By.NAME, "name").send_keys(f"bad{evil}")
    go(browser, By.CSS_SELECTOR, "#create-topic button")
    err = browser.find_element(By.CSS_SELECTOR, "p.error").text
    assert err.startswith("INVALID_TOPIC_EXCEPTION") and f"bad{evil}" in err
    # nothing became markup, nothing ran
    for page in ("/topics/escapes/messages", "/groups"):
        browser.get(url + page)
        assert browser.find_elements(By.CSS_SELECTOR, "main img") == []
        assert "pwned" not in browser.title


def test_create_and_delete_a_topic_behind_a_confirmation(
    broker: ThreadedBroker, browser: webdriver.Chrome
) -> None:
    url = base(broker)
    browser.get(url + "/topics")
    go(browser, By.LINK_TEXT, "Create topic")
    browser.find_element(By.NAME, "name").send_keys("audit")
    browser.find_element(By.NAME, "partitions").send_keys("4")
    browser.find_element(By.NAME, "configs").send_keys(
        "retention.ms=3600000\ncleanup.policy=compact"
    )
    go(browser, By.CSS_SELECTOR, "#create-topic button")
    review = browser.find_element(By.ID, "review").text
    assert "audit 4 1 retention.ms=3600000, cleanup.policy=compact" in review
    assert broker.kafka.metadata_cache.get_topic("audit") is None  # not before confirming
    shot(browser, "create-topic-confirm")
    go(browser, By.ID, "confirm")
    assert browser.find_element(By.CSS_SELECTOR, "h1").text == "Topic audit"
    t = broker.kafka.metadata_cache.get_topic("audit")
    assert t is not None and len(t.partitions) == 4
    assert "cleanup.policy compact topic override" in browser.find_element(By.ID, "configs").text

    go(browser, By.LINK_TEXT, "Delete topic")
    browser.find_element(By.NAME, "confirm").send_keys("audi")
    go(browser, By.ID, "confirm")
    assert "does not match" in browser.find_element(By.CSS_SELECTOR, "p.error").text
    assert broker.kafka.metadata_cache.get_topic("audit") is not None
    browser.find_element(By.NAME, "confirm").send_keys("audit")
    go(browser, By.ID, "confirm")
    assert browser.find_element(By.CSS_SELECTOR, "h1").text == "Topic deleted"
    assert broker.kafka.metadata_cache.get_topic("audit") is None


def test_reset_offsets_previews_then_executes(
    broker: ThreadedBroker, browser: webdriver.Chrome, orders: str
) -> None:
    broker.create_topic("ledger", partitions=2)
    produce(broker, "ledger", [(None, f"entry {i}", [], i % 2) for i in range(20)])
    consume_and_commit(broker, "ledger", "reporting", 20)
    url = base(broker)
    browser.get(url + "/groups/reporting")
    go(browser, By.LINK_TEXT, "Reset offsets")
    browser.find_element(By.CSS_SELECTOR, "select[name=topic] option[value=ledger]").click()
    browser.find_element(By.CSS_SELECTOR, "select[name=strategy] option[value=to-offset]").click()
    browser.find_element(By.NAME, "value").send_keys("4")
    go(browser, By.CSS_SELECTOR, "#reset-offsets button")
    plan = [r.text.split() for r in browser.find_elements(By.CSS_SELECTOR, "#plan tbody tr")]
    assert [p[:4] for p in plan] == [["ledger", "0", "10", "4"], ["ledger", "1", "10", "4"]]
    g = broker.kafka.group_coordinator.manager.get_group("reporting")
    assert g is not None and g.offsets[("ledger", 0)].offset == 10  # a preview writes nothing
    shot(browser, "reset-offsets-preview")
    go(browser, By.ID, "confirm")
    result = browser.find_element(By.ID, "result").text
    assert "ledger 0 4 ok" in result and "ledger 1 4 ok" in result
    assert g.offsets[("ledger", 0)].offset == 4
    browser.get(url + "/groups/reporting")
    assert browser.find_element(By.ID, "total-lag").text == "12"  # 6 + 6


def test_read_only_by_default(tmp_path: Path) -> None:
    """No browser needed: the default console offers no writes and refuses them."""
    b = ThreadedBroker(tmp_path, **{"kafkalite.console.port": 0}).start()
    try:
        b.create_topic("keep", partitions=1)
        url = base(b)
        topics = urllib.request.urlopen(url + "/topics").read().decode()
        assert "keep" in topics and "Create topic" not in topics and "read-only" in topics
        for path, form in (("/topics/keep/delete", b"confirm=keep"), ("/topics/new", b"name=x")):
            req = urllib.request.Request(url + path, data=form, method="POST")
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req)
            assert e.value.code == 403
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url + "/topics/keep/delete")
        assert e.value.code == 403
        assert b.kafka.metadata_cache.get_topic("keep") is not None
        # bound to loopback: a request naming another host (DNS rebinding) is refused
        req = urllib.request.Request(url + "/topics", headers={"Host": "evil.example:80"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req)
        assert e.value.code == 403
    finally:
        b.stop()


# ---- a console in a cluster ----------------------------------------------------------------
@pytest.fixture(scope="module")
def three() -> Iterator[Any]:
    """Three in-process brokers, each with its console; "spread" led by each in turn."""
    from kafkalite.testing import cluster

    with cluster(3, **{"kafkalite.console.port": 0, "offsets.topic.num.partitions": 3}) as c:
        c.create_topic("spread", 3, 2, assignments={0: [0, 1], 1: [1, 2], 2: [2, 0]})
        produce(c, "spread", [(f"k{i}", "v" * (50 + 40 * (i % 3)), None, i % 3) for i in range(15)])
        yield c


def _offsets_partition(c: Any, group: str) -> int:
    return int(c.kafka(0).group_coordinator.manager.partition_for(group))


def _console(c: Any, broker_id: int) -> str:
    console = c.kafka(broker_id).console
    assert console is not None
    return f"http://127.0.0.1:{console.port}"


def test_a_console_shows_the_whole_cluster(three: Any, browser: webdriver.Chrome) -> None:
    """Broker 0's console: every partition's leader, replicas and ISR, the size of the
    partitions led by brokers 1 and 2 (asked of them), every broker, and the groups
    coordinated elsewhere with their coordinator."""
    # a group on each coordinator (the first one creates __consumer_offsets)
    consume_and_commit(three, "spread", "audit-0", 15)
    coordinator = {
        three.leader_of("__consumer_offsets", _offsets_partition(three, "audit-0")): "audit-0"
    }
    for name in (f"audit-{i}" for i in range(1, 60)):
        if len(coordinator) == 3:
            break
        leader = three.leader_of("__consumer_offsets", _offsets_partition(three, name))
        if leader not in coordinator:
            coordinator[leader] = name
            consume_and_commit(three, "spread", name, 15)
    assert len(coordinator) == 3

    url = _console(three, 0)
    browser.get(url + "/topics/spread")
    rows = [
        [td.text for td in r.find_elements(By.TAG_NAME, "td")]
        for r in browser.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")
    ]
    sizes = {
        p: three.kafka(p).replica_manager.partitions[("spread", p)].log.size_in_bytes
        for p in range(3)
    }
    got = {int(r[0]): r for r in rows}
    assert sorted(got) == [0, 1, 2]
    for p, (leader, replicas) in {0: (0, "0,1"), 1: (1, "1,2"), 2: (2, "2,0")}.items():
        r = got[p]
        assert [r[1], r[2].replace(" ", "")] == [str(leader), replicas]
        # the ISR: every replica
        assert set(r[3].replace(" ", "").split(",")) == set(replicas.split(","))
        assert r[8] == pages.human_bytes(sizes[p]), (p, r, sizes[p])
    # offsets of partitions led elsewhere are not this broker's to tell
    # the leaders' log start and high watermark (ListOffsets); their log end and
    # segments are not told
    assert got[0][5:10] == ["0", "5", "5", pages.human_bytes(sizes[0]), "1"]
    for p in (1, 2):
        assert got[p][5:8] == ["0", "5", "n/a"] and got[p][9] == "n/a"
    facts = browser.find_element(By.CSS_SELECTOR, "dl.facts").text
    assert pages.human_bytes(sum(sizes.values())) in facts
    assert "Messages\n15" in facts
    shot(browser, "cluster-topic")

    browser.get(url + "/topics")
    row = browser.find_element(By.XPATH, "//table[@id='topics']//tr[td/a[text()='spread']]")
    cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
    assert cells[1:6] == ["3", "2", "0", "15", pages.human_bytes(sum(sizes.values()))]

    browser.get(url + "/groups")
    groups = {
        r.text.split()[0]: r.text
        for r in browser.find_elements(By.CSS_SELECTOR, "#groups tbody tr")
    }
    for broker_id, name in coordinator.items():
        assert name in groups
        where = "broker 0 (this one)" if broker_id == 0 else f"broker {broker_id}"
        assert groups[name].endswith(where), groups[name]
    shot(browser, "cluster-groups")

    browser.get(url + "/brokers")
    brokers = [
        r.text.split()[0] for r in browser.find_elements(By.CSS_SELECTOR, "#brokers tbody tr")
    ]
    assert brokers == ["0", "1", "2"]
