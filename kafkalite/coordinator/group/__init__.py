"""The classic consumer group protocol and offsets stored in ``__consumer_offsets``."""

from kafkalite.coordinator.group.group_coordinator import GroupCoordinator
from kafkalite.coordinator.group.group_metadata import GroupMetadata, GroupState, MemberMetadata
from kafkalite.coordinator.group.group_metadata_manager import (
    OFFSETS_TOPIC,
    GroupConfig,
    GroupMetadataManager,
)

__all__ = [
    "OFFSETS_TOPIC",
    "GroupConfig",
    "GroupCoordinator",
    "GroupMetadata",
    "GroupMetadataManager",
    "GroupState",
    "MemberMetadata",
]
