"""SCRAM (RFC 5802, RFC 7677) as Kafka uses it: the key derivations and the four messages.

Shared by the broker's SCRAM server (``kafkalite.security.sasl``) and its own SCRAM
client (``sasl_client``, the inter-broker connections), so it sits in ``protocol``,
below both. Every primitive is the standard library's (``hashlib.pbkdf2_hmac``,
``hmac``); nothing here is hand-written cryptography.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

__all__ = [
    "MAX_ITERATIONS",
    "MECHANISMS",
    "ScramError",
    "ScramMechanism",
    "client_final_message",
    "client_first_message",
    "client_proof",
    "mechanism",
    "parse_client_final",
    "parse_client_first",
    "parse_server_final",
    "parse_server_first",
    "server_key",
    "server_signature",
    "stored_key",
    "salted_password",
]

#: Kafka's upper bound on iterations (AlterUserScramCredentials, kafka-configs.sh)
MAX_ITERATIONS = 16384


class ScramError(ValueError):
    """A malformed SCRAM message (Kafka's ``SaslException`` from ``ScramMessages``)."""


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str
    hash_name: str
    #: the ``mechanism`` byte of Describe/AlterUserScramCredentials
    type_id: int
    min_iterations: int = 4096

    def digest(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()


MECHANISMS: dict[str, ScramMechanism] = {
    "SCRAM-SHA-256": ScramMechanism("SCRAM-SHA-256", "sha256", 1),
    "SCRAM-SHA-512": ScramMechanism("SCRAM-SHA-512", "sha512", 2),
}
BY_TYPE = {m.type_id: m for m in MECHANISMS.values()}


def mechanism(name: str) -> ScramMechanism | None:
    return MECHANISMS.get(name)


# ---- key derivation ----------------------------------------------------------
def salted_password(mech: ScramMechanism, password: bytes, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(mech.hash_name, password, salt, iterations)


def client_key(mech: ScramMechanism, salted: bytes) -> bytes:
    return mech.hmac(salted, b"Client Key")


def stored_key(mech: ScramMechanism, salted: bytes) -> bytes:
    return mech.digest(client_key(mech, salted))


def server_key(mech: ScramMechanism, salted: bytes) -> bytes:
    return mech.hmac(salted, b"Server Key")


def client_proof(mech: ScramMechanism, salted: bytes, auth_message: bytes) -> bytes:
    key = client_key(mech, salted)
    signature = mech.hmac(mech.digest(key), auth_message)
    return bytes(a ^ b for a, b in zip(key, signature, strict=True))


def server_signature(mech: ScramMechanism, skey: bytes, auth_message: bytes) -> bytes:
    return mech.hmac(skey, auth_message)


def verify_client_proof(
    mech: ScramMechanism, skey_stored: bytes, auth_message: bytes, proof: bytes
) -> bool:
    """StoredKey == H(ClientProof XOR HMAC(StoredKey, AuthMessage)), in constant time."""
    signature = mech.hmac(skey_stored, auth_message)
    if len(proof) != len(signature):
        return False
    computed = mech.digest(bytes(a ^ b for a, b in zip(proof, signature, strict=True)))
    return hmac.compare_digest(computed, skey_stored)


def nonce() -> str:
    return secrets.token_urlsafe(24)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise ScramError(f"Invalid SCRAM {what}: not base64") from None


# ---- messages -----------------------------------------------------------------
def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _unescape(name: str) -> str:
    if re.search(r"=(?!2C|3D)", name):
        raise ScramError("Invalid SCRAM username encoding")
    return name.replace("=2C", ",").replace("=3D", "=")


_PRINTABLE = re.compile(r"^[\x21-\x2b\x2d-\x7e]+$")


@dataclass(frozen=True, slots=True)
class ClientFirst:
    gs2_header: str
    authzid: str
    username: str
    nonce: str
    extensions: dict[str, str]
    bare: str


def client_first_message(username: str, cnonce: str) -> tuple[str, str]:
    """(message, bare part)"""
    bare = f"n={_escape(username)},r={cnonce}"
    return "n,," + bare, bare


def parse_client_first(data: bytes) -> ClientFirst:
    """``gs2-header n=user,r=nonce[,ext=value...]`` (Kafka's ``ClientFirstMessage``)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("Invalid SCRAM client first message: not UTF-8") from None
    m = re.fullmatch(
        r"n,(a=([^,]*))?,(n=([^,]*),r=([^,]*)((?:,[A-Za-z][A-Za-z0-9]*=[^,]*)*))", text
    )
    if m is None:
        raise ScramError("Invalid SCRAM client first message")
    authzid, user, cnonce, ext = m[2] or "", m[4], m[5], m[6]
    if not user or not cnonce or not _PRINTABLE.match(cnonce):
        raise ScramError("Invalid SCRAM client first message")
    extensions = {}
    for kv in ext.split(",")[1:]:
        k, _, v = kv.partition("=")
        extensions[k] = v
    return ClientFirst(
        f"n,{'a=' + authzid if m[1] else ''},",
        _unescape(authzid) if authzid else "",
        _unescape(user),
        cnonce,
        extensions,
        m[3],
    )


def server_first_message(full_nonce: str, salt: bytes, iterations: int) -> str:
    return f"r={full_nonce},s={b64(salt)},i={iterations}"


def parse_server_first(data: bytes) -> tuple[str, bytes, int]:
    m = re.fullmatch(r"r=([^,]+),s=([^,]+),i=(\d+)(,.*)?", data.decode("utf-8", "replace"))
    if m is None:
        raise ScramError("Invalid SCRAM server first message")
    return m[1], unb64(m[2], "salt"), int(m[3])


@dataclass(frozen=True, slots=True)
class ClientFinal:
    channel_binding: bytes
    nonce: str
    proof: bytes
    without_proof: str


def client_final_message(gs2_header: str, full_nonce: str, proof: bytes) -> tuple[str, str]:
    """(message, message without proof)"""
    without = f"c={b64(gs2_header.encode())},r={full_nonce}"
    return f"{without},p={b64(proof)}", without


def parse_client_final(data: bytes) -> ClientFinal:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("Invalid SCRAM client final message: not UTF-8") from None
    m = re.fullmatch(r"(c=([^,]*),r=([^,]*)(?:,[A-Za-z]=[^,]*)*?),p=([^,]+)", text)
    if m is None:
        raise ScramError("Invalid SCRAM client final message")
    return ClientFinal(unb64(m[2], "channel binding"), m[3], unb64(m[4], "proof"), m[1])


def server_final_message(signature: bytes | None, error: str | None = None) -> str:
    return f"e={error}" if error is not None else f"v={b64(signature or b'')}"


def parse_server_final(data: bytes) -> tuple[bytes | None, str | None]:
    """(server signature, error)"""
    text = data.decode("utf-8", "replace")
    if text.startswith("e="):
        return None, text[2:]
    if text.startswith("v="):
        return unb64(text[2:].split(",")[0], "server signature"), None
    raise ScramError("Invalid SCRAM server final message")
