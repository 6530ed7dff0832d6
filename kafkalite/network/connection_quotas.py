"""Kafka's connection limits: ``max.connections`` (broker-wide and per listener),
``max.connections.per.ip`` and ``max.connection.creation.rate`` (KIP-612).

As in Kafka's ``ConnectionQuotas``:

- a new connection from an address that already has its maximum
  (``max.connections.per.ip``, or its entry in ``max.connections.per.ip.overrides``)
  is accepted and closed at once;
- when the broker holds ``max.connections``, listeners stop accepting until a
  connection closes (clients wait in the kernel's backlog); the inter-broker
  listener, when there are several listeners, is exempt, and a connection it
  accepts over the limit makes the least recently active connection of another
  listener close;
- a listener at its own ``listener.name.<name>.max.connections`` stops accepting
  the same way (its clients wait in the backlog);
- over ``max.connection.creation.rate`` (broker-wide, the inter-broker listener
  exempt) or a listener's ``listener.name.<name>.max.connection.creation.rate``,
  accepting pauses for the throttle time of the windowed rate (KIP-612: new
  connections are delayed, never refused);
- over its address's ``connection_creation_rate`` quota (the ``ip`` entity of
  AlterClientQuotas), a new connection is held unread for the throttle time and
  then closed, as Kafka's acceptor does with a ``ConnectionThrottledException``.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kafkalite.quota.rate import WindowedRate

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
    #: ``listener.name.<name>.max.connections``, by listener name
    listener_max: dict[str, int] = field(default_factory=dict)
    #: ``max.connection.creation.rate`` and its per-listener overrides (per second)
    max_creation_rate: int = INT_MAX
    listener_creation_rate: dict[str, int] = field(default_factory=dict)
    #: ``quota.window.num`` / ``quota.window.size.seconds``: the creation rate's window
    window_num: int = 11
    window_size_s: int = 1
    total: int = 0
    per_ip: dict[str, int] = field(default_factory=dict)
    per_listener: dict[str, int] = field(default_factory=dict)
    #: an address's ``connection_creation_rate`` quota (KIP-612's ip entity, set with
    #: AlterClientQuotas), None: no quota
    ip_rate: Callable[[str], float | None] = lambda _ip: None
    _broker_rate: WindowedRate | None = None
    _listener_rates: dict[str, WindowedRate] = field(default_factory=dict)
    _ip_rates: dict[str, WindowedRate] = field(default_factory=dict)

    def limit_for(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_per_ip)

    def full(self, listener: str) -> bool:
        """Whether ``listener`` must stop accepting (the broker-wide or its own limit)."""
        if self.per_listener.get(listener, 0) >= self.listener_max.get(listener, INT_MAX):
            return True
        return self.total >= self.max_connections and listener != self.protected_listener

    def _rate(self, listener: str | None, now_ms: int) -> WindowedRate:
        if listener is None:
            if self._broker_rate is None:
                self._broker_rate = WindowedRate(self.window_num, self.window_size_s * 1000, now_ms)
            return self._broker_rate
        r = self._listener_rates.get(listener)
        if r is None:
            r = self._listener_rates[listener] = WindowedRate(
                self.window_num, self.window_size_s * 1000, now_ms
            )
        return r

    def _limits(self, listener: str) -> list[tuple[str | None, int]]:
        out: list[tuple[str | None, int]] = []
        if self.max_creation_rate < INT_MAX and listener != self.protected_listener:
            out.append((None, self.max_creation_rate))
        rate = self.listener_creation_rate.get(listener, INT_MAX)
        if rate < INT_MAX:
            out.append((listener, rate))
        return out

    def creation_delay_ms(self, listener: str, now_ms: int) -> int:
        """How long ``listener`` must wait before accepting (0: accept now)."""
        delay = 0
        for key, bound in self._limits(listener):
            if bound <= 0:
                return self.window_num * self.window_size_s * 1000
            delay = max(delay, self._rate(key, now_ms).throttle_ms(bound, now_ms))
        return delay

    def record_creation(self, listener: str, now_ms: int) -> None:
        """A connection was accepted on ``listener`` (counted in the creation rates)."""
        for key, _bound in self._limits(listener):
            self._rate(key, now_ms).record(1, now_ms)

    def over_limit(self) -> bool:
        """More connections than ``max_connections`` (the protected listener went over)."""
        return self.total > self.max_connections

    def ip_throttle_ms(self, ip: str, now_ms: int) -> int:
        """KIP-612's per-address rate: 0 (counted), or how long to hold the new connection
        before closing it (not counted, as Kafka unrecords a throttled connection)."""
        bound = self.ip_rate(ip)
        if bound is None:
            if self._ip_rates:
                self._ip_rates.pop(ip, None)
            return 0
        r = self._ip_rates.get(ip)
        if r is None:
            r = self._ip_rates[ip] = WindowedRate(
                self.window_num, self.window_size_s * 1000, now_ms
            )
        r.record(1, now_ms)
        if bound <= 0:
            r.record(-1, now_ms)
            return self.window_num * self.window_size_s * 1000
        ms = r.throttle_ms(bound, now_ms)
        if ms > 0:
            r.record(-1, now_ms)
        return ms

    def admit(self, ip: str, listener: str = "") -> bool:
        """Count a new connection from ``ip``; False: it is over the per-IP limit (close it)."""
        n = self.per_ip.get(ip, 0)
        if n >= self.limit_for(ip):
            return False
        self.per_ip[ip] = n + 1
        self.per_listener[listener] = self.per_listener.get(listener, 0) + 1
        self.total += 1
        return True

    def release(self, ip: str, listener: str = "") -> None:
        n = self.per_ip.get(ip, 0) - 1
        if n > 0:
            self.per_ip[ip] = n
        else:
            self.per_ip.pop(ip, None)
        m = self.per_listener.get(listener, 0) - 1
        if m > 0:
            self.per_listener[listener] = m
        else:
            self.per_listener.pop(listener, None)
        self.total -= 1
