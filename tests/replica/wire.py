"""Wire helpers for the replica tests: raw Fetch/Produce requests and a second replica.

A partition gets extra replicas (broker ids that no process runs, like 99) through
a real LeaderAndIsr on the controller path; the test then plays such a follower
with a raw socket sending Fetch requests with its replica_id. Nothing is mocked.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from kafkalite.protocol.records import build_batch

FOLLOWER = 99
FETCH_V = 12
PRODUCE_V = 9


def fetch(
    parts: Iterable[tuple[str, int, int]],
    *,
    replica_id: int = -1,
    wait_ms: int = 10_000,
    min_bytes: int = 1,
    current_leader_epoch: int = -1,
) -> FetchRequest:
    """A sessionless Fetch of ``(topic, partition, offset)`` triples."""
    by_topic: dict[str, list[FetchPartition]] = {}
    for topic, partition, offset in parts:
        by_topic.setdefault(topic, []).append(
            FetchPartition(
                partition=partition,
                fetch_offset=offset,
                partition_max_bytes=1 << 20,
                current_leader_epoch=current_leader_epoch,
            )
        )
    return FetchRequest(
        replica_id=replica_id,
        max_wait=datetime.timedelta(milliseconds=wait_ms),
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=tuple(FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        forgotten_topics_data=(),
        rack_id="",
    )


def produce(
    data: Iterable[tuple[str, int, bytes]], *, acks: int = 1, timeout_ms: int = 10_000
) -> ProduceRequest:
    """A Produce of ``(topic, partition, records)`` triples."""
    by_topic: dict[str, list[PartitionProduceData]] = {}
    for topic, partition, records in data:
        by_topic.setdefault(topic, []).append(
            PartitionProduceData(index=partition, records=records)
        )
    return ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=tuple(
            TopicProduceData(name=t, partition_data=tuple(p)) for t, p in by_topic.items()
        ),
    )


def batch(n: int = 3, value_size: int = 2) -> bytes:
    return build_batch([(f"k{i}".encode(), b"v" * value_size) for i in range(n)])


def set_replicas(
    b: Any,
    topic: str,
    partition: int = 0,
    *,
    leader: int = 0,
    isr: list[int],
    replicas: list[int],
    epoch: int = 1,
) -> dict[tuple[str, int], int]:
    """LeaderAndIsr for one partition through the broker's controller-request path."""
    k = b.kafka
    t = k.metadata_cache.get_topic(topic)
    state = {
        "topic": topic,
        "partition": partition,
        "topic_id": t.topic_id,
        "leader": leader,
        "leader_epoch": epoch,
        "isr": isr,
        "replicas": replicas,
        "controller_epoch": k.metadata_cache.controller_epoch,
        "partition_epoch": epoch,
    }
    return b.call(
        k.replica_manager.become_leader_or_follower,
        k.metadata_cache.controller_id,
        k.metadata_cache.controller_epoch,
        [state],
    )


class InFlight:
    """A request answered on a background thread, so the test can act while it waits."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.took = 0.0
        self._t0 = time.monotonic()

        def run() -> None:
            try:
                self.result = call()
            except BaseException as e:  # surfaced by wait()
                self.error = e
            self.took = time.monotonic() - self._t0

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    @property
    def pending(self) -> bool:
        return self._thread.is_alive()

    def wait(self, timeout: float = 15) -> Any:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"no response within {timeout}s"
        if self.error is not None:
            raise self.error
        return self.result


def log_dir_of(b: Any, topic: str, partition: int) -> Path:
    """The log dir holding a partition (from the filesystem, not the broker)."""
    for d in b.kafka.config.log_dirs:
        if (Path(d) / f"{topic}-{partition}").is_dir():
            return Path(d)
    raise AssertionError(f"{topic}-{partition} is in no log dir")


def fail_log_dir(d: Path) -> None:
    """A real filesystem failure: the dir is moved away and a plain file takes its place,
    so every later file operation under it fails with NotADirectoryError."""
    d.rename(d.with_name(d.name + ".failed"))
    d.write_text("this log dir has failed\n")


def wait_until(pred: Callable[[], bool], timeout: float = 10, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
