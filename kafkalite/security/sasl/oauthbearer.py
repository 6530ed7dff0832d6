"""OAUTHBEARER (RFC 7628) validation: Kafka's unsecured-JWS validator by default, or
signed JWTs checked against a JWKS (KIP-768's ``sasl.oauthbearer.*`` names).

The unsecured validator accepts ``alg: none`` tokens as Kafka's
``OAuthBearerUnsecuredValidatorCallbackHandler`` does (for development: anyone can
mint one). The JWKS validator uses PyJWT for the signature and the registered
claims; keys come from a file or a URL, fetched off the event loop and refreshed.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt

from kafkalite.security.sasl.config import OAuthConfig

log = logging.getLogger(__name__)

__all__ = ["InvalidToken", "OAuthValidator", "ValidatedToken", "parse_client_initial_response"]


class InvalidToken(Exception):
    """Carries the RFC 7628 error status the server sends back (never the token)."""

    def __init__(self, status: str, detail: str, scope: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.scope = scope

    def json(self) -> str:
        body: dict[str, str] = {"status": self.status}
        if self.scope is not None:
            body["scope"] = self.scope
        return json.dumps(body, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class ValidatedToken:
    principal: str
    #: expiry in epoch milliseconds
    expires_ms: int


def parse_client_initial_response(data: bytes) -> tuple[str, str, dict[str, str]]:
    """``n,[a=authzid],^Aauth=Bearer <token>^A[key=value^A...]^A`` -> (token, authzid, extensions)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("Invalid OAUTHBEARER client first message: not UTF-8") from None
    gs2, sep, rest = text.partition("\x01")
    if not sep or not rest.endswith("\x01\x01"):
        raise ValueError("Invalid OAUTHBEARER client first message")
    parts = gs2.split(",")
    if len(parts) != 3 or parts[0] != "n" or (parts[1] and not parts[1].startswith("a=")):
        raise ValueError("Invalid OAUTHBEARER client first message: bad GS2 header")
    authzid = parts[1][2:]
    kvs: dict[str, str] = {}
    for kv in rest[:-2].split("\x01"):
        k, s, v = kv.partition("=")
        if not s or not k:
            raise ValueError("Invalid OAUTHBEARER client first message: bad key-value")
        kvs[k] = v
    auth = kvs.pop("auth", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise ValueError("Invalid OAUTHBEARER client first message: no bearer token")
    return token.strip(), authzid, kvs


def _b64url_json(part: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise InvalidToken("invalid_token", "not a base64url-encoded JSON object") from None
    if not isinstance(value, dict):
        raise InvalidToken("invalid_token", "not a JSON object")
    return value


def _scopes(value: Any) -> set[str]:
    if isinstance(value, str):
        return set(value.split())
    if isinstance(value, list):
        return {str(v) for v in value}
    return set()


class OAuthValidator:
    """One per listener; :meth:`validate` is synchronous (keys are cached)."""

    def __init__(self, config: OAuthConfig) -> None:
        self.config = config
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._refresh: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self.config.jwks_url is None:
            return
        await self._load_keys()
        self._refresh = asyncio.get_running_loop().create_task(self._refresh_loop())

    async def stop(self) -> None:
        if self._refresh is not None:
            self._refresh.cancel()

    async def _load_keys(self) -> None:
        url = self.config.jwks_url
        assert url is not None
        text = await asyncio.to_thread(_read_jwks, url)
        keyset = jwt.PyJWKSet.from_json(text)
        self._keys = {k.key_id: k for k in keyset.keys}

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.jwks_refresh_ms / 1000)
            try:
                await self._load_keys()
            except Exception as e:  # keep the last good keys
                log.warning("refreshing the JWKS failed (keeping the last keys): %s", e)

    def validate(self, token: str, now_ms: int | None = None) -> ValidatedToken:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        if self.config.jwks_url is None:
            return self._unsecured(token, now_ms)
        return self._signed(token)

    def _unsecured(self, token: str, now_ms: int) -> ValidatedToken:
        """Kafka's ``OAuthBearerUnsecuredJws`` + ``OAuthBearerValidationUtils``."""
        opts = self.config.unsecured
        principal_claim = opts.get("unsecuredValidatorPrincipalClaimName", "sub") or "sub"
        scope_claim = opts.get("unsecuredValidatorScopeClaimName", "scope") or "scope"
        required = opts.get("unsecuredValidatorRequiredScope", "").split()
        try:
            skew_ms = int(opts.get("unsecuredValidatorAllowableClockSkewMs", "0") or 0)
        except ValueError:
            skew_ms = 0
        parts = token.split(".")
        if len(parts) != 3 or parts[2] != "":
            raise InvalidToken("invalid_token", "an unsecured JWS has 3 parts and no signature")
        header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
        if header.get("alg") != "none":
            raise InvalidToken("invalid_token", "unsecured JWS must have alg none")
        principal = claims.get(principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise InvalidToken("invalid_token", f"no {principal_claim} claim")
        exp = claims.get("exp")
        if not isinstance(exp, int | float):
            raise InvalidToken("invalid_token", "no exp claim")
        if now_ms - skew_ms >= exp * 1000:
            raise InvalidToken("invalid_token", "the token has expired")
        iat = claims.get("iat")
        if isinstance(iat, int | float) and iat * 1000 > now_ms + skew_ms:
            raise InvalidToken("invalid_token", "the token was issued in the future")
        missing = [s for s in required if s not in _scopes(claims.get(scope_claim))]
        if missing:
            raise InvalidToken("insufficient_scope", "required scope missing", " ".join(required))
        return ValidatedToken(principal, int(exp * 1000))

    def _signed(self, token: str) -> ValidatedToken:
        c = self.config
        try:
            header = jwt.get_unverified_header(token)
            key = self._keys.get(header.get("kid"))
            if key is None and len(self._keys) == 1 and header.get("kid") is None:
                key = next(iter(self._keys.values()))
            if key is None:
                if self._refresh is not None:  # a rotated key: fetch the set now
                    asyncio.get_running_loop().create_task(self._load_keys())
                raise InvalidToken("invalid_token", "no JWKS key matches the token's kid")
            alg = header.get("alg")
            if not isinstance(alg, str) or alg == "none":
                raise InvalidToken("invalid_token", "the token is not signed")
            claims = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                audience=list(c.expected_audience) or None,
                issuer=c.expected_issuer,
                leeway=c.clock_skew_s,
                options={
                    "require": ["exp"],
                    "verify_aud": bool(c.expected_audience),
                    "verify_iss": c.expected_issuer is not None,
                },
            )
        except InvalidToken:
            raise
        except jwt.PyJWTError as e:
            raise InvalidToken("invalid_token", type(e).__name__) from None
        principal = claims.get(c.sub_claim_name)
        if not isinstance(principal, str) or not principal:
            raise InvalidToken("invalid_token", f"no {c.sub_claim_name} claim")
        return ValidatedToken(principal, int(float(claims["exp"]) * 1000))


def _read_jwks(url: str) -> str:
    if url.startswith("file:"):
        path = url[len("file://") :] if url.startswith("file://") else url[len("file:") :]
        with open(path, encoding="utf-8") as f:
            return f.read()
    with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 (configured URL)
        return r.read().decode("utf-8")  # type: ignore[no-any-return]


def unsecured_options(options: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in options.items() if k.startswith("unsecuredValidator")}
