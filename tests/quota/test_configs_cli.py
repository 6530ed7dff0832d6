"""``kafkalite configs`` for client quotas with kafka-configs.sh's syntax, against a real
broker: the quota set by the CLI takes effect without a restart."""

from __future__ import annotations

from kafkalite.cli.admin import main
from kafkalite.quota import ANONYMOUS


def configs(bootstrap: str, *args: str) -> int:
    return main(["configs", "--bootstrap-server", bootstrap, *args])


def test_alter_and_describe_client_and_user_quotas(kafka_broker, capsys):
    bs = kafka_broker.bootstrap_servers
    assert (
        configs(
            bs,
            "--alter",
            "--entity-type",
            "clients",
            "--entity-name",
            "X",
            "--add-config",
            "producer_byte_rate=1048576,consumer_byte_rate=2097152",
        )
        == 0
    )
    assert "Completed updating config for client-id 'X'." in capsys.readouterr().out
    # in effect at once, on the running broker
    resolved = kafka_broker.call(
        lambda: kafka_broker.kafka.quotas.configs.resolve(ANONYMOUS, "X", "producer_byte_rate")
    )
    assert resolved[0] == 1048576
    assert (
        configs(
            bs,
            "--alter",
            "--entity-type",
            "clients",
            "--entity-default",
            "--add-config",
            "request_percentage=50",
        )
        == 0
    )
    assert (
        configs(
            bs,
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--entity-type",
            "clients",
            "--entity-default",
            "--add-config",
            "controller_mutation_rate=10",
        )
        == 0
    )
    capsys.readouterr()

    assert configs(bs, "--describe", "--entity-type", "clients", "--entity-name", "X") == 0
    out = capsys.readouterr().out
    assert out.strip() == (
        "Quota configs for client-id 'X' are consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0"
    )
    assert configs(bs, "--describe", "--entity-type", "clients") == 0
    out = capsys.readouterr().out.splitlines()
    assert sorted(out) == [
        "Quota configs for client-id 'X' are consumer_byte_rate=2097152.0,"
        " producer_byte_rate=1048576.0",
        "Quota configs for the default client-id are request_percentage=50.0",
    ]
    assert configs(bs, "--describe", "--user", "alice", "--client-defaults") == 0
    assert capsys.readouterr().out.strip() == (
        "Quota configs for user-principal 'alice', the default client-id are"
        " controller_mutation_rate=10.0"
    )

    assert (
        configs(
            bs,
            "--alter",
            "--entity-type",
            "clients",
            "--entity-name",
            "X",
            "--delete-config",
            "producer_byte_rate",
        )
        == 0
    )
    capsys.readouterr()
    assert configs(bs, "--describe", "--client", "X") == 0
    assert "producer_byte_rate" not in capsys.readouterr().out

    # KIP-612's ip entity
    assert (
        configs(
            bs,
            "--alter",
            "--entity-type",
            "ips",
            "--entity-name",
            "10.1.2.3",
            "--add-config",
            "connection_creation_rate=10",
        )
        == 0
    )
    capsys.readouterr()
    assert configs(bs, "--describe", "--entity-type", "ips") == 0
    assert capsys.readouterr().out.strip() == (
        "Quota configs for ip '10.1.2.3' are connection_creation_rate=10.0"
    )

    # Kafka's errors come back as such
    assert configs(bs, "--alter", "--client", "X", "--add-config", "producer_byte_rate=1.5") == 1
    assert "INVALID_REQUEST" in capsys.readouterr().err.upper()
