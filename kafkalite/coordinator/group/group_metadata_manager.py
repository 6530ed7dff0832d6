"""GroupMetadataManager: the groups cache and its durable copy in ``__consumer_offsets``.

A group lives in partition ``partition_for(group_id)`` of ``__consumer_offsets``
and only the leader of that partition (its coordinator) caches it. When this
broker becomes leader of a partition the manager replays the partition's log
(last value per key wins, a null value deletes) into the cache; until that is
done the partition's groups answer COORDINATOR_LOAD_IN_PROGRESS. When it stops
being leader the groups are dropped and answer NOT_COORDINATOR.

Every change (commits, group metadata, deletions) is appended through the
replica manager with acks=-1 and reaches the cache only after the append
succeeded, so what a client was told is what a reload will find.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kafkalite.common.errors import ConfigError
from kafkalite.common.types import TopicPartition
from kafkalite.coordinator.group import consumer_group_codec as cg_codec
from kafkalite.coordinator.group import offset_codec as codec
from kafkalite.coordinator.group.collaborators import ClusterMetadata, Replicas
from kafkalite.coordinator.group.group_metadata import (
    GroupMetadata,
    GroupState,
    OffsetAndMetadata,
)
from kafkalite.coordinator.group.txn_offsets import TxnReplay
from kafkalite.coordinator.load_summary import LoadSummary
from kafkalite.coordinator.share import share_loader
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import build_batch, iter_batches

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
#: the server-side assignors of the consumer protocol (the first is the default)
DEFAULT_ASSIGNORS = ("uniform", "range")
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


@dataclass(slots=True)
class GroupConfig:
    """The broker settings the group coordinator reads (Kafka's names and defaults)."""

    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104857600
    offsets_load_buffer_size: int = 5242880
    offsets_commit_timeout_ms: int = 5000
    offsets_retention_ms: int = 10080 * 60_000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2**31 - 1
    # the consumer protocol (KIP-848)
    consumer_session_timeout_ms: int = 45000
    consumer_min_session_timeout_ms: int = 45000
    consumer_max_session_timeout_ms: int = 60000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_min_heartbeat_interval_ms: int = 5000
    consumer_max_heartbeat_interval_ms: int = 15000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")  # the first is the default
    consumer_migration_policy: str = "bidirectional"
    # share groups (KIP-932)
    share_session_timeout_ms: int = 45000
    share_min_session_timeout_ms: int = 45000
    share_max_session_timeout_ms: int = 60000
    share_heartbeat_interval_ms: int = 5000
    share_min_heartbeat_interval_ms: int = 5000
    share_max_heartbeat_interval_ms: int = 15000
    share_max_size: int = 200
    share_record_lock_duration_ms: int = 30000
    share_min_record_lock_duration_ms: int = 15000
    share_max_record_lock_duration_ms: int = 60000
    share_delivery_count_limit: int = 5
    share_min_delivery_count_limit: int = 2
    share_max_delivery_count_limit: int = 10
    share_partition_max_record_locks: int = 2000
    share_max_share_sessions: int = 2000

    @classmethod
    def from_broker_config(cls, cfg: Any) -> GroupConfig:
        d = cls()

        def get(key: str, default: int) -> int:
            v = cfg.get(key) if hasattr(cfg, "get") else None
            return default if v is None else int(v)

        out = cls(
            offsets_topic_num_partitions=get(
                "offsets.topic.num.partitions", d.offsets_topic_num_partitions
            ),
            offsets_topic_replication_factor=get(
                "offsets.topic.replication.factor", d.offsets_topic_replication_factor
            ),
            offsets_topic_segment_bytes=get(
                "offsets.topic.segment.bytes", d.offsets_topic_segment_bytes
            ),
            offsets_load_buffer_size=get("offsets.load.buffer.size", d.offsets_load_buffer_size),
            offsets_commit_timeout_ms=get("offsets.commit.timeout.ms", d.offsets_commit_timeout_ms),
            offsets_retention_ms=get("offsets.retention.minutes", 10080) * 60_000,
            offsets_retention_check_interval_ms=get(
                "offsets.retention.check.interval.ms", d.offsets_retention_check_interval_ms
            ),
            offset_metadata_max_bytes=get("offset.metadata.max.bytes", d.offset_metadata_max_bytes),
            group_min_session_timeout_ms=get(
                "group.min.session.timeout.ms", d.group_min_session_timeout_ms
            ),
            group_max_session_timeout_ms=get(
                "group.max.session.timeout.ms", d.group_max_session_timeout_ms
            ),
            group_initial_rebalance_delay_ms=get(
                "group.initial.rebalance.delay.ms", d.group_initial_rebalance_delay_ms
            ),
            group_max_size=get("group.max.size", d.group_max_size),
            consumer_session_timeout_ms=get(
                "group.consumer.session.timeout.ms", d.consumer_session_timeout_ms
            ),
            consumer_min_session_timeout_ms=get(
                "group.consumer.min.session.timeout.ms", d.consumer_min_session_timeout_ms
            ),
            consumer_max_session_timeout_ms=get(
                "group.consumer.max.session.timeout.ms", d.consumer_max_session_timeout_ms
            ),
            consumer_heartbeat_interval_ms=get(
                "group.consumer.heartbeat.interval.ms", d.consumer_heartbeat_interval_ms
            ),
            consumer_min_heartbeat_interval_ms=get(
                "group.consumer.min.heartbeat.interval.ms", d.consumer_min_heartbeat_interval_ms
            ),
            consumer_max_heartbeat_interval_ms=get(
                "group.consumer.max.heartbeat.interval.ms", d.consumer_max_heartbeat_interval_ms
            ),
            consumer_max_size=get("group.consumer.max.size", d.consumer_max_size),
            consumer_assignors=_assignor_names(cfg.get("group.consumer.assignors")),
            consumer_migration_policy=str(
                cfg.get("group.consumer.migration.policy") or d.consumer_migration_policy
            ).lower(),
            **{
                f.replace(".", "_")[len("group_") :]: get(f, getattr(d, f.replace(".", "_")[6:]))
                for f in _SHARE_KEYS
            },
        )
        out.check_consumer_bounds()
        return out

    def check_consumer_bounds(self) -> None:
        """Kafka's GroupCoordinatorConfig checks: each default within its min and max,
        the heartbeat interval below the session timeout."""
        for key, lo, v, hi in (
            (
                "group.consumer.session.timeout.ms",
                self.consumer_min_session_timeout_ms,
                self.consumer_session_timeout_ms,
                self.consumer_max_session_timeout_ms,
            ),
            (
                "group.consumer.heartbeat.interval.ms",
                self.consumer_min_heartbeat_interval_ms,
                self.consumer_heartbeat_interval_ms,
                self.consumer_max_heartbeat_interval_ms,
            ),
            (
                "group.share.session.timeout.ms",
                self.share_min_session_timeout_ms,
                self.share_session_timeout_ms,
                self.share_max_session_timeout_ms,
            ),
            (
                "group.share.heartbeat.interval.ms",
                self.share_min_heartbeat_interval_ms,
                self.share_heartbeat_interval_ms,
                self.share_max_heartbeat_interval_ms,
            ),
            (
                "group.share.record.lock.duration.ms",
                self.share_min_record_lock_duration_ms,
                self.share_record_lock_duration_ms,
                self.share_max_record_lock_duration_ms,
            ),
            (
                "group.share.delivery.count.limit",
                self.share_min_delivery_count_limit,
                self.share_delivery_count_limit,
                self.share_max_delivery_count_limit,
            ),
        ):
            if not lo <= v <= hi:
                raise ConfigError(key, f"{v} must be between its min ({lo}) and max ({hi})")
        if self.consumer_heartbeat_interval_ms >= self.consumer_session_timeout_ms:
            raise ConfigError(
                "group.consumer.heartbeat.interval.ms",
                "must be less than group.consumer.session.timeout.ms",
            )
        if self.consumer_migration_policy not in MIGRATION_POLICIES:
            raise ConfigError(
                "group.consumer.migration.policy",
                f"must be one of {', '.join(MIGRATION_POLICIES)}",
            )


_SHARE_KEYS = tuple(
    "group." + n.replace("_", ".")
    for n in (
        "share_session_timeout_ms",
        "share_min_session_timeout_ms",
        "share_max_session_timeout_ms",
        "share_heartbeat_interval_ms",
        "share_min_heartbeat_interval_ms",
        "share_max_heartbeat_interval_ms",
        "share_max_size",
        "share_record_lock_duration_ms",
        "share_min_record_lock_duration_ms",
        "share_max_record_lock_duration_ms",
        "share_delivery_count_limit",
        "share_min_delivery_count_limit",
        "share_max_delivery_count_limit",
        "share_partition_max_record_locks",
        "share_max_share_sessions",
    )
)


def _assignor_names(value: Any) -> tuple[str, ...]:
    """group.consumer.assignors: names, or Kafka's class names of its two assignors."""
    if value is None:
        return DEFAULT_ASSIGNORS
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    out = []
    for item in items:
        name = str(item).strip()
        if not name:
            continue
        short = name.rsplit(".", 1)[-1]
        out.append(
            {"UniformAssignor": "uniform", "RangeAssignor": "range"}.get(short, name.lower())
        )
    for name in out:
        if name not in DEFAULT_ASSIGNORS:
            raise ConfigError("group.consumer.assignors", f"unknown assignor {name!r}")
    return tuple(out) or DEFAULT_ASSIGNORS


def _store_error(code: int, *, for_offsets: bool) -> int:
    """What a failed append means to a group client (Kafka's mapping)."""
    if code in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
    ):
        return int(ErrorCode.coordinator_not_available)
    if code in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return int(ErrorCode.not_coordinator)
    if code in (
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.invalid_fetch_size,
    ):
        return int(
            ErrorCode.invalid_commit_offset_size if for_offsets else ErrorCode.unknown_server_error
        )
    return int(code)


class GroupMetadataManager:
    def __init__(
        self,
        metadata: ClusterMetadata,
        replicas: Replicas,
        config: GroupConfig,
        clock_ms: Callable[[], int],
    ) -> None:
        self.metadata = metadata
        self.replicas = replicas
        self.config = config
        self.clock_ms = clock_ms
        self.groups: dict[str, GroupMetadata] = {}
        self.owned_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()
        #: one token per leadership of a partition; a load whose token is stale gives up
        self._load_tokens: dict[int, object] = {}
        self._load_tasks: dict[int, asyncio.Task[None]] = {}
        self.shutting_down = False
        self._load_summary = LoadSummary(log, "groups", OFFSETS_TOPIC)

    # ---- ownership ----------------------------------------------------------------
    @property
    def num_partitions(self) -> int:
        """An existing ``__consumer_offsets`` wins over offsets.topic.num.partitions."""
        t = self.metadata.get_topic(OFFSETS_TOPIC)
        if t is not None and t.partitions:
            return len(t.partitions)
        return self.config.offsets_topic_num_partitions

    def partition_for(self, group_id: str) -> int:
        return codec.partition_for(group_id, self.num_partitions)

    def is_group_local(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned_partitions

    def is_group_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading_partitions

    @property
    def is_loading(self) -> bool:
        return bool(self.loading_partitions)

    # ---- cache --------------------------------------------------------------------
    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.groups.setdefault(group.group_id, group)

    def live_group(self, group_id: str, now_ms: int, create: bool) -> GroupMetadata | None:
        """The group's container unless it is Dead; a new Empty one when ``create``
        (the KIP-848 and share heartbeats' first step), else None."""
        container = self.groups.get(group_id)
        if container is not None and container.is_state(GroupState.DEAD):
            container = None
        if container is None and create:
            container = self.add_group(GroupMetadata(group_id, GroupState.EMPTY, now_ms))
        return container

    def remove_group(self, group: GroupMetadata) -> None:
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    def current_groups(self) -> list[GroupMetadata]:
        return list(self.groups.values())

    # ---- writes -------------------------------------------------------------------
    async def _append(
        self, partition: int, records: list[tuple[bytes, bytes | None]]
    ) -> tuple[int, int]:
        """Append records to one offsets partition (acks=-1); returns (error, base offset)."""
        tp = (OFFSETS_TOPIC, partition)
        batch = build_batch(records, timestamp_ms=self.clock_ms())
        result: Any = self.replicas.append_records(
            self.config.offsets_commit_timeout_ms, -1, {tp: bytearray(batch)}
        )
        if not isinstance(result, dict):
            result = await result
        r = result[tp]
        return int(r.error), int(r.base_offset)

    async def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> int:
        """Persist the group's generation and assignment; returns an error code."""
        value = codec.encode_group_metadata_value(group.to_record_value(assignment))
        key = codec.encode_group_metadata_key(group.group_id)
        error, _ = await self._append(self.partition_for(group.group_id), [(key, value)])
        if error:
            log.warning(
                "storing metadata of group %s failed: %s", group.group_id, ErrorCode(error).name
            )
        return _store_error(error, for_offsets=False) if error else 0

    async def store_records(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> int:
        """Append a consumer group's records (KIP-848 formats); returns an error code."""
        error, _ = await self._append(self.partition_for(group_id), records)
        if error:
            log.warning("storing consumer group %s failed: %s", group_id, ErrorCode(error).name)
        return _store_error(error, for_offsets=False) if error else 0

    async def store_offsets(
        self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> dict[TopicPartition, int]:
        """Append the commits, then make them visible; returns an error per partition."""
        if not offsets:
            return {}
        gid = group.group_id
        records: list[tuple[bytes, bytes | None]] = []
        for (topic, partition), om in offsets.items():
            value = codec.OffsetCommitValue(
                om.offset, om.metadata, om.commit_timestamp, om.leader_epoch, om.expire_timestamp
            )
            records.append(
                (
                    codec.encode_offset_commit_key(gid, topic, partition),
                    codec.encode_offset_commit_value(value),
                )
            )
        group.pending_offset_commits.update(offsets.keys())
        try:
            error, base = await self._append(self.partition_for(gid), records)
        finally:
            group.pending_offset_commits.subtract(offsets.keys())
            group.pending_offset_commits += type(group.pending_offset_commits)()
        if error:
            mapped = _store_error(error, for_offsets=True)
            return dict.fromkeys(offsets, mapped)
        if not group.is_state(GroupState.DEAD):
            for i, (tp, om) in enumerate(offsets.items()):
                om.record_offset = base + i
                current = group.offsets.get(tp)
                # appends to one partition complete in offset order, but never let an older win
                if current is None or current.record_offset < om.record_offset:
                    group.offsets[tp] = om
        return dict.fromkeys(offsets, 0)

    async def delete_offsets(self, group: GroupMetadata, tps: Iterable[TopicPartition]) -> int:
        """Tombstone the given offsets of a group and drop them from the cache."""
        tps = [tp for tp in tps if tp in group.offsets]
        if not tps:
            return 0
        for tp in tps:
            group.offsets.pop(tp, None)
        records: list[tuple[bytes, bytes | None]] = [
            (codec.encode_offset_commit_key(group.group_id, t, p), None) for t, p in tps
        ]
        error, _ = await self._append(self.partition_for(group.group_id), records)
        return _store_error(error, for_offsets=True) if error else 0

    async def delete_group(self, group: GroupMetadata) -> int:
        """Mark the group Dead, drop it and tombstone its offsets and metadata."""
        records: list[tuple[bytes, bytes | None]] = [
            (codec.encode_offset_commit_key(group.group_id, t, p), None) for t, p in group.offsets
        ]
        records.append((codec.encode_group_metadata_key(group.group_id), None))
        if group.consumer is not None:
            records += [(k, None) for k in group.consumer.persisted]
            group.consumer.persisted.clear()
        group.offsets.clear()
        group.transition_to(GroupState.DEAD, self.clock_ms())
        self.remove_group(group)
        error, _ = await self._append(self.partition_for(group.group_id), records)
        return _store_error(error, for_offsets=False) if error else 0

    # ---- loading ------------------------------------------------------------------
    def schedule_load(self, partition: int, on_loaded: Callable[[GroupMetadata], None]) -> None:
        """Become coordinator for ``partition``: replay it, then own its groups.

        A partition already owned or loading keeps its cache: this broker has
        been its leader all along, so the cache is newer than nothing."""
        if partition in self.owned_partitions or partition in self.loading_partitions:
            return
        token = object()
        self._load_tokens[partition] = token
        self._load_summary.started(len(self.loading_partitions))
        self.loading_partitions.add(partition)
        task = asyncio.get_running_loop().create_task(self._load(partition, token, on_loaded))
        self._load_tasks[partition] = task
        task.add_done_callback(
            lambda _t: (
                self._load_tasks.pop(partition, None)
                if self._load_tasks.get(partition) is _t
                else None
            )
        )

    def unload(self, partition: int, on_unloaded: Callable[[GroupMetadata], None]) -> None:
        """Stop being coordinator for ``partition``: drop its groups."""
        self._load_tokens.pop(partition, None)
        task = self._load_tasks.pop(partition, None)
        if task is not None:
            task.cancel()
        self.loading_partitions.discard(partition)
        self.owned_partitions.discard(partition)
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) == partition:
                self.remove_group(group)
                on_unloaded(group)

    async def _load(
        self, partition: int, token: object, on_loaded: Callable[[GroupMetadata], None]
    ) -> None:
        consumer: dict[str, dict[bytes, bytes | None]] = {}
        share: dict[str, dict[bytes, bytes | None]] = {}
        try:
            offsets, metadata = await self._read_partition(partition, token, consumer, share)
        except asyncio.CancelledError:
            raise
        except Exception:
            # as Kafka does: log it and own the partition with what could be read
            log.exception("loading %s-%d failed", OFFSETS_TOPIC, partition)
            offsets, metadata = {}, {}
        if self._load_tokens.get(partition) is not token or self.shutting_down:
            return
        now = self.clock_ms()
        loaded = 0
        for gid in set(offsets) | set(metadata) | set(consumer) | set(share):
            value = metadata.get(gid)
            sg = share_loader.rebuild(gid, share[gid]) if gid in share else None
            if sg is not None:
                group = GroupMetadata(gid, GroupState.EMPTY, now)
                group.share = sg
                group.protocol_type = "share"
                group.offsets = offsets.get(gid, {})
                if self.add_group(group) is group:
                    loaded += 1
                    on_loaded(group)
                continue
            cg = None
            if gid in consumer:
                try:
                    cg = cg_codec.rebuild(gid, consumer[gid])
                except (codec.CodecError, RuntimeError) as e:
                    log.warning("consumer group %s could not be rebuilt: %s", gid, e)
            if cg is not None:
                group = GroupMetadata(gid, GroupState.EMPTY, now)
                group.consumer = cg
                group.protocol_type = "consumer"
                cg.persisted = {k: v for k, v in consumer[gid].items() if v is not None}
            elif value is not None:
                group = GroupMetadata.from_record_value(gid, value, now)
            elif offsets.get(gid):
                group = GroupMetadata(gid, GroupState.EMPTY, now)
            else:
                continue
            group.offsets = offsets.get(gid, {})
            current = self.add_group(group)
            if current is group:
                loaded += 1
                on_loaded(group)
        self.loading_partitions.discard(partition)
        self.owned_partitions.add(partition)
        self._load_summary.finished(partition, loaded, len(self.loading_partitions))

    async def _read_partition(
        self,
        partition: int,
        token: object,
        consumer: dict[str, dict[bytes, bytes | None]] | None = None,
        share: dict[str, dict[bytes, bytes | None]] | None = None,
    ) -> tuple[
        dict[str, dict[TopicPartition, OffsetAndMetadata]],
        dict[str, codec.GroupMetadataValue | None],
    ]:
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        metadata: dict[str, codec.GroupMetadataValue | None] = {}
        p = self.replicas.get_partition((OFFSETS_TOPIC, partition))
        plog = p.log if p is not None else None
        if plog is None:
            return offsets, metadata
        position = plog.log_start_offset
        end = plog.log_end_offset
        replay = TxnReplay()

        def record_offset_of(key_bytes: bytes) -> int | None:
            try:
                key = codec.decode_key(key_bytes)
            except codec.CodecError:
                return None
            if not isinstance(key, codec.OffsetCommitKey):
                return None
            om = offsets.get(key.group, {}).get((key.topic, key.partition))
            return None if om is None else om.record_offset

        def apply(record_offset: int, key: bytes, value: bytes | None) -> None:
            self._apply(record_offset, key, value, offsets, metadata)

        while position < end:
            raw = plog.read(
                position,
                self.config.offsets_load_buffer_size,
                max_offset=None,
                min_one_message=True,
            ).read_bytes()
            if not raw:
                break
            next_position = position
            for header, records in iter_batches(raw):
                next_position = header.next_offset
                if header.is_transactional:
                    # transactional offset commits count once their COMMIT marker is read
                    replay.batch(header, records, position, apply, record_offset_of)
                    continue
                if header.is_control:
                    continue
                for rec in records:
                    if rec.offset < position or rec.key is None:
                        continue
                    self._apply(rec.offset, rec.key, rec.value, offsets, metadata, consumer, share)
            if next_position <= position:
                break
            position = next_position
            await asyncio.sleep(0)  # a big partition must not stall the broker
            if self._load_tokens.get(partition) is not token:
                raise asyncio.CancelledError
        replay.leftover(self, partition, apply, record_offset_of)
        return offsets, metadata

    @staticmethod
    def _apply(
        record_offset: int,
        key_bytes: bytes,
        value_bytes: bytes | None,
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]],
        metadata: dict[str, codec.GroupMetadataValue | None],
        consumer: dict[str, dict[bytes, bytes | None]] | None = None,
        share: dict[str, dict[bytes, bytes | None]] | None = None,
    ) -> None:
        try:
            key = codec.decode_key(key_bytes)
            if isinstance(key, codec.UnknownKey):
                if share is not None and key.version in share_loader.SHARE_KEY_VERSIONS:
                    sk = share_loader.decode_key(bytes(key_bytes))
                    share.setdefault(sk.group_id, {})[bytes(key_bytes)] = (
                        None if value_bytes is None else bytes(value_bytes)
                    )
                    return
                if consumer is not None and key.version in cg_codec.CONSUMER_KEY_VERSIONS:
                    ck = cg_codec.decode_key(key_bytes)
                    consumer.setdefault(ck.group, {})[bytes(key_bytes)] = (
                        None if value_bytes is None else bytes(value_bytes)
                    )
                return
            if isinstance(key, codec.OffsetCommitKey):
                group_offsets = offsets.setdefault(key.group, {})
                tp = (key.topic, key.partition)
                if value_bytes is None:
                    group_offsets.pop(tp, None)
                    return
                v = codec.decode_offset_commit_value(value_bytes)
                group_offsets[tp] = OffsetAndMetadata(
                    v.offset,
                    v.leader_epoch,
                    v.metadata,
                    v.commit_timestamp,
                    v.expire_timestamp,
                    record_offset,
                )
            elif isinstance(key, codec.GroupMetadataKey):
                metadata[key.group] = (
                    None if value_bytes is None else codec.decode_group_metadata_value(value_bytes)
                )
        except codec.CodecError as e:
            log.warning(
                "skipping undecodable %s record at offset %d: %s", OFFSETS_TOPIC, record_offset, e
            )

    # ---- expiry -------------------------------------------------------------------
    async def cleanup_group_metadata(self, now_ms: int | None = None) -> int:
        """Expire old offsets and drop empty groups with none left; returns offsets removed."""
        now = self.clock_ms() if now_ms is None else now_ms
        removed = 0
        tombstones: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for group in list(self.groups.values()):
            partition = self.partition_for(group.group_id)
            if partition not in self.owned_partitions:
                continue
            expired = group.expired_offsets(now, self.config.offsets_retention_ms)
            out = tombstones.setdefault(partition, [])
            for tp in expired:
                del group.offsets[tp]
                out.append((codec.encode_offset_commit_key(group.group_id, tp[0], tp[1]), None))
            removed += len(expired)
            if (
                group.is_empty
                and group.share is None  # share groups stay until DeleteGroups, as in Kafka
                and not group.offsets
                and not group.pending_offset_commits
            ):
                group.transition_to(GroupState.DEAD, now)
                self.remove_group(group)
                out.append((codec.encode_group_metadata_key(group.group_id), None))
        for partition, records in tombstones.items():
            if records:
                error, _ = await self._append(partition, records)
                if error:
                    log.warning(
                        "writing expiry tombstones to %s-%d failed: %s",
                        OFFSETS_TOPIC,
                        partition,
                        ErrorCode(error).name,
                    )
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed

    async def run_expiry(self) -> None:
        interval = max(self.config.offsets_retention_check_interval_ms, 1) / 1000
        while not self.shutting_down:
            await asyncio.sleep(interval)
            with contextlib.suppress(Exception):
                await self.cleanup_group_metadata()

    def shutdown(self) -> None:
        self.shutting_down = True
        for task in self._load_tasks.values():
            task.cancel()
        self._load_tasks.clear()
