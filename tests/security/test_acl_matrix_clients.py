"""The ACL matrix through a stock client: confluent-kafka's admin API, producer and
consumer as ``User:alice`` over mTLS, for every API they expose, in the same five
cells as ``test_acl_matrix`` (no ACL, ALLOW, DENY over ALLOW, PREFIXED ALLOW, super
user). Each cell's outcome is the error code the client reports (0: none)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from tests.security.acl_env import AclBroker
from tests.security.pki import needs_openssl
from tests.security.test_acl_matrix import (
    ALTER,
    ALTER_CONFIGS,
    CELLS,
    CLUSTER,
    CREATE,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    READ,
    TOPIC,
    WRITE,
    Row,
    _cell_acls,
    set_acls,
)

pytestmark = needs_openssl

T, G = "mxc-topic", "mxc-group"


def _wait(futures: Any) -> None:
    """Every future's result; a partition's error (group offsets) raised like the others."""
    for f in futures.values() if isinstance(futures, dict) else [futures]:
        result = f.result()
        for tp in getattr(result, "topic_partitions", None) or ():
            if tp.error is not None:
                raise KafkaException(tp.error)


def _produce(conf: dict[str, Any]) -> None:
    p = Producer(
        {**{k: v for k, v in conf.items() if k != "broker.id"}, "message.timeout.ms": 5000}
    )
    errors: list[Any] = []
    p.produce(T, b"v", partition=0, on_delivery=lambda e, m: errors.append(e))
    p.flush(10)
    if errors[0] is not None:
        raise KafkaException(errors[0])


@dataclass
class ClientRow:
    api: str
    call: Callable[[AdminClient, dict[str, Any]], None]
    grants: list[tuple[int, str, int]]
    denied: int

    def __str__(self) -> str:
        return self.api

    def as_row(self) -> Row:
        return Row(self.api, -1, -1, {}, self.grants, self.denied, lambda r: 0)


_TA = KafkaError.TOPIC_AUTHORIZATION_FAILED
_GA = KafkaError.GROUP_AUTHORIZATION_FAILED
_CA = KafkaError.CLUSTER_AUTHORIZATION_FAILED
_tp = TopicPartition

ROWS = [
    ClientRow("produce", lambda a, c: _produce(c), [(TOPIC, T, WRITE)], _TA),
    ClientRow(
        "create_topics (validate)",
        lambda a, c: _wait(a.create_topics([NewTopic("mxc-new", 1, 1)], validate_only=True)),
        [(TOPIC, "mxc-new", CREATE)],
        _TA,
    ),
    ClientRow(
        "delete_topics (absent)",
        lambda a, c: _wait(a.delete_topics(["mxc-absent"], operation_timeout=5)),
        [(TOPIC, "mxc-absent", DELETE)],
        _TA,
    ),
    ClientRow(
        "create_partitions (validate)",
        lambda a, c: _wait(a.create_partitions([NewPartitions(T, 2)], validate_only=True)),
        [(TOPIC, T, ALTER)],
        _TA,
    ),
    ClientRow(
        "describe_topics",
        lambda a, c: _wait(a.describe_topics(TopicCollection([T]))),
        [(TOPIC, T, DESCRIBE)],
        _TA,
    ),
    ClientRow(
        "describe_configs (topic)",
        lambda a, c: _wait(a.describe_configs([ConfigResource("topic", T)])),
        [(TOPIC, T, DESCRIBE_CONFIGS)],
        _TA,
    ),
    ClientRow(
        "incremental_alter_configs (topic, validate)",
        lambda a, c: _wait(
            a.incremental_alter_configs(
                [
                    ConfigResource(
                        "topic",
                        T,
                        incremental_configs=[
                            ConfigEntry(
                                "retention.ms",
                                "100000",
                                incremental_operation=AlterConfigOpType.SET,
                            )
                        ],
                    )
                ],
                validate_only=True,
            )
        ),
        [(TOPIC, T, ALTER_CONFIGS)],
        _TA,
    ),
    ClientRow(
        "describe_configs (broker)",
        lambda a, c: _wait(a.describe_configs([ConfigResource("broker", c["broker.id"])])),
        [(CLUSTER, "kafka-cluster", DESCRIBE_CONFIGS)],
        _CA,
    ),
    ClientRow(
        "list_offsets",
        lambda a, c: _wait(a.list_offsets({_tp(T, 0): OffsetSpec.latest()})),
        [(TOPIC, T, DESCRIBE)],
        _TA,
    ),
    ClientRow(
        "delete_records",
        lambda a, c: _wait(a.delete_records([_tp(T, 0, 0)])),
        [(TOPIC, T, DELETE)],
        _TA,
    ),
    ClientRow(
        "describe_consumer_groups",
        lambda a, c: _wait(a.describe_consumer_groups([G])),
        [(GROUP, G, DESCRIBE)],
        _GA,
    ),
    ClientRow(
        "delete_consumer_groups",
        lambda a, c: _wait(a.delete_consumer_groups(["mxc-nogroup"])),
        [(GROUP, "mxc-nogroup", DELETE)],
        _GA,
    ),
    ClientRow(
        "list_consumer_group_offsets",
        lambda a, c: _wait(
            a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(G, [_tp(T, 0)])])
        ),
        [(GROUP, G, DESCRIBE), (TOPIC, T, DESCRIBE)],
        _GA,
    ),
    ClientRow(
        "alter_consumer_group_offsets",
        lambda a, c: _wait(
            a.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(G, [_tp(T, 0, 0)])])
        ),
        [(GROUP, G, READ), (TOPIC, T, READ)],
        _GA,
    ),
    ClientRow(
        "alter_consumer_group_offsets (topic)",
        lambda a, c: _wait(
            a.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(G, [_tp(T, 0, 0)])])
        ),
        [(TOPIC, T, READ), (GROUP, G, READ)],
        _TA,
    ),
]


@pytest.fixture(scope="module")
def clients(secure: AclBroker) -> Any:
    secure.broker.create_topic(T)
    raw = secure.raw(None)
    secure.wait_for_coordinators(raw, G)
    conf = {who: secure.client_conf(who) for who in ("alice", "root")}
    admins = {who: AdminClient(c) for who, c in conf.items()}
    for c in conf.values():  # not a client setting: the id describe_configs names
        c["broker.id"] = str(secure.broker.kafka.broker_id)
    yield raw, conf, admins
    set_acls(raw, [])
    raw.close()


def _outcome(row: ClientRow, admin: AdminClient, conf: dict[str, Any]) -> int:
    try:
        row.call(admin, conf)
    except KafkaException as e:
        err = e.args[0]
        return int(err.code()) if isinstance(err, KafkaError) else -1
    return 0


@pytest.mark.parametrize("row", ROWS, ids=str)
def test_acl_matrix_with_confluent_kafka(clients: Any, row: ClientRow) -> None:
    raw, conf, admins = clients
    got = {}
    for cell in CELLS:
        who = "root" if cell == "super user" else "alice"
        set_acls(raw, [] if cell == "super user" else _cell_acls(row.as_row(), cell))
        got[cell] = _outcome(row, admins[who], conf[who])
    for cell, code in got.items():
        if cell in ("no ACL", "DENY over ALLOW"):
            assert code == row.denied, (row.api, cell, got)
        else:
            assert code != row.denied, (row.api, cell, got)
