"""The principal of a TLS client certificate: the DN mapped by
``ssl.principal.mapping.rules``; ANONYMOUS without a certificate on a ``requested``
listener; a certificate no rule maps closes the connection (Kafka fails the
authentication). And a TLS connection that idles past the read-buffer trim keeps
working (it used to be closed on its next request)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.security.acl_env import AclBroker, call, secure_broker_config
from tests.security.pki import make_pki, needs_openssl
from tests.server.raw_client import RawClient

pytestmark = needs_openssl

_CREATE = {
    "creations": [
        {"resource_type": 2, "resource_name": "m", "resource_pattern_type": 3,
         "principal": "User:x", "host": "*", "operation": 3, "permission_type": 3}
    ]
}  # fmt: skip


def _create_acl_code(rc: RawClient) -> int:
    return int(call(rc, 30, 3, _CREATE).results[0].error_code)


def test_mapping_rules_requested_auth_and_unmapped_certificates(
    kafka_broker_factory: Any, tmp_path: Any
) -> None:
    pki = make_pki(tmp_path)
    config = {
        **secure_broker_config(pki),
        "ssl.client.auth": "requested",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=test,.*$/$1/L",
        "super.users": "User:ANONYMOUS;User:carol",
    }
    b = kafka_broker_factory(**config)
    host, port = "127.0.0.1", b.kafka.bound_port("SSL")
    # CN=Carol,OU=test,O=kafkalite -> carol (lower-cased), a super user
    carol = RawClient(host, port)
    carol.sock = pki.client_ssl(pki.issue("carol", "/O=kafkalite/OU=test/CN=Carol")).wrap_socket(
        carol.sock, server_hostname="localhost"
    )
    assert _create_acl_code(carol) == 0
    carol.close()
    # no certificate on a "requested" listener: ANONYMOUS
    anon = RawClient(host, port)
    import ssl

    ctx = ssl.create_default_context(cafile=str(pki.ca))
    anon.sock = ctx.wrap_socket(anon.sock, server_hostname="localhost")
    assert _create_acl_code(anon) == 0  # ANONYMOUS is a super user here
    anon.close()
    # a certificate no rule maps: the connection is closed
    dave = RawClient(host, port)
    dave.sock = pki.client_ssl(pki.issue("dave", "/O=other/CN=dave")).wrap_socket(
        dave.sock, server_hostname="localhost"
    )
    with pytest.raises((ConnectionError, OSError)):
        _create_acl_code(dave)
    dave.close()


def test_a_principal_without_super_user_rights_is_refused(secure: AclBroker) -> None:
    bob = secure.raw("bob")
    try:
        assert _create_acl_code(bob) == 31  # CLUSTER_AUTHORIZATION_FAILED
    finally:
        bob.close()


def test_an_idle_tls_connection_keeps_working_after_the_buffer_trim(secure: AclBroker) -> None:
    """The read buffer of an idle connection is dropped after one to two seconds; a TLS read
    waiting at that moment used to land in the dropped buffer."""
    rc = secure.raw("root")
    try:
        assert call(rc, 18, 3, {"client_software_name": "t", "client_software_version": "1"})
        time.sleep(2.5)
        r = call(rc, 18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert int(r.error_code) == 0
    finally:
        rc.close()
