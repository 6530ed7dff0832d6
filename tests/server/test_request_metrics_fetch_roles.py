"""A Fetch is timed once, under FetchConsumer or FetchFollower (the request path's
cost), and Kafka's all-Fetch histograms are their sum, added when scraped."""

from __future__ import annotations

from kafkalite.network.request_channel import RequestChannel
from kafkalite.network.request_stats import ApiStats
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.server.apis import build_broker_api_table
from kafkalite.server.metrics import RequestCollector


def _samples(ch: RequestChannel) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in RequestCollector(lambda: ch).collect()
        for s in fam.samples
    }


def test_fetch_histograms_are_the_sum_of_consumer_and_follower_fetches():
    ch = RequestChannel(build_broker_api_table(None), max_request_size=1 << 20)
    fetch = ch.stats_of(ApiKey.FETCH)
    fetch.add_error(0, 3)
    ch.requests_total[ApiKey.FETCH] = 3
    for queue_s in (0.001, 0.002):
        ch.fetch_consumer_stats.requests += 1
        ch.fetch_consumer_stats.record(queue_s, 0.0005, 0.0)
    ch.fetch_follower_stats.requests += 1
    ch.fetch_follower_stats.record(0.0, 0.0001, 0.5)
    s = _samples(ch)
    name = "kafka_network_requestmetrics_totaltimems_count"
    assert s[(name, (("request", "FetchConsumer"),))] == 2
    assert s[(name, (("request", "FetchFollower"),))] == 1
    assert s[(name, (("request", "Fetch"),))] == 3
    total_ms = s[("kafka_network_requestmetrics_totaltimems_sum", (("request", "Fetch"),))]
    assert abs(total_ms - (1.5 + 2.5 + 500.1)) < 1e-6
    # errors stay on Fetch (counted once per partition in the responses)
    errors = s[
        (
            "kafka_network_requestmetrics_errorspersec",
            (("error", "NONE"), ("request", "Fetch")),
        )
    ]
    assert errors == 3


def test_add_sums_requests_buckets_and_seconds_but_not_errors():
    a, b = ApiStats(), ApiStats()
    b.requests = 2
    b.record(0.001, 0.002, 0.003)
    b.add_error(6)
    a.add(b)
    a.add(b)
    assert a.requests == 4
    assert sum(a.total) == 2 and sum(a.queue) == 2
    assert abs(a.total_s - 0.012) < 1e-9
    assert a.errors == {}
