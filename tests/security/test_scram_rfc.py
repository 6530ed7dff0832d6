"""The SCRAM primitives against RFC 7677's SCRAM-SHA-256 example exchange, and the
server's verdicts on a replayed or altered proof (no broker needed)."""

from __future__ import annotations

import base64

from kafkalite.protocol import scram
from kafkalite.security.credentials import CredentialCache, ScramCredential
from kafkalite.security.sasl.authenticator import SaslServerContext
from kafkalite.security.sasl.config import SaslListenerConfig

CLIENT_FIRST_BARE = "n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = (
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
FINAL_WITHOUT_PROOF = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
PROOF = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
SERVER_SIGNATURE = "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_rfc7677_example() -> None:
    mech = scram.MECHANISMS["SCRAM-SHA-256"]
    nonce, salt, iterations = scram.parse_server_first(SERVER_FIRST.encode())
    salted = scram.salted_password(mech, b"pencil", salt, iterations)
    auth = f"{CLIENT_FIRST_BARE},{SERVER_FIRST},{FINAL_WITHOUT_PROOF}".encode()
    assert base64.b64encode(scram.client_proof(mech, salted, auth)).decode() == PROOF
    skey = scram.server_key(mech, salted)
    assert base64.b64encode(scram.server_signature(mech, skey, auth)).decode() == SERVER_SIGNATURE
    assert scram.verify_client_proof(
        mech, scram.stored_key(mech, salted), auth, base64.b64decode(PROOF)
    )
    first = scram.parse_client_first(f"n,,{CLIENT_FIRST_BARE}".encode())
    assert (first.username, first.nonce, first.gs2_header) == (
        "user",
        "rOprNGfwEbeRWgbNEkqO",
        "n,,",
    )
    final = scram.parse_client_final(f"{FINAL_WITHOUT_PROOF},p={PROOF}".encode())
    assert final.without_proof == FINAL_WITHOUT_PROOF and final.channel_binding == b"n,,"


def test_server_refuses_a_proof_for_another_nonce() -> None:
    mech = scram.MECHANISMS["SCRAM-SHA-512"]
    cache = CredentialCache()
    cache.credentials[("u=,x", mech.name)] = ScramCredential.from_password(mech, "pw", 4096)
    ctx = SaslServerContext(SaslListenerConfig("L", (mech.name,)), cache)

    def exchange(tamper: bool) -> int:
        a = ctx.new_authenticator()
        a.handshake(mech.name)
        first, bare = scram.client_first_message("u=,x", "abc")  # escaped as n=u=3D=2Cx
        resp, failed = a.authenticate(2, first.encode())
        assert not failed
        server_first = resp["auth_bytes"]
        nonce, salt, it = scram.parse_server_first(server_first)
        salted = scram.salted_password(mech, b"pw", salt, it)
        without = f"c=biws,r={nonce + ('x' if tamper else '')}"
        auth = f"{bare},{server_first.decode()},{without}".encode()
        proof = scram.client_proof(mech, salted, auth)
        resp, failed = a.authenticate(2, f"{without},p={scram.b64(proof)}".encode())
        return int(resp["error_code"])

    assert exchange(False) == 0
    assert exchange(True) == 58
