"""The SASL listeners' configuration (:class:`SaslListenerConfig`) and the broker's own
SASL client credentials, from Kafka's property names.

Per listener, Kafka's precedence: ``listener.name.<l>.sasl.enabled.mechanisms`` over
``sasl.enabled.mechanisms``; PLAIN users from ``listener.name.<l>.plain.sasl.jaas.config``
(``user_<name>="<password>"`` options, as Kafka's ``PlainLoginModule``) and from the
YAML form ``kafkalite.sasl.plain.users`` (``listener.name.<l>.kafkalite.sasl.plain.users``
for one listener). A bad value is a ``ConfigError`` naming its key, never its value.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalite.common.errors import ConfigError
from kafkalite.protocol.sasl_client import SaslClientCredentials
from kafkalite.security.sasl.config import (
    SUPPORTED_MECHANISMS,
    JaasError,
    OAuthConfig,
    SaslListenerConfig,
    parse_jaas,
)
from kafkalite.security.sasl.oauthbearer import unsecured_options
from kafkalite.server.config import BrokerConfig

__all__ = ["inter_broker_sasl_credentials", "sasl_listener_configs"]


def _jaas(config: BrokerConfig, listener: str, mechanism: str) -> dict[str, str]:
    key = f"{mechanism.lower()}.sasl.jaas.config"
    text = config.listener_sasl.get(listener, {}).get(key)
    if text is None:
        return {}
    try:
        return parse_jaas(text)[1]
    except JaasError as e:
        raise ConfigError(f"listener.name.{listener.lower()}.{key}", str(e)) from None


def _mechanisms(config: BrokerConfig, listener: str) -> tuple[str, ...]:
    override = config.listener_sasl.get(listener, {}).get("sasl.enabled.mechanisms")
    if override is not None:
        key = f"listener.name.{listener.lower()}.sasl.enabled.mechanisms"
        names = [m.strip() for m in override.split(",") if m.strip()]
    else:
        key = "sasl.enabled.mechanisms"
        names = list(config["sasl.enabled.mechanisms"] or [])
    if not names:
        raise ConfigError(key, "a SASL listener needs at least one mechanism")
    for m in names:
        if m not in SUPPORTED_MECHANISMS:
            raise ConfigError(
                key, f"{m} is not supported (supported: {', '.join(SUPPORTED_MECHANISMS)})"
            )
    return tuple(names)


def _oauth(config: BrokerConfig, listener: str) -> OAuthConfig:
    per = config.listener_sasl.get(listener, {})

    def get(name: str) -> object:
        v = per.get(f"oauthbearer.{name}")
        return v if v is not None else config[name]

    aud = get("sasl.oauthbearer.expected.audience")
    audience = (
        tuple(a.strip() for a in aud.split(",") if a.strip())
        if isinstance(aud, str)
        else tuple(aud or ())  # type: ignore[arg-type]
    )
    url = get("sasl.oauthbearer.jwks.endpoint.url")
    issuer = get("sasl.oauthbearer.expected.issuer")
    return OAuthConfig(
        unsecured=unsecured_options(_jaas(config, listener, "OAUTHBEARER")),
        jwks_url=str(url) if url else None,
        jwks_refresh_ms=int(str(get("sasl.oauthbearer.jwks.endpoint.refresh.ms"))),
        expected_audience=audience,
        expected_issuer=str(issuer) if issuer else None,
        sub_claim_name=str(get("sasl.oauthbearer.sub.claim.name")),
        scope_claim_name=str(get("sasl.oauthbearer.scope.claim.name")),
        clock_skew_s=int(str(get("sasl.oauthbearer.clock.skew.seconds"))),
    )


def sasl_listener_configs(config: BrokerConfig) -> dict[str, SaslListenerConfig]:
    """One entry per SASL_PLAINTEXT / SASL_SSL listener."""
    out: dict[str, SaslListenerConfig] = {}
    for ep in config.listeners:
        if not ep.security_protocol.startswith("SASL_"):
            continue
        name = ep.listener
        users = dict(config.sasl_plain_users.get("", {}))
        users.update(config.sasl_plain_users.get(name, {}))
        for k, v in _jaas(config, name, "PLAIN").items():
            if k.startswith("user_"):
                users[k[len("user_") :]] = v
        reauth = config.listener_sasl.get(name, {}).get("connections.max.reauth.ms")
        try:
            max_reauth = (
                int(reauth) if reauth is not None else int(config["connections.max.reauth.ms"])
            )
        except ValueError:
            raise ConfigError(
                f"listener.name.{name.lower()}.connections.max.reauth.ms", "must be an integer"
            ) from None
        out[name] = SaslListenerConfig(
            listener=name,
            mechanisms=_mechanisms(config, name),
            plain_users=users,
            oauth=_oauth(config, name),
            max_reauth_ms=max_reauth,
            failure_delay_ms=int(config["connection.failed.authentication.delay.ms"]),
            max_receive_size=int(config["sasl.server.max.receive.size"]),
        )
    return out


@dataclass(frozen=True, slots=True)
class _Found:
    username: str
    password: str


def inter_broker_sasl_credentials(
    config: BrokerConfig, listener: str | None = None
) -> SaslClientCredentials | None:
    """What this broker authenticates with on ``listener`` (default: the inter-broker
    listener), None when that listener is not SASL. Kafka takes them from the listener's
    JAAS config for ``sasl.mechanism.inter.broker.protocol`` (``username``/``password``);
    ``kafkalite.sasl.client.username``/``password`` set them directly."""
    name = listener or config.inter_broker_listener
    ep = next((e for e in config.advertised if e.listener == name), None)
    if ep is None or not ep.security_protocol.startswith("SASL_"):
        return None
    mechanism = str(config["sasl.mechanism.inter.broker.protocol"])
    key = "sasl.mechanism.inter.broker.protocol"
    if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise ConfigError(
            key, f"{mechanism} is not supported between brokers (PLAIN, SCRAM-SHA-256/512)"
        )
    if mechanism not in _mechanisms(config, name):
        raise ConfigError(key, f"{mechanism} is not enabled on the inter-broker listener {name}")
    user = config["kafkalite.sasl.client.username"]
    password = config["kafkalite.sasl.client.password"]
    if user is None:
        opts = _jaas(config, name, mechanism)
        user, password = opts.get("username"), opts.get("password")
    if not user or password is None:
        raise ConfigError(
            f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config",
            "the inter-broker listener needs the broker's username and password",
        )
    return SaslClientCredentials(mechanism, str(user), str(password))
