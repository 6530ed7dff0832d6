"""Errors that more than one layer raises."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A configuration problem, always naming the offending key.

    Raised by the broker's config (``kafkalite.server.config``, which exports it)
    and by the network layer's TLS contexts, which read ``ssl.*`` properties but
    may not import the server.
    """

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"invalid config {key!r}: {message}")
