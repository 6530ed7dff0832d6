"""OAUTHBEARER with the JWKS fetched over HTTP (KIP-768's ``jwks.endpoint.url``), as a
production identity provider publishes it, not read from a file."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from kafkalite.testing.embedded_broker import ThreadedBroker
from tests.security.conftest import JWK_PUBLIC, signed_jwt


class _JwksHandler(http.server.BaseHTTPRequestHandler):
    requests = 0

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        type(self).requests += 1
        body = json.dumps({"keys": [JWK_PUBLIC]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def jwks_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _JwksHandler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/.well-known/jwks.json"
    finally:
        server.shutdown()
        server.server_close()


def _login(bootstrap: str, token: str) -> tuple[bool, list[str]]:
    errors: list[str] = []
    delivered: list[Any] = []
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _cfg: (token, time.time() + 3600),
            "error_cb": lambda e: errors.append(str(e)),
        }
    )
    p.produce("jwks-url", b"j", on_delivery=lambda err, _msg: delivered.append(err))
    deadline = time.monotonic() + 10
    while not delivered and not errors and time.monotonic() < deadline:
        p.poll(0.05)
    return delivered == [None], errors


def test_oauthbearer_validates_signed_jwts_against_a_jwks_served_over_http(
    tmp_path: Any, jwks_url: str
) -> None:
    b = ThreadedBroker(
        tmp_path / "data",
        **{
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": (
                jwks_url
            ),
            "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.audience": "kafka",
            "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.issuer": (
                "https://issuer.test"
            ),
        },
    )
    b.start()
    try:
        bootstrap = f"127.0.0.1:{b.kafka.bound_port('SASL_PLAINTEXT')}"
        ok, errors = _login(bootstrap, signed_jwt("grace"))
        assert ok, errors
        assert _JwksHandler.requests >= 1  # the keys came over HTTP
        ok, errors = _login(bootstrap, signed_jwt("grace", kid="k2"))  # a key it does not have
        assert not ok and any("invalid_token" in e for e in errors), errors
    finally:
        b.stop()
