"""``kafkalite configs --entity-type users`` manages SCRAM credentials as kafka-configs.sh."""

from __future__ import annotations

import pytest

from kafkalite.cli.admin import main
from tests.security.conftest import SecureBroker
from tests.security.test_scram_credentials import _login


def _cli(sb: SecureBroker, *args: str) -> int:
    return main(["configs", "--bootstrap-server", sb.admin_bootstrap, *args])


def test_add_describe_delete_scram_credentials(
    secure_broker: SecureBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    user = ["--entity-type", "users", "--entity-name", "grace"]
    assert (
        _cli(
            secure_broker,
            *user,
            "--alter",
            "--add-config",
            "SCRAM-SHA-256=[iterations=8192,password=grace-secret],"
            "SCRAM-SHA-512=[password=grace-secret]",
        )
        == 0
    )
    assert "Completed updating config for user grace." in capsys.readouterr().out
    assert _login(secure_broker, "SCRAM-SHA-256", "grace", "grace-secret")
    assert _login(secure_broker, "SCRAM-SHA-512", "grace", "grace-secret")
    assert _cli(secure_broker, *user, "--describe") == 0
    out = capsys.readouterr().out
    assert (
        "SCRAM credential configs for user-principal 'grace' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096" in out
    )
    assert "grace-secret" not in out
    assert _cli(secure_broker, *user, "--alter", "--delete-config", "SCRAM-SHA-256") == 0
    assert not _login(secure_broker, "SCRAM-SHA-256", "grace", "grace-secret")
    capsys.readouterr()
    # Kafka's bounds come back as the broker's error
    bad = "SCRAM-SHA-256=[iterations=100,password=x]"
    assert _cli(secure_broker, *user, "--alter", "--add-config", bad) == 1
    assert "Too few iterations" in capsys.readouterr().err
