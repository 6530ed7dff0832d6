"""SASL configuration: Kafka's names, per-listener overrides, bad values refused at
start-up with the key named and the secret never repeated."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.common.errors import ConfigError
from kafkalite.security.sasl.config import JaasError, parse_jaas
from kafkalite.server.config import BrokerConfig
from kafkalite.server.sasl_config import inter_broker_sasl_credentials, sasl_listener_configs

BASE = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "log.dirs": "/tmp/unused"}


def _cfg(**kv: str) -> BrokerConfig:
    return BrokerConfig({**BASE, **{k.replace("__", "."): v for k, v in kv.items()}})


def test_kafkas_default_gssapi_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError) as e:
        sasl_listener_configs(_cfg())
    assert "sasl.enabled.mechanisms" in str(e.value) and "GSSAPI" in str(e.value)


def test_listener_override_and_users_from_both_forms() -> None:
    cfg = BrokerConfig(
        {
            **BASE,
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                'username="admin" password="a-pw" user_admin="a-pw" user_bob="b-pw";'
            ),
            "kafkalite.sasl.plain.users.carol": "c-pw",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
        }
    )
    (lc,) = sasl_listener_configs(cfg).values()
    assert lc.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert dict(lc.plain_users) == {"admin": "a-pw", "bob": "b-pw", "carol": "c-pw"}
    assert "a-pw" not in repr(lc)
    creds = inter_broker_sasl_credentials(cfg)
    assert creds is not None and (creds.mechanism, creds.username) == ("PLAIN", "admin")
    assert "a-pw" not in repr(creds)


def test_a_bad_jaas_string_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError) as e:
        sasl_listener_configs(
            _cfg(
                sasl__enabled__mechanisms="PLAIN",
                listener__name__sasl_plaintext__plain__sasl__jaas__config='X required user_a="secret-z"',
            )
        )
    assert "listener.name.sasl_plaintext.plain.sasl.jaas.config" in str(e.value)
    assert "secret-z" not in str(e.value)
    with pytest.raises(JaasError):
        parse_jaas('X sometimes a="b";')


def test_inter_broker_sasl_needs_the_brokers_credentials(tmp_path: Path) -> None:
    cfg = _cfg(
        sasl__enabled__mechanisms="SCRAM-SHA-512",
        sasl__mechanism__inter__broker__protocol="SCRAM-SHA-512",
    )
    with pytest.raises(ConfigError):
        inter_broker_sasl_credentials(cfg)
    cfg = _cfg(sasl__enabled__mechanisms="PLAIN", sasl__mechanism__inter__broker__protocol="GSSAPI")
    with pytest.raises(ConfigError) as e:
        inter_broker_sasl_credentials(cfg)
    assert "sasl.mechanism.inter.broker.protocol" in str(e.value)
