"""DescribeUserScramCredentials / AlterUserScramCredentials through a stock admin client,
the credential znode as Kafka's ZooKeeper mode writes it (shared with the user's
quotas), and a credential altered on one broker authenticating on another."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from kafkalite.protocol import scram
from kafkalite.quota.entities import QuotaEntity
from kafkalite.security.credentials import ScramCredential
from tests.security.conftest import SCRAM_USERS, SecureBroker


def _admin(sb: SecureBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": sb.admin_bootstrap})


def _error(fut: Any) -> Any:
    with pytest.raises(KafkaException) as e:
        fut.result(timeout=30)
    return e.value.args[0]


def _login(sb: SecureBroker, mech: str, user: str, pw: str) -> bool:
    delivered: list[Any] = []
    errors: list[Any] = []
    p = Producer(
        {
            "bootstrap.servers": sb.bootstrap("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mech,
            "sasl.username": user,
            "sasl.password": pw,
            "message.timeout.ms": 3000,
            "error_cb": errors.append,
        }
    )
    p.produce("secure", b"s", on_delivery=lambda err, msg: delivered.append(err))
    deadline = time.monotonic() + 5
    while not delivered and not errors and time.monotonic() < deadline:
        p.poll(0.05)
    return delivered == [None]


def test_describe_shows_mechanisms_and_iterations(secure_broker: SecureBroker) -> None:
    admin = _admin(secure_broker)
    got = admin.describe_user_scram_credentials(["bob"])["bob"].result(timeout=30)
    infos = sorted((i.mechanism.value, i.iterations) for i in got.scram_credential_infos)
    assert infos == [(1, 4096), (2, 4096)]
    everyone = admin.describe_user_scram_credentials().result(timeout=30)
    assert {"bob", "carol"} <= set(everyone)
    err = _error(admin.describe_user_scram_credentials(["nobody"])["nobody"])
    assert err.code() == 91  # RESOURCE_NOT_FOUND
    assert "does not exist" in err.str()


def test_alter_checks_as_kafka(secure_broker: SecureBroker) -> None:
    admin = _admin(secure_broker)
    few = UserScramCredentialUpsertion(
        "dan", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1024), b"dan-pw"
    )
    err = _error(admin.alter_user_scram_credentials([few])["dan"])
    assert err.code() == 93 and "Too few iterations" in err.str()  # UNACCEPTABLE_CREDENTIAL
    many = UserScramCredentialUpsertion(
        "dan", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 16385), b"dan-pw"
    )
    err = _error(admin.alter_user_scram_credentials([many])["dan"])
    assert err.code() == 93 and "Too many iterations" in err.str()
    gone = UserScramCredentialDeletion("dan", ScramMechanism.SCRAM_SHA_512)
    err = _error(admin.alter_user_scram_credentials([gone])["dan"])
    assert err.code() == 91  # RESOURCE_NOT_FOUND: deleting what does not exist


def test_upsert_login_delete_and_the_znode_layout(secure_broker: SecureBroker) -> None:
    admin = _admin(secure_broker)
    b = secure_broker.broker
    # a quota in the same znode must survive the credential writes (and vice versa)
    qs = b.kafka.quota_store
    b.call(qs.alter, QuotaEntity("erin", None), [("producer_byte_rate", 1e9)], False)
    up = UserScramCredentialUpsertion(
        "erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"erin-secret"
    )
    for f in admin.alter_user_scram_credentials([up]).values():
        f.result(timeout=30)
    assert _login(secure_broker, "SCRAM-SHA-512", "erin", "erin-secret")
    assert not _login(secure_broker, "SCRAM-SHA-512", "erin", "erin-wrong")

    async def znode() -> dict[str, str]:
        raw, _ = await b.kafka.store.get("/config/users/erin")
        return dict(json.loads(raw)["config"])

    config = b.call(znode)
    assert config["producer_byte_rate"] == "1000000000"
    entry = config["SCRAM-SHA-512"]
    # Kafka's ScramCredentialUtils form; the salted keys verify the password
    fields = dict(kv.split("=", 1) for kv in entry.split(","))
    assert list(fields) == ["salt", "stored_key", "server_key", "iterations"]
    assert fields["iterations"] == "8192"
    cred = ScramCredential.from_config(entry)
    mech = scram.MECHANISMS["SCRAM-SHA-512"]
    salted = scram.salted_password(mech, b"erin-secret", cred.salt, 8192)
    assert scram.stored_key(mech, salted) == cred.stored_key
    assert "erin-secret" not in json.dumps(config)
    # the quota write keeps the credential
    b.call(qs.alter, QuotaEntity("erin", None), [("producer_byte_rate", 2e9)], False)
    assert "SCRAM-SHA-512" in b.call(znode)
    gone = UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_512)
    for f in admin.alter_user_scram_credentials([gone]).values():
        f.result(timeout=30)
    assert "SCRAM-SHA-512" not in b.call(znode)
    assert b.call(znode)["producer_byte_rate"] == "2000000000"
    assert not _login(secure_broker, "SCRAM-SHA-512", "erin", "erin-secret")
    assert _login(secure_broker, "SCRAM-SHA-256", "bob", SCRAM_USERS["bob"])
