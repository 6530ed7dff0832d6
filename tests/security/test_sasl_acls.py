"""ACLs on SASL principals: a PLAIN user gets what its ACLs say over SASL_PLAINTEXT,
another user is refused, as Kafka (the authorizer reads the connection's principal,
whoever authenticated it)."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)


def _produce(bootstrap: str, user: str, password: str) -> Any:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": password,
            "message.timeout.ms": 5000,
        }
    )
    errors: list[Any] = []
    p.produce("sasl-acl", b"v", on_delivery=lambda e, m: errors.append(e))
    p.flush(10)
    return errors[0]


def test_a_sasl_users_acls_apply(kafka_broker_factory: Any) -> None:
    b = kafka_broker_factory(
        **{
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "kafkalite.sasl.plain.users.writer": "writer-secret",
            "kafkalite.sasl.plain.users.reader": "reader-secret",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS",
        }
    )
    b.create_topic("sasl-acl")
    plain = f"127.0.0.1:{b.kafka.bound_port('PLAINTEXT')}"
    sasl = f"127.0.0.1:{b.kafka.bound_port('SASL_PLAINTEXT')}"
    admin = AdminClient({"bootstrap.servers": plain})
    acl = AclBinding(
        ResourceType.TOPIC,
        "sasl-",
        ResourcePatternType.PREFIXED,
        "User:writer",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    for f in admin.create_acls([acl]).values():
        f.result()
    assert _produce(sasl, "writer", "writer-secret") is None
    err = _produce(sasl, "reader", "reader-secret")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
