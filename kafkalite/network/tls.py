"""TLS contexts from Kafka's ``ssl.*`` properties (PEM keystores).

A broker is a TLS server on its SSL listeners and a TLS client on the
connections it opens to other brokers (the controller's channel to each broker,
controlled shutdown). As in Kafka, both sides use the same keystore and
truststore: the broker presents its keystore's certificate as a client
certificate, so a cluster whose only listener is SSL with
``ssl.client.auth=required`` can talk to itself.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from typing import Any, Protocol

from kafkalite.common.errors import ConfigError


class SslConfigs(Protocol):
    """Kafka's ``ssl.*`` properties by name (the broker's ``BrokerConfig`` is one)."""

    def __getitem__(self, key: str, /) -> Any: ...


_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def _set_versions(ctx: ssl.SSLContext, cfg: SslConfigs) -> None:
    versions = [_VERSIONS[p] for p in cfg["ssl.enabled.protocols"]]
    ctx.minimum_version = min(versions)
    ctx.maximum_version = max(versions)


def has_keystore(cfg: SslConfigs) -> bool:
    return bool(
        cfg["ssl.keystore.location"]
        or (cfg["ssl.keystore.certificate.chain"] and cfg["ssl.keystore.key"])
    )


def _load_keystore(ctx: ssl.SSLContext, cfg: SslConfigs) -> None:
    password = cfg["ssl.key.password"]
    location = cfg["ssl.keystore.location"]
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
        else:
            # inline PEM: ssl wants files, so write them to a private temp file once
            with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as f:
                os.fchmod(f.fileno(), 0o600)
                f.write(
                    cfg["ssl.keystore.key"].strip()
                    + "\n"
                    + cfg["ssl.keystore.certificate.chain"].strip()
                    + "\n"
                )
            try:
                ctx.load_cert_chain(f.name, password=password)
            finally:
                os.unlink(f.name)
    except FileNotFoundError:
        raise ConfigError("ssl.keystore.location", f"file not found: {location}") from None
    except (ssl.SSLError, ValueError) as e:
        raise ConfigError(
            "ssl.keystore.location" if location else "ssl.keystore.key", f"cannot load: {e}"
        ) from None


def _load_truststore(ctx: ssl.SSLContext, trust: str) -> None:
    try:
        ctx.load_verify_locations(trust)
    except (FileNotFoundError, ssl.SSLError) as e:
        raise ConfigError("ssl.truststore.location", f"cannot load: {e}") from None


def build_ssl_context(cfg: SslConfigs) -> ssl.SSLContext:
    """The server side of the SSL listeners."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_versions(ctx, cfg)
    _load_keystore(ctx, cfg)
    auth = cfg["ssl.client.auth"]
    if auth != "none":
        trust = cfg["ssl.truststore.location"]
        if not trust:
            raise ConfigError("ssl.truststore.location", "ssl.client.auth needs a truststore")
        _load_truststore(ctx, trust)
        ctx.verify_mode = ssl.CERT_REQUIRED if auth == "required" else ssl.CERT_OPTIONAL
    return ctx


def build_client_ssl_context(cfg: SslConfigs) -> ssl.SSLContext:
    """The client side of this broker's connections to other brokers' SSL listeners.

    The peer is verified against ``ssl.truststore.location`` (the system CAs without
    one) and, with ``ssl.endpoint.identification.algorithm=https`` (Kafka's default),
    by host name. The keystore, when there is one, is offered as the client
    certificate, which listeners with ``ssl.client.auth=required`` demand.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_versions(ctx, cfg)
    trust = cfg["ssl.truststore.location"]
    if trust:
        _load_truststore(ctx, trust)
    else:
        ctx.load_default_certs()
    ctx.check_hostname = str(cfg["ssl.endpoint.identification.algorithm"] or "").lower() == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    if has_keystore(cfg):
        _load_keystore(ctx, cfg)
    return ctx
