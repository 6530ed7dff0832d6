"""Stock clients authenticate with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 over
SASL_PLAINTEXT and SASL_SSL, and with OAUTHBEARER where they support it; a wrong
password fails with SASL_AUTHENTICATION_FAILED (its message) for each client."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.clients.node import run_node
from tests.security.conftest import (
    PLAIN_USERS,
    SCRAM_USERS,
    SecureBroker,
    signed_jwt,
    unsecured_jwt,
)

CLIENTS = ["confluent-kafka", "kafka-python", "aiokafka", "kcat", "kafkajs"]
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
LISTENERS = ["SASL_PLAINTEXT", "SASL_SSL"]


@dataclass
class Outcome:
    ok: bool
    error: str = ""


def _user(mechanism: str) -> tuple[str, str]:
    return ("alice", PLAIN_USERS["alice"]) if mechanism == "PLAIN" else ("bob", SCRAM_USERS["bob"])


def _confluent(sb: SecureBroker, listener: str, mech: str, user: str, pw: str) -> Outcome:
    errors: list[str] = []
    delivered: list[Any] = []
    conf = {
        "bootstrap.servers": sb.bootstrap(listener),
        "security.protocol": listener,
        "sasl.mechanism": mech,
        "sasl.username": user,
        "sasl.password": pw,
        "ssl.ca.location": str(sb.ca),
        "message.timeout.ms": 8000,
        "error_cb": lambda e: errors.append(str(e)),
    }
    p = Producer(conf)
    p.produce("secure", b"v", on_delivery=lambda err, msg: delivered.append(err))
    deadline = time.monotonic() + 10
    while not delivered and not errors and time.monotonic() < deadline:
        p.poll(0.05)
    ok = bool(delivered) and delivered[0] is None
    return Outcome(ok, " ".join(errors))


class _Messages(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _kafka_python(
    sb: SecureBroker, listener: str, mech: str, user: str, pw: str, **extra: Any
) -> Outcome:
    from kafka import KafkaProducer

    # kafka-python logs the broker's SaslAuthenticate error and retries the bootstrap.
    # Its transport (3.0.12) drops a response that arrives in the same read as the
    # close that follows it ("socket disconnected"), as the broker closes right after a
    # failed authentication (Kafka does too): the broker's own log line of the answer
    # it sent is then the evidence
    seen = _Messages()
    logging.getLogger("kafka").addHandler(seen)
    broker_log = logging.getLogger("kafkalite.server.apis.sasl")
    level = broker_log.level
    broker_log.setLevel(logging.INFO)
    broker_log.addHandler(seen)
    try:
        p = KafkaProducer(
            bootstrap_servers=sb.bootstrap(listener),
            security_protocol=listener,
            sasl_mechanism=mech,
            sasl_plain_username=user,
            sasl_plain_password=pw,
            ssl_cafile=str(sb.ca),
            ssl_check_hostname=False,
            request_timeout_ms=8000,
            max_block_ms=8000,
            bootstrap_timeout_ms=3000 if pw == "wrong-password" else 10000,
            **extra,
        )
        p.send("secure", b"v").get(timeout=10)
        p.close(timeout=5)
        return Outcome(True)
    except Exception as e:
        return Outcome(False, f"{type(e).__name__}: {e} " + " ".join(seen.lines))
    finally:
        logging.getLogger("kafka").removeHandler(seen)
        broker_log.removeHandler(seen)
        broker_log.setLevel(level)


def _aiokafka(
    sb: SecureBroker, listener: str, mech: str, user: str, pw: str, **extra: Any
) -> Outcome:
    from aiokafka import AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    seen = _Messages()  # aiokafka logs the broker's message, raises a connection error
    logging.getLogger("aiokafka").addHandler(seen)

    async def run() -> Outcome:
        p = AIOKafkaProducer(
            bootstrap_servers=sb.bootstrap(listener),
            security_protocol=listener,
            sasl_mechanism=mech,
            sasl_plain_username=user,
            sasl_plain_password=pw,
            ssl_context=create_ssl_context(cafile=str(sb.ca)) if listener == "SASL_SSL" else None,
            request_timeout_ms=8000,
            **extra,
        )
        try:
            await p.start()
            await p.send_and_wait("secure", b"v")
            return Outcome(True)
        except Exception as e:
            return Outcome(False, f"{type(e).__name__}: {e} " + " ".join(seen.lines))
        finally:
            await p.stop()

    try:
        return asyncio.run(run())
    finally:
        logging.getLogger("aiokafka").removeHandler(seen)


def _kcat(sb: SecureBroker, listener: str, mech: str, user: str, pw: str) -> Outcome:
    proc = subprocess.run(
        [
            "kcat", "-b", sb.bootstrap(listener), "-P", "-t", "secure",
            "-X", f"security.protocol={listener}", "-X", f"sasl.mechanisms={mech}",
            "-X", f"sasl.username={user}", "-X", f"sasl.password={pw}",
            "-X", f"ssl.ca.location={sb.ca}", "-X", "message.timeout.ms=8000",
        ],
        input=b"v\n",
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    return Outcome(
        proc.returncode == 0 and b"Authentication failed" not in proc.stderr, proc.stderr.decode()
    )


_KAFKAJS = """
const { Kafka, logLevel } = require('kafkajs');
const fs = require('fs');
const cfg = JSON.parse(process.env.CFG);
(async () => {
  let sasl = { mechanism: cfg.mechanism, username: cfg.user, password: cfg.password };
  if (cfg.token) sasl = { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: cfg.token }) };
  const kafka = new Kafka({ clientId: 'sasl-test', brokers: [cfg.broker], logLevel: logLevel.NOTHING,
    ssl: cfg.ca ? { ca: [fs.readFileSync(cfg.ca)], rejectUnauthorized: true } : false,
    sasl, retry: { retries: 0 }, connectionTimeout: 8000, authenticationTimeout: 8000 });
  const producer = kafka.producer();
  try {
    await producer.connect();
    await producer.send({ topic: 'secure', messages: [{ value: 'v' }] });
    await producer.disconnect();
    console.log(JSON.stringify({ ok: true }));
  } catch (e) {
    console.log(JSON.stringify({ ok: false, error: e.name + ': ' + e.message }));
  }
})();
"""


def _kafkajs(
    sb: SecureBroker, listener: str, mech: str, user: str, pw: str, token: str | None = None
) -> Outcome:
    cfg = {
        "broker": sb.bootstrap(listener),
        "mechanism": mech.lower(),
        "user": user,
        "password": pw,
        "ca": str(sb.ca) if listener == "SASL_SSL" else None,
        "token": token,
    }
    out = run_node(_KAFKAJS, env={"CFG": json.dumps(cfg)})
    return Outcome(bool(out["ok"]), out.get("error", ""))


RUNNERS = {
    "confluent-kafka": _confluent,
    "kafka-python": _kafka_python,
    "aiokafka": _aiokafka,
    "kcat": _kcat,
    "kafkajs": _kafkajs,
}


def _need(client: str) -> None:
    if client == "kcat" and shutil.which("kcat") is None:
        pytest.fail("kcat is not installed (make system-deps)")


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_authenticates_with_each_mechanism(
    secure_broker: SecureBroker, client: str, listener: str
) -> None:
    _need(client)
    for mech in MECHANISMS:
        user, pw = _user(mech)
        out = RUNNERS[client](secure_broker, listener, mech, user, pw)
        assert out.ok, f"{client} {mech} over {listener}: {out.error}"


@pytest.mark.parametrize("client", CLIENTS)
def test_a_wrong_password_fails_with_sasl_authentication_failed(
    secure_broker: SecureBroker, client: str
) -> None:
    _need(client)
    for mech in ("PLAIN", "SCRAM-SHA-256"):
        user, _ = _user(mech)
        out = RUNNERS[client](secure_broker, "SASL_PLAINTEXT", mech, user, "wrong-password")
        assert not out.ok
        # each client reports the broker's SASL_AUTHENTICATION_FAILED message
        assert "Authentication failed" in out.error, f"{client} {mech}: {out.error}"


def test_plain_user_from_kafkas_jaas_config(secure_broker: SecureBroker) -> None:
    out = _confluent(secure_broker, "SASL_SSL", "PLAIN", "admin", PLAIN_USERS["admin"])
    assert out.ok, out.error
    # alice is configured for every listener, admin (JAAS) only where its listener says
    out = _confluent(secure_broker, "SASL_SSL", "PLAIN", "alice", PLAIN_USERS["alice"])
    assert out.ok, out.error


@pytest.mark.parametrize("listener", LISTENERS)
def test_oauthbearer_unsecured_jwt(secure_broker: SecureBroker, listener: str) -> None:
    # confluent-kafka: librdkafka's own unsecured JWT
    errors: list[str] = []
    delivered: list[Any] = []
    p = Producer(
        {
            "bootstrap.servers": secure_broker.bootstrap(listener),
            "security.protocol": listener,
            "ssl.ca.location": str(secure_broker.ca),
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.config": "principal=dave scope=kafka",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "error_cb": lambda e: errors.append(str(e)),
        }
    )
    p.produce("secure", b"v", on_delivery=lambda err, msg: delivered.append(err))
    p.flush(10)
    assert delivered == [None], errors
    # kafkajs: an oauthBearerProvider handing over an unsecured JWS
    out = _kafkajs(secure_broker, listener, "oauthbearer", "", "", token=unsecured_jwt("erin"))
    assert out.ok, out.error
    # kcat (librdkafka 2.0): its unsecured JWT too
    if shutil.which("kcat"):
        proc = subprocess.run(
            [
                "kcat", "-b", secure_broker.bootstrap(listener), "-P", "-t", "secure",
                "-X", f"security.protocol={listener}", "-X", "sasl.mechanisms=OAUTHBEARER",
                "-X", "enable.sasl.oauthbearer.unsecure.jwt=true",
                "-X", "sasl.oauthbearer.config=principal=kim",
                "-X", f"ssl.ca.location={secure_broker.ca}", "-X", "message.timeout.ms=8000",
            ],
            input=b"v\n",
            capture_output=True,
            timeout=60,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    # aiokafka and kafka-python: their token providers
    from aiokafka.abc import AbstractTokenProvider

    class Aio(AbstractTokenProvider):  # type: ignore[misc]
        async def token(self) -> str:
            return unsecured_jwt("ivan")

    out = _aiokafka(secure_broker, listener, "OAUTHBEARER", "", "", sasl_oauth_token_provider=Aio())
    assert out.ok, out.error

    from kafka.net.sasl.oauth import AbstractTokenProvider as KafkaTokenProvider

    class Sync(KafkaTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return unsecured_jwt("judy")

    out = _kafka_python(
        secure_broker, listener, "OAUTHBEARER", "", "", sasl_oauth_token_provider=Sync()
    )
    assert out.ok, out.error


def test_oauthbearer_expired_token_fails(secure_broker: SecureBroker) -> None:
    out = _kafkajs(
        secure_broker, "SASL_PLAINTEXT", "oauthbearer", "", "", token=unsecured_jwt("erin", -60)
    )
    assert not out.ok
    # the broker answers the token with RFC 7628's error JSON; kafkajs does not send the
    # %x01 acknowledgement and goes on, so its next request meets ILLEGAL_SASL_STATE,
    # as it would on Kafka
    assert "SASL" in out.error, out.error


def _oauth_cb_login(sb: SecureBroker, token: str) -> tuple[bool, list[str]]:
    errors: list[str] = []
    delivered: list[Any] = []
    p = Producer(
        {
            "bootstrap.servers": sb.bootstrap("JWKS"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _cfg: (token, time.time() + 3600),
            "error_cb": lambda e: errors.append(str(e)),
        }
    )
    p.produce("secure", b"j", on_delivery=lambda err, msg: delivered.append(err))
    deadline = time.monotonic() + 10
    while not delivered and not errors and time.monotonic() < deadline:
        p.poll(0.05)
    return delivered == [None], errors


def test_oauthbearer_signed_jwt_checked_against_the_jwks(secure_broker: SecureBroker) -> None:
    ok, errors = _oauth_cb_login(secure_broker, signed_jwt("frank"))
    assert ok, errors
    # wrong audience, wrong issuer, expired, unknown key, unsigned: all refused
    for bad in (
        signed_jwt("frank", aud="other"),
        signed_jwt("frank", iss="https://evil.test"),
        signed_jwt("frank", lifetime_s=-120),
        signed_jwt("frank", kid="k2"),
        unsecured_jwt("frank"),
    ):
        ok, errors = _oauth_cb_login(secure_broker, bad)
        assert not ok
        assert any("invalid_token" in e for e in errors), errors
