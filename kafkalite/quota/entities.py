"""Quota entities (user, client-id, or both, each possibly the default) and Kafka's
eight-level precedence.

For a request from user ``U`` with client id ``C``, each quota key (producer_byte_rate,
...) is taken from the first of these that sets it (Kafka's ``DefaultQuotaCallback``):

1. ``/config/users/U/clients/C``       5. ``/config/users/<default>/clients/<default>``
2. ``/config/users/U/clients/<default>`` 6. ``/config/users/<default>``
3. ``/config/users/U``                 7. ``/config/clients/C``
4. ``/config/users/<default>/clients/C`` 8. ``/config/clients/<default>``

The level also decides who shares the quota (the sensor's metric tags): a user +
client-id level is per (U, C), a user level is shared by all of U's clients, a
client-id level by every user's connections with that client id; a default is
applied to each user or client id separately, never shared between them.

Users: a connection's principal name (SASL's user, an mTLS certificate's mapped
name, or ``ANONYMOUS`` on PLAINTEXT and SSL without client auth, as Kafka).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

#: PLAINTEXT's and unauthenticated SSL's principal name (Kafka's KafkaPrincipal.ANONYMOUS)
ANONYMOUS = "ANONYMOUS"
#: the default entity in memory (the protocol's null name, ZooKeeper's ``<default>``)
DEFAULT = "\x00<default>"
#: ZooKeeper's name of the default entity
ZK_DEFAULT = "<default>"

USER = "user"
CLIENT_ID = "client-id"
ENTITY_TYPES = (USER, CLIENT_ID)
#: KIP-612's per-address entity: only ``connection_creation_rate``, never combined
IP = "ip"
CONNECTION_CREATION_RATE = "connection_creation_rate"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
#: the quota keys a user / client-id entity takes, and whether the value must be whole
#: (Kafka's QuotaConfigs: the byte rates are LONG, the others DOUBLE)
QUOTA_KEYS: dict[str, bool] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """``user`` and/or ``client_id``: a name, :data:`DEFAULT`, or None (not part of it)."""

    user: str | None = None
    client_id: str | None = None

    def describe(self) -> list[tuple[str, str | None]]:
        """``[(entity_type, name or None for the default)]``, user first (the wire form)."""
        out: list[tuple[str, str | None]] = []
        if self.user is not None:
            out.append((USER, None if self.user == DEFAULT else self.user))
        if self.client_id is not None:
            out.append((CLIENT_ID, None if self.client_id == DEFAULT else self.client_id))
        return out


#: metric tags of a sensor: (user, client-id), "" where the quota is not per that type
Tags = tuple[str, str]


def precedence(user: str, client_id: str) -> list[tuple[QuotaEntity, Tags]]:
    """The eight levels for (user, client_id), most specific first, with their sensor tags."""
    return [
        (QuotaEntity(user, client_id), (user, client_id)),
        (QuotaEntity(user, DEFAULT), (user, client_id)),
        (QuotaEntity(user, None), (user, "")),
        (QuotaEntity(DEFAULT, client_id), (user, client_id)),
        (QuotaEntity(DEFAULT, DEFAULT), (user, client_id)),
        (QuotaEntity(DEFAULT, None), (user, "")),
        (QuotaEntity(None, client_id), ("", client_id)),
        (QuotaEntity(None, DEFAULT), ("", client_id)),
    ]


#: resolutions cached before the cache is dropped (many distinct client ids)
_CACHE_MAX = 10_000


class ClientQuotaConfigs:
    """Every user / client-id entity's quota values, as stored; resolved with precedence."""

    def __init__(self) -> None:
        self.entries: dict[QuotaEntity, dict[str, float]] = {}
        #: ``connection_creation_rate`` by IP address (or :data:`DEFAULT`), KIP-612
        self.ip_rates: dict[str, float] = {}
        self._cache: dict[tuple[str, str, str], tuple[float | None, Tags]] = {}
        #: called after every change (the managers re-read their sensors' bounds)
        self.listeners: list[Callable[[], None]] = []

    def __bool__(self) -> bool:
        return bool(self.entries)

    def keys_in_use(self) -> set[str]:
        return {k for values in self.entries.values() for k in values}

    def set(self, entity: QuotaEntity, values: Mapping[str, float]) -> None:
        """Replace ``entity``'s values (empty: it has no quota any more)."""
        if values:
            self.entries[entity] = dict(values)
        else:
            self.entries.pop(entity, None)
        self._changed()

    def replace_all(
        self,
        entries: Mapping[QuotaEntity, Mapping[str, float]],
        ip_rates: Mapping[str, float] | None = None,
    ) -> None:
        self.entries = {e: dict(v) for e, v in entries.items() if v}
        if ip_rates is not None:
            self.ip_rates = dict(ip_rates)
        self._changed()

    def set_ip_rate(self, ip: str, rate: float | None) -> None:
        if rate is None:
            self.ip_rates.pop(ip, None)
        else:
            self.ip_rates[ip] = rate

    def ip_rate(self, ip: str) -> float | None:
        """The address's ``connection_creation_rate``: its own, else the default's."""
        rates = self.ip_rates
        if not rates:
            return None
        rate = rates.get(ip)
        return rates.get(DEFAULT) if rate is None else rate

    def _changed(self) -> None:
        self._cache.clear()
        for listener in self.listeners:
            listener()

    def resolve(self, user: str, client_id: str, key: str) -> tuple[float | None, Tags]:
        """The quota ``key`` applying to (user, client_id) and the tags of the sensor it
        is measured on; (None, ("", client_id)) when no level sets it."""
        ck = (user, client_id, key)
        hit = self._cache.get(ck)
        if hit is not None:
            return hit
        result: tuple[float | None, Tags] = (None, ("", client_id))
        entries = self.entries
        if entries:
            for entity, tags in precedence(user, client_id):
                values = entries.get(entity)
                if values is not None and key in values:
                    result = (values[key], tags)
                    break
        if len(self._cache) >= _CACHE_MAX:
            self._cache.clear()
        self._cache[ck] = result
        return result
