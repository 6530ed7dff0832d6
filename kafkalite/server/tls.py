"""Server-side TLS context from Kafka's ``ssl.*`` properties (PEM keystores)."""

from __future__ import annotations

import os
import ssl
import tempfile

from kafkalite.server.config import BrokerConfig, ConfigError

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def build_ssl_context(cfg: BrokerConfig) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = [_VERSIONS[p] for p in cfg["ssl.enabled.protocols"]]
    ctx.minimum_version = min(versions)
    ctx.maximum_version = max(versions)
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
    auth = cfg["ssl.client.auth"]
    if auth != "none":
        trust = cfg["ssl.truststore.location"]
        if not trust:
            raise ConfigError("ssl.truststore.location", "ssl.client.auth needs a truststore")
        try:
            ctx.load_verify_locations(trust)
        except (FileNotFoundError, ssl.SSLError) as e:
            raise ConfigError("ssl.truststore.location", f"cannot load: {e}") from None
        ctx.verify_mode = ssl.CERT_REQUIRED if auth == "required" else ssl.CERT_OPTIONAL
    return ctx
