"""Kafka's server-side SASL state machine over the wire, hostile input, re-authentication
(KIP-368), the failed-authentication delay and credentials kept out of logs and
DescribeConfigs. One broker for the module (``secure_broker``)."""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import time
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from kafkalite.protocol import messages
from kafkalite.protocol.sasl_client import SaslClientCredentials, authenticate
from tests.security.conftest import PLAIN_USERS, REAUTH_MS, SCRAM_USERS, SecureBroker
from tests.security.wire import Wire, metadata, plain_login

UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 33, 34, 58


def _wire(sb: SecureBroker, listener: str = "SASL_PLAINTEXT") -> Wire:
    return Wire(sb.broker.kafka.bound_port(listener))


def test_only_versions_and_handshake_before_authentication(secure_broker: SecureBroker) -> None:
    bystander = _wire(secure_broker)
    assert int(plain_login(bystander, "alice", PLAIN_USERS["alice"]).error_code) == 0
    w = _wire(secure_broker)
    assert (
        int(w.call(18, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code)
        == 0
    )
    w.send(3, 12, {"topics": None, "allow_auto_topic_creation": False})
    assert w.closed(), "a Metadata request before authentication closes the connection"
    # ... that connection only
    assert metadata(bystander).brokers


def test_sasl_authenticate_before_the_handshake_closes_the_connection(
    secure_broker: SecureBroker,
) -> None:
    w = _wire(secure_broker)
    w.send(36, 2, {"auth_bytes": b"\x00alice\x00x"})
    assert w.closed()


def test_unsupported_mechanism_lists_the_enabled_ones(secure_broker: SecureBroker) -> None:
    w = _wire(secure_broker)
    r = w.call(17, 1, {"mechanism": "GSSAPI"})
    assert int(r.error_code) == UNSUPPORTED_SASL_MECHANISM
    assert list(r.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
    assert w.closed()


def test_a_request_between_handshake_and_authenticate_is_illegal_sasl_state(
    secure_broker: SecureBroker,
) -> None:
    w = _wire(secure_broker)
    assert int(w.call(17, 1, {"mechanism": "PLAIN"}).error_code) == 0
    r = metadata(w)
    assert r is not None  # its error response (ILLEGAL_SASL_STATE), then the close
    assert w.closed()


def test_malformed_scram_message_fails_and_closes_that_connection_only(
    secure_broker: SecureBroker,
) -> None:
    bystander = _wire(secure_broker)
    assert int(plain_login(bystander, "alice", PLAIN_USERS["alice"]).error_code) == 0
    for garbage in (b"nonsense", b"n,,n=bob", b"\xff\xfe", b"n,,n=bob,r=" + b"\x00" * 10):
        w = _wire(secure_broker)
        assert int(w.call(17, 1, {"mechanism": "SCRAM-SHA-256"}).error_code) == 0
        r = w.call(36, 2, {"auth_bytes": garbage})
        assert int(r.error_code) == SASL_AUTHENTICATION_FAILED
        assert r.error_message == (
            "Authentication failed during authentication due to invalid credentials with"
            " SASL mechanism SCRAM-SHA-256"
        )
        assert w.closed()
    # a garbage frame (not even a header) closes too
    w = _wire(secure_broker)
    w.send_raw(b"\x00\x24")
    assert w.closed()
    assert metadata(bystander).brokers


def test_sasl_requests_outside_an_exchange_are_illegal_sasl_state(
    secure_broker: SecureBroker,
) -> None:
    plain = _wire(secure_broker, "PLAINTEXT")
    assert int(plain.call(17, 1, {"mechanism": "PLAIN"}).error_code) == ILLEGAL_SASL_STATE
    assert metadata(plain).brokers  # KafkaApis' answer: the connection stays
    w = _wire(secure_broker)
    assert int(plain_login(w, "alice", PLAIN_USERS["alice"]).error_code) == 0
    r = w.call(36, 2, {"auth_bytes": b"x"})
    assert int(r.error_code) == ILLEGAL_SASL_STATE
    assert metadata(w).brokers


def test_handshake_v0_then_raw_tokens(secure_broker: SecureBroker) -> None:
    w = _wire(secure_broker)
    assert int(w.call(17, 0, {"mechanism": "PLAIN"}).error_code) == 0
    w.send_raw(f"\x00alice\x00{PLAIN_USERS['alice']}".encode())
    assert w.read_frame() == b""  # PLAIN's empty server token, bare
    assert metadata(w).brokers


def test_inter_broker_sasl_client_scram(secure_broker: SecureBroker) -> None:
    """The broker's own SCRAM client (controller channel, fetchers) against the server."""

    async def run(password: str) -> str:
        port = secure_broker.broker.kafka.bound_port("SASL_PLAINTEXT")
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            await authenticate(
                reader, writer, SaslClientCredentials("SCRAM-SHA-512", "carol", password)
            )
            return "ok"
        except ConnectionError as e:
            return str(e)
        finally:
            writer.close()

    assert asyncio.run(run(SCRAM_USERS["carol"])) == "ok"
    assert "authentication failed" in asyncio.run(run("nope"))


# ---- KIP-368 ---------------------------------------------------------------------
def test_session_lifetime_and_expiry_close_the_connection(secure_broker: SecureBroker) -> None:
    w = _wire(secure_broker, "REAUTH")
    r = plain_login(w, "alice", PLAIN_USERS["alice"])
    assert int(r.error_code) == 0
    assert r.session_lifetime.total_seconds() * 1000 == REAUTH_MS
    assert metadata(w).brokers
    time.sleep(REAUTH_MS / 1000 + 0.2)
    w.send(3, 12, {"topics": None, "allow_auto_topic_creation": False})
    assert w.closed(), "a request after the session expired closes the connection"


def test_reauthentication_extends_the_session_and_keeps_the_principal(
    secure_broker: SecureBroker,
) -> None:
    w = _wire(secure_broker, "REAUTH")
    assert int(plain_login(w, "alice", PLAIN_USERS["alice"]).error_code) == 0
    time.sleep(REAUTH_MS / 2000)
    assert int(plain_login(w, "alice", PLAIN_USERS["alice"]).error_code) == 0
    time.sleep(REAUTH_MS / 1000 * 0.6)  # past the first session, well within the second
    assert metadata(w).brokers
    # another principal on re-authentication is refused
    hs = w.call(17, 1, {"mechanism": "PLAIN"})
    assert int(hs.error_code) == 0
    r = w.call(36, 2, {"auth_bytes": f"\x00mallory\x00{PLAIN_USERS['mallory']}".encode()})
    assert int(r.error_code) == SASL_AUTHENTICATION_FAILED
    assert "Cannot change principals during re-authentication" in r.error_message
    assert w.closed()


def test_librdkafka_reauthenticates_transparently(secure_broker: SecureBroker) -> None:
    errors: list[str] = []
    delivered: list[Any] = []
    p = Producer(
        {
            "bootstrap.servers": secure_broker.bootstrap("REAUTH"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "bob",
            "sasl.password": SCRAM_USERS["bob"],
            "error_cb": lambda e: errors.append(str(e)),
        }
    )
    end = time.monotonic() + 2.5 * REAUTH_MS / 1000
    while time.monotonic() < end:
        p.produce("secure", b"r", on_delivery=lambda err, msg: delivered.append(err))
        p.flush(10)
        time.sleep(0.1)
    assert delivered and all(e is None for e in delivered), (delivered, errors)
    assert not errors


# ---- hostile clients -----------------------------------------------------------------
async def _failed_login(port: int) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:

        async def call(api: int, version: int, body: dict[str, Any], cid: int) -> Any:
            cls = messages.request_type(api, version)
            flex = bool(cls.__flexible__)  # type: ignore[attr-defined]
            hdr = struct.pack(">hhih", api, version, cid, 1) + b"x" + (b"\x00" if flex else b"")
            payload = hdr + messages.encode(messages.build(cls, body))
            writer.write(struct.pack(">i", len(payload)) + payload)
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            frame = await reader.readexactly(size)
            return messages.decode_response(api, version, frame, 5 if flex else 4)

        await call(17, 1, {"mechanism": "PLAIN"}, 1)
        r = await call(36, 2, {"auth_bytes": b"\x00alice\x00wrong-password"}, 2)
        assert await reader.read(1) == b""  # then closed
        return int(r.error_code)
    finally:
        writer.close()


def test_many_failed_authentications_do_not_hold_up_another_client(
    secure_broker: SecureBroker,
) -> None:
    """Short form in CI; KAFKALITE_SOAK=1 runs Kafka's 10,000."""
    total = 10_000 if os.environ.get("KAFKALITE_SOAK") else 300
    port = secure_broker.broker.kafka.bound_port("SASL_PLAINTEXT")
    good = _wire(secure_broker)
    assert int(plain_login(good, "alice", PLAIN_USERS["alice"]).error_code) == 0
    codes: list[int] = []
    served = 0

    async def storm() -> None:
        sem = asyncio.Semaphore(100)

        async def one() -> None:
            async with sem:
                codes.append(await _failed_login(port))

        await asyncio.gather(*(one() for _ in range(total)))

    import threading

    t = threading.Thread(target=lambda: asyncio.run(storm()))
    t.start()
    while t.is_alive():
        # the authenticated client is answered all along
        assert metadata(good).brokers
        served += 1
    t.join()
    assert codes == [SASL_AUTHENTICATION_FAILED] * total
    assert served > 0
    assert metadata(good).brokers


def test_credentials_never_in_logs_or_describe_configs(
    secure_broker: SecureBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    w = _wire(secure_broker)
    plain_login(w, "alice", "wrong-" + PLAIN_USERS["alice"])
    w = _wire(secure_broker)
    assert int(plain_login(w, "alice", PLAIN_USERS["alice"]).error_code) == 0
    admin = AdminClient({"bootstrap.servers": secure_broker.admin_bootstrap})
    res = ConfigResource(ResourceType.BROKER, str(secure_broker.broker.kafka.broker_id))
    described = admin.describe_configs([res])[res].result(timeout=30)
    entry = described["kafkalite.sasl.client.password"]
    assert entry.is_sensitive and entry.value is None
    text = caplog.text + repr({k: v.value for k, v in described.items()})
    for secret in [*PLAIN_USERS.values(), *SCRAM_USERS.values(), "never-shown-Qq8"]:
        assert secret not in text
    assert "Failed authentication" in caplog.text  # the failure itself is logged


def test_a_controller_request_before_authentication_closes_the_connection(
    secure_broker: SecureBroker,
) -> None:
    from kafkalite.protocol import inter_broker as ib

    w = _wire(secure_broker)
    request = ib.ControlledShutdownRequest(0, 0)
    w.sock.sendall(
        ib.request_frame(
            ib.CONTROLLED_SHUTDOWN, 3, 1, "x", request, secret=None, target_broker_id=0
        )
    )
    assert w.closed()


def test_a_large_frame_before_authentication_closes_the_connection(
    secure_broker: SecureBroker,
) -> None:
    """Kafka's sasl.server.max.receive.size (512 KiB) before authentication."""
    w = _wire(secure_broker)
    w.sock.sendall(struct.pack(">i", 600_000) + b"\x00" * 1000)
    assert w.closed()
    w = _wire(secure_broker)
    assert int(plain_login(w, "alice", PLAIN_USERS["alice"]).error_code) == 0
    assert metadata(w).brokers  # an authenticated client is not bound by it
