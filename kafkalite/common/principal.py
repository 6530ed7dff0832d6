"""Who sent a request (Kafka's ``KafkaPrincipal``).

It lives in ``common`` because the transport sets it (SASL, the TLS client
certificate), the quotas key on its name and the authorizer matches ACLs
against it: three layers name the same value.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ANONYMOUS_PRINCIPAL", "USER_TYPE", "KafkaPrincipal"]

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """``<type>:<name>``; Kafka compares principals by both fields."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` -> KafkaPrincipal("User", "alice"); ValueError without a type."""
        kind, sep, name = text.partition(":")
        if not sep or not kind:
            raise ValueError(f"expected <type>:<name>, got {text!r}")
        return cls(kind, name)


#: PLAINTEXT, and SSL without client authentication (Kafka's KafkaPrincipal.ANONYMOUS)
ANONYMOUS_PRINCIPAL = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
