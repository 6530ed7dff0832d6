"""AdminManager (Kafka's ZkAdminManager): topic and config changes written to the store.

Admin requests never touch partitions directly. They validate, write the
znodes (/config/topics/<t> first, then /brokers/topics/<t>, as Kafka does) and
wait until the controller has brought the result into this broker's metadata
cache, so a client that gets a success can use the topic at once.
"""

from __future__ import annotations

import contextlib
import logging
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkalite.log.errors import ConfigError as LogConfigError
from kafkalite.log.log_config import LogConfig
from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.store import MetadataStore, NodeExistsError, NoNodeError
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.kafka_uuid import random_uuid, uuid_to_kafka
from kafkalite.server.config import BrokerConfig
from kafkalite.server.dynamic_broker_config import DynamicBrokerConfig
from kafkalite.server.metadata_cache import MetadataCache
from kafkalite.server.topic_names import INTERNAL_TOPICS, colliding_topic, validate_topic_name

log = logging.getLogger(__name__)


@dataclass(slots=True)
class CreateTopicResult:
    name: str
    error: int = 0
    message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    #: the topic's effective config and its overrides, for the response's config list
    log_config: LogConfig | None = None
    overrides: dict[str, str] | None = None


def assign_replicas_to_brokers(
    brokers: Sequence[int],
    n_partitions: int,
    rf: int,
    *,
    start_partition: int = 0,
    fixed_start_index: int = -1,
    racks: Mapping[int, str | None] | None = None,
) -> dict[int, list[int]]:
    """Kafka's AdminUtils.assignReplicasToBrokers: rack-unaware (round-robin leaders,
    shifted followers) when no broker has a rack, rack-aware when all have one (each
    partition's replicas spread over as many racks as possible); a mix is refused."""
    if racks:
        with_rack = {b: racks.get(b) for b in brokers}
        if any(r is not None for r in with_rack.values()):
            if any(r is None for r in with_rack.values()):
                raise KafkaError(
                    ErrorCode.unknown_server_error,
                    "Not all brokers have rack information for replica rack aware assignment.",
                )
            return _assign_rack_aware(
                {b: str(r) for b, r in with_rack.items()},
                n_partitions,
                rf,
                start_partition=start_partition,
                fixed_start_index=fixed_start_index,
            )
    if rf > len(brokers):
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"Replication factor: {rf} larger than available brokers: {len(brokers)}.",
        )
    bs = sorted(brokers)
    n = len(bs)
    start = fixed_start_index if fixed_start_index >= 0 else random.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else random.randrange(n)
    out: dict[int, list[int]] = {}
    pid = max(0, start_partition)
    for _ in range(n_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        replicas = [bs[first]]
        for j in range(rf - 1):
            s = 1 + (shift + j) % (n - 1)
            replicas.append(bs[(first + s) % n])
        out[pid] = replicas
        pid += 1
    return out


def _rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Kafka's getRackAlternatedBrokerList: one broker of each rack in turn."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(racks):
        by_rack.setdefault(racks[b], []).append(b)
    iters = [iter(by_rack[r]) for r in sorted(by_rack)]
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        nxt = next(iters[i], None)
        if nxt is not None:
            out.append(nxt)
        i = (i + 1) % len(iters)
    return out


def _assign_rack_aware(
    racks: Mapping[int, str],
    n_partitions: int,
    rf: int,
    *,
    start_partition: int,
    fixed_start_index: int,
) -> dict[int, list[int]]:
    """Kafka's assignReplicasToBrokersRackAware: leaders round robin over the
    rack-alternated broker list; a follower is skipped while its rack (or itself)
    already has a replica and some rack (or broker) has none."""
    arranged = _rack_alternated(racks)
    n = len(arranged)
    if rf > n:
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"Replication factor: {rf} larger than available brokers: {n}.",
        )
    n_racks = len(set(racks.values()))
    start = fixed_start_index if fixed_start_index >= 0 else random.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else random.randrange(n)
    out: dict[int, list[int]] = {}
    pid = max(0, start_partition)
    for _ in range(n_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        k = 0
        for _r in range(rf - 1):
            while True:
                b = arranged[(first + 1 + (shift * n_racks + k) % (n - 1)) % n]
                k += 1
                rack = racks[b]
                if (rack not in racks_used or len(racks_used) == n_racks) and (
                    b not in replicas or len(replicas) == n
                ):
                    replicas.append(b)
                    racks_used.add(rack)
                    break
        out[pid] = replicas
        pid += 1
    return out


class AdminManager:
    def __init__(
        self,
        store: MetadataStore,
        config: BrokerConfig,
        metadata_cache: MetadataCache,
        dynamic_config: DynamicBrokerConfig,
    ) -> None:
        self.store = store
        self.config = config
        self.metadata_cache = metadata_cache
        self.dynamic_config = dynamic_config
        self.creating: set[str] = set()
        #: topic -> config overrides (Kafka names -> strings), mirrored from /config/topics
        self.topic_configs: dict[str, dict[str, str]] = {}
        #: called with a topic whose overrides this broker changed (AlterConfigs)
        self.topic_config_listeners: list[Callable[[str], None]] = []

    def _racks(self) -> dict[int, str | None]:
        """The live brokers' broker.rack, as the controller's UpdateMetadata described them."""
        return {b: info.rack for b, info in self.metadata_cache.brokers.items()}

    # ---- configs ------------------------------------------------------------
    async def load_topic_configs(self) -> None:
        try:
            names = await self.store.get_children(zk_paths.CONFIG_TOPICS)
        except NoNodeError:
            return
        for name in names:
            with contextlib.suppress(NoNodeError, ValueError):
                raw, _ = await self.store.get(zk_paths.topic_config_path(name))
                self.topic_configs[name] = dict(zk_data.EntityConfig.decode(raw).config)

    async def ensure_topic_configs(self, topics: Iterable[str]) -> None:
        """Read the overrides of topics not seen yet (LeaderAndIsr for a new topic)."""
        for topic in topics:
            if topic not in self.topic_configs:
                with contextlib.suppress(NoNodeError, ValueError):
                    raw, _ = await self.store.get(zk_paths.topic_config_path(topic))
                    self.topic_configs[topic] = dict(zk_data.EntityConfig.decode(raw).config)

    def forget_topic_configs(self, topics: Iterable[str]) -> None:
        """The broker hosts no replica of ``topics`` any more (StopReplica with delete)."""
        for topic in topics:
            self.topic_configs.pop(topic, None)

    def log_config(self, topic: str) -> LogConfig:
        return LogConfig.from_properties(
            self.topic_configs.get(topic, {}), self.dynamic_config.default_log_config
        )

    def validate_topic_configs(self, configs: Mapping[str, str | None]) -> LogConfig:
        props = {k: v for k, v in configs.items() if v is not None}
        try:
            return LogConfig.from_properties(props, self.dynamic_config.default_log_config)
        except LogConfigError as e:
            raise KafkaError(ErrorCode.invalid_config, str(e)) from None

    async def write_topic_config(self, topic: str, configs: dict[str, str]) -> None:
        data = zk_data.EntityConfig(configs).encode()
        path = zk_paths.topic_config_path(topic)
        try:
            await self.store.set(path, data)
        except NoNodeError:
            await self.store.create(path, data, makepath=True)
        self.topic_configs[topic] = dict(configs)
        self.topic_config_changed(topic)

    def topic_config_changed(self, topic: str) -> None:
        """Tell the listeners (the broker's logs and partitions) a topic's config changed."""
        for listener in self.topic_config_listeners:
            listener(topic)

    def broker_defaults_changed(self) -> None:
        """The broker's dynamic defaults changed: every topic's effective config may have."""
        for topic in list(self.metadata_cache.topics):
            self.topic_config_changed(topic)

    # ---- topics -------------------------------------------------------------
    async def create_topics(
        self, topics: Sequence[Any], *, validate_only: bool, timeout_ms: int
    ) -> list[CreateTopicResult]:
        results: list[CreateTopicResult] = []
        to_wait: list[str] = []
        seen: set[str] = set()
        for t in topics:
            r = CreateTopicResult(t.name)
            results.append(r)
            try:
                if t.name in seen:
                    raise KafkaError(
                        ErrorCode.invalid_request, f"duplicate topic {t.name} in request"
                    )
                seen.add(t.name)
                assignment, configs = self._validate_new_topic(t, also_existing=to_wait)
                r.num_partitions = len(assignment)
                r.replication_factor = len(next(iter(assignment.values())))
                r.log_config = self.validate_topic_configs(configs)
                r.overrides = configs
                if validate_only:
                    continue
                topic_id = await self._write_topic(t.name, assignment, configs)
                r.topic_id = topic_id
                to_wait.append(t.name)
            except KafkaError as e:
                r.error, r.message = int(e.code), e.message
        if to_wait:
            await self.metadata_cache.wait_for_topics(
                to_wait, timeout_ms / 1000 if timeout_ms > 0 else 0
            )
            for r in results:
                if r.name in to_wait:
                    t = self.metadata_cache.get_topic(r.name)
                    if t is not None:
                        r.topic_id = t.topic_id
        return results

    def check_new_topic_name(self, name: str, also_existing: Sequence[str] = ()) -> None:
        """Kafka's order: a legal name, not already there, no '.'/'_' collision."""
        if (why := validate_topic_name(name)) is not None:
            raise KafkaError(ErrorCode.invalid_topic_exception, why)
        topics = self.metadata_cache.topics
        if name in topics or name in self.creating:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        other = colliding_topic(name, [*topics, *self.creating, *also_existing])
        if other is not None:
            raise KafkaError(
                ErrorCode.invalid_topic_exception,
                f"Topic '{name}' collides with existing topic: {other}",
            )

    def _validate_new_topic(
        self, t: Any, also_existing: Sequence[str] = ()
    ) -> tuple[dict[int, list[int]], dict[str, str]]:
        cfg = self.config
        self.check_new_topic_name(t.name, also_existing)
        live = self.metadata_cache.alive_broker_ids()
        manual = list(getattr(t, "assignments", ()) or ())
        num_partitions = int(t.num_partitions)
        rf = int(t.replication_factor)
        if manual:
            if num_partitions != -1 or rf != -1:
                raise KafkaError(
                    ErrorCode.invalid_request,
                    "Both numPartitions or replicationFactor and replicasAssignments were set.",
                )
            assignment: dict[int, list[int]] = {}
            for a in manual:
                if len(a.broker_ids) > len(live):  # before copying a list of any length
                    raise KafkaError(
                        ErrorCode.invalid_replica_assignment,
                        f"{len(a.broker_ids)} replicas for partition {a.partition_index}, but "
                        f"only {len(live)} brokers are registered",
                    )
                replicas = [int(b) for b in a.broker_ids]
                if not replicas or len(set(replicas)) != len(replicas):
                    raise KafkaError(
                        ErrorCode.invalid_replica_assignment, "duplicate or empty replica list"
                    )
                if any(b not in live for b in replicas):
                    raise KafkaError(
                        ErrorCode.invalid_replica_assignment, "unknown broker in assignment"
                    )
                assignment[int(a.partition_index)] = replicas
            if sorted(assignment) != list(range(len(assignment))):
                raise KafkaError(ErrorCode.invalid_replica_assignment, "partitions must be 0..n-1")
            if len({len(r) for r in assignment.values()}) != 1:
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment, "all partitions need the same RF"
                )
        else:
            if num_partitions == -1:
                num_partitions = int(cfg["num.partitions"])
            if rf == -1:
                rf = int(cfg["default.replication.factor"])
            if num_partitions <= 0:
                raise KafkaError(
                    ErrorCode.invalid_partitions, "Number of partitions must be larger than 0."
                )
            if rf <= 0:
                raise KafkaError(
                    ErrorCode.invalid_replication_factor,
                    "Replication factor must be larger than 0.",
                )
            if rf > len(live):
                raise KafkaError(
                    ErrorCode.invalid_replication_factor,
                    f"Replication factor: {rf} larger than available brokers: {len(live)}.",
                )
            assignment = assign_replicas_to_brokers(live, num_partitions, rf, racks=self._racks())
        configs: dict[str, str] = {}
        for c in getattr(t, "configs", ()) or ():
            if c.value is None:
                raise KafkaError(
                    ErrorCode.invalid_config,
                    f"Null value not supported for topic configs: {c.name}",
                )
            configs[c.name] = c.value
        return assignment, configs

    async def _write_topic(
        self, name: str, assignment: dict[int, list[int]], configs: dict[str, str]
    ) -> uuid.UUID:
        topic_id = random_uuid()
        self.creating.add(name)
        try:
            await self.write_topic_config(name, configs)
            data = zk_data.TopicAssignment(
                {p: list(r) for p, r in sorted(assignment.items())},
                topic_id=uuid_to_kafka(topic_id),
            ).encode()
            try:
                await self.store.create(zk_paths.topic_path(name), data, makepath=True)
            except NodeExistsError:
                raise KafkaError(
                    ErrorCode.topic_already_exists, f"Topic '{name}' already exists."
                ) from None
        finally:
            self.creating.discard(name)
        return topic_id

    async def auto_create_topics(self, names: Sequence[str]) -> dict[str, int]:
        """Create topics a Metadata request named; returns the errors of those that failed."""
        cfg = self.config
        live = self.metadata_cache.alive_broker_ids()
        rf = min(int(cfg["default.replication.factor"]), max(len(live), 1))
        created: list[str] = []
        errors: dict[str, int] = {}
        for name in names:
            if (
                name in self.metadata_cache.topics
                or name in self.creating
                or name in INTERNAL_TOPICS
            ):
                continue
            try:
                self.check_new_topic_name(name, created)
                assignment = assign_replicas_to_brokers(
                    live, int(cfg["num.partitions"]), rf, racks=self._racks()
                )
                await self._write_topic(name, assignment, {})
                created.append(name)
            except KafkaError as e:
                if e.code != ErrorCode.topic_already_exists:
                    log.warning("auto-creating topic %s failed: %s", name, e.message)
                    errors[name] = int(e.code)
        if created:
            await self.metadata_cache.wait_for_topics(created, 5.0)
        return errors

    async def delete_topics(self, names: Sequence[str], timeout_ms: int) -> dict[str, int]:
        out: dict[str, int] = {}
        if not self.config["delete.topic.enable"]:
            return {n: ErrorCode.topic_deletion_disabled for n in names}
        waiting = []
        for name in names:
            if name not in self.metadata_cache.topics:
                out[name] = ErrorCode.unknown_topic_or_partition
                continue
            with contextlib.suppress(NodeExistsError):
                await self.store.create(
                    f"{zk_paths.ADMIN_DELETE_TOPICS}/{name}", b"", makepath=True
                )
            out[name] = ErrorCode.none
            waiting.append(name)
        if waiting:
            ok = await self.metadata_cache.wait_for_topics_gone(
                waiting, timeout_ms / 1000 if timeout_ms > 0 else 0
            )
            for name in waiting:
                if name not in ok and timeout_ms > 0:
                    out[name] = ErrorCode.request_timed_out
        for name in waiting:
            self.topic_configs.pop(name, None)
        return out

    async def create_partitions(
        self, topic: str, count: int, assignments: Any, *, validate_only: bool, timeout_ms: int
    ) -> None:
        cache = self.metadata_cache
        t = cache.get_topic(topic)
        if t is None:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition, f"The topic '{topic}' does not exist."
            )
        current = len(t.partitions)
        if count < current:
            raise KafkaError(
                ErrorCode.invalid_partitions,
                f"Topic currently has {current} partitions, which is higher than the requested {count}.",
            )
        if count == current:
            raise KafkaError(
                ErrorCode.invalid_partitions, f"Topic already has {current} partitions."
            )
        raw, stat = await self.store.get(zk_paths.topic_path(topic))
        current_assignment = zk_data.TopicAssignment.decode(raw)
        existing = {int(p): list(r) for p, r in current_assignment.partitions.items()}
        rf = len(next(iter(existing.values())))
        live = cache.alive_broker_ids()
        if assignments:
            new: dict[int, list[int]] = {}
            if len(assignments) != count - current:
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment,
                    f"Increasing the number of partitions by {count - current} but "
                    f"{len(assignments)} assignments provided.",
                )
            for i, a in enumerate(assignments):
                if len(a.broker_ids) != rf:  # before copying a list of any length
                    raise KafkaError(ErrorCode.invalid_replica_assignment, "bad replica assignment")
                replicas = [int(b) for b in a.broker_ids]
                if (
                    len(replicas) != rf
                    or len(set(replicas)) != rf
                    or any(b not in live for b in replicas)
                ):
                    raise KafkaError(ErrorCode.invalid_replica_assignment, "bad replica assignment")
                new[current + i] = replicas
        else:
            # Kafka's addPartitions: continue the round robin from partition 0's first
            # replica (not a random start), so added partitions follow the same pattern
            brokers = sorted(live)
            first = existing[0][0] if 0 in existing else brokers[0]
            start = next((i for i, b in enumerate(brokers) if b >= first), 0)
            new = assign_replicas_to_brokers(
                brokers,
                count - current,
                rf,
                start_partition=current,
                fixed_start_index=start,
                racks=self._racks(),
            )
        if validate_only:
            return
        grown = zk_data.TopicAssignment(
            dict(sorted({**existing, **new}.items())),
            current_assignment.adding_replicas,
            current_assignment.removing_replicas,
            current_assignment.topic_id,
        )
        await self.store.set(zk_paths.topic_path(topic), grown.encode(), version=stat.version)
        await self.metadata_cache.wait_for_partitions(
            topic, count, timeout_ms / 1000 if timeout_ms > 0 else 0
        )
