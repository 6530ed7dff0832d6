"""Kafka's ``AclAuthorizer``: ACLs from the metadata store, decisions cached.

Rules (Kafka's): a super user may do everything; a resource matched by no ACL
at all is allowed only with ``allow.everyone.if.no.acl.found``; otherwise a
DENY (of the operation or ALL, for the principal or ``User:*``, from the
client's host or ``*``) wins over any ALLOW, and an ALLOW of the operation, of
ALL, or of one implying it (Describe by Read/Write/Delete/Alter, DescribeConfigs
by AlterConfigs) grants it. The ACLs of a resource are those of its LITERAL
name, of the LITERAL ``*`` and of every PREFIXED pattern its name starts with.

Decisions are cached per (principal, host, operation, resource) and the cache is
dropped on every ACL change, so the Produce/Fetch path costs one dict lookup.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kafkalite.common.principal import KafkaPrincipal
from kafkalite.metadata.change_watcher import ChangeWatcher
from kafkalite.metadata.store import MetadataStore, MetadataStoreError
from kafkalite.security.authorizer.acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    implied_allow,
    supported_operations,
)
from kafkalite.security.authorizer.acl_store import (
    ACL_CHANGES,
    ACL_EXTENDED_CHANGES,
    AclZkStore,
    decode_change,
)

log = logging.getLogger(__name__)

__all__ = ["AUTHORIZER_CLASS_NAMES", "AclAuthorizer", "parse_super_users"]

#: ``authorizer.class.name`` values that mean this authorizer (Kafka's and ours)
AUTHORIZER_CLASS_NAMES = frozenset(
    {
        "kafka.security.authorizer.AclAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "kafkalite.security.authorizer.AclAuthorizer",
    }
)
#: Kafka's ``ZkNodeChangeNotificationListener`` expiry of processed notifications
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
_CACHE_MAX = 100_000

_ALLOW = PermissionType.ALLOW
_DENY = PermissionType.DENY


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (Kafka's syntax)."""
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())


@dataclass(frozen=True, slots=True)
class _Indexed:
    """The ACLs of one resource type: literal by name, prefixed by prefix."""

    literal: dict[str, frozenset[AccessControlEntry]]
    prefixed: dict[str, frozenset[AccessControlEntry]]


class AclAuthorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl: bool = False):
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl = allow_everyone_if_no_acl
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._index: dict[ResourceType, _Indexed] = {}
        self._decisions: dict[tuple[str, str, str, AclOperation, ResourceType, str], bool] = {}
        self._zk: AclZkStore | None = None
        self._seen: dict[str, str] = {}
        self._watcher = ChangeWatcher(self._process_changes, "ACL changes", 0.5)
        #: a store read and the cache update it leads to are one step: a reload that
        #: read a znode before a local write must not apply it after that write
        self._lock = asyncio.Lock()
        #: bumped on every change of the cache (tests and metrics read it)
        self.version = 0

    # ---- deciding --------------------------------------------------------------
    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        op: AclOperation,
        rtype: ResourceType,
        name: str,
    ) -> bool:
        # the principal's strings, not the dataclass: their hashes are cached in the str
        key = (principal.name, principal.principal_type, host, op, rtype, name)
        try:
            return self._decisions[key]
        except KeyError:
            pass
        hit = self._decide(principal, host, op, rtype, name)
        if len(self._decisions) >= _CACHE_MAX:
            self._decisions.clear()
        self._decisions[key] = hit
        return hit

    def _matching(self, rtype: ResourceType, name: str) -> list[frozenset[AccessControlEntry]]:
        idx = self._index.get(rtype)
        if idx is None:
            return []
        out = []
        lit = idx.literal.get(name)
        if lit:
            out.append(lit)
        if name != WILDCARD:
            wild = idx.literal.get(WILDCARD)
            if wild:
                out.append(wild)
        for prefix, entries in idx.prefixed.items():
            if name.startswith(prefix):
                out.append(entries)
        return out

    def _decide(
        self, principal: KafkaPrincipal, host: str, op: AclOperation, rtype: ResourceType, name: str
    ) -> bool:
        who = str(principal)
        if who in self.super_users:
            return True
        matching = self._matching(rtype, name)
        if not matching:
            return self.allow_everyone_if_no_acl
        principals = (who, WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD)
        allows = implied_allow(op)
        allowed = False
        for entries in matching:
            for e in entries:
                if e.principal not in principals or e.host not in hosts:
                    continue
                if e.permission == _DENY:
                    if e.operation == op or e.operation == AclOperation.ALL:
                        return False
                elif e.operation in allows:
                    allowed = True
        return allowed

    def authorize_any(
        self, principal: KafkaPrincipal, host: str, op: AclOperation, rtype: ResourceType
    ) -> bool:
        """Kafka's ``authorizeByResourceType``: may the principal ``op`` some resource of
        the type (an ALLOW on a pattern that no DENY of the principal covers)?"""
        who = str(principal)
        if who in self.super_users:
            return True
        idx = self._index.get(rtype)
        if idx is None or not (idx.literal or idx.prefixed):
            return self.allow_everyone_if_no_acl
        principals = (who, WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD)

        def denied(entries: frozenset[AccessControlEntry]) -> bool:
            return any(
                e.permission == _DENY
                and e.principal in principals
                and e.host in hosts
                and e.operation in (op, AclOperation.ALL)
                for e in entries
            )

        if denied(idx.literal.get(WILDCARD, frozenset())):
            return False
        deny_prefixes = [p for p, es in idx.prefixed.items() if denied(es)]
        allows = implied_allow(op)
        for table, prefixed in ((idx.literal, False), (idx.prefixed, True)):
            for name, entries in table.items():
                if any(name.startswith(d) for d in deny_prefixes):
                    continue
                if not prefixed and denied(entries):
                    continue
                if any(
                    e.permission == _ALLOW
                    and e.principal in principals
                    and e.host in hosts
                    and e.operation in allows
                    for e in entries
                ):
                    return True
        return False

    def authorized_operations(
        self, principal: KafkaPrincipal, host: str, rtype: ResourceType, name: str
    ) -> set[AclOperation]:
        return {
            op
            for op in supported_operations(rtype)
            if self.authorize(principal, host, op, rtype, name)
        }

    # ---- the cache -------------------------------------------------------------
    def _set(self, p: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        frozen = frozenset(entries)
        if frozen:
            self._acls[p] = frozen
        else:
            self._acls.pop(p, None)
        self._rebuild_index()

    def _rebuild_index(self) -> None:
        index: dict[ResourceType, _Indexed] = {}
        for p, entries in self._acls.items():
            idx = index.setdefault(p.resource_type, _Indexed({}, {}))
            table = idx.literal if p.pattern_type == PatternType.LITERAL else idx.prefixed
            table[p.name] = entries
        self._index = index
        self._decisions = {}
        self.version += 1

    def bindings(self) -> list[AclBinding]:
        return [AclBinding(p, e) for p, es in self._acls.items() for e in es]

    def acl_count(self) -> int:
        return sum(len(es) for es in self._acls.values())

    # ---- the store ---------------------------------------------------------------
    async def start(self, store: MetadataStore) -> None:
        zk = self._zk = AclZkStore(store)
        await zk.ensure_paths()
        for changes in (ACL_CHANGES, ACL_EXTENDED_CHANGES):
            names = await store.get_children(changes, watch=self._watcher.on_change)
            self._seen[changes] = max(names, default="")
        self._acls = {p: frozenset(es) for p, es in (await zk.load_all()).items()}
        self._rebuild_index()
        log.info("authorizer loaded %d ACLs", self.acl_count())

    async def stop(self) -> None:
        await self._watcher.stop()

    async def _process_changes(self) -> None:
        zk = self._zk
        assert zk is not None
        store = zk.store
        for changes in (ACL_CHANGES, ACL_EXTENDED_CHANGES):
            names = await store.get_children(changes, watch=self._watcher.on_change)
            seen = self._seen.get(changes, "")
            now = int(time.time() * 1000)
            for n in sorted(names):
                path = f"{changes}/{n}"
                if n > seen:
                    got = await store.get_or_none(path)
                    if got is not None:
                        p = decode_change(changes, got[0])
                        if p is not None:
                            async with self._lock:
                                entries, _ = await zk.read(p)
                                self._set(p, entries)
                    seen = n
                elif n != seen:
                    stat = await store.exists(path)
                    if stat is not None and now - stat.ctime > CHANGE_EXPIRATION_MS:
                        try:
                            await store.delete(path)
                        except MetadataStoreError:
                            pass
            self._seen[changes] = seen

    # ---- CreateAcls / DeleteAcls / DescribeAcls ------------------------------------
    async def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Store the (validated) bindings, one znode update per pattern."""
        zk = self._zk
        assert zk is not None, "start() first"
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
        async with self._lock:
            for p, add in by_pattern.items():
                self._set(p, await zk.update(p, add, set()))

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Per filter, the bindings it removed (Kafka matches every stored binding)."""
        zk = self._zk
        assert zk is not None, "start() first"
        async with self._lock:
            current = self.bindings()
            matched = [[b for b in current if f.matches(b)] for f in filters]
            by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
            for bs in matched:
                for b in bs:
                    by_pattern.setdefault(b.pattern, set()).add(b.entry)
            for p, remove in by_pattern.items():
                self._set(p, await zk.update(p, set(), remove))
        return matched

    def describe_acls(self, f: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self.bindings() if f.matches(b)]
