"""Kafka's ZooKeeper layout (seed 002 §4): the znode paths and how they are built.

The same paths in the embedded store and in a real ZooKeeper, so a Kafka broker
or ``zookeeper-shell`` sharing the ensemble finds everything where Kafka puts
it. What is stored at each path, and its JSON, is :mod:`kafkalite.metadata.zk_data`.
"""

from __future__ import annotations

__all__ = [
    "ADMIN",
    "ADMIN_DELETE_TOPICS",
    "BROKER_SEQUENCE_ID",
    "BROKERS",
    "BROKER_IDS",
    "BROKER_SEQID",
    "BROKER_TOPICS",
    "CLUSTER",
    "CLUSTER_ID",
    "CONFIG",
    "CONFIG_BROKERS",
    "CONFIG_CHANGES",
    "CONFIG_CHANGE_PREFIX",
    "CONFIG_CLIENTS",
    "CONFIG_IPS",
    "CONFIG_TOPICS",
    "CONFIG_USERS",
    "CONSUMERS",
    "CONTROLLER",
    "CONTROLLER_EPOCH",
    "DELETE_TOPICS",
    "ISR_CHANGE_NOTIFICATION",
    "ISR_CHANGE_PREFIX",
    "LATEST_PRODUCER_ID_BLOCK",
    "LOG_DIR_EVENT_NOTIFICATION",
    "LOG_DIR_EVENT_PREFIX",
    "PERSISTENT_PATHS",
    "PREFERRED_REPLICA_ELECTION",
    "REASSIGN_PARTITIONS",
    "broker_id_from_seqid_version",
    "broker_path",
    "config_change_path",
    "config_entity_path",
    "delete_topic_path",
    "isr_change_notification_path",
    "log_dir_event_notification_path",
    "partition_path",
    "partition_state_path",
    "sequence_number",
    "topic_partitions_path",
    "topic_config_path",
    "topic_path",
]

# --------------------------------------------------------------------------- paths

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_CLIENTS = "/config/clients"
CONFIG_USERS = "/config/users"
CONFIG_BROKERS = "/config/brokers"
CONFIG_IPS = "/config/ips"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"
CONSUMERS = "/consumers"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"

# Aliases under the names other kafkalite modules use.
ADMIN_DELETE_TOPICS = DELETE_TOPICS
BROKER_SEQUENCE_ID = BROKER_SEQID

#: Persistent parents every broker creates at start-up ([ref] KafkaZkClient).
PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    CONFIG_TOPICS,
    CONFIG_CLIENTS,
    CONFIG_USERS,
    CONFIG_BROKERS,
    CONFIG_IPS,
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def config_entity_path(entity_type: str, entity_name: str) -> str:
    """``/config/<type>/<name>``; type is topics, clients, users, brokers or ips."""
    return f"{CONFIG}/{entity_type}/{entity_name}"


def topic_config_path(topic: str) -> str:
    """``/config/topics/<t>``: the topic's config overrides."""
    return f"{CONFIG_TOPICS}/{topic}"


def isr_change_notification_path(sequence: str = "") -> str:
    """Without ``sequence``: the prefix to create sequentially under."""
    return f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}{sequence}"


def log_dir_event_notification_path(sequence: str = "") -> str:
    """Without ``sequence``: the prefix to create sequentially under."""
    return f"{LOG_DIR_EVENT_NOTIFICATION}/{LOG_DIR_EVENT_PREFIX}{sequence}"


def config_change_path(sequence: str = "") -> str:
    return f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}{sequence}"


def sequence_number(name: str, prefix: str) -> int:
    """``isr_change_0000000042`` -> 42 (accepts a full path too)."""
    tail = name.rsplit("/", 1)[-1]
    if not tail.startswith(prefix):
        raise ValueError(f"{name!r} does not start with {prefix!r}")
    return int(tail[len(prefix) :])


def broker_id_from_seqid_version(version: int, reserved_broker_max_id: int = 1000) -> int:
    """Kafka's generated broker id: /brokers/seqid data version + reserved.broker.max.id."""
    return version + reserved_broker_max_id
