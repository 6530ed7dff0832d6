"""Kafka's connection count limits: ``max.connections`` and ``max.connections.per.ip``.

As in Kafka's ``ConnectionQuotas``:

- a new connection from an address that already has its maximum
  (``max.connections.per.ip``, or its entry in ``max.connections.per.ip.overrides``)
  is accepted and closed at once;
- when the broker holds ``max.connections``, listeners stop accepting until a
  connection closes (clients wait in the kernel's backlog); the inter-broker
  listener, when there are several listeners, is exempt, and a connection it
  accepts over the limit makes the least recently active connection of another
  listener close.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

INT_MAX = 2**31 - 1


def parse_overrides(text: str) -> dict[str, int]:
    """``host:count,host:count`` (Kafka's ``max.connections.per.ip.overrides``); ValueError if bad."""
    out: dict[str, int] = {}
    for entry in text.split(","):
        entry = entry.strip()
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        if not sep or not host.strip() or not count.strip().isdigit():
            raise ValueError(f"{entry!r} is not of the form host:count")
        out[host.strip().strip("[]")] = int(count)
    return out


def resolve_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """Key the overrides by IP address (Kafka resolves host names once, at start-up)."""
    out: dict[str, int] = {}
    for host, count in overrides.items():
        for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM):
            out[str(info[4][0])] = count
    return out


@dataclass(slots=True)
class ConnectionQuotas:
    max_connections: int = INT_MAX
    max_per_ip: int = INT_MAX
    #: per-IP maximums that replace ``max_per_ip``, keyed by IP address
    per_ip_overrides: dict[str, int] = field(default_factory=dict)
    #: the inter-broker listener when there are several (exempt from ``max_connections``)
    protected_listener: str | None = None
    total: int = 0
    per_ip: dict[str, int] = field(default_factory=dict)

    def limit_for(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_per_ip)

    def full(self, listener: str) -> bool:
        """Whether ``listener`` must stop accepting (the broker-wide limit is reached)."""
        return self.total >= self.max_connections and listener != self.protected_listener

    def over_limit(self) -> bool:
        """More connections than ``max_connections`` (the protected listener went over)."""
        return self.total > self.max_connections

    def admit(self, ip: str) -> bool:
        """Count a new connection from ``ip``; False: it is over the per-IP limit (close it)."""
        n = self.per_ip.get(ip, 0)
        if n >= self.limit_for(ip):
            return False
        self.per_ip[ip] = n + 1
        self.total += 1
        return True

    def release(self, ip: str) -> None:
        n = self.per_ip.get(ip, 0) - 1
        if n > 0:
            self.per_ip[ip] = n
        else:
            self.per_ip.pop(ip, None)
        self.total -= 1
