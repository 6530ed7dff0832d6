"""Checks a broker makes before it writes anything to disk.

A port that another process holds is the commonest start-up failure; found only
when the listeners bind (after the log dirs, meta.properties and the metadata
store were written) it leaves a half-initialised data dir behind. Each failure
is a :class:`StartupError`: one line naming the config key and the cause.
"""

from __future__ import annotations

import errno
import socket

from kafkalite.server.config import BrokerConfig

__all__ = ["StartupError", "check_ports_free"]


class StartupError(Exception):
    """The broker cannot start; the message names the key and the cause."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


def check_ports_free(config: BrokerConfig) -> None:
    """Bind (and release at once) every configured listener port and the metrics port;
    port 0 (any free port) is not checked."""
    for ep in config.listeners:
        if ep.port:
            _check("listeners", f"{ep.listener}://{ep.host}:{ep.port}", ep.host, ep.port)
    port = config["kafkalite.metrics.port"]
    if port:
        host = str(config["kafkalite.metrics.host"])
        _check("kafkalite.metrics.port", f"http://{host}:{port}", host, int(port))


def _check(key: str, what: str, host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        # as the listeners bind: a port in TIME_WAIT is free, one being listened on is not
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host or "0.0.0.0", port))
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise StartupError(
                key, f"{what}: port {port} is already in use (is another broker running?)"
            ) from None
        if e.errno == errno.EADDRNOTAVAIL:
            raise StartupError(key, f"{what}: {host} is not an address of this machine") from None
        if e.errno == errno.EACCES:
            raise StartupError(key, f"{what}: permission denied (ports below 1024)") from None
        raise StartupError(key, f"{what}: {e.strerror or e}") from None
    except (socket.gaierror, UnicodeError) as e:
        raise StartupError(key, f"{what}: cannot resolve {host!r}: {e}") from None
    finally:
        s.close()
