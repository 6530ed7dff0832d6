"""Bounds on administrative requests, checked before any work starts.

One CreateTopics asking for 1,000,000 partitions would otherwise write a huge
assignment to the metadata store and start creating directories; 2^31-1 runs the
broker out of memory. Kafka 4's controller refuses a CreateTopics whose topics
add more than MAX_PARTITIONS_PER_BATCH (10,000) partitions in total
(KAFKA-17870, ReplicationControlManager.validateTotalNumberOfPartitions): every
topic of the request gets POLICY_VIOLATION, "Excessively large number of
partitions per request.", and nothing is created. kafkalite applies the same
total to CreatePartitions (KAFKA-19673; Kafka 4.0 itself fails such a request
deep in the controller with UNKNOWN_SERVER_ERROR once its bounded record list
overflows). The bound is ``kafkalite.max.partitions.per.request``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kafkalite.protocol.errors import ErrorCode

POLICY_VIOLATION = int(ErrorCode.policy_violation)
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."


def create_topics_partitions(topics: Iterable[Any], default_partitions: int) -> int:
    """Partitions a CreateTopics request would create, counted as Kafka does: the
    manual assignments, else ``num_partitions`` (the broker default for -1)."""
    total = 0
    for t in topics:
        assignments = getattr(t, "assignments", None) or ()
        if assignments:
            total += len(assignments)
        elif t.num_partitions == -1:
            total += default_partitions
        elif t.num_partitions > 0:
            total += t.num_partitions
    return total


def create_partitions_partitions(
    topics: Iterable[Any], current_count: Callable[[str], int | None]
) -> int:
    """Partitions a CreatePartitions request would add to the topics that exist."""
    total = 0
    for t in topics:
        current = current_count(t.name)
        if current is not None and t.count > current:
            total += t.count - current
    return total
