"""Kafka's windowed Rate, throttle time and the KIP-599 token bucket (unit tests of
the arithmetic the broker reports as throttle_time_ms)."""

from __future__ import annotations

from kafkalite.quota import ClientQuotaConfigs, QuotaConfig, QuotaEntity, QuotaManagers
from kafkalite.quota.entities import DEFAULT
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


def test_old_samples_expire_by_their_last_value():
    r = WindowedRate(2, 1000, now_ms=0)
    r.record(5000, 0)
    r.record(100, 1500)
    assert r.total(1500) == 5100
    assert r.total(2100) == 100  # the first sample's last value is 2 windows old


def test_a_sample_overlapping_the_window_still_counts_with_its_start():
    # Kafka 3.8+ (apache/kafka#15889): num + 1 slots, a sample expires by its last
    # value, the rate divides by the time since the oldest sample's start
    r = WindowedRate(2, 1000, now_ms=0)
    r.record(1000, 0)
    r.record(1000, 900)  # same sample (started at 0), last value at 900
    r.record(1000, 1000)  # second sample
    r.record(1000, 2000)  # third: the extra slot, the first one is kept
    assert r.total(2500) == 4000
    assert r.window_size_ms(2500) == 2500  # since the first sample's start
    assert r.total(2900) == 2000  # its last value (900) is now 2 windows old


def test_throttle_is_rounded_as_javas_math_round():
    r = WindowedRate(2, 1000, now_ms=0)
    r.record(1000.5, 0)
    assert r.throttle_ms(1000, 0) == 1  # 0.5 ms rounds up


def test_byte_rate_throttle_is_unbounded_and_request_throttle_is_one_window():
    # Kafka: ClientQuotaManager returns QuotaUtils.throttleTime as is; only the
    # request quota (ClientRequestQuotaManager) bounds it by quota.window.size.seconds
    configs = ClientQuotaConfigs()
    q = QuotaManagers.create(QuotaConfig(11, 1), lambda: 0, configs)
    configs.set(QuotaEntity(None, "c"), {"producer_byte_rate": 1000, "request_percentage": 1})
    # 30 kB against 1 kB/s over (at least) 10 s: 3 kB/s, (3 - 1) / 1 * 10 s
    assert q.produce.record_and_get_throttle_ms("ANONYMOUS", "c", 30_000, 0) == 20_000
    q.request.record("ANONYMOUS", "c", 300, 0)  # 300 % * s
    assert q.request.throttle_ms("ANONYMOUS", "c", 0) == 1000


def test_sensors_of_inactive_clients_expire_after_an_hour():
    configs = ClientQuotaConfigs()
    now = [0]
    q = QuotaManagers.create(QuotaConfig(11, 1), lambda: now[0], configs)
    # the default client id's quotas: one sensor per client id
    configs.set(
        QuotaEntity(None, DEFAULT), {"producer_byte_rate": 1000, "controller_mutation_rate": 5}
    )
    for i in range(5000):
        q.produce.record_and_get_throttle_ms("ANONYMOUS", f"client-{i}", 10)
        q.controller_mutation.record("ANONYMOUS", f"client-{i}", 1)
    assert len(q.produce.sensors) == 5000 and len(q.controller_mutation.sensors) == 5000
    now[0] = 3_600_000 - 1  # one keeps recording
    q.produce.record_and_get_throttle_ms("ANONYMOUS", "client-0", 10)
    q.controller_mutation.record("ANONYMOUS", "client-0", 1)
    now[0] = 3_600_000 + 60_000  # the others have been idle an hour: a new client sweeps
    q.produce.record_and_get_throttle_ms("ANONYMOUS", "newcomer", 10)
    q.controller_mutation.record("ANONYMOUS", "newcomer", 1)
    assert set(q.produce.sensors) == {("", "client-0"), ("", "newcomer")}
    assert set(q.controller_mutation.sensors) == {("", "client-0"), ("", "newcomer")}
    # an expired client starts afresh: its old bytes are forgotten
    assert q.produce.record_and_get_throttle_ms("ANONYMOUS", "client-1", 10) == 0


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
    # 3000 B over (at least) 1 s against 1000 B/s: (3000 - 1000) / 1000 * 1 s
    assert q.fetch.record_and_get_throttle_ms("ANONYMOUS", "c", 3000) == 2000
    assert q.fetch.record_and_get_throttle_ms("ANONYMOUS", "other", 3000) == 0
    configs.set(QuotaEntity(None, "c"), {})
    assert not q.fetch.enabled and not q.fetch.sensors
