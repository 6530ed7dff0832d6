"""What the ACL matrix does not show cell by cell: listings that hide what the
principal may not Describe, the authorized-operations bit sets, stock clients
(confluent-kafka) denied and allowed, follower fetches needing ClusterAction."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka import TopicPartition as TP
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.security.acl_env import AclBroker, call
from tests.security.pki import needs_openssl
from tests.security.test_acl_matrix import ANY_FILTER, set_acls

pytestmark = needs_openssl


def _binding(
    rtype: Any,
    name: str,
    op: Any,
    *,
    who: str = "User:alice",
    prefixed: bool = False,
    deny: bool = False,
) -> AclBinding:
    return AclBinding(
        rtype,
        name,
        ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL,
        who,
        "*",
        op,
        AclPermissionType.DENY if deny else AclPermissionType.ALLOW,
    )


@pytest.fixture(scope="module")
def env(secure: AclBroker) -> Any:
    for t in ("az-visible", "az-hidden", "az-orders"):
        secure.broker.create_topic(t)
    admin = AdminClient({"bootstrap.servers": secure.plain})
    raw = secure.raw(None)
    secure.wait_for_coordinators(raw)
    yield secure, admin, raw
    set_acls(raw, [])
    raw.close()


def _replace_acls(admin: AdminClient, raw: Any, bindings: list[AclBinding]) -> None:
    set_acls(raw, [])
    if bindings:
        for f in admin.create_acls(bindings).values():
            f.result()


def test_metadata_hides_topics_without_describe_and_never_reveals_existence(env: Any) -> None:
    secure, admin, raw = env
    _replace_acls(admin, raw, [_binding(ResourceType.TOPIC, "az-visible", AclOperation.READ)])
    alice = secure.raw("alice")
    try:
        every = call(alice, 3, 12, {"topics": None, "allow_auto_topic_creation": False})
        assert [t.name for t in every.topics] == ["az-visible"]  # Read implies Describe
        named = call(
            alice,
            3,
            12,
            {
                "topics": [{"name": "az-hidden"}, {"name": "az-nowhere"}, {"name": "az-visible"}],
                "allow_auto_topic_creation": False,
            },
        )
        codes = {t.name: int(t.error_code) for t in named.topics}
        # an existing and a missing topic look the same to a principal that cannot see them
        assert codes == {"az-hidden": 29, "az-nowhere": 29, "az-visible": 0}
        # asked for by topic id: refused by id, the name not revealed
        [hidden] = call(raw, 3, 12, {"topics": [{"name": "az-hidden"}]}).topics
        [by_id] = call(alice, 3, 12, {"topics": [{"name": None, "topic_id": hidden.topic_id}],
                                      "allow_auto_topic_creation": False}).topics  # fmt: skip
        assert (by_id.error_code, by_id.name, by_id.topic_id) == (29, None, hidden.topic_id)
    finally:
        alice.close()


def test_list_groups_and_transactions_show_only_what_the_principal_may_describe(env: Any) -> None:
    secure, admin, raw = env
    for g in ("az-g1", "az-g2"):
        call(
            raw,
            8,
            8,
            {
                "group_id": g,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "topics": [
                    {
                        "name": "az-visible",
                        "partitions": [{"partition_index": 0, "committed_offset": 0}],
                    }
                ],
            },
        )
    _replace_acls(admin, raw, [_binding(ResourceType.GROUP, "az-g1", AclOperation.DESCRIBE)])
    alice = secure.raw("alice")
    try:
        groups = {g.group_id for g in call(alice, 16, 4, {"states_filter": []}).groups}
        assert "az-g1" in groups and "az-g2" not in groups
        everything = {g.group_id for g in call(raw, 16, 4, {"states_filter": []}).groups}
        assert {"az-g1", "az-g2"} <= everything  # Describe on the cluster: all
        for x in ("az-tx1", "az-tx2"):
            r = call(raw, 22, 4, {"transactional_id": x, "transaction_timeout": 60000,
                                  "producer_id": -1, "producer_epoch": -1})  # fmt: skip
            assert r.error_code == 0
        _replace_acls(
            admin, raw, [_binding(ResourceType.TRANSACTIONAL_ID, "az-tx1", AclOperation.DESCRIBE)]
        )
        listed = {t.transactional_id for t in call(alice, 66, 0, {}).transaction_states}
        assert "az-tx1" in listed and "az-tx2" not in listed
        assert {"az-tx1", "az-tx2"} <= {
            t.transactional_id for t in call(raw, 66, 0, {}).transaction_states
        }
    finally:
        alice.close()


def test_authorized_operations_are_the_principals_real_sets(env: Any) -> None:
    secure, admin, raw = env
    _replace_acls(
        admin,
        raw,
        [
            _binding(ResourceType.TOPIC, "az-", AclOperation.READ, prefixed=True),
            _binding(ResourceType.TOPIC, "az-orders", AclOperation.ALTER_CONFIGS),
            _binding(ResourceType.TOPIC, "az-orders", AclOperation.DESCRIBE_CONFIGS, deny=True),
            _binding(ResourceType.GROUP, "az-readers", AclOperation.READ),
            _binding(ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
            _binding(ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER),
        ],
    )
    alice = AdminClient(secure.client_conf("alice"))
    topics = alice.describe_topics(
        TopicCollection(["az-orders", "az-visible"]), include_authorized_operations=True
    )
    ops = {name: set(f.result().authorized_operations) for name, f in topics.items()}
    # DescribeConfigs is implied by AlterConfigs, unless denied
    assert ops["az-orders"] == {
        AclOperation.READ,
        AclOperation.DESCRIBE,
        AclOperation.ALTER_CONFIGS,
    }
    assert ops["az-visible"] == {AclOperation.READ, AclOperation.DESCRIBE}
    cluster = alice.describe_cluster(include_authorized_operations=True).result()
    assert set(cluster.authorized_operations) == {AclOperation.DESCRIBE, AclOperation.ALTER}
    [g] = alice.describe_consumer_groups(
        ["az-readers"], include_authorized_operations=True
    ).values()
    assert set(g.result().authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    # bob may not Describe the cluster: an empty set, as Kafka
    bob = AdminClient(secure.client_conf("bob"))
    assert (
        not bob.describe_cluster(include_authorized_operations=True).result().authorized_operations
    )


def test_stock_clients_are_denied_then_allowed(env: Any) -> None:
    secure, admin, raw = env
    conf = {**secure.client_conf("alice"), "message.timeout.ms": 5000}
    _replace_acls(admin, raw, [])
    p = Producer(conf)
    errors: list[Any] = []
    p.produce("az-visible", b"denied", on_delivery=lambda e, m: errors.append(e))
    p.flush(10)
    assert errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    _replace_acls(
        admin,
        raw,
        [
            _binding(ResourceType.TOPIC, "az-vis", AclOperation.WRITE, prefixed=True),
            _binding(ResourceType.TOPIC, "az-visible", AclOperation.READ),
            _binding(ResourceType.GROUP, "az-consumers", AclOperation.READ),
        ],
    )
    p = Producer(conf)
    errors.clear()
    p.produce("az-visible", b"allowed", on_delivery=lambda e, m: errors.append(e))
    p.flush(10)
    assert errors == [None]
    c = Consumer({**conf, "group.id": "az-consumers", "auto.offset.reset": "earliest"})
    c.assign([TP("az-visible", 0, 0)])
    got = []
    while not got:
        m = c.poll(10)
        assert m is not None and not m.error(), m and m.error()
        got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    assert got == [b"allowed"]

    # a DENY wins: the group is refused to the same consumer
    for f in admin.create_acls(
        [_binding(ResourceType.GROUP, "az-consumers", AclOperation.ALL, deny=True)]
    ).values():
        f.result()
    c = Consumer({**conf, "group.id": "az-consumers"})
    c.subscribe(["az-visible"])
    try:
        while True:
            m = c.poll(10)
            assert m is not None, "no error reported"
            if m.error():
                assert m.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED
                break
    finally:
        c.close()


def test_acl_apis_through_confluent_kafka(env: Any) -> None:
    secure, admin, raw = env
    _replace_acls(admin, raw, [])
    b = _binding(ResourceType.TOPIC, "az-", AclOperation.WRITE, prefixed=True, who="User:bob")
    for f in admin.create_acls([b]).values():
        assert f.result() is None
    from confluent_kafka.admin import AclBindingFilter

    every = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert admin.describe_acls(every).result() == [b]
    # MATCH: the patterns that apply to a name
    match = AclBindingFilter(
        ResourceType.TOPIC,
        "az-orders",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert admin.describe_acls(match).result() == [b]
    # alice may not create ACLs: CLUSTER_AUTHORIZATION_FAILED
    alice = AdminClient(secure.client_conf("alice"))
    with pytest.raises(KafkaException) as e:
        for f in alice.create_acls([b]).values():
            f.result()
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    deleted = [x for f in admin.delete_acls([every]).values() for x in f.result()]
    assert deleted == [b]
    assert call(raw, 29, 3, ANY_FILTER).resources == ()


def test_invalid_acls_and_filters_are_invalid_request(env: Any) -> None:
    secure, admin, raw = env
    bad = [
        # PREFIXED with the wildcard, a cluster not named kafka-cluster, Read on a cluster,
        # an ANY pattern, a principal without a type
        {"resource_type": 2, "resource_name": "*", "resource_pattern_type": 4},
        {"resource_type": 4, "resource_name": "other", "resource_pattern_type": 3},
        {
            "resource_type": 4,
            "resource_name": "kafka-cluster",
            "resource_pattern_type": 3,
            "operation": 3,
        },
        {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 1},
        {
            "resource_type": 2,
            "resource_name": "t",
            "resource_pattern_type": 3,
            "principal": "alice",
        },
    ]
    creations = [
        {"principal": "User:x", "host": "*", "operation": 7, "permission_type": 3, **c} for c in bad
    ]
    r = call(raw, 30, 3, {"creations": creations})
    assert [int(x.error_code) for x in r.results] == [42] * len(bad)
    r = call(raw, 29, 3, {**ANY_FILTER, "resource_type_filter": 0})
    assert int(r.error_code) == 42
    r = call(raw, 31, 3, {"filters": [{**ANY_FILTER, "operation": 0}, ANY_FILTER]})
    assert [int(x.error_code) for x in r.filter_results] == [42, 0]


def test_follower_fetch_needs_cluster_action(env: Any) -> None:
    """A signed follower fetch (the inter-broker authenticator) from a principal without
    ClusterAction is refused; a super user's is served."""
    secure, admin, raw = env
    _replace_acls(admin, raw, [_binding(ResourceType.TOPIC, "az-visible", AclOperation.READ)])
    body = {
        "replica_id": 7,
        "max_wait": 0,
        "max_bytes": 1 << 20,
        "session_epoch": -1,
        "topics": [
            {
                "topic": "az-visible",
                "partitions": [
                    {
                        "partition": 0,
                        "fetch_offset": 0,
                        "partition_max_bytes": 1 << 20,
                        "current_leader_epoch": -1,
                        "log_start_offset": -1,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
    }
    for who, expected in (("alice", 29), ("root", None)):
        c = secure.raw(who).sign_in_as_broker(secure.broker.kafka, 7)
        try:
            code = int(call(c, 1, 12, body).responses[0].partitions[0].error_code)
        finally:
            c.close()
        if expected is None:
            assert code != 29
        else:
            assert code == expected


def test_create_topics_returns_configs_only_with_describe_configs(env: Any) -> None:
    secure, admin, raw = env
    _replace_acls(admin, raw, [_binding(ResourceType.TOPIC, "az-c", AclOperation.CREATE,
                                        prefixed=True)])  # fmt: skip
    alice = secure.raw("alice")
    body = {"topics": [{"name": "az-created", "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": []}], "timeout": 5000,
            "validate_only": True}  # fmt: skip
    try:
        t = call(alice, 19, 7, body).topics[0]
        assert (t.error_code, t.topic_config_error_code, t.configs) == (0, 29, None)
        _replace_acls(admin, raw, [
            _binding(ResourceType.TOPIC, "az-c", AclOperation.CREATE, prefixed=True),
            _binding(ResourceType.TOPIC, "az-created", AclOperation.DESCRIBE_CONFIGS),
        ])  # fmt: skip
        t = call(alice, 19, 7, body).topics[0]
        assert (t.error_code, t.topic_config_error_code) == (0, 0) and t.configs
    finally:
        alice.close()
