"""The server side of a SASL connection (Kafka's ``SaslServerAuthenticator``).

One :class:`SaslServerAuthenticator` per connection on a SASL_PLAINTEXT or SASL_SSL
listener. Its state machine is Kafka's:

- before authentication only ApiVersions, SaslHandshake and SaslAuthenticate may
  come; any other request, or a SaslAuthenticate before the handshake, closes the
  connection (:meth:`admits`);
- SaslHandshake names a mechanism: an unknown or disabled one is answered
  UNSUPPORTED_SASL_MECHANISM with the enabled list, and the connection closes;
- after the handshake only SaslAuthenticate may come (anything else:
  ILLEGAL_SASL_STATE, then close); a failed exchange is answered
  SASL_AUTHENTICATION_FAILED with a message and the connection closes, after
  ``connection.failed.authentication.delay.ms``;
- KIP-368: with ``connections.max.reauth.ms`` a session expires; a SaslHandshake on
  an authenticated connection re-authenticates it (same mechanism, same principal),
  and a request after the expiry closes the connection.

The mechanisms' servers (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER) are here too; none
logs or returns a credential.
"""

from __future__ import annotations

import hmac
import logging
import time
from dataclasses import dataclass
from typing import Any

from kafkalite.protocol import scram
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.credentials import CredentialCache
from kafkalite.security.sasl.config import SaslListenerConfig
from kafkalite.security.sasl.oauthbearer import (
    InvalidToken,
    OAuthValidator,
    parse_client_initial_response,
)

log = logging.getLogger(__name__)

__all__ = ["AuthenticationFailed", "SaslServerAuthenticator", "SaslServerContext"]

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
UNSUPPORTED_SASL_MECHANISM = int(ErrorCode.unsupported_sasl_mechanism)
ILLEGAL_SASL_STATE = int(ErrorCode.illegal_sasl_state)
SASL_AUTHENTICATION_FAILED = int(ErrorCode.sasl_authentication_failed)

#: what :meth:`SaslServerAuthenticator.admits` answers
ADMIT, CLOSE, ILLEGAL_STATE = 0, 1, 2

# states (Kafka's SaslState, trimmed to what the server observes)
INITIAL, AUTHENTICATE, COMPLETE, FAILED = "INITIAL", "AUTHENTICATE", "COMPLETE", "FAILED"


class AuthenticationFailed(Exception):
    """Kafka's ``SaslAuthenticationException``: its message goes to the client."""


class _GenericFailure(Exception):
    """Kafka's ``SaslException``: the client gets the generic message for the mechanism."""


@dataclass(slots=True)
class SaslServerContext:
    """What every connection of one listener shares."""

    config: SaslListenerConfig
    credentials: CredentialCache
    oauth: OAuthValidator | None = None

    def new_authenticator(self) -> SaslServerAuthenticator:
        return SaslServerAuthenticator(self)


# ---- the mechanisms -------------------------------------------------------------
class _Mechanism:
    complete = False
    #: authenticated user name, once complete
    user = ""
    #: when the credential expires (epoch ms; OAUTHBEARER's token), None: never
    expires_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        raise NotImplementedError


class _PlainServer(_Mechanism):
    """RFC 4616: ``authzid NUL authcid NUL passwd``, checked against the listener's users."""

    def __init__(self, users: dict[str, str] | Any) -> None:
        self.users = users

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        tokens = text.split("\x00")
        if len(tokens) != 3:
            raise AuthenticationFailed(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}"
            )
        authzid, user, password = tokens
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self.users.get(user)
        # compared in constant time; an unknown user costs the same comparison
        ok = hmac.compare_digest(password.encode(), (expected or "\x00" + password).encode())
        if expected is None or not ok:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.user = user
        self.complete = True
        return b""


class _ScramServer(_Mechanism):
    """RFC 5802 server: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mech: scram.ScramMechanism, credentials: CredentialCache) -> None:
        self.mech = mech
        self.credentials = credentials
        self._first: scram.ClientFirst | None = None
        self._server_first = ""
        self._nonce = ""
        self._cred: Any = None

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._first is None:
                return self._client_first(token)
            return self._client_final(token)
        except scram.ScramError as e:
            raise _GenericFailure(str(e)) from None

    def _client_first(self, token: bytes) -> bytes:
        first = scram.parse_client_first(token)
        if first.extensions.get("tokenauth", "false").lower() == "true":
            raise _GenericFailure("delegation tokens are not supported")
        if first.authzid and first.authzid != first.username:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        cred = self.credentials.get(first.username, self.mech.name)
        if cred is None:
            raise _GenericFailure("Invalid user credentials")
        self._first, self._cred = first, cred
        self._nonce = first.nonce + scram.nonce()
        self._server_first = scram.server_first_message(self._nonce, cred.salt, cred.iterations)
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        first, cred = self._first, self._cred
        assert first is not None and cred is not None
        final = scram.parse_client_final(token)
        # Kafka's check is endsWith, not equality: librdkafka 2.0 echoes its own nonce
        # in front of the server's combined one, and Kafka accepts it
        if not final.nonce.endswith(self._nonce):
            raise _GenericFailure("Invalid client nonce in the final client message.")
        if final.channel_binding != first.gs2_header.encode():
            raise _GenericFailure("Invalid channel binding in the final client message.")
        auth_message = f"{first.bare},{self._server_first},{final.without_proof}".encode()
        if not scram.verify_client_proof(self.mech, cred.stored_key, auth_message, final.proof):
            raise _GenericFailure("Invalid client credentials")
        self.user = first.username
        self.complete = True
        signature = scram.server_signature(self.mech, cred.server_key, auth_message)
        return scram.server_final_message(signature).encode()


class _OAuthBearerServer(_Mechanism):
    """RFC 7628: a bad token is answered with the error JSON as a challenge; the client
    acknowledges it with ``%x01`` and then fails (as Kafka's ``OAuthBearerSaslServer``)."""

    def __init__(self, validator: OAuthValidator) -> None:
        self.validator = validator
        self._error: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self._error is not None:
            if token == b"\x01":
                raise AuthenticationFailed(self._error)
            raise AuthenticationFailed("Authentication failed: unexpected response to an error")
        try:
            jws, authzid, _ext = parse_client_initial_response(token)
        except ValueError as e:
            raise AuthenticationFailed(str(e)) from None
        try:
            valid = self.validator.validate(jws)
        except InvalidToken as e:
            self._error = e.json()
            log.debug("OAUTHBEARER token refused: %s", e)
            return self._error.encode()
        if authzid and authzid != valid.principal:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from the token's principal"
            )
        self.user = valid.principal
        self.expires_ms = valid.expires_ms
        self.complete = True
        return b""


# ---- the per-connection state machine ----------------------------------------------
class SaslServerAuthenticator:
    __slots__ = (
        "context",
        "state",
        "open",
        "mechanism",
        "user",
        "expires_at",
        "reauthenticating",
        "authenticate_version",
        "raw_tokens",
        "_server",
    )

    def __init__(self, context: SaslServerContext) -> None:
        self.context = context
        self.state = INITIAL
        #: authenticated for good (no session expiry to check): the request channel's
        #: fast path, one attribute test per request
        self.open = False
        self.mechanism: str | None = None
        self.user: str | None = None
        #: ``time.monotonic()`` when the session expires (KIP-368), None: never
        self.expires_at: float | None = None
        self.reauthenticating = False
        #: the SaslAuthenticate version the client used (v0 clients cannot re-authenticate)
        self.authenticate_version = -1
        #: after a SaslHandshake v0 the tokens come as bare size-prefixed frames
        self.raw_tokens = False
        self._server: _Mechanism | None = None

    @property
    def authenticated(self) -> bool:
        return self.user is not None and self.state == COMPLETE

    def admits(self, api_key: int) -> int:
        """Whether a request may be handled now: ADMIT, CLOSE or ILLEGAL_STATE."""
        state = self.state
        if state == COMPLETE:
            exp = self.expires_at
            if exp is not None and time.monotonic() >= exp and api_key != SASL_HANDSHAKE:
                return CLOSE  # the session expired without re-authentication
            return ADMIT
        if state == INITIAL:
            return ADMIT if api_key in (API_VERSIONS, SASL_HANDSHAKE) else CLOSE
        if state == AUTHENTICATE:
            return ADMIT if api_key == SASL_AUTHENTICATE else ILLEGAL_STATE
        return CLOSE

    def refusal(self, api_key: int) -> str:
        if self.state == COMPLETE:
            return "SASL session expired without re-authentication"
        if self.state == INITIAL:
            return f"Unexpected Kafka request of type {api_key} during SASL handshake"
        return f"Unexpected Kafka request of type {api_key} during SASL authentication"

    # ---- SaslHandshake -----------------------------------------------------------
    def handshake(self, mechanism: str, version: int = 1) -> tuple[dict[str, Any], bool]:
        """(response, close after it)"""
        enabled = list(self.context.config.mechanisms)
        if self.state == COMPLETE:
            if self.authenticate_version < 1:
                # a v0 client cannot re-authenticate: KafkaApis' answer
                return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": []}, False
            if mechanism != self.mechanism:
                self.state = FAILED
                return {"error_code": UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled}, True
            self.reauthenticating = True
        elif self.state != INITIAL:
            self.state = FAILED
            return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": []}, True
        if mechanism not in enabled:
            self.state = FAILED
            return {"error_code": UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled}, True
        server = self._new_server(mechanism)
        if server is None:
            self.state = FAILED
            return {"error_code": UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled}, True
        self.mechanism, self._server = mechanism, server
        self.state = AUTHENTICATE
        self.open = False
        self.raw_tokens = version == 0
        return {"error_code": 0, "mechanisms": enabled}, False

    def _new_server(self, mechanism: str) -> _Mechanism | None:
        ctx = self.context
        if mechanism == "PLAIN":
            return _PlainServer(ctx.config.plain_users)
        mech = scram.mechanism(mechanism)
        if mech is not None:
            return _ScramServer(mech, ctx.credentials)
        if mechanism == "OAUTHBEARER" and ctx.oauth is not None:
            return _OAuthBearerServer(ctx.oauth)
        return None

    # ---- SaslAuthenticate --------------------------------------------------------
    def authenticate(self, version: int, token: bytes) -> tuple[dict[str, Any], bool]:
        """(response, failed: close after it, with the failure delay). On success the
        caller reads :attr:`user` for the principal."""
        server = self._server
        if self.state != AUTHENTICATE or server is None:
            return self._failure(
                ILLEGAL_SASL_STATE, "SaslAuthenticate request received in an illegal state"
            )
        self.authenticate_version = version
        try:
            challenge = server.evaluate(token)
        except AuthenticationFailed as e:
            return self._failure(SASL_AUTHENTICATION_FAILED, str(e))
        except _GenericFailure:
            return self._failure(
                SASL_AUTHENTICATION_FAILED,
                "Authentication failed during authentication due to invalid credentials with SASL mechanism "
                + str(self.mechanism),
            )
        lifetime_ms = 0
        if server.complete:
            if self.reauthenticating and self.user is not None and server.user != self.user:
                return self._failure(
                    SASL_AUTHENTICATION_FAILED,
                    f"Cannot change principals during re-authentication from User:{self.user}: User:{server.user}",
                )
            lifetime_ms = self._session_lifetime_ms(server)
            self.user = server.user
            self.state = COMPLETE
            self.raw_tokens = False
            self.reauthenticating = False
            self._server = None
            if lifetime_ms > 0:
                self.expires_at = time.monotonic() + lifetime_ms / 1000
                self.open = False
            else:
                self.expires_at = None
                self.open = True
        return {
            "error_code": 0,
            "error_message": None,
            "auth_bytes": challenge,
            "session_lifetime": lifetime_ms,
        }, False

    def _session_lifetime_ms(self, server: _Mechanism) -> int:
        """KIP-368: min(connections.max.reauth.ms, the credential's remaining life); 0 when
        re-authentication is off (Kafka then ignores the credential's expiry too)."""
        max_ms = self.context.config.max_reauth_ms
        if max_ms <= 0:
            return 0
        if server.expires_ms is not None:
            left = server.expires_ms - int(time.time() * 1000)
            return max(1, min(max_ms, left))
        return max_ms

    def _failure(self, code: int, message: str) -> tuple[dict[str, Any], bool]:
        self.state = FAILED
        self.open = False
        self.raw_tokens = False
        self._server = None
        return {
            "error_code": code,
            "error_message": message,
            "auth_bytes": b"",
            "session_lifetime": 0,
        }, True
