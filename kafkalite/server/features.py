"""The feature levels a kafkalite broker reports (KIP-584), from what it implements.

Kafka 4.x clients read ``FinalizedFeatures`` from ApiVersions to choose protocol
paths: a Java producer uses the KIP-890 part 2 transaction protocol (EndTxn v5,
implicit AddPartitionsToTxn with Produce v12+) only when ``transaction.version``
is finalized at 2 or more, and the admin client's ``describeFeatures`` shows these
ranges. kafkalite implements transactions V2 (``transaction.version`` 2, KIP-890
part 2, finalized as on a new Kafka 4 cluster; V1 clients keep working, each request
version says which protocol it speaks), the KIP-848 consumer protocol (``group.version`` 1) and share groups (KIP-932,
``share.version`` 1: :data:`SHARE_VERSION`). The levels are fixed by the code, so they are finalized once, at epoch
:data:`FINALIZED_EPOCH`; UpdateFeatures accepts only the current levels.

``metadata.version`` is reported as a ZooKeeper-mode Kafka 3.9 broker reports it:
supported (3.0-IV1 to 3.9-IV0) but never finalized, since it only has meaning in
KRaft.
"""

from __future__ import annotations

from dataclasses import dataclass

#: share groups (KIP-932), served by kafkalite.coordinator.share
SHARE_VERSION = 1
#: transactions V2 (KIP-890 part 2), Kafka 4's default for a new cluster
TRANSACTION_VERSION = 2
#: the KIP-848 consumer group protocol
GROUP_VERSION = 1
#: a ZooKeeper-mode broker's range: IBP 3.0-IV1 (level 1) .. 3.9-IV0 (level 21)
METADATA_VERSION_RANGE = (1, 21)
#: the epoch of the fixed finalized set (Kafka: -1 means unknown)
FINALIZED_EPOCH = 0


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    min_supported: int
    max_supported: int
    #: None: supported but never finalized (metadata.version in ZooKeeper mode)
    finalized: int | None


def features() -> tuple[Feature, ...]:
    """Every feature, read at call time so a flipped :data:`SHARE_VERSION` shows."""
    return (
        Feature("metadata.version", *METADATA_VERSION_RANGE, None),
        Feature("transaction.version", 0, TRANSACTION_VERSION, TRANSACTION_VERSION),
        Feature("group.version", 0, GROUP_VERSION, GROUP_VERSION),
        Feature("share.version", 0, SHARE_VERSION, SHARE_VERSION),
    )


def supported_features(api_version: int) -> list[dict[str, object]]:
    """ApiVersions' SupportedFeatures; v0-3 omit features with a minimum of 0 (KAFKA-17011:
    older clients reject such ranges)."""
    return [
        {"name": f.name, "min_version": f.min_supported, "max_version": f.max_supported}
        for f in features()
        if api_version >= 4 or f.min_supported > 0
    ]


def finalized_features() -> list[dict[str, object]]:
    """ApiVersions' FinalizedFeatures: level-0 features are not finalized (Kafka omits them)."""
    return [
        {"name": f.name, "max_version_level": f.finalized, "min_version_level": f.finalized}
        for f in features()
        if f.finalized
    ]


def feature(name: str) -> Feature | None:
    return next((f for f in features() if f.name == name), None)
