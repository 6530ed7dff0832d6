"""Proof that a controller request comes from a broker of the cluster.

With one listener for clients and brokers, a client can name the live
controller's id (it is in every Metadata response) and epoch (a small number)
exactly. So the sender of LeaderAndIsr, StopReplica, UpdateMetadata and
ControlledShutdown also proves it holds the cluster's inter-broker secret
(:mod:`kafkalite.metadata.inter_broker_secret`): its request header carries

    HMAC-SHA256(secret, LABEL | api_key int16 | api_version int16
                        | target broker id int32 | request body)

in tagged field ``AUTHENTICATOR_TAG`` of request header v2. The body holds the
controller id and epoch and the target's broker epoch (or, for
ControlledShutdown, the sender's broker id and epoch), so none of them can be
changed without the key, and the target id stops a request signed for one
broker from being replayed to another. Kafka defines no request-header tags,
and a Kafka peer skips unknown ones, so the wire format stays Kafka's. Only
flexible versions have header tags: older versions cannot be authenticated.

This is a stand-in until kafkalite has authentication: then these APIs also
need CLUSTER_ACTION on an authenticated principal, as in Kafka's ZooKeeper mode.
It does not stop someone who can read the inter-broker traffic from replaying a
request to the same broker incarnation in the same controller epoch (use TLS).
"""

from __future__ import annotations

import hashlib
import hmac
import struct

from kafkalite.protocol.inter_broker.wire import Reader
from kafkalite.protocol.varint import encode_unsigned_varint

#: 0x4B4C ("KL"): far above any tag Kafka may ever define in the request header
AUTHENTICATOR_TAG = 19276
AUTHENTICATOR_BYTES = hashlib.sha256().digest_size
#: domain separation: this key signs nothing else, and a new layout gets a new label
_LABEL = b"kafkalite controller request v1\x00"
_PREFIX = struct.Struct(">hhi")
_TAG_PREFIX = b"\x01" + encode_unsigned_varint(AUTHENTICATOR_TAG)


def authenticator(
    secret: bytes,
    api_key: int,
    api_version: int,
    target_broker_id: int,
    body: bytes | bytearray | memoryview,
) -> bytes:
    """The HMAC a request to ``target_broker_id`` carries (one pass over the body)."""
    mac = hmac.new(secret, _LABEL, hashlib.sha256)
    mac.update(_PREFIX.pack(api_key, api_version, target_broker_id))
    mac.update(body)
    return mac.digest()


def header_tagged_fields(authenticator: bytes | None) -> bytes:
    """A request header v2's tagged-field section: empty, or just the authenticator."""
    if authenticator is None:
        return b"\x00"
    return _TAG_PREFIX + encode_unsigned_varint(len(authenticator)) + authenticator


def read_header_authenticator(buf: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    """(authenticator or None, offset of the body) from the tagged fields of a request
    header v2 that start at ``pos``. Raises InterBrokerCodecError if they are malformed."""
    r = Reader(buf, pos, True)
    found = r.tagged_field(AUTHENTICATOR_TAG)
    return found, r.pos


def is_valid(
    secret: bytes | None,
    presented: bytes | None,
    api_key: int,
    api_version: int,
    target_broker_id: int,
    body: bytes | bytearray | memoryview,
) -> bool:
    """Whether ``presented`` is the authenticator of this request (constant-time)."""
    if secret is None or presented is None:
        return False
    expected = authenticator(secret, api_key, api_version, target_broker_id, body)
    return hmac.compare_digest(expected, presented)
