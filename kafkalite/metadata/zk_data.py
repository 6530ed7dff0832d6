"""The JSON Kafka stores in its ZooKeeper znodes (Kafka's ``ZkData``, seed 002 §4).

Encoders write what Apache Kafka (2.x/3.x ZooKeeper mode) writes: compact JSON
(Jackson style, no spaces, UTF-8) with Kafka's key order, so a Kafka broker or
``zookeeper-shell`` sees familiar data. Decoders accept every version Kafka has
written (older broker registrations, controller v2 with ``kraftControllerEpoch``,
topic znodes with or without reassignment fields and ``topic_id``, integers as
strings, ...), since a ZooKeeper shared with real Kafka may hold any of them.
Where each znode lives is :mod:`kafkalite.metadata.zk_paths`.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Self

from kafkalite.common.types import Endpoint

__all__ = [
    "BrokerRegistration",
    "ClusterId",
    "ConfigChangeNotification",
    "ControllerInfo",
    "EndPoint",
    "Endpoint",
    "EntityConfig",
    "IsrChangeNotification",
    "LogDirEventNotification",
    "MetadataFormatError",
    "PartitionReassignment",
    "PartitionState",
    "PreferredReplicaElection",
    "ProducerIdBlock",
    "TopicAssignment",
    "TopicPartition",
    "decode_controller_epoch",
    "encode_controller_epoch",
    "generate_cluster_id",
    "parse_endpoint",
    "topic_id_from_str",
    "topic_id_to_str",
]

# --------------------------------------------------------------------------- JSON helpers


class MetadataFormatError(ValueError):
    """A znode's data is not in any format Kafka writes."""


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _loads(data: bytes | str, what: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise MetadataFormatError(f"invalid {what} JSON: {data!r}") from e


def _object(data: bytes | str, what: str) -> dict[str, Any]:
    obj = _loads(data, what)
    if not isinstance(obj, dict):
        raise MetadataFormatError(f"{what} is not a JSON object: {data!r}")
    return obj


def _int(value: Any, what: str) -> int:
    """Kafka writes some integers as strings ("timestamp":"123"); accept both."""
    if isinstance(value, bool):
        raise MetadataFormatError(f"{what}: expected an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError) as e:
        raise MetadataFormatError(f"{what}: expected an integer, got {value!r}") from e


def _req(obj: Mapping[str, Any], key: str, what: str) -> Any:
    try:
        return obj[key]
    except KeyError:
        raise MetadataFormatError(f"{what}: missing {key!r} in {dict(obj)!r}") from None


def _int_list(value: Any, what: str) -> list[int]:
    if not isinstance(value, list):
        raise MetadataFormatError(f"{what}: expected a list, got {value!r}")
    return [_int(v, what) for v in value]


class TopicPartition(NamedTuple):
    topic: str
    partition: int


def _partition_list(obj: Mapping[str, Any], what: str) -> list[TopicPartition]:
    items = obj.get("partitions") or []
    if not isinstance(items, list):
        raise MetadataFormatError(f"{what}: partitions is not a list")
    out = []
    for item in items:
        if not isinstance(item, dict):
            raise MetadataFormatError(f"{what}: bad partition entry {item!r}")
        out.append(
            TopicPartition(
                str(_req(item, "topic", what)), _int(_req(item, "partition", what), what)
            )
        )
    return out


def _encode_partition_list(version: int, partitions: Iterable[TopicPartition]) -> bytes:
    return _dumps(
        {
            "version": version,
            "partitions": [{"topic": t, "partition": p} for t, p in partitions],
        }
    )


# --------------------------------------------------------------------------- /controller


@dataclass(frozen=True, slots=True)
class ControllerInfo:
    """``/controller`` (ephemeral): who the controller is.

    Kafka 3.4+ writes version 2 with ``kraftControllerEpoch`` (-1 outside migration);
    some very old brokers wrote just the id as a plain integer.
    """

    broker_id: int
    timestamp: int
    kraft_controller_epoch: int | None = None

    def encode(self) -> bytes:
        if self.kraft_controller_epoch is None:
            return _dumps(
                {"version": 1, "brokerid": self.broker_id, "timestamp": str(self.timestamp)}
            )
        return _dumps(
            {
                "version": 2,
                "brokerid": self.broker_id,
                "timestamp": str(self.timestamp),
                "kraftControllerEpoch": self.kraft_controller_epoch,
            }
        )

    @classmethod
    def decode(cls, data: bytes | str) -> Self:
        obj = _loads(data, "controller")
        if isinstance(obj, int) and not isinstance(obj, bool):
            return cls(broker_id=obj, timestamp=-1)
        if not isinstance(obj, dict):
            raise MetadataFormatError(f"invalid controller data: {data!r}")
        kraft = obj.get("kraftControllerEpoch")
        return cls(
            broker_id=_int(_req(obj, "brokerid", "controller"), "controller brokerid"),
            timestamp=_int(obj.get("timestamp", -1), "controller timestamp"),
            kraft_controller_epoch=None if kraft is None else _int(kraft, "kraftControllerEpoch"),
        )


def encode_controller_epoch(epoch: int) -> bytes:
    """``/controller_epoch`` holds the epoch as a decimal string."""
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes | str) -> int:
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    try:
        return int(text.strip())
    except ValueError as e:
        raise MetadataFormatError(f"invalid controller epoch: {data!r}") from e


# --------------------------------------------------------------------------- /brokers/ids

_ENDPOINT_RE = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


#: the old name of :class:`kafkalite.common.types.Endpoint` (``server/broker_identity.py`` uses it)
EndPoint = Endpoint


def parse_endpoint(text: str, protocol_map: Mapping[str, str] | None = None) -> Endpoint:
    """Parse Kafka's endpoint string; the listener name doubles as the protocol
    when no listener_security_protocol_map is given (registrations before v4)."""
    m = _ENDPOINT_RE.match(text)
    if m is None:
        raise MetadataFormatError(f"invalid endpoint {text!r}")
    name, host, port = m.group(1), m.group(2), int(m.group(3))
    protocol = (protocol_map or {}).get(name, name)
    return Endpoint(name, host or None, port, protocol)


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """``/brokers/ids/<id>`` (ephemeral): Kafka's broker registration (v1..v5).

    ``host``/``port`` at top level are the first PLAINTEXT endpoint (null/-1 without
    one), kept for old clients, exactly as Kafka computes them.
    """

    endpoints: tuple[Endpoint, ...]
    timestamp: int
    jmx_port: int = -1
    rack: str | None = None
    features: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    version: int = 5

    @property
    def host(self) -> str | None:
        ep = self._plaintext()
        return ep.host if ep else None

    @property
    def port(self) -> int:
        ep = self._plaintext()
        return ep.port if ep else -1

    def _plaintext(self) -> Endpoint | None:
        return next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)

    def endpoint(self, listener_name: str) -> Endpoint | None:
        return next((e for e in self.endpoints if e.listener == listener_name), None)

    def encode(self) -> bytes:
        obj: dict[str, Any] = {}
        if self.version >= 4:
            obj["listener_security_protocol_map"] = {
                e.listener: e.security_protocol for e in self.endpoints
            }
        obj["endpoints"] = [e.connection_string() for e in self.endpoints]
        if self.rack is not None and self.version >= 3:
            obj["rack"] = self.rack
        obj["jmx_port"] = self.jmx_port
        if self.version >= 5:
            obj["features"] = {k: dict(v) for k, v in self.features.items()}
        obj["host"] = self.host
        obj["timestamp"] = str(self.timestamp)
        obj["port"] = self.port
        obj["version"] = self.version
        return _dumps(obj)

    @classmethod
    def decode(cls, data: bytes | str) -> Self:
        what = "broker registration"
        obj = _object(data, what)
        version = _int(_req(obj, "version", what), what)
        if version < 1:
            raise MetadataFormatError(f"unsupported broker registration version {version}")
        if version == 1:
            endpoints: tuple[Endpoint, ...] = (
                Endpoint(
                    "PLAINTEXT",
                    obj.get("host"),
                    _int(_req(obj, "port", what), what),
                    "PLAINTEXT",
                ),
            )
        else:
            protocol_map = obj.get("listener_security_protocol_map")
            if protocol_map is not None and not isinstance(protocol_map, dict):
                raise MetadataFormatError(f"{what}: bad listener_security_protocol_map")
            raw = _req(obj, "endpoints", what)
            if not isinstance(raw, list):
                raise MetadataFormatError(f"{what}: endpoints is not a list")
            endpoints = tuple(parse_endpoint(str(e), protocol_map) for e in raw)
        features_raw = obj.get("features") or {}
        features = {
            str(name): {str(k): _int(v, what) for k, v in dict(rng).items()}
            for name, rng in dict(features_raw).items()
        }
        rack = obj.get("rack")
        return cls(
            endpoints=endpoints,
            timestamp=_int(obj.get("timestamp", -1), what),
            jmx_port=_int(obj.get("jmx_port", -1), what),
            rack=None if rack is None else str(rack),
            features=features,
            version=version,
        )


# --------------------------------------------------------------------------- /brokers/topics


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid text form: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def topic_id_from_str(text: str) -> uuid.UUID:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError as e:
        raise MetadataFormatError(f"invalid topic id {text!r}") from e
    if len(raw) != 16:
        raise MetadataFormatError(f"invalid topic id {text!r}")
    return uuid.UUID(bytes=raw)


def _replica_map(value: Any, what: str) -> dict[int, list[int]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MetadataFormatError(f"{what}: expected an object, got {value!r}")
    return {_int(k, what): _int_list(v, what) for k, v in value.items()}


def _encode_replica_map(m: Mapping[int, list[int]]) -> dict[str, list[int]]:
    return {str(p): list(m[p]) for p in sorted(m)}


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """``/brokers/topics/<t>``: replica assignment per partition (AR order matters).

    Kafka 2.4+ adds ``adding_replicas``/``removing_replicas`` (version 2); 2.8+ adds
    ``topic_id`` (written as version 3 by Kafka 3.x).
    """

    partitions: Mapping[int, list[int]]
    adding_replicas: Mapping[int, list[int]] = field(default_factory=dict)
    removing_replicas: Mapping[int, list[int]] = field(default_factory=dict)
    topic_id: str | None = None

    @property
    def version(self) -> int:
        return 3 if self.topic_id is not None else 2

    def encode(self) -> bytes:
        obj: dict[str, Any] = {
            "removing_replicas": _encode_replica_map(self.removing_replicas),
            "partitions": _encode_replica_map(self.partitions),
        }
        if self.topic_id is not None:
            obj["topic_id"] = self.topic_id
        obj["adding_replicas"] = _encode_replica_map(self.adding_replicas)
        obj["version"] = self.version
        return _dumps(obj)

    @classmethod
    def decode(cls, data: bytes | str) -> Self:
        what = "topic assignment"
        obj = _object(data, what)
        topic_id = obj.get("topic_id")
        return cls(
            partitions=_replica_map(obj.get("partitions"), what),
            adding_replicas=_replica_map(obj.get("adding_replicas"), what),
            removing_replicas=_replica_map(obj.get("removing_replicas"), what),
            topic_id=None if topic_id is None else str(topic_id),
        )


@dataclass(frozen=True, slots=True)
class PartitionState:
    """``/brokers/topics/<t>/partitions/<p>/state``: leader, epoch and ISR.

    The znode's Stat version is the ``zkVersion`` used for conditional ISR updates.
    ``leader_recovery_state`` (KIP-704) is written only while RECOVERING (1).
    """

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    leader_recovery_state: int | None = None

    def encode(self) -> bytes:
        obj: dict[str, Any] = {
            "controller_epoch": self.controller_epoch,
            "leader": self.leader,
            "version": 1,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
        }
        if self.leader_recovery_state:
            obj["leader_recovery_state"] = self.leader_recovery_state
        return _dumps(obj)

    @classmethod
    def decode(cls, data: bytes | str) -> Self:
        what = "partition state"
        obj = _object(data, what)
        lrs = obj.get("leader_recovery_state")
        return cls(
            leader=_int(_req(obj, "leader", what), what),
            leader_epoch=_int(_req(obj, "leader_epoch", what), what),
            isr=_int_list(_req(obj, "isr", what), what),
            controller_epoch=_int(_req(obj, "controller_epoch", what), what),
            leader_recovery_state=None if lrs is None else _int(lrs, what),
        )


# --------------------------------------------------------------------------- /admin, notifications


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """``/admin/reassign_partitions``: target replicas per partition.

    ``kafka-reassign-partitions`` may add ``log_dirs``; it is ignored here.
    """

    partitions: Mapping[TopicPartition, list[int]]

    def encode(self) -> bytes:
        return _dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": tp.topic, "partition": tp.partition, "replicas": list(r)}
                    for tp, r in self.partitions.items()
                ],
            }
        )

    @classmethod
    def decode(cls, data: bytes | str) -> Self:
        what = "partition reassignment"
        obj = _object(data, what)
        items = obj.get("partitions") or []
        if not isinstance(items, list):
            raise MetadataFormatError(f"{what}: partitions is not a list")
        out: dict[TopicPartition, list[int]] = {}
        for item in items:
            if not isinstance(item, dict):
                raise MetadataFormatError(f"{what}: bad entry {item!r}")
            tp = TopicPartition(
                str(_req(item, "topic", what)), _int(_req(item, "partition", what), what)
            )
            out[tp] = _int_list(_req(item, "replicas", what), what)
        return cls(out)


@dataclass(frozen=True, slots=True)
class PreferredReplicaElection:
    """``/admin/preferred_replica_election``: partitions to move back to AR[0]."""

    partitions: tuple[TopicPartition, ...]

    def encode(self) -> bytes:
        return _encode_partition_list(1, self.partitions)

    @classmethod
    def decode(cls, data: bytes | str) -> Self:
        what = "preferred replica election"
        return cls(tuple(_partition_list(_object(data, what), what)))


@dataclass(frozen=True, slots=True)
class IsrChangeNotification:
    """``/isr_change_notification/isr_change_<seq>`` (persistent sequential)."""

    partitions: tuple[TopicPartition, ...]

    def encode(self) -> bytes:
        return _encode_partition_list(1, self.partitions)

    @classmethod
    def decode(cls, data: bytes | str) -> Self:
        what = "ISR change notification"
        return cls(tuple(_partition_list(_object(data, what), what)))


@dataclass(frozen=True, slots=True)
class LogDirEventNotification:
    """``/log_dir_event_notification/log_dir_event_<seq>`` (persistent sequential).

    A broker writes one when a log dir fails; the controller then asks it, with
    LeaderAndIsr, which of its replicas are offline.
    """

    broker: int
    event: int = 1  # LogDirFailure, the only event Kafka defines

    def encode(self) -> bytes:
        return _dumps({"version": 1, "broker": self.broker, "event": self.event})

    @classmethod
    def decode(cls, data: bytes | str) -> Self:
        what = "log dir event notification"
        obj = _object(data, what)
        return cls(_int(_req(obj, "broker", what), what), _int(obj.get("event", 1), what))


# --------------------------------------------------------------------------- /config


@dataclass(frozen=True, slots=True)
class EntityConfig:
    """``/config/<type>/<name>``: dynamic config overrides, values as strings."""

    config: Mapping[str, str]

    def encode(self) -> bytes:
        return _dumps({"version": 1, "config": {k: str(v) for k, v in self.config.items()}})

    @classmethod
    def decode(cls, data: bytes | str | None) -> Self:
        if not data:
            return cls({})  # Kafka treats a null/empty config znode as no overrides
        obj = _object(data, "entity config")
        config = obj.get("config") or {}
        if not isinstance(config, dict):
            raise MetadataFormatError(f"entity config: config is not an object: {data!r}")
        return cls({str(k): v if isinstance(v, str) else json.dumps(v) for k, v in config.items()})


@dataclass(frozen=True, slots=True)
class ConfigChangeNotification:
    """``/config/changes/config_change_<seq>``: which entity's config changed.

    Version 2 carries ``entity_path`` ("topics/t", "users/u/clients/c"); version 1
    carried ``entity_type`` + ``entity_name``.
    """

    entity_path: str

    @property
    def entity_type(self) -> str:
        return self.entity_path.split("/", 1)[0]

    @property
    def entity_name(self) -> str:
        return self.entity_path.split("/", 1)[1] if "/" in self.entity_path else ""

    def encode(self) -> bytes:
        return _dumps({"version": 2, "entity_path": self.entity_path})

    @classmethod
    def decode(cls, data: bytes | str) -> Self:
        what = "config change notification"
        obj = _object(data, what)
        version = _int(_req(obj, "version", what), what)
        if version == 1:
            entity_type = str(_req(obj, "entity_type", what))
            entity_name = str(_req(obj, "entity_name", what))
            return cls(f"{entity_type}/{entity_name}")
        if version == 2:
            return cls(str(_req(obj, "entity_path", what)))
        raise MetadataFormatError(f"unsupported config change notification version {version}")


# --------------------------------------------------------------------------- misc


@dataclass(frozen=True, slots=True)
class ClusterId:
    """``/cluster/id``: ``{"version":"1","id":...}`` (the version is a string)."""

    id: str

    def encode(self) -> bytes:
        return _dumps({"version": "1", "id": self.id})

    @classmethod
    def decode(cls, data: bytes | str) -> Self:
        return cls(str(_req(_object(data, "cluster id"), "id", "cluster id")))


def generate_cluster_id() -> str:
    """A random cluster id in Kafka's form (22-char URL-safe base64 UUID)."""
    return topic_id_to_str(uuid.uuid4())


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """``/latest_producer_id_block``: the last producer-id range handed out.

    Brokers claim the next block with a conditional set on this znode.
    """

    broker_id: int
    block_start: int
    block_end: int

    def encode(self) -> bytes:
        return _dumps(
            {
                "version": 1,
                "broker": self.broker_id,
                "block_start": str(self.block_start),
                "block_end": str(self.block_end),
            }
        )

    @classmethod
    def decode(cls, data: bytes | str) -> Self:
        what = "producer id block"
        obj = _object(data, what)
        return cls(
            broker_id=_int(_req(obj, "broker", what), what),
            block_start=_int(_req(obj, "block_start", what), what),
            block_end=_int(_req(obj, "block_end", what), what),
        )
