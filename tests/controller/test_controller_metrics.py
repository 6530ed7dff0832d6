"""Kafka's controller metrics as Prometheus gauges, in a 3-broker cluster, read from each
broker's registry and over HTTP (``kafkalite.metrics.port``).

Names follow the JMX-exporter rule of ``kafkalite/server/metrics.py``:
``kafka.controller:type=KafkaController,name=OfflinePartitionsCount`` is
``kafka_controller_kafkacontroller_offlinepartitionscount``.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kafkalite.server import metrics as m
from tests.controller.cluster import Cluster, eventually


def _value(cluster: Cluster, i: int, name: str) -> float | None:
    return cluster.broker(i).metrics.value(name)


def _http_get(port: int, path: str = "/metrics") -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


def _samples(text: str) -> dict[str, float]:
    return {s.name: s.value for fam in text_string_to_metric_families(text) for s in fam.samples}


async def test_controller_gauges_follow_failures(tmp_path, backend):
    """Active controller count, topic/partition counts, offline partitions and the
    preferred replica imbalance on the controller (0 elsewhere), before and after a
    broker and then the controller die."""
    async with Cluster(tmp_path, 3, zookeeper_connect=backend) as cluster:
        ctrl = cluster.controller().broker_id
        victim, other = (i for i in range(3) if i != ctrl)
        # x-0 leads on the victim with a live follower; x-1 and y-0 live only on the victim
        await cluster.create_topic_znode("x", {0: [victim, other], 1: [victim], 2: [ctrl, other]})
        await cluster.create_topic_znode("y", {0: [victim]})
        await cluster.wait_state("y", 0, lambda s: s.leader == victim)
        for p in range(3):
            await cluster.wait_state("x", p, lambda s: s.leader >= 0)

        def gauges(i: int) -> tuple[float | None, ...]:
            return tuple(
                _value(cluster, i, name)
                for name in (
                    m.ACTIVE_CONTROLLER_COUNT,
                    m.GLOBAL_TOPIC_COUNT,
                    m.GLOBAL_PARTITION_COUNT,
                    m.OFFLINE_PARTITIONS_COUNT,
                    m.PREFERRED_REPLICA_IMBALANCE_COUNT,
                )
            )

        await eventually(lambda: gauges(ctrl) == (1, 2, 4, 0, 0))
        assert gauges(victim) == gauges(other) == (0, 0, 0, 0, 0)
        assert _value(cluster, ctrl, m.EVENT_QUEUE_TIME_MS + "_count") > 0
        await eventually(lambda: _value(cluster, ctrl, m.EVENT_QUEUE_SIZE) == 0)
        await eventually(lambda: _value(cluster, ctrl, m.CONTROLLER_STATE) == 0)  # Idle

        await cluster.kill(victim)
        # x-1 and y-0 lost their only replica (offline, and leaderless counts as imbalanced,
        # as in Kafka); x-0 is led by `other`, not its preferred replica
        await eventually(lambda: gauges(ctrl) == (1, 2, 4, 2, 3))
        assert gauges(other) == (0, 0, 0, 0, 0)

        await cluster.kill(ctrl)
        await cluster.wait_for_controller(not_=ctrl)
        # the survivor took over and sees the same cluster (x-2 moved to it as well)
        await eventually(lambda: gauges(other) == (1, 2, 4, 2, 4))


async def test_metrics_endpoint_over_http(tmp_path):
    """``kafkalite.metrics.port: 0``: every broker serves ``GET /metrics``; the controller's
    ActiveControllerCount is 1, the others' 0, and offline partitions show up after a kill."""
    async with Cluster(tmp_path, 3, **{"kafkalite.metrics.port": 0}) as cluster:
        await cluster.create_topic_znode("t", {0: [1], 1: [2], 2: [0]})
        for p in range(3):
            await cluster.wait_state("t", p, lambda s: s.leader >= 0)
        ports = {i: cluster.broker(i).metrics_server.port for i in range(3)}
        assert len(set(ports.values())) == 3 and 0 not in ports.values()
        ctrl = cluster.controller().broker_id

        async def scrape(i: int) -> dict[str, float]:
            status, ctype, text = await asyncio.to_thread(_http_get, ports[i])
            assert status == 200
            assert ctype.startswith("text/plain")
            return _samples(text)

        got = {i: await scrape(i) for i in range(3)}
        assert [got[i][m.ACTIVE_CONTROLLER_COUNT] for i in range(3)] == [
            1.0 if i == ctrl else 0.0 for i in range(3)
        ]
        assert got[ctrl][m.GLOBAL_PARTITION_COUNT] == 3
        assert got[ctrl][m.OFFLINE_PARTITIONS_COUNT] == 0
        assert got[ctrl][m.EVENT_QUEUE_TIME_MS + "_count"] > 0
        # the purgatory gauges are served too
        assert any(k.startswith("kafka_server_delayedoperationpurgatory") for k in got[ctrl])

        victim = next(i for i in range(3) if i != ctrl)
        await cluster.kill(victim)

        async def one_offline() -> bool:
            return (await scrape(ctrl))[m.OFFLINE_PARTITIONS_COUNT] == 1

        await eventually(one_offline)

        status, _ctype, _text = await asyncio.to_thread(_http_get, ports[ctrl], "/nope")
        assert status == 404
        with pytest.raises(OSError):  # a killed broker's endpoint is closed
            await asyncio.to_thread(_http_get, ports[victim])


async def test_controller_state_and_queue_size_while_an_event_runs(tmp_path):
    """ControllerState is the running event's Kafka state (ControlledShutdown = 8), and
    EventQueueSize counts the events queued behind it."""
    async with Cluster(tmp_path, 1) as cluster:
        ctrl = cluster.broker(0).controller
        release = asyncio.Event()
        running = asyncio.Event()

        async def blocker() -> None:
            running.set()
            await release.wait()

        async def nothing() -> None:
            return None

        first = ctrl.put(blocker, "ControlledShutdown")
        queued = [ctrl.put(nothing, "TopicChange") for _ in range(3)]
        await running.wait()
        assert _value(cluster, 0, m.CONTROLLER_STATE) == 8
        assert _value(cluster, 0, m.EVENT_QUEUE_SIZE) == 3
        before = _value(cluster, 0, m.EVENT_QUEUE_TIME_MS + "_count")
        release.set()
        await asyncio.gather(first, *queued)
        assert _value(cluster, 0, m.EVENT_QUEUE_SIZE) == 0
        assert _value(cluster, 0, m.CONTROLLER_STATE) == 0
        assert _value(cluster, 0, m.EVENT_QUEUE_TIME_MS + "_count") == before + 3
        assert _value(cluster, 0, m.EVENT_QUEUE_TIME_MS + "_sum") > 0
