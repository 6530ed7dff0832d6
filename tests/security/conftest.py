"""One broker per module with every kind of listener a security test needs.

PLAINTEXT (the admin's), SASL_PLAINTEXT, SASL_SSL and REAUTH (SASL_PLAINTEXT with a
short ``connections.max.reauth.ms``), PLAIN users from the YAML form, SCRAM users
created through AlterUserScramCredentials by a stock admin client.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from kafkalite.testing.embedded_broker import ThreadedBroker

PLAIN_USERS = {
    "alice": "alice-secret-7Hq",
    "admin": "admin-secret-3Kx",
    "mallory": "mallory-secret-2Rt",
}
SCRAM_USERS = {"bob": "bob-secret-9Zp", "carol": "carol-secret-4Wd"}
REAUTH_MS = 1500


def make_cert(d: Path) -> tuple[Path, Path]:
    key, crt = d / "key.pem", d / "cert.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
            "-keyout", str(key), "-out", str(crt), "-days", "2", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    keystore = d / "keystore.pem"
    keystore.write_text(key.read_text() + crt.read_text())
    return keystore, crt


_RSA = rsa.generate_private_key(public_exponent=65537, key_size=2048)
JWK_PUBLIC = {**json.loads(RSAAlgorithm.to_jwk(_RSA.public_key())), "kid": "k1", "alg": "RS256"}


def signed_jwt(
    sub: str,
    *,
    aud: str = "kafka",
    iss: str = "https://issuer.test",
    lifetime_s: int = 3600,
    kid: str = "k1",
) -> str:
    now = int(time.time())
    claims = {"sub": sub, "aud": aud, "iss": iss, "iat": now, "exp": now + lifetime_s}
    return jwt.encode(claims, _RSA, algorithm="RS256", headers={"kid": kid})


def unsecured_jwt(sub: str, lifetime_s: int = 3600, **claims: Any) -> str:
    """An ``alg: none`` JWS as Kafka's unsecured login module makes one."""

    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    now = int(time.time())
    body = {"sub": sub, "iat": now, "exp": now + lifetime_s, **claims}
    return f"{part({'alg': 'none'})}.{part(body)}."


@dataclass
class SecureBroker:
    broker: ThreadedBroker
    ca: Path
    keystore: Path

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.broker.kafka.bound_port(listener)}"

    @property
    def admin_bootstrap(self) -> str:
        return self.bootstrap("PLAINTEXT")


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if shutil.which("openssl") is None:
        pytest.fail("the openssl CLI is needed to make the test certificate")
    d = tmp_path_factory.mktemp("sasl")
    keystore, ca = make_cert(d)
    jwks = d / "jwks.json"
    jwks.write_text(json.dumps({"keys": [JWK_PUBLIC]}))
    config: dict[str, Any] = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
        "SASL_SSL://127.0.0.1:0,REAUTH://127.0.0.1:0,JWKS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
        "SASL_SSL:SASL_SSL,REAUTH:SASL_PLAINTEXT,JWKS:SASL_PLAINTEXT",
        # KIP-768: signed JWTs checked against a JWKS file on one listener
        "listener.name.jwks.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.jwks.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": f"file://{jwks}",
        "listener.name.jwks.oauthbearer.sasl.oauthbearer.expected.audience": "kafka",
        "listener.name.jwks.oauthbearer.sasl.oauthbearer.expected.issuer": "https://issuer.test",
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.location": str(keystore),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
        # Kafka's JAAS form for one user, the YAML form for the other
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="admin" password="{PLAIN_USERS["admin"]}" '
            f'user_admin="{PLAIN_USERS["admin"]}";'
        ),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_admin="{PLAIN_USERS["admin"]}";'
        ),
        "kafkalite.sasl.plain.users.alice": PLAIN_USERS["alice"],
        # one listener's own user
        "listener.name.reauth.kafkalite.sasl.plain.users.mallory": PLAIN_USERS["mallory"],
        "kafkalite.sasl.client.password": "never-shown-Qq8",
    }
    b = ThreadedBroker(d / "data", **config)
    b.start()
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{b.kafka.bound_port('PLAINTEXT')}"})
        ups = [
            UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, 4096), pw.encode())
            for user, pw in SCRAM_USERS.items()
            for mech in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
        ]
        for f in admin.alter_user_scram_credentials(ups).values():
            f.result(timeout=30)
        b.create_topic("secure")
        yield SecureBroker(b, ca, keystore)
    finally:
        b.stop()
