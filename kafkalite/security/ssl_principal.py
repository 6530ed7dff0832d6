"""The principal of a TLS client certificate (Kafka's ``SslPrincipalMapper``).

On an SSL listener with ``ssl.client.auth=required`` (or ``requested`` and the
client sent one), the principal is ``User:<DN>``, the DN written as Java's
``X500Principal.getName()`` does (RFC 2253: most specific RDN first, no
spaces after commas, special characters escaped), then rewritten by
``ssl.principal.mapping.rules``: a comma- or newline-separated list of
``RULE:<regex>/<replacement>/[L|U]`` and ``DEFAULT`` (the DN unchanged). The
first rule whose regex matches the whole DN wins; ``$1``... are its groups;
``L``/``U`` lower/upper-case the result. No rule matching fails the
authentication (the connection is closed), as in Kafka.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kafkalite.common.principal import ANONYMOUS_PRINCIPAL, USER_TYPE, KafkaPrincipal

__all__ = ["NoMatchingRule", "SslPrincipalMapper", "distinguished_name", "principal_of"]

# Kafka's rule grammar: RULE:<pattern>/<replacement>/<flags>, "/" escaped as "\/"
_RULE = re.compile(
    r"\s*(DEFAULT|RULE:((?:\\.|[^\\/])+)/((?:\\.|[^\\/])*)/([LU]?)[^,\n]*?|(.*?))\s*(?:[,\n]\s*|$)"
)

#: the attribute names Java's RFC 2253 output uses (others: dotted OIDs)
_SHORT = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_OIDS = {
    "emailAddress": ("1.2.840.113549.1.9.1", 0x16),  # IA5String
    "serialNumber": ("2.5.4.5", 0x13),  # PrintableString
    "title": ("2.5.4.12", 0x0C),
    "surname": ("2.5.4.4", 0x0C),
    "givenName": ("2.5.4.42", 0x0C),
}


class NoMatchingRule(ValueError):
    pass


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _der_hex(tag: int, value: str) -> str:
    raw = value.encode()
    n = len(raw)
    length = (
        bytes([n]) if n < 128 else bytes([0x81, n]) if n < 256 else bytes([0x82, n >> 8, n & 255])
    )
    return "#" + (bytes([tag]) + length + raw).hex()


def distinguished_name(subject: Any) -> str:
    """RFC 2253 text of the ``subject`` of ``SSLSocket.getpeercert()``."""
    rdns = []
    for rdn in reversed(subject):
        parts = []
        for attr, value in rdn:
            if attr in _SHORT:
                parts.append(f"{_SHORT[attr]}={_escape(value)}")
            elif attr in _OIDS:
                oid, tag = _OIDS[attr]
                parts.append(f"{oid}={_der_hex(tag, value)}")
            else:
                parts.append(f"{attr}={_escape(value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        m = self.pattern.fullmatch(dn)
        if m is None:
            return None
        out = m.expand(self.replacement)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


def _java_replacement(text: str) -> str:
    """``$1`` -> a Python group reference; ``\\x`` -> ``x`` (Java's replacement syntax)."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append("\\\\" if nxt == "\\" else nxt)
            i += 2
        elif ch == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            out.append(f"\\g<{text[i + 1 : j]}>")
            i = j
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class SslPrincipalMapper:
    def __init__(self, rules: list[_Rule]) -> None:
        self.rules = rules

    @classmethod
    def from_rules(cls, text: str) -> SslPrincipalMapper:
        """Parse ``ssl.principal.mapping.rules``; ValueError names a bad rule."""
        rules: list[_Rule] = []
        pos = 0
        text = text.strip() or "DEFAULT"
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ValueError(f"Invalid rule: {text[pos:]}")
            pos = m.end()
            if m.group(5) is not None and m.group(1) == m.group(5):
                if m.group(5):
                    raise ValueError(f"Invalid rule: {m.group(5)}")
                continue
            if m.group(1) == "DEFAULT":
                rules.append(_Rule(None))
                continue
            regex = m.group(2).replace("\\/", "/")
            try:
                compiled = re.compile(regex)
            except re.error as e:
                raise ValueError(f"Invalid rule: {m.group(1)}: {e}") from None
            rules.append(_Rule(compiled, _java_replacement(m.group(3)), m.group(4)))
        return cls(rules)

    def name(self, dn: str) -> str:
        for r in self.rules:
            out = r.apply(dn)
            if out is not None:
                return out
        raise NoMatchingRule(f"No rules apply to {dn}, rules {self.rules}")


def principal_of(peercert: Any, mapper: SslPrincipalMapper) -> KafkaPrincipal:
    """The principal of a TLS connection: ANONYMOUS without a verified client certificate."""
    if not peercert:
        return ANONYMOUS_PRINCIPAL
    subject = peercert.get("subject") if isinstance(peercert, dict) else None
    if not subject:
        return ANONYMOUS_PRINCIPAL
    return KafkaPrincipal(USER_TYPE, mapper.name(distinguished_name(subject)))
