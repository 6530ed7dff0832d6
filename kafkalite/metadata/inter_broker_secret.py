"""The cluster's inter-broker secret: created once in the metadata store, read by every broker.

The controller signs each request it sends to a broker (and a broker its
ControlledShutdown to the controller) with an HMAC under this key
(:mod:`kafkalite.protocol.inter_broker.authenticator`), so that a client that
knows the live controller's id and epoch still cannot be obeyed as the
controller. The key lives in a kafkalite-specific znode, outside Kafka's layout,
as ``{"version":1,"secret":"<64 hex digits>"}``: JSON like Kafka's znodes, so
``zookeeper-shell`` and the embedded store's journal show it as text.

The first broker to start creates it; concurrent first starts race on one
create, the losers read the winner's, so every broker ends with the same key.
Whoever can read the metadata store can read the key; whoever can write it can
rewrite /controller anyway, so this adds no new trust in the store.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from dataclasses import dataclass

from kafkalite.metadata.store import MetadataStore, NodeExistsError
from kafkalite.metadata.zk_data import MetadataFormatError

INTER_BROKER_SECRET_PATH = "/kafkalite/inter_broker_secret"
SECRET_BYTES = 32


@dataclass(frozen=True, slots=True)
class InterBrokerSecret:
    key: bytes

    def encode(self) -> bytes:
        return json.dumps({"version": 1, "secret": self.key.hex()}).encode()

    @classmethod
    def decode(cls, data: bytes) -> InterBrokerSecret:
        """The key, refused unless it is exactly ``SECRET_BYTES`` long: a truncated or
        edited znode must stop the broker, not weaken every request's check."""
        try:
            obj = json.loads(data)
            key = bytes.fromhex(obj["secret"])
        except (ValueError, TypeError, KeyError) as e:
            raise MetadataFormatError(f"invalid {INTER_BROKER_SECRET_PATH}: {e}") from None
        if len(key) != SECRET_BYTES:
            raise MetadataFormatError(
                f"{INTER_BROKER_SECRET_PATH} holds {len(key)} bytes, not {SECRET_BYTES}"
            )
        return cls(key)

    @classmethod
    def generate(cls) -> InterBrokerSecret:
        return cls(secrets.token_bytes(SECRET_BYTES))


async def get_or_create_inter_broker_secret(store: MetadataStore) -> bytes:
    """The cluster's key, creating it if this is the first broker ever to start."""
    got = await store.get_or_none(INTER_BROKER_SECRET_PATH)
    if got is None:
        with contextlib.suppress(NodeExistsError):  # another broker's create won
            await store.create(
                INTER_BROKER_SECRET_PATH, InterBrokerSecret.generate().encode(), makepath=True
            )
        got = await store.get(INTER_BROKER_SECRET_PATH)
    return InterBrokerSecret.decode(got[0]).key
