"""Transactional offset commits (TxnOffsetCommit) and their completion by markers.

A transactional producer's offsets are appended to ``__consumer_offsets`` as a
transactional batch with its producer id and epoch; they stay pending (not
returned by OffsetFetch) until the transaction coordinator's COMMIT marker
reaches that partition, and are dropped on ABORT (Kafka's
``GroupMetadata.pendingTransactionalOffsetCommits``). Loading a partition
replays the same rules from the log.

Kept apart from the group coordinator's modules: it only needs the manager's
append and group lookup.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkalite.common.types import TopicPartition
from kafkalite.coordinator.group import offset_codec as codec
from kafkalite.coordinator.group.group_metadata import GroupMetadata, GroupState, OffsetAndMetadata
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.record_batch import NO_SEQUENCE, BatchHeader
from kafkalite.protocol.records import ControlRecordType, Record, build_batch, parse_control_record

if TYPE_CHECKING:
    from kafkalite.coordinator.group.group_coordinator import GroupCoordinator
    from kafkalite.coordinator.group.group_metadata_manager import GroupMetadataManager

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"


@dataclass(slots=True)
class PendingTxnOffsets:
    """Producer id -> group -> partition -> offset, not visible until committed."""

    by_pid: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = field(
        default_factory=dict
    )

    def add(self, pid: int, group: str, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.by_pid.setdefault(pid, {}).setdefault(group, {}).update(offsets)

    def is_pending(self, group: str, tp: TopicPartition) -> bool:
        return any(tp in g.get(group, {}) for g in self.by_pid.values())

    def take(
        self, pid: int, groups_in_partition: Any
    ) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """Remove and return the producer's pending offsets of the groups ``groups_in_partition`` accepts."""
        groups = self.by_pid.get(pid)
        if not groups:
            return {}
        out = {g: o for g, o in groups.items() if groups_in_partition(g)}
        for g in out:
            del groups[g]
        if not groups:
            del self.by_pid[pid]
        return out


def pending_of(manager: GroupMetadataManager) -> PendingTxnOffsets:
    p: PendingTxnOffsets | None = getattr(manager, "txn_offsets", None)
    if p is None:
        p = PendingTxnOffsets()
        manager.txn_offsets = p  # type: ignore[attr-defined]
    return p


def _apply_committed(
    group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]
) -> None:
    for tp, om in offsets.items():
        current = group.offsets.get(tp)
        if current is None or current.record_offset < om.record_offset:
            group.offsets[tp] = om


async def handle_txn_commit_offsets(
    gc: GroupCoordinator,
    group_id: str,
    producer_id: int,
    producer_epoch: int,
    member_id: str,
    group_instance_id: str | None,
    generation_id: int,
    offsets: dict[TopicPartition, OffsetAndMetadata],
) -> dict[TopicPartition, int]:
    """TxnOffsetCommit: append the offsets as part of the producer's transaction."""
    error = gc._validate_group_status(group_id, allow_empty=True)
    if error:
        return dict.fromkeys(offsets, error)
    manager = gc.manager
    group = manager.get_group(group_id)
    if group is None:
        group = manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, gc.clock_ms()))
    if group.is_state(GroupState.DEAD):
        return dict.fromkeys(offsets, int(ErrorCode.coordinator_not_available))
    if generation_id >= 0 or member_id:
        # v3+ (KIP-447): the consumer's group metadata fences zombie instances
        error = group.validate_member(member_id, group_instance_id)
        if error:
            return dict.fromkeys(offsets, int(error))
        if generation_id != group.generation_id:
            return dict.fromkeys(offsets, int(ErrorCode.illegal_generation))
    results: dict[TopicPartition, int] = {}
    valid: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, om in offsets.items():
        if len(om.metadata.encode("utf-8")) > gc.config.offset_metadata_max_bytes:
            results[tp] = int(ErrorCode.offset_metadata_too_large)
        else:
            valid[tp] = om
    if valid:
        records: list[tuple[bytes, bytes | None]] = [
            (
                codec.encode_offset_commit_key(group_id, t, p),
                codec.encode_offset_commit_value(
                    codec.OffsetCommitValue(
                        om.offset,
                        om.metadata,
                        om.commit_timestamp,
                        om.leader_epoch,
                        om.expire_timestamp,
                    )
                ),
            )
            for (t, p), om in valid.items()
        ]
        tp_log = (OFFSETS_TOPIC, manager.partition_for(group_id))
        batch = build_batch(
            records,
            timestamp_ms=gc.clock_ms(),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=NO_SEQUENCE,
            is_transactional=True,
        )
        result: Any = manager.replicas.append_records(
            manager.config.offsets_commit_timeout_ms, -1, {tp_log: bytearray(batch)}
        )
        if not isinstance(result, dict):
            result = await result
        r = result[tp_log]
        code = int(r.error)
        if code:
            if code == ErrorCode.invalid_producer_epoch:
                code = int(ErrorCode.producer_fenced)
            elif code in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
                code = int(ErrorCode.not_coordinator)
            elif code in (
                ErrorCode.unknown_topic_or_partition,
                ErrorCode.not_enough_replicas,
                ErrorCode.not_enough_replicas_after_append,
                ErrorCode.request_timed_out,
            ):
                code = int(ErrorCode.coordinator_not_available)
            results.update(dict.fromkeys(valid, code))
        else:
            for i, om in enumerate(valid.values()):
                om.record_offset = int(r.base_offset) + i
            pending_of(manager).add(producer_id, group_id, valid)
            results.update(dict.fromkeys(valid, 0))
    return {tp: results[tp] for tp in offsets}


def complete_txn_offsets(
    gc: GroupCoordinator, partition: int, producer_id: int, commit: bool
) -> None:
    """A marker reached ``__consumer_offsets-<partition>``: publish or drop the producer's offsets."""
    manager = gc.manager
    if partition in manager.loading_partitions:
        # the load may have read past the marker or not: it settles this one itself
        deferred: dict[int, list[tuple[int, bool]]] = getattr(manager, "txn_deferred", None) or {}
        manager.txn_deferred = deferred  # type: ignore[attr-defined]
        deferred.setdefault(partition, []).append((producer_id, commit))
        return
    taken = pending_of(manager).take(producer_id, lambda g: manager.partition_for(g) == partition)
    if not commit:
        return
    for gid, offsets in taken.items():
        group = manager.get_group(gid)
        if group is None:
            group = manager.add_group(GroupMetadata(gid, GroupState.EMPTY, gc.clock_ms()))
        if not group.is_state(GroupState.DEAD):
            _apply_committed(group, offsets)


class TxnReplay:
    """Loading: transactional offset records wait for their marker, as at run time."""

    def __init__(self) -> None:
        self.open: dict[int, list[Record]] = {}

    def batch(
        self,
        header: BatchHeader,
        records: list[Record],
        position: int,
        apply: Any,
        record_offset_of: Any,
    ) -> None:
        pid = header.producer_id
        if not header.is_control:
            self.open.setdefault(pid, []).extend(r for r in records if r.offset >= position)
            return
        if not records:
            self.open.pop(pid, None)
            return
        try:
            ctype = parse_control_record(records[0])[0]
        except Exception:
            self.open.pop(pid, None)
            return
        self.complete(pid, ctype == ControlRecordType.COMMIT, apply, record_offset_of)

    def complete(self, pid: int, commit: bool, apply: Any, record_offset_of: Any) -> None:
        pending = self.open.pop(pid, [])
        if not commit:
            return
        for rec in pending:
            if rec.key is None:
                continue
            current = record_offset_of(rec.key)
            if current is None or current < rec.offset:
                apply(rec.offset, rec.key, rec.value)

    def leftover(
        self, manager: GroupMetadataManager, partition: int, apply: Any, record_offset_of: Any
    ) -> None:
        """Transactions still open at the end of the log: their offsets are pending, unless
        a marker arrived while the partition loaded (after the read passed its offset)."""
        deferred: dict[int, list[tuple[int, bool]]] = getattr(manager, "txn_deferred", None) or {}
        for pid, commit in deferred.pop(partition, []):
            self.complete(pid, commit, apply, record_offset_of)
        pending = pending_of(manager)
        for groups in pending.by_pid.values():  # a previous leadership's leftovers
            for gid in [g for g in groups if manager.partition_for(g) == partition]:
                del groups[gid]
        for pid, recs in self.open.items():
            for rec in recs:
                if rec.key is None or rec.value is None:
                    continue
                try:
                    key = codec.decode_key(rec.key)
                    if not isinstance(key, codec.OffsetCommitKey):
                        continue
                    v = codec.decode_offset_commit_value(rec.value)
                except codec.CodecError:
                    continue
                pending.add(
                    pid,
                    key.group,
                    {
                        (key.topic, key.partition): OffsetAndMetadata(
                            v.offset,
                            v.leader_epoch,
                            v.metadata,
                            v.commit_timestamp,
                            v.expire_timestamp,
                            rec.offset,
                        )
                    },
                )
        self.open.clear()
