"""Share groups read back from ``__consumer_offsets`` when a coordinator loads it."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from kafkalite.coordinator.share import share_codec
from kafkalite.coordinator.share.share_codec import SHARE_KEY_VERSIONS, ShareKey
from kafkalite.coordinator.share.share_group import ShareGroup

log = logging.getLogger(__name__)

__all__ = ["SHARE_KEY_VERSIONS", "decode_key", "rebuild"]


def decode_key(buf: bytes) -> ShareKey:
    """The key, or one with an empty group id when undecodable (then ignored)."""
    try:
        return share_codec.decode_key(buf)
    except (share_codec.ShareCodecError, UnicodeDecodeError, IndexError, ValueError) as e:
        log.warning("skipping an undecodable share key: %s", e)
        return ShareKey(-1, "")


def rebuild(group_id: str, records: Mapping[bytes, bytes | None]) -> ShareGroup | None:
    """The share group from its latest records; None when it has no live metadata record."""
    if not group_id:
        return None
    group: ShareGroup | None = None
    snapshots = {}
    for k, v in records.items():
        key = decode_key(k)
        if v is None:
            continue
        try:
            if key.version == share_codec.SHARE_GROUP_METADATA:
                epoch = share_codec.decode_group_metadata_value(v)
                group = ShareGroup(group_id, group_epoch=epoch, assignment_epoch=epoch)
                group.persisted_epoch = epoch
            elif key.version == share_codec.SHARE_SNAPSHOT and key.topic_id is not None:
                snapshots[(key.topic_id, key.partition)] = share_codec.decode_snapshot(v)
        except share_codec.ShareCodecError as e:
            log.warning("share group %s: skipping an undecodable record: %s", group_id, e)
    if group is not None:
        group.snapshots = snapshots
    return group
