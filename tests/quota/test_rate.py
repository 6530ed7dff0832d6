"""Kafka's windowed Rate, throttle time and the KIP-599 token bucket (unit tests of
the arithmetic the broker reports as throttle_time_ms)."""

from __future__ import annotations

from kafkalite.quota import ClientQuotaConfigs, QuotaConfig, QuotaEntity, QuotaManagers
from kafkalite.quota.rate import TokenBucket, WindowedRate


def test_rate_divides_by_at_least_num_minus_one_windows():
    r = WindowedRate(11, 1000, now_ms=0)
    r.record(10_000, 0)
    # 100 ms after the first sample: 10 kB over (at least) 10 s, not over 0.1 s
    assert r.window_size_ms(100) == 10_100
    assert round(r.measure(100)) == 990


def test_throttle_time_is_kafkas_formula_and_zero_within_the_quota():
    r = WindowedRate(2, 1000, now_ms=0)
    r.record(1500, 0)
    # 1500 B over 1 s against 1000 B/s: (1500 - 1000) / 1000 * 1000 ms
    assert r.throttle_ms(1000, 0) == 500
    assert r.throttle_ms(2000, 0) == 0


def test_old_samples_expire():
    r = WindowedRate(2, 1000, now_ms=0)
    r.record(5000, 0)
    r.record(100, 1500)
    assert r.total(1500) == 5100
    assert r.total(2100) == 100  # the first sample is older than 2 windows


def test_token_bucket_lets_one_request_into_debt_then_refuses_until_refilled():
    b = TokenBucket(quota=2, burst_s=2, now_ms=0)  # 4 tokens
    assert not b.exceeded(0)
    b.record(6, 0)  # goes through, 2 tokens of debt
    assert b.exceeded(0)
    assert b.throttle_ms(0) == 1000  # 2 tokens at 2/s
    assert not b.exceeded(1000)


def test_managers_measure_nothing_until_a_quota_of_their_type_exists():
    configs = ClientQuotaConfigs()
    now = [0]
    q = QuotaManagers.create(QuotaConfig(2, 1), lambda: now[0], configs)
    assert not q.enabled and q.produce.record_and_get_throttle_ms("ANONYMOUS", "c", 10**9) == 0
    configs.set(QuotaEntity(None, "c"), {"consumer_byte_rate": 1000})
    assert q.fetch.enabled and not q.produce.enabled
    assert q.fetch.max_value_in_window("ANONYMOUS", "c") == 1000
    assert q.fetch.record_and_get_throttle_ms("ANONYMOUS", "c", 3000) == 2000  # capped at 2 s
    assert q.fetch.record_and_get_throttle_ms("ANONYMOUS", "other", 3000) == 0
    configs.set(QuotaEntity(None, "c"), {})
    assert not q.fetch.enabled and not q.fetch.sensors
