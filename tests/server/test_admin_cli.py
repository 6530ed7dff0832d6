"""The ``kafkalite`` admin CLI against a real broker."""

from __future__ import annotations

from kafkalite.cli.admin import main


def test_topics_create_describe_list_delete(kafka_bootstrap, capsys):
    assert (
        main(
            [
                "topics",
                "--bootstrap-server",
                kafka_bootstrap,
                "--create",
                "--topic",
                "cli-t",
                "--partitions",
                "2",
                "--config",
                "retention.ms=1000000",
            ]
        )
        == 0
    )
    assert main(["topics", "--bootstrap-server", kafka_bootstrap, "--list"]) == 0
    assert "cli-t" in capsys.readouterr().out.split()
    assert (
        main(["topics", "--bootstrap-server", kafka_bootstrap, "--describe", "--topic", "cli-t"])
        == 0
    )
    out = capsys.readouterr().out
    assert "PartitionCount: 2" in out and "Partition: 1\tLeader: 0" in out
    assert (
        main(
            [
                "configs",
                "--bootstrap-server",
                kafka_bootstrap,
                "--entity-type",
                "topics",
                "--entity-name",
                "cli-t",
                "--alter",
                "--add-config",
                "retention.ms=5000,cleanup.policy=compact",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "configs",
                "--bootstrap-server",
                kafka_bootstrap,
                "--entity-type",
                "topics",
                "--entity-name",
                "cli-t",
                "--describe",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "retention.ms=5000" in out and "cleanup.policy=compact" in out
    assert (
        main(["topics", "--bootstrap-server", kafka_bootstrap, "--create", "--topic", "cli-t"]) == 1
    )
    assert "TOPIC_ALREADY_EXISTS" in capsys.readouterr().err.upper()
    assert (
        main(["topics", "--bootstrap-server", kafka_bootstrap, "--delete", "--topic", "cli-t"]) == 0
    )
    assert main(["topics", "--bootstrap-server", kafka_bootstrap, "--list"]) == 0
    assert "cli-t" not in capsys.readouterr().out.split()
