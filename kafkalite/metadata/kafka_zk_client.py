"""KafkaZkClient: Kafka's znode operations on a :class:`MetadataStore`.

The controller and the broker speak in Kafka terms (register the controller,
bump the controller epoch, read partition states, ...); this module turns those
into store calls on the znodes of :mod:`.zk_paths` with the JSON of
:mod:`.zk_data`. Bulk reads and writes are batched: reads through
:meth:`MetadataStore.get_many` (pipelined on ZooKeeper),
writes as ``multi`` transactions in chunks, because a controller electing
leaders for ten thousand partitions must not pay ten thousand round trips (or,
on the embedded store, ten thousand fsyncs).

Writes made on behalf of an active controller carry ``epoch_zk_version``: the
version of /controller_epoch this controller wrote when it took over. Every such
multi starts with a check of that version, so a controller that has been
replaced (a zombie) cannot write anything; it gets
:class:`ControllerMovedException` and resigns, as in Kafka 2.2+.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkalite.common.types import Endpoint, TopicPartition
from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.store import (
    ANY_VERSION,
    BadVersionError,
    CheckOp,
    CreateOp,
    DeleteOp,
    MetadataStore,
    MetadataStoreError,
    NodeExistsError,
    NoNodeError,
    Op,
    SetDataOp,
    Stat,
    WatchCallback,
)
from kafkalite.timer import loop_slices

__all__ = [
    "BrokerInfo",
    "ControllerMovedException",
    "KafkaZkClient",
    "parse_controller_id",
]

log = logging.getLogger(__name__)


#: Znode operations per multi: well under ZooKeeper's 1 MB jute.maxbuffer.
MULTI_CHUNK = 300


class ControllerMovedException(Exception):
    """Another broker became controller (the /controller_epoch check failed)."""


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker as the controller knows it: its listeners, rack and broker epoch
    (Kafka's ``Broker`` plus the epoch its ``ControllerContext`` keeps)."""

    id: int
    #: the endpoints of its /brokers/ids/<id> registration, in registration order
    endpoints: tuple[Endpoint, ...]
    #: Kafka's broker epoch: the czxid of /brokers/ids/<id>
    epoch: int
    rack: str | None = None

    @classmethod
    def from_registration(
        cls, broker_id: int, reg: zk_data.BrokerRegistration, epoch: int
    ) -> BrokerInfo:
        return cls(broker_id, reg.endpoints, epoch, reg.rack)


class KafkaZkClient:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    # ---- start-up ---------------------------------------------------------------
    async def create_top_level_paths(self) -> None:
        """The persistent parents every broker creates at start-up ([ref] KafkaZkClient)."""
        for path in zk_paths.PERSISTENT_PATHS:
            await self.store.ensure_path(path)

    async def get_or_create_cluster_id(self, proposed: str) -> str:
        """/cluster/id, created with ``proposed`` by the first broker (createOrGetClusterId)."""
        got = await self.store.get_or_none(zk_paths.CLUSTER_ID)
        if got is None:
            try:
                await self.store.create(
                    zk_paths.CLUSTER_ID, zk_data.ClusterId(proposed).encode(), makepath=True
                )
            except NodeExistsError:
                pass
            got = await self.store.get(zk_paths.CLUSTER_ID)
        return zk_data.ClusterId.decode(got[0]).id

    async def generate_broker_sequence_id(self) -> int:
        """A new value of the /brokers/seqid counter (its data version, bumped by a write)."""
        try:
            stat = await self.store.set(zk_paths.BROKER_SEQUENCE_ID, b"")
        except NoNodeError:
            try:
                await self.store.create(zk_paths.BROKER_SEQUENCE_ID, b"", makepath=True)
            except NodeExistsError:
                pass
            stat = await self.store.set(zk_paths.BROKER_SEQUENCE_ID, b"")
        return int(stat.version)

    async def register_broker(self, broker_id: int, reg: zk_data.BrokerRegistration) -> int:
        """Create the ephemeral /brokers/ids/<id>; returns its czxid (the broker epoch).

        A registration left by this same session is kept; one held by another live
        session means a second broker with this id, which is refused.
        """
        path = zk_paths.broker_path(broker_id)
        try:
            await self.store.create(path, reg.encode(), ephemeral=True, makepath=True)
        except NodeExistsError:
            stat = await self.store.exists(path)
            if stat is None or stat.ephemeral_owner != self.store.session_id:
                raise RuntimeError(
                    f"broker.id {broker_id} is already registered in the metadata store by a live broker"
                ) from None
        stat = await self.store.exists(path)
        return stat.czxid if stat is not None else -1

    # ---- /controller, /controller_epoch -------------------------------------------
    async def get_controller_id(self, watch: WatchCallback | None = None) -> int:
        """The active controller's broker id; -1 if absent or unreadable.

        With a watch, an exists-watch is left so creation is heard too.
        """
        got = await self.store.get_or_none(zk_paths.CONTROLLER, watch=watch)
        if got is None:
            return -1
        return parse_controller_id(got[0])

    async def register_controller(self, broker_id: int, timestamp_ms: int) -> bool:
        """Create the ephemeral /controller for ``broker_id``; False if it exists."""
        data = zk_data.ControllerInfo(broker_id, timestamp_ms).encode()
        try:
            await self.store.create(zk_paths.CONTROLLER, data, ephemeral=True)
            return True
        except NodeExistsError:
            return False

    async def delete_controller_if_owned(self, broker_id: int) -> bool:
        """Delete /controller if it names ``broker_id`` (resigning so others elect)."""
        got = await self.store.get_or_none(zk_paths.CONTROLLER)
        if got is None or parse_controller_id(got[0]) != broker_id:
            return False
        try:
            await self.store.delete(zk_paths.CONTROLLER, version=got[1].version)
            return True
        except (NoNodeError, BadVersionError):
            return False

    async def increment_controller_epoch(self) -> tuple[int, int]:
        """Bump /controller_epoch by CAS; returns (epoch, znode version).

        A concurrent bump (version mismatch, or a racing creation) means another
        controller got there first: :class:`ControllerMovedException`.
        """
        got = await self.store.get_or_none(zk_paths.CONTROLLER_EPOCH)
        if got is None:
            try:
                await self.store.create(
                    zk_paths.CONTROLLER_EPOCH, zk_data.encode_controller_epoch(1)
                )
            except NodeExistsError:
                raise ControllerMovedException(
                    "/controller_epoch was created by another controller"
                ) from None
            return 1, 0
        raw, stat = got
        epoch = zk_data.decode_controller_epoch(raw) + 1
        try:
            new = await self.store.set(
                zk_paths.CONTROLLER_EPOCH,
                zk_data.encode_controller_epoch(epoch),
                version=stat.version,
            )
        except BadVersionError:
            raise ControllerMovedException(
                f"/controller_epoch changed while bumping it to {epoch}"
            ) from None
        return epoch, new.version

    async def get_controller_epoch(self) -> tuple[int, int] | None:
        got = await self.store.get_or_none(zk_paths.CONTROLLER_EPOCH)
        return None if got is None else (zk_data.decode_controller_epoch(got[0]), got[1].version)

    # ---- /brokers/ids -------------------------------------------------------------
    async def get_broker_ids(self, watch: WatchCallback | None = None) -> list[int]:
        out = []
        for name in await self.store.get_children(zk_paths.BROKER_IDS, watch=watch):
            try:
                out.append(int(name))
            except ValueError:
                log.warning("ignoring /brokers/ids child %r", name)
        return sorted(out)

    async def get_brokers(self, ids: Sequence[int]) -> dict[int, BrokerInfo]:
        got = await self.store.get_many([zk_paths.broker_path(i) for i in ids])
        out: dict[int, BrokerInfo] = {}
        for broker_id, item in zip(ids, got, strict=True):
            if item is None:
                continue
            try:
                reg = zk_data.BrokerRegistration.decode(item[0])
            except zk_data.MetadataFormatError as e:
                log.warning("ignoring malformed registration of broker %d: %s", broker_id, e)
                continue
            out[broker_id] = BrokerInfo.from_registration(broker_id, reg, item[1].czxid)
        return out

    # ---- /brokers/topics ----------------------------------------------------------
    async def get_all_topics(self, watch: WatchCallback | None = None) -> list[str]:
        return await self.store.get_children(zk_paths.BROKER_TOPICS, watch=watch)

    async def get_topic_assignment(
        self, topic: str, watch: WatchCallback | None = None
    ) -> tuple[zk_data.TopicAssignment, int] | None:
        """(assignment, znode version), None if the topic znode is gone or unreadable."""
        try:
            raw, stat = await self.store.get(zk_paths.topic_path(topic), watch=watch)
        except NoNodeError:
            return None
        try:
            return zk_data.TopicAssignment.decode(raw), stat.version
        except zk_data.MetadataFormatError as e:
            log.error("ignoring topic %s with a malformed assignment: %s", topic, e)
            return None

    async def get_topic_assignments(
        self, topics: Sequence[str]
    ) -> dict[str, tuple[zk_data.TopicAssignment, int]]:
        got = await self.store.get_many([zk_paths.topic_path(t) for t in topics])
        out = {}
        for topic, item in zip(topics, got, strict=True):
            if item is None:
                continue
            try:
                out[topic] = (zk_data.TopicAssignment.decode(item[0]), item[1].version)
            except zk_data.MetadataFormatError as e:
                log.error("ignoring topic %s with a malformed assignment: %s", topic, e)
        return out

    async def set_topic_assignment(
        self,
        topic: str,
        assignment: zk_data.TopicAssignment,
        *,
        expected_version: int = ANY_VERSION,
        epoch_zk_version: int | None = None,
    ) -> int:
        """Write the assignment (conditionally); returns the new znode version."""
        [stat] = await self._multi_fenced(
            [SetDataOp(zk_paths.topic_path(topic), assignment.encode(), expected_version)],
            epoch_zk_version,
        )
        assert isinstance(stat, Stat)
        return stat.version

    async def get_topic_config(self, topic: str) -> dict[str, str]:
        got = await self.store.get_or_none(zk_paths.topic_config_path(topic))
        if got is None:
            return {}
        try:
            return dict(zk_data.EntityConfig.decode(got[0]).config)
        except zk_data.MetadataFormatError:
            return {}

    async def delete_topic_znodes(self, topic: str, epoch_zk_version: int | None) -> None:
        """Topic deletion's last step: the topic, its config, its deletion marker.

        The partitions' znodes go first, a batch per transaction (Kafka's
        deleteRecursive deletes children before their parent, not atomically
        either): one transaction of 20,000 znodes held the loop for 0.15 s.
        """
        await self._check_epoch(epoch_zk_version)
        await self._delete_partition_znodes(topic, epoch_zk_version)
        for path in (zk_paths.topic_path(topic), zk_paths.topic_config_path(topic)):
            try:
                await self.store.delete(path, recursive=True)
            except NoNodeError:
                pass
        await self.delete_topic_deletions([topic], epoch_zk_version)

    async def _delete_partition_znodes(self, topic: str, epoch_zk_version: int | None) -> None:
        try:
            children = await self.store.get_children(zk_paths.topic_partitions_path(topic))
        except NoNodeError:
            return
        for i in range(0, len(children), MULTI_CHUNK // 2):
            ops: list[Op] = []
            for name in children[i : i + MULTI_CHUNK // 2]:
                try:
                    partition = int(name)
                except ValueError:
                    continue  # not ours: the recursive delete takes it
                ops.append(DeleteOp(zk_paths.partition_state_path(topic, partition)))
                ops.append(DeleteOp(zk_paths.partition_path(topic, partition)))
            try:
                await self._multi_fenced(ops, epoch_zk_version)
            except MetadataStoreError:
                pass  # changed meanwhile: the recursive delete takes what is left

    # ---- partition state znodes -----------------------------------------------------
    async def get_partition_states(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, tuple[zk_data.PartitionState, int]]:
        """(state, znode version) per partition that has a readable state znode."""
        got = await self.store.get_many([zk_paths.partition_state_path(*tp) for tp in partitions])
        out = {}
        for tp, item in zip(partitions, got, strict=True):
            if item is None:
                continue
            try:
                out[tp] = (zk_data.PartitionState.decode(item[0]), item[1].version)
            except zk_data.MetadataFormatError as e:
                log.error("malformed state znode of %s-%d: %s", tp[0], tp[1], e)
            await loop_slices.pause()
        return out

    async def create_partition_states(
        self,
        states: Sequence[tuple[TopicPartition, zk_data.PartitionState]],
        epoch_zk_version: int | None,
    ) -> dict[TopicPartition, MetadataStoreError | None]:
        """Create state znodes (and their parents); None per success, else the error."""
        result: dict[TopicPartition, MetadataStoreError | None] = {}
        existing_parents: set[str] = set()
        for i in range(0, len(states), MULTI_CHUNK // 3):
            pending = list(states[i : i + MULTI_CHUNK // 3])
            while pending:
                ops: list[Op] = []
                owners: list[tuple[TopicPartition | None, str]] = []
                planned: set[str] = set()
                for tp, st in pending:
                    for parent in (
                        zk_paths.topic_partitions_path(tp[0]),
                        zk_paths.partition_path(*tp),
                    ):
                        if parent not in existing_parents and parent not in planned:
                            planned.add(parent)
                            ops.append(CreateOp(parent))
                            owners.append((None, parent))
                    ops.append(CreateOp(zk_paths.partition_state_path(*tp), st.encode()))
                    owners.append((tp, ""))
                try:
                    await self._multi_fenced(ops, epoch_zk_version)
                except MetadataStoreError as e:
                    if e.op_index is None:
                        raise
                    failed_tp, parent = owners[e.op_index]
                    if failed_tp is None:
                        if isinstance(e, NodeExistsError):
                            existing_parents.add(parent)
                            continue
                        # the topic znode itself is gone: fail its partitions
                        topic = parent.split("/")[3]
                        for tp, _ in pending:
                            if tp[0] == topic:
                                result[tp] = e
                        pending = [x for x in pending if x[0][0] != topic]
                        continue
                    result[failed_tp] = e
                    pending = [x for x in pending if x[0] != failed_tp]
                    continue
                existing_parents |= planned
                for tp, _ in pending:
                    result[tp] = None
                pending = []
        return result

    async def update_partition_states(
        self,
        states: Sequence[tuple[TopicPartition, zk_data.PartitionState, int]],
        epoch_zk_version: int | None,
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, MetadataStoreError]]:
        """Conditional writes ``(partition, state, expected version)``.

        Returns (new version per written partition, error per failed one); a
        version conflict shows up as :class:`BadVersionError` (retry after a re-read).
        """
        done: dict[TopicPartition, int] = {}
        failed: dict[TopicPartition, MetadataStoreError] = {}
        for i in range(0, len(states), MULTI_CHUNK):
            pending = list(states[i : i + MULTI_CHUNK])
            while pending:
                ops: list[Op] = [
                    SetDataOp(zk_paths.partition_state_path(*tp), st.encode(), version)
                    for tp, st, version in pending
                ]
                try:
                    results = await self._multi_fenced(ops, epoch_zk_version)
                except MetadataStoreError as e:
                    if e.op_index is None:
                        raise
                    failed[pending[e.op_index][0]] = e
                    del pending[e.op_index]
                    continue
                for (tp, _st, _v), stat in zip(pending, results, strict=True):
                    assert isinstance(stat, Stat)
                    done[tp] = stat.version
                pending = []
        return done, failed

    # ---- /admin/delete_topics -------------------------------------------------------
    async def get_topic_deletions(self, watch: WatchCallback | None = None) -> list[str]:
        return await self.store.get_children(zk_paths.DELETE_TOPICS, watch=watch)

    async def delete_topic_deletions(
        self, topics: Iterable[str], epoch_zk_version: int | None
    ) -> None:
        await self._check_epoch(epoch_zk_version)
        for t in topics:
            try:
                await self.store.delete(zk_paths.delete_topic_path(t), recursive=True)
            except NoNodeError:
                pass

    # ---- /isr_change_notification ---------------------------------------------------
    async def get_isr_change_notifications(self, watch: WatchCallback | None = None) -> list[str]:
        return await self.store.get_children(zk_paths.ISR_CHANGE_NOTIFICATION, watch=watch)

    async def get_isr_change_partitions(self, names: Sequence[str]) -> set[TopicPartition]:
        """Partitions named by the notifications; malformed ones name none."""
        got = await self.store.get_many([f"{zk_paths.ISR_CHANGE_NOTIFICATION}/{n}" for n in names])
        out: set[TopicPartition] = set()
        for name, item in zip(names, got, strict=True):
            if item is None:
                continue
            try:
                out.update(
                    (tp.topic, tp.partition)
                    for tp in zk_data.IsrChangeNotification.decode(item[0]).partitions
                )
            except zk_data.MetadataFormatError as e:
                log.warning("ignoring malformed ISR change notification %s: %s", name, e)
        return out

    async def delete_isr_change_notifications(
        self, names: Iterable[str], epoch_zk_version: int | None
    ) -> None:
        await self._check_epoch(epoch_zk_version)
        for n in names:
            try:
                await self.store.delete(f"{zk_paths.ISR_CHANGE_NOTIFICATION}/{n}")
            except NoNodeError:
                pass

    # ---- /log_dir_event_notification -------------------------------------------------
    async def propagate_log_dir_event(self, broker_id: int) -> None:
        """/log_dir_event_notification/log_dir_event_<seq>: the controller then asks the
        broker which of its replicas are offline."""
        await self.store.create(
            zk_paths.log_dir_event_notification_path(),
            zk_data.LogDirEventNotification(broker_id).encode(),
            sequential=True,
            makepath=True,
        )

    async def get_log_dir_event_notifications(
        self, watch: WatchCallback | None = None
    ) -> list[str]:
        return await self.store.get_children(zk_paths.LOG_DIR_EVENT_NOTIFICATION, watch=watch)

    async def get_broker_ids_from_log_dir_events(self, names: Sequence[str]) -> set[int]:
        """Brokers named by the notifications; malformed ones name none."""
        got = await self.store.get_many(
            [f"{zk_paths.LOG_DIR_EVENT_NOTIFICATION}/{n}" for n in names]
        )
        out: set[int] = set()
        for name, item in zip(names, got, strict=True):
            if item is None:
                continue
            try:
                out.add(zk_data.LogDirEventNotification.decode(item[0]).broker)
            except zk_data.MetadataFormatError as e:
                log.warning("ignoring malformed log dir event notification %s: %s", name, e)
        return out

    async def delete_log_dir_event_notifications(
        self, names: Iterable[str], epoch_zk_version: int | None
    ) -> None:
        await self._check_epoch(epoch_zk_version)
        for n in names:
            try:
                await self.store.delete(f"{zk_paths.LOG_DIR_EVENT_NOTIFICATION}/{n}")
            except NoNodeError:
                pass

    # ---- /admin/reassign_partitions -----------------------------------------------
    async def get_partition_reassignment(
        self, watch: WatchCallback | None = None
    ) -> dict[TopicPartition, list[int]]:
        got = await self.store.get_or_none(zk_paths.REASSIGN_PARTITIONS, watch=watch)
        if got is None:
            return {}
        try:
            decoded = zk_data.PartitionReassignment.decode(got[0])
        except zk_data.MetadataFormatError as e:
            log.error("ignoring malformed %s: %s", zk_paths.REASSIGN_PARTITIONS, e)
            return {}
        return {(tp.topic, tp.partition): r for tp, r in decoded.partitions.items()}

    async def set_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, list[int]], epoch_zk_version: int | None
    ) -> None:
        """Rewrite the admin node; delete it when nothing is left."""
        if not reassignment:
            await self._check_epoch(epoch_zk_version)
            try:
                await self.store.delete(zk_paths.REASSIGN_PARTITIONS)
            except NoNodeError:
                pass
            return
        data = zk_data.PartitionReassignment(
            {zk_data.TopicPartition(*tp): list(r) for tp, r in reassignment.items()}
        ).encode()
        try:
            await self._multi_fenced(
                [SetDataOp(zk_paths.REASSIGN_PARTITIONS, data)], epoch_zk_version
            )
        except NoNodeError:
            await self._multi_fenced(
                [CreateOp(zk_paths.REASSIGN_PARTITIONS, data)], epoch_zk_version
            )

    # ---- /admin/preferred_replica_election ------------------------------------------
    async def get_preferred_replica_election(
        self, watch: WatchCallback | None = None
    ) -> set[TopicPartition] | None:
        """None when the admin node is absent."""
        got = await self.store.get_or_none(zk_paths.PREFERRED_REPLICA_ELECTION, watch=watch)
        if got is None:
            return None
        try:
            decoded = zk_data.PreferredReplicaElection.decode(got[0])
        except zk_data.MetadataFormatError as e:
            log.error("ignoring malformed %s: %s", zk_paths.PREFERRED_REPLICA_ELECTION, e)
            return set()
        return {(tp.topic, tp.partition) for tp in decoded.partitions}

    async def delete_preferred_replica_election(self, epoch_zk_version: int | None) -> None:
        await self._check_epoch(epoch_zk_version)
        try:
            await self.store.delete(zk_paths.PREFERRED_REPLICA_ELECTION)
        except NoNodeError:
            pass

    # ---- fencing ------------------------------------------------------------------
    async def _multi_fenced(self, ops: list[Op], epoch_zk_version: int | None) -> list[Any]:
        """``multi(ops)``, preceded by the /controller_epoch check when fenced.

        Errors keep ``op_index`` relative to ``ops``; a failed check raises
        :class:`ControllerMovedException`.
        """
        if epoch_zk_version is None:
            return await self.store.multi(ops)
        try:
            results = await self.store.multi(
                [CheckOp(zk_paths.CONTROLLER_EPOCH, epoch_zk_version), *ops]
            )
        except MetadataStoreError as e:
            if e.op_index == 0:
                raise ControllerMovedException(
                    f"/controller_epoch is no longer at version {epoch_zk_version}"
                ) from e
            if e.op_index is not None:
                e.op_index -= 1
            raise
        return results[1:]

    async def _check_epoch(self, epoch_zk_version: int | None) -> None:
        """For writes that are not worth a multi: fail fast if the controller moved."""
        if epoch_zk_version is None:
            return
        stat = await self.store.exists(zk_paths.CONTROLLER_EPOCH)
        if stat is None or stat.version != epoch_zk_version:
            raise ControllerMovedException(
                f"/controller_epoch is no longer at version {epoch_zk_version}"
            )


def parse_controller_id(data: bytes) -> int:
    """/controller's broker id (JSON ``brokerid`` or a plain integer); -1 if malformed."""
    try:
        return zk_data.ControllerInfo.decode(data).broker_id
    except zk_data.MetadataFormatError:
        log.warning("malformed /controller data %r", data)
        return -1
