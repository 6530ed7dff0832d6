"""The ACL tests' broker (the ``secure`` fixture in conftest.py): one with an ACL
authorizer for the session (the tests replace the ACLs they need, the ACL matrix
between cells, rather than start brokers).

- PLAINTEXT: ``User:ANONYMOUS``, a super user here (the tests' admin, and the
  broker's own inter-broker traffic, as Kafka needs its brokers to be super users);
- SSL with ``ssl.client.auth=required``: the principal is the client certificate's
  CN (``ssl.principal.mapping.rules``); ``User:root`` is a super user, ``User:alice``
  and ``User:bob`` get only what their ACLs say.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkalite.protocol import messages
from tests.security.pki import Pki
from tests.server.raw_client import RawClient

MAPPING_RULES = "RULE:^CN=([^,]*),.*$/$1/,DEFAULT"


@dataclass
class AclBroker:
    broker: Any
    pki: Pki
    certs: dict[str, tuple[Path, Path]]

    @property
    def plain(self) -> str:
        return f"127.0.0.1:{self.broker.kafka.bound_port('PLAINTEXT')}"

    @property
    def tls(self) -> str:
        return f"127.0.0.1:{self.broker.kafka.bound_port('SSL')}"

    def raw(self, who: str | None) -> RawClient:
        """A kio client: over PLAINTEXT (ANONYMOUS, super) for None, else over mTLS."""
        if who is None:
            return RawClient.to(self.plain)
        rc = RawClient.to(self.tls)
        rc.sock = self.pki.client_ssl(self.certs[who]).wrap_socket(
            rc.sock, server_hostname="localhost"
        )
        return rc

    def wait_for_coordinators(self, rc: RawClient, group: str = "g", txn: str = "x") -> None:
        """Create the group and transaction coordinators' topics (FindCoordinator)."""
        for key_type, key in ((0, group), (1, txn)):
            deadline = time.monotonic() + 30
            while call(rc, 10, 3, {"key": key, "key_type": key_type}).error_code != 0:
                assert time.monotonic() < deadline, "no coordinator"
                time.sleep(0.1)

    def client_conf(self, who: str) -> dict[str, str]:
        """confluent-kafka settings for ``who``'s certificate."""
        crt, key = self.certs[who]
        return {
            "bootstrap.servers": self.tls,
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.pki.ca),
            "ssl.certificate.location": str(crt),
            "ssl.key.location": str(key),
        }


def call(rc: RawClient, key: int, version: int, body: dict[str, Any]) -> Any:
    return rc.call(key, version, messages.build(messages.request_type(key, version), body))


def secure_broker_config(pki: Pki) -> dict[str, Any]:
    keystore = pki.keystore("broker", "/CN=localhost", server=True)
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.location": str(pki.ca),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": MAPPING_RULES,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS;User:root",
        "num.partitions": 1,
        "offsets.topic.num.partitions": 1,
        "transaction.state.log.num.partitions": 1,
    }
