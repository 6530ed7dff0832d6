"""Share groups read back from ``__consumer_offsets`` when a coordinator loads it."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from kafkalite.coordinator.share import share_codec
from kafkalite.coordinator.share.share_codec import SHARE_KEY_VERSIONS, ShareKey
from kafkalite.coordinator.share.share_group import ShareGroup, ShareMember

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
    metas: dict[str, share_codec.MemberMetadata] = {}
    assignments: dict[str, tuple[int, dict[uuid.UUID, list[int]]]] = {}
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
            elif key.version == share_codec.SHARE_MEMBER_METADATA and key.member_id:
                metas[key.member_id] = share_codec.decode_member_metadata(v)
            elif key.version == share_codec.SHARE_CURRENT_MEMBER_ASSIGNMENT and key.member_id:
                assignments[key.member_id] = share_codec.decode_member_assignment(v)
        except share_codec.ShareCodecError as e:
            log.warning("share group %s: skipping an undecodable record: %s", group_id, e)
    if group is not None:
        group.snapshots = snapshots
        for member_id, meta in metas.items():
            epoch, assigned = assignments.get(member_id, (group.group_epoch, {}))
            m = ShareMember(
                member_id,
                member_epoch=epoch,
                rack_id=meta.rack_id,
                client_id=meta.client_id,
                client_host=meta.client_host,
                subscribed_topic_names=meta.subscribed_topic_names,
                assigned=assigned,
            )
            group.members[member_id] = m
            group.persisted_members[member_id] = persisted_view(m)
    return group


def persisted_view(m: ShareMember) -> tuple[object, ...]:
    """What of a member its two records hold: a change of it is written."""
    return (
        m.rack_id,
        m.client_id,
        m.client_host,
        m.subscribed_topic_names,
        m.member_epoch,
        tuple(sorted((str(t), tuple(ps)) for t, ps in m.assigned.items())),
    )
