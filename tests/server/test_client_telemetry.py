"""KIP-714 client telemetry: a CLIENT_METRICS subscription set with IncrementalAlterConfigs
(kafka-python's admin client), a stock librdkafka producer pushing its metrics
(``enable.metrics.push``), and the decoded values on the broker's ``/metrics``."""

from __future__ import annotations

import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kio.schema.get_telemetry_subscriptions.v0.request import GetTelemetrySubscriptionsRequest
from kio.schema.push_telemetry.v0.request import PushTelemetryRequest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2

from kafkalite.protocol.errors import ErrorCode
from tests.server.raw_client import RawClient


@pytest.fixture
def broker(kafka_broker_factory):
    return kafka_broker_factory(**{"kafkalite.metrics.port": 0})


@pytest.fixture
def admin(broker):
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, client_id="tele-admin")
    yield a
    a.close()


def subscribe(admin, name: str, **configs: str) -> None:
    res = ConfigResource(ConfigResourceType.CLIENT_METRICS, name, configs)
    result = admin.alter_configs([res], incremental=True, raise_on_unknown=False)
    assert result == {"client_metrics": {name: "OK"}}


class NamedClient(RawClient):
    """A raw client with its own client id (subscriptions match on it)."""

    client_id = "raw"

    def call(self, api_key, version, body):
        cid = self.send(api_key, version, body, client_id=self.client_id)
        got_cid, obj = self.read_response(api_key, version)
        assert got_cid == cid
        return obj


def named(bootstrap: str, client_id: str) -> NamedClient:
    c = NamedClient.to(bootstrap)
    assert isinstance(c, NamedClient)
    c.client_id = client_id
    return c


def scrape(broker) -> str:
    port = broker.kafka.metrics_server.port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def test_librdkafka_pushes_its_metrics_to_the_broker_metrics_endpoint(broker, admin):
    subscribe(admin, "producers", metrics="org.apache.kafka.producer.", **{"interval.ms": "200"})
    assert admin.list_config_resources(["CLIENT_METRICS"]) == {"client_metrics": ["producers"]}
    described = admin.describe_configs(
        [ConfigResource(ConfigResourceType.CLIENT_METRICS, "producers")]
    )
    assert "interval.ms" in str(described) and "200" in str(described)

    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "client.id": "tele-producer",
            "enable.metrics.push": True,
        }
    )
    try:
        deadline = time.monotonic() + 30
        text = ""
        while time.monotonic() < deadline:
            p.produce("tele", b"v")
            p.poll(0.2)
            text = scrape(broker)
            if 'client_id="tele-producer"' in text and "org_apache_kafka_producer" in text:
                break
        lines = [
            ln for ln in text.splitlines() if 'client_id="tele-producer"' in ln and ln[0] != "#"
        ]
        assert lines, text[-2000:]
        assert all(ln.startswith("org_apache_kafka_producer") for ln in lines)
        assert all('client_instance_id="' in ln for ln in lines)
    finally:
        p.flush(10)


def test_subscription_and_push_rules_over_the_wire(broker, admin):
    """Kafka's ClientMetricsManager rules, with kio-built requests: a new instance id,
    the matched subscription, throttling, stale subscription ids and bad payloads."""
    subscribe(admin, "raw", metrics="*", **{"interval.ms": "100000", "match": "client_id=raw-.*"})
    c = named(broker.bootstrap_servers, "raw-1")
    try:
        got = c.call(71, 0, GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)))
        assert got.error_code == ErrorCode.none
        assert got.requested_metrics == ("",)  # all metrics
        assert got.push_interval.total_seconds() == 100
        assert list(got.accepted_compression_types) == [4, 3, 1, 2]
        iid, sid = got.client_instance_id, got.subscription_id
        assert iid.int != 0
        # asked again before the interval: throttled
        again = c.call(71, 0, GetTelemetrySubscriptionsRequest(client_instance_id=iid))
        assert again.error_code == ErrorCode.throttling_quota_exceeded

        def push(sub_id: int, metrics: bytes, terminating: bool = False) -> int:
            req = PushTelemetryRequest(
                client_instance_id=iid,
                subscription_id=sub_id,
                terminating=terminating,
                compression_type=0,
                metrics=metrics,
            )
            return int(c.call(72, 0, req).error_code)

        data = metrics_pb2.MetricsData()
        m = data.resource_metrics.add().scope_metrics.add().metrics.add()
        m.name = "org.apache.kafka.producer.record.queue.time.max"
        point = m.gauge.data_points.add()
        point.as_double = 12.5
        point.attributes.append(
            common_pb2.KeyValue(key="node.id", value=common_pb2.AnyValue(string_value="0"))
        )
        assert push(sid ^ 1, data.SerializeToString()) == ErrorCode.unknown_subscription_id
        assert push(sid, data.SerializeToString()) == ErrorCode.throttling_quota_exceeded
        # a terminating push is accepted whatever the interval; nothing after it
        assert push(sid, data.SerializeToString(), terminating=True) == ErrorCode.none
        assert push(sid, b"") == ErrorCode.invalid_request
        text = scrape(broker)
        assert (
            "org_apache_kafka_producer_record_queue_time_max{"
            f'client_id="raw-1",client_instance_id="{iid}",node_id="0"}} 12.5'
        ) in text
    finally:
        c.close()

    # a client the pattern does not match gets no metrics and the default interval
    other = named(broker.bootstrap_servers, "other")
    try:
        got = other.call(
            71, 0, GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0))
        )
        assert got.requested_metrics == () and got.push_interval.total_seconds() == 300
        bad = PushTelemetryRequest(
            client_instance_id=got.client_instance_id,
            subscription_id=got.subscription_id,
            terminating=False,
            compression_type=0,
            metrics=b"\xff\xff\xff",
        )
        assert other.call(72, 0, bad).error_code == ErrorCode.invalid_record
    finally:
        other.close()


def test_a_subscription_reaches_the_other_brokers_of_a_cluster(tmp_path):
    """Set through one broker, a subscription is what another broker hands out (Kafka's
    config change notification)."""
    from kafkalite.testing.in_process_cluster import ThreadedCluster

    cluster = ThreadedCluster(2, tmp_path)
    cluster.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_of(0))
        try:
            subscribe(admin, "everyone", metrics="org.apache.kafka.", **{"interval.ms": "1000"})
        finally:
            admin.close()
        c = named(cluster.bootstrap_of(1), "anyone")
        try:
            deadline = time.monotonic() + 10
            while True:
                got = c.call(
                    71, 0, GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0))
                )
                if got.requested_metrics or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert got.requested_metrics == ("org.apache.kafka.",)
            assert got.push_interval.total_seconds() == 1
        finally:
            c.close()
    finally:
        cluster.stop()


def test_delta_sums_add_up_into_counters_and_histograms_export_count_and_sum():
    """What ``/metrics`` shows of pushed OTLP data: a gauge's last value, a monotonic
    delta sum's running total, a histogram's count and sum."""
    from prometheus_client import CollectorRegistry, generate_latest

    from kafkalite.server.client_metrics import (
        ClientInstance,
        ClientMetricsManager,
        ClientTelemetryCollector,
    )

    mgr = ClientMetricsManager(lambda: 0)
    iid = uuid.UUID(int=5)
    inst = ClientInstance(iid, {"client_id": "c"}, 1, 0, ["*"], 1000)
    mgr.instances[iid] = inst

    def push(delta: int) -> None:
        data = metrics_pb2.MetricsData()
        ms = data.resource_metrics.add().scope_metrics.add()
        total = ms.metrics.add()
        total.name = "org.apache.kafka.producer.connection.creation.total"
        total.sum.is_monotonic = True
        total.sum.aggregation_temporality = 1  # delta
        total.sum.data_points.add().as_int = delta
        hist = ms.metrics.add()
        hist.name = "x.latency"
        hist.histogram.aggregation_temporality = 1
        p = hist.histogram.data_points.add()
        p.count, p.sum = 2, 10.0
        mgr._decode_into(inst, 0, data.SerializeToString())

    push(3)
    push(4)
    reg = CollectorRegistry()
    reg.register(ClientTelemetryCollector(lambda: mgr))
    text = generate_latest(reg).decode()
    labels = f'{{client_id="c",client_instance_id="{iid}"}}'
    assert f"org_apache_kafka_producer_connection_creation_total{labels} 7.0" in text
    assert f"x_latency_count{labels} 4.0" in text
    assert f"x_latency_sum{labels} 20.0" in text
