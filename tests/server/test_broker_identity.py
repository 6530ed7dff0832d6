"""Broker identity (seed 000 §5): meta.properties and broker.id generation."""

from __future__ import annotations

import pytest

from kafkalite.log.errors import InconsistentBrokerIdError
from kafkalite.log.meta_properties import read_meta_properties
from kafkalite.testing.embedded_broker import ThreadedBroker


def test_generated_broker_id_starts_at_1001_and_survives_restart(kafka_broker_factory, tmp_path):
    b = kafka_broker_factory(tmp_path / "b1", **{"broker.id": -1})
    assert b.kafka.broker_id == 1001
    meta = read_meta_properties(tmp_path / "b1" / "logs")
    assert meta is not None and meta.broker_id == 1001 and meta.cluster_id == b.kafka.cluster_id
    b.restart()
    assert b.kafka.broker_id == 1001  # from meta.properties, not generated again


def test_configured_id_conflicting_with_meta_properties_fails_start_up(
    kafka_broker_factory, tmp_path
):
    b = kafka_broker_factory(tmp_path / "b", **{"broker.id": 7})
    b.stop()
    other = ThreadedBroker(tmp_path / "b", **{"broker.id": 8})
    with pytest.raises(InconsistentBrokerIdError):
        other.start()


def test_metadata_advertises_broker_id_cluster_id_and_controller(kafka_bootstrap, kafka_broker):
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10)
    assert md.controller_id == kafka_broker.kafka.broker_id
    assert md.cluster_id == kafka_broker.kafka.cluster_id
    assert list(md.brokers) == [kafka_broker.kafka.broker_id]
