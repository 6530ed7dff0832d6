"""``kafkalite acls`` with kafka-acls.sh's flags and output, against the secure broker;
the ACLs it adds take effect for a stock client over mTLS."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, Producer

from kafkalite.cli.admin import main
from tests.security.acl_env import AclBroker
from tests.security.pki import needs_openssl
from tests.security.test_acl_matrix import set_acls

pytestmark = needs_openssl


def _run(capsys: Any, *argv: str) -> str:
    capsys.readouterr()
    assert main(["acls", *argv]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def _produce(secure: AclBroker, topic: str) -> Any:
    p = Producer({**secure.client_conf("bob"), "message.timeout.ms": 5000})
    errors: list[Any] = []
    p.produce(topic, b"v", on_delivery=lambda e, m: errors.append(e))
    p.flush(10)
    return errors[0]


def test_add_list_remove_as_kafka_acls(secure: AclBroker, capsys: Any) -> None:
    bs = ["--bootstrap-server", secure.plain]
    raw = secure.raw(None)
    set_acls(raw, [])
    secure.broker.create_topic("cli-orders")
    try:
        out = _run(capsys, *bs, "--add", "--allow-principal", "User:bob", "--operation", "Read",
                   "--operation", "Describe", "--topic", "cli-orders")  # fmt: skip
        assert out.startswith(
            "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=cli-orders, "
            "patternType=LITERAL)`: \n"
            " \t(principal=User:bob, host=*, operation=READ, permissionType=ALLOW) \n"
        )
        assert (
            "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=cli-orders" in out
        )
        # --producer on a prefix: Write, Describe, Create; then bob can produce
        assert _produce(secure, "cli-orders").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        _run(capsys, *bs, "--add", "--allow-principal", "User:bob", "--producer", "--topic", "cli-",
             "--resource-pattern-type", "prefixed")  # fmt: skip
        assert _produce(secure, "cli-orders") is None
        _run(capsys, *bs, "--add", "--deny-principal", "User:eve", "--deny-host", "10.0.0.9",
             "--cluster", "--operation", "Alter")  # fmt: skip
        listed = _run(capsys, *bs, "--list")
        assert (
            "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=cli-, "
            "patternType=PREFIXED)`: \n"
            " \t(principal=User:bob, host=*, operation=CREATE, permissionType=ALLOW) \n"
            " \t(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW) \n"
            " \t(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW) \n"
        ) in listed
        assert "(principal=User:eve, host=10.0.0.9, operation=ALTER, permissionType=DENY)" in listed
        only_topic = _run(capsys, *bs, "--list", "--topic", "cli-orders")
        assert "PREFIXED" not in only_topic and "name=cli-orders" in only_topic
        # MATCH lists every pattern that applies to the name
        matching = _run(capsys, *bs, "--list", "--topic", "cli-orders",
                        "--resource-pattern-type", "match")  # fmt: skip
        assert "PREFIXED" in matching and "LITERAL" in matching
        _run(capsys, *bs, "--remove", "--force", "--topic", "cli-", "--resource-pattern-type",
             "prefixed")  # fmt: skip
        assert _produce(secure, "cli-orders").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        # User and DelegationToken resources (not in confluent-kafka): over the wire client
        _run(capsys, *bs, "--add", "--allow-principal", "User:bob", "--operation",
             "DescribeTokens", "--user-principal", "User:alice")  # fmt: skip
        assert "resourceType=USER, name=User:alice" in _run(
            capsys, *bs, "--list", "--user-principal", "User:alice"
        )
    finally:
        set_acls(raw, [])
        raw.close()


def test_usage_errors(secure: AclBroker, capsys: Any) -> None:
    bs = ["--bootstrap-server", secure.plain]
    assert main(["acls", *bs, "--add", "--topic", "t"]) == 1
    assert "--allow-principal" in capsys.readouterr().err
    assert main(["acls", *bs, "--add", "--allow-principal", "User:x", "--consumer",
                 "--topic", "t"]) == 1  # fmt: skip
    assert "--group" in capsys.readouterr().err
    assert main(["acls", *bs, "--add", "--allow-principal", "User:x", "--topic", "t",
                 "--resource-pattern-type", "match"]) == 1  # fmt: skip
    # an operation the resource does not support: Kafka's validation
    assert main(["acls", *bs, "--add", "--allow-principal", "User:x", "--cluster",
                 "--operation", "Read"]) == 1  # fmt: skip
