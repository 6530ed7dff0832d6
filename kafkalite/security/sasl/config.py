"""What one SASL listener accepts: its mechanisms, PLAIN users, OAUTHBEARER validation,
re-authentication and the failed-authentication delay.

The server builds these from its config (``server/sasl_config.py``); this layer only
reads them. Kafka's JAAS strings are parsed here (:func:`parse_jaas`) because both
a listener's server users (``user_<name>="pw"``) and the broker's own client
credentials (``username``/``password``) come in that form.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["JaasError", "OAuthConfig", "SaslListenerConfig", "parse_jaas"]

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class JaasError(ValueError):
    pass


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """``<LoginModule class> <flag> key="value" ...;`` -> (class, options).

    Kafka's ``JaasConfig`` grammar: one login module, its control flag
    (required, requisite, sufficient, optional), options, a final ``;``. Values
    are quoted strings or bare tokens. The error never repeats the text (it holds
    passwords).
    """
    body = text.strip()
    if not body.endswith(";"):
        raise JaasError("a JAAS configuration must end with ';'")
    try:
        tokens = shlex.split(body[:-1], posix=True)
    except ValueError:
        raise JaasError("unbalanced quotes in the JAAS configuration") from None
    if len(tokens) < 2:
        raise JaasError("expected '<LoginModule> <flag> [options];'")
    module, flag, *opts = tokens
    if flag not in ("required", "requisite", "sufficient", "optional"):
        raise JaasError(f"invalid control flag {flag!r} in the JAAS configuration")
    options: dict[str, str] = {}
    for o in opts:
        k, sep, v = o.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z0-9_.\-]+", k):
            raise JaasError("every JAAS option must be key=value")
        options[k] = v
    return module, options


@dataclass(frozen=True, slots=True)
class OAuthConfig:
    #: Kafka's unsecured validator options (``unsecuredValidatorPrincipalClaimName``,
    #: ``...ScopeClaimName``, ``...RequiredScope``, ``...AllowableClockSkewMs``)
    unsecured: Mapping[str, str] = field(default_factory=dict)
    #: KIP-768: validate signed JWTs against this JWKS (``file:`` path or http(s) URL);
    #: None: the unsecured validator (Kafka's default, for development)
    jwks_url: str | None = None
    jwks_refresh_ms: int = 3_600_000
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    sub_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    clock_skew_s: int = 30


@dataclass(frozen=True, slots=True)
class SaslListenerConfig:
    listener: str
    mechanisms: tuple[str, ...]
    #: PLAIN's users: name -> password (never logged: repr hides them)
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    oauth: OAuthConfig = field(default_factory=OAuthConfig)
    #: ``connections.max.reauth.ms`` (KIP-368); 0: sessions do not expire
    max_reauth_ms: int = 0
    #: ``connection.failed.authentication.delay.ms``
    failure_delay_ms: int = 100
    #: ``sasl.server.max.receive.size``: the largest frame before authentication
    max_receive_size: int = 524288
