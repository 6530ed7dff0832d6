"""Every kind of ``kafkalite <tool>`` client honours Kafka's client properties files
(``--command-config``, ``--producer.config``, ``--consumer.config``) as Kafka's tools do,
so they reach a SASL/SCRAM listener: confluent-kafka tools (``topics``, the console
producer and consumer), a kafka-python one (``log-dirs``) and the tools on kafkalite's
own wire client (``broker-api-versions``, ``configs``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.cli.admin import main
from tests.security.conftest import SCRAM_USERS, SecureBroker


def _props(tmp_path: Path, password: str, *, jaas: bool) -> str:
    f = tmp_path / ("jaas.properties" if jaas else "plain.properties")
    lines = ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-512"]
    if jaas:  # the Java client's form, as kafka-*.sh users write it
        lines.append(
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
            f'required username="bob" password="{password}";'
        )
    else:  # librdkafka's form
        lines += ["sasl.username=bob", f"sasl.password={password}"]
    f.write_text("\n".join(lines) + "\n")
    return str(f)


def test_each_kind_of_tool_reaches_a_scram_listener(
    secure_broker: SecureBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    boot = ["--bootstrap-server", secure_broker.bootstrap("SASL_PLAINTEXT")]
    jaas = _props(tmp_path, SCRAM_USERS["bob"], jaas=True)
    plain = _props(tmp_path, SCRAM_USERS["bob"], jaas=False)
    # confluent-kafka
    assert main(["topics", *boot, "--command-config", jaas, "--list"]) == 0
    assert "secure" in capsys.readouterr().out.split()
    # the wire client
    assert main(["broker-api-versions", *boot, "--command-config", jaas]) == 0
    out = capsys.readouterr().out
    assert "SaslAuthenticate(36)" in out and "Produce(0)" in out
    assert (
        main(["configs", *boot, "--command-config", plain, "--describe", "--topic", "secure"]) == 0
    )
    assert "Dynamic configs for topic secure are:" in capsys.readouterr().out
    # kafka-python (with confluent-kafka for the broker list)
    assert main(["log-dirs", *boot, "--command-config", plain, "--describe"]) == 0
    assert '"partition":"secure-0"' in capsys.readouterr().out
    # the console tools' own flags
    producer = ["console-producer", *boot, "--producer.config", jaas, "--topic", "secure"]
    import io
    import sys

    stdin = sys.stdin
    sys.stdin = io.StringIO("over-scram\n")
    try:
        assert main(producer) == 0
    finally:
        sys.stdin = stdin
    capsys.readouterr()
    consumer = [
        "console-consumer",
        *boot,
        "--consumer.config",
        plain,
        "--topic",
        "secure",
        "--from-beginning",
        "--max-messages",
        "1",
        "--timeout-ms",
        "15000",
    ]
    assert main(consumer) == 0
    assert "over-scram" in capsys.readouterr().out


def test_a_wrong_password_is_one_line(
    secure_broker: SecureBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    boot = ["--bootstrap-server", secure_broker.bootstrap("SASL_PLAINTEXT")]
    bad = _props(tmp_path, "not-bobs", jaas=True)
    assert main(["broker-api-versions", *boot, "--command-config", bad]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("Error: SASL authentication failed") and "\n" not in err
