"""Client quota configs in the metadata store, as Kafka's ZooKeeper mode keeps them.

- ``/config/users/<user>``, ``/config/users/<user>/clients/<client-id>`` and
  ``/config/clients/<client-id>``, ``<default>`` for a default entity, names
  sanitized as Kafka's ``Sanitizer`` (URL-encoded), each znode an
  ``{"version":1,"config":{...}}`` of strings;
- every change also writes ``/config/changes/config_change_<seq>`` with
  ``{"version":2,"entity_path":"clients/x"}``; each broker watches that znode's
  children and reloads the quota tree when one appears, so AlterClientQuotas on
  any broker applies on every broker within the store's notification latency
  (well under a second). Notifications older than 15 minutes are purged, as
  Kafka's ``ZkNodeChangeNotificationListener`` does.
"""

from __future__ import annotations

import ipaddress
import logging
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kafkalite.metadata import zk_data, zk_paths
from kafkalite.metadata.change_watcher import ChangeWatcher
from kafkalite.metadata.entity_config import update_entity_config
from kafkalite.metadata.store import MetadataStore, MetadataStoreError, NoNodeError
from kafkalite.protocol.errors import ErrorCode
from kafkalite.quota.entities import (
    CLIENT_ID,
    CONNECTION_CREATION_RATE,
    DEFAULT,
    ENTITY_TYPES,
    IP,
    QUOTA_KEYS,
    USER,
    ZK_DEFAULT,
    ClientQuotaConfigs,
    QuotaEntity,
)

log = logging.getLogger(__name__)

#: Kafka's ``changeExpirationMs`` for config change notifications
CHANGE_EXPIRATION_MS = 15 * 60 * 1000

INVALID_REQUEST = int(ErrorCode.invalid_request)


class QuotaRequestError(Exception):
    """A quota entity or operation Kafka refuses (INVALID_REQUEST, with its message)."""

    def __init__(self, message: str, code: int = INVALID_REQUEST) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: URL-encoding, spaces as %20, ``*`` encoded."""
    return urllib.parse.quote(name, safe="")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


def _zk_name(name: str) -> str:
    return ZK_DEFAULT if name == DEFAULT else sanitize(name)


def _mem_name(zk_name: str) -> str:
    return DEFAULT if zk_name == ZK_DEFAULT else desanitize(zk_name)


def entity_path(entity: QuotaEntity) -> str:
    """``users/<u>``, ``clients/<c>`` or ``users/<u>/clients/<c>`` (under ``/config``)."""
    if entity.user is not None and entity.client_id is not None:
        return f"users/{_zk_name(entity.user)}/clients/{_zk_name(entity.client_id)}"
    if entity.user is not None:
        return f"users/{_zk_name(entity.user)}"
    assert entity.client_id is not None
    return f"clients/{_zk_name(entity.client_id)}"


def parse_ip_entity(components: Sequence[tuple[str, str | None]]) -> str | None:
    """The address of an ``ip`` entity (:data:`DEFAULT` for the default), None when the
    entity has no ip component; an ip combined with another type is refused, as Kafka."""
    ips = [name for etype, name in components if etype == IP]
    if not ips:
        return None
    if len(components) > 1:
        raise QuotaRequestError(
            "Invalid quota entity combination, IP entity should not be combined with User or ClientId entities"
        )
    name = ips[0]
    if name is None:
        return DEFAULT
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        raise QuotaRequestError(f"{name} is not a valid IP") from None


def validate_ip_value(key: str, value: float) -> float:
    if key != CONNECTION_CREATION_RATE:
        raise QuotaRequestError(f"Invalid configuration key {key}")
    if value != int(value):
        raise QuotaRequestError(f"Configuration {key} must be an Integer value")
    if value < 0:
        raise QuotaRequestError(f"Configuration {key} must be >= 0")
    return float(value)


def parse_entity(components: Sequence[tuple[str, str | None]]) -> QuotaEntity:
    """The entity of AlterClientQuotas' ``entity`` list (None name: the default)."""
    user: str | None = None
    client: str | None = None
    seen: set[str] = set()
    for etype, name in components:
        if etype in seen:
            raise QuotaRequestError(f"Duplicate {etype} entity type")
        seen.add(etype)
        if etype not in ENTITY_TYPES:
            raise QuotaRequestError(f"Unsupported quota entity type {etype!r}")
        value = DEFAULT if name is None else name
        if etype == USER:
            user = value
        else:
            client = value
    if user is None and client is None:
        raise QuotaRequestError("Invalid empty client quota entity")
    return QuotaEntity(user, client)


def validate_value(key: str, value: float) -> float:
    whole = QUOTA_KEYS.get(key)
    if whole is None:
        raise QuotaRequestError(f"Invalid configuration key {key}")
    if whole and value != int(value):
        raise QuotaRequestError(f"Configuration {key} must be a Long value")
    if value <= 0:
        raise QuotaRequestError(f"Configuration {key} must be greater than 0")
    return float(value)


def _values(raw: Mapping[str, str], kind: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    keys = (CONNECTION_CREATION_RATE,) if kind == IP else QUOTA_KEYS
    for k, v in raw.items():
        if k in keys:
            try:
                out[k] = float(v)
            except ValueError:
                log.warning("ignoring stored quota %s=%r", k, v)
    return out


@dataclass(frozen=True, slots=True)
class FilterComponent:
    """DescribeClientQuotas' component: match_type 0 exact name, 1 default, 2 any."""

    entity_type: str
    match_type: int
    match: str | None = None


MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def describe(
    configs: ClientQuotaConfigs, components: Sequence[FilterComponent], strict: bool
) -> list[tuple[QuotaEntity | str, dict[str, float]]]:
    """The entities matching the filter (Kafka's ``ZkAdminManager.describeClientQuotas``):
    a user / client-id :class:`QuotaEntity`, or an IP address (a ``str``, :data:`DEFAULT`
    for the default ip entity)."""
    seen: set[str] = set()
    for c in components:
        if c.entity_type not in (*ENTITY_TYPES, IP):
            raise QuotaRequestError(f"Custom entity type {c.entity_type!r} not supported")
        if c.entity_type in seen:
            raise QuotaRequestError(f"Duplicate {c.entity_type} filter component entity type")
        seen.add(c.entity_type)
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            raise QuotaRequestError(f"Unknown match type {c.match_type}")
        if c.match_type == MATCH_EXACT and c.match is None:
            raise QuotaRequestError("Exact match requires a name")
    if IP in seen and len(seen) > 1:
        raise QuotaRequestError(
            "Invalid entity filter component combination, IP filter component should not"
            " be used with User or ClientId filter component."
        )
    out: list[tuple[QuotaEntity | str, dict[str, float]]] = []
    if IP in seen or (not seen and not strict):
        ipc = next((c for c in components if c.entity_type == IP), None)
        for ip, rate in configs.ip_rates.items():
            if ipc is None or ipc.match_type == MATCH_ANY:
                ok = True
            elif ipc.match_type == MATCH_DEFAULT:
                ok = ip == DEFAULT
            else:
                ok = ip == ipc.match
            if ok:
                out.append((ip, {CONNECTION_CREATION_RATE: rate}))
        if IP in seen:
            out.sort(key=lambda ev: str(ev[0]))
            return out
    for entity, values in configs.entries.items():
        names = {USER: entity.user, CLIENT_ID: entity.client_id}
        present = {t for t, n in names.items() if n is not None}
        if strict and present != seen:
            continue
        ok = True
        for c in components:
            name = names[c.entity_type]
            if name is None:
                ok = False
            elif c.match_type == MATCH_EXACT:
                ok = name == c.match
            elif c.match_type == MATCH_DEFAULT:
                ok = name == DEFAULT
            if not ok:
                break
        if ok:
            out.append((entity, dict(values)))
    out.sort(key=lambda ev: ev[0] if isinstance(ev[0], str) else entity_path(ev[0]))
    return out


class ClientQuotaStore:
    """Loads, watches and writes the quota znodes; keeps :class:`ClientQuotaConfigs` current."""

    def __init__(self, configs: ClientQuotaConfigs) -> None:
        self.configs = configs
        self._store: MetadataStore | None = None
        self._watcher = ChangeWatcher(self._load_and_watch, "client quotas", 1.0)

    async def start(self, store: MetadataStore) -> None:
        self._store = store
        await store.ensure_path(zk_paths.CONFIG_CHANGES)
        await self._load_and_watch()

    async def stop(self) -> None:
        await self._watcher.stop()

    # ---- reading ---------------------------------------------------------------
    async def _children(self, path: str) -> list[str]:
        assert self._store is not None
        try:
            return sorted(await self._store.get_children(path))
        except NoNodeError:
            return []

    async def _config(self, path: str, kind: str = "") -> dict[str, float]:
        assert self._store is not None
        try:
            raw, _ = await self._store.get(path)
            return _values(zk_data.EntityConfig.decode(raw).config, kind)
        except (NoNodeError, zk_data.MetadataFormatError):
            return {}

    async def load(self) -> dict[QuotaEntity, dict[str, float]]:
        entries: dict[QuotaEntity, dict[str, float]] = {}
        for u in await self._children(zk_paths.CONFIG_USERS):
            upath = f"{zk_paths.CONFIG_USERS}/{u}"
            entries[QuotaEntity(_mem_name(u), None)] = await self._config(upath)
            for c in await self._children(f"{upath}/clients"):
                entries[QuotaEntity(_mem_name(u), _mem_name(c))] = await self._config(
                    f"{upath}/clients/{c}"
                )
        for c in await self._children(zk_paths.CONFIG_CLIENTS):
            entries[QuotaEntity(None, _mem_name(c))] = await self._config(
                f"{zk_paths.CONFIG_CLIENTS}/{c}"
            )
        return {e: v for e, v in entries.items() if v}

    async def load_ips(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for ip in await self._children(zk_paths.CONFIG_IPS):
            values = await self._config(f"{zk_paths.CONFIG_IPS}/{ip}", IP)
            if CONNECTION_CREATION_RATE in values:
                out[DEFAULT if ip == ZK_DEFAULT else ip] = values[CONNECTION_CREATION_RATE]
        return out

    async def _load_and_watch(self) -> None:
        assert self._store is not None
        names = await self._store.get_children(
            zk_paths.CONFIG_CHANGES, watch=self._watcher.on_change
        )
        entries = await self.load()
        ips = await self.load_ips()
        if entries != self.configs.entries or ips != self.configs.ip_rates:
            self.configs.replace_all(entries, ips)
        await self._purge(names)

    async def _purge(self, names: list[str]) -> None:
        assert self._store is not None
        now = int(time.time() * 1000)
        for n in sorted(names)[:-1]:  # keep the newest one
            path = f"{zk_paths.CONFIG_CHANGES}/{n}"
            try:
                stat = await self._store.exists(path)
                if stat is not None and now - stat.ctime > CHANGE_EXPIRATION_MS:
                    await self._store.delete(path)
            except MetadataStoreError:
                pass

    # ---- writing ---------------------------------------------------------------
    async def alter_ip(
        self, ip: str, ops: Sequence[tuple[str, float | None]], validate_only: bool
    ) -> None:
        """``connection_creation_rate`` of an address (or the default): set or removed."""
        rate = self.configs.ip_rates.get(ip)
        seen: set[str] = set()
        for key, value in ops:
            if key in seen:
                raise QuotaRequestError(f"Duplicate quota key {key}")
            seen.add(key)
            if value is None:
                if key != CONNECTION_CREATION_RATE:
                    raise QuotaRequestError(f"Invalid configuration key {key}")
                rate = None
            else:
                rate = validate_ip_value(key, value)
        if validate_only:
            return
        assert self._store is not None, "start() first"
        name = ZK_DEFAULT if ip == DEFAULT else ip
        stored = {} if rate is None else {CONNECTION_CREATION_RATE: str(int(rate))}
        await self._write(f"{zk_paths.CONFIG_IPS}/{name}", stored, f"ips/{name}")
        self.configs.set_ip_rate(ip, rate)

    async def _write(self, path: str, stored: dict[str, str], change_path: str) -> None:
        """Replace the quota keys of ``path`` with ``stored``; other keys (a user's SCRAM
        credentials share ``/config/users/<user>``) are kept."""
        assert self._store is not None
        keys = (CONNECTION_CREATION_RATE,) if path.startswith(zk_paths.CONFIG_IPS) else QUOTA_KEYS

        def update(current: dict[str, str]) -> dict[str, str]:
            kept = {k: v for k, v in current.items() if k not in keys}
            return {**kept, **stored}

        await update_entity_config(self._store, path, change_path, update)

    async def alter(
        self, entity: QuotaEntity, ops: Sequence[tuple[str, float | None]], validate_only: bool
    ) -> None:
        """Apply ``(key, value)`` (None: remove) to ``entity``; raises QuotaRequestError."""
        new = dict(self.configs.entries.get(entity, {}))
        seen: set[str] = set()
        for key, value in ops:
            if key in seen:
                raise QuotaRequestError(f"Duplicate quota key {key}")
            seen.add(key)
            if key not in QUOTA_KEYS:
                raise QuotaRequestError(f"Invalid configuration key {key}")
            if value is None:
                new.pop(key, None)
            else:
                new[key] = validate_value(key, value)
        if validate_only:
            return
        assert self._store is not None, "start() first"
        stored = {k: _fmt(k, v) for k, v in sorted(new.items())}
        await self._write(f"{zk_paths.CONFIG}/{entity_path(entity)}", stored, entity_path(entity))
        self.configs.set(entity, new)


def _fmt(key: str, value: float) -> str:
    """As Kafka stores them: byte rates as longs, the others as doubles."""
    return str(int(value)) if QUOTA_KEYS[key] else repr(float(value))
