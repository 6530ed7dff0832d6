"""ACLs in the metadata store, in Kafka's ZooKeeper layout (``ZkAclStore``).

- LITERAL patterns: ``/kafka-acl/<ResourceType>/<name>``; PREFIXED ones:
  ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``; each znode is
  ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
  "operation":"Read","host":"*"}, ...]}``, written with a version check so two
  brokers changing the same resource never lose each other's ACLs;
- every change also writes a sequential ``acl_changes_`` notification: under
  ``/kafka-acl-changes`` with ``Topic:foo`` for a literal pattern, under
  ``/kafka-acl-extended-changes`` with Kafka's JSON (``resourceType``, ``name``,
  ``patternType``) for a prefixed one. Every broker watches both and reloads the
  named resources.

A name containing ``/`` (a group may) is stored with it encoded as ``%2F``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from kafkalite.metadata.store import (
    BadVersionError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
)
from kafkalite.security.authorizer.acl import (
    AccessControlEntry,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)

ACL_ROOT = "/kafka-acl"
ACL_EXTENDED_ROOT = "/kafka-acl-extended/prefixed"
ACL_CHANGES = "/kafka-acl-changes"
ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"

_STORED_TYPES = [
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN,
    ResourceType.USER,
]


def _encode_name(name: str) -> str:
    return name.replace("%", "%25").replace("/", "%2F")


def _decode_name(name: str) -> str:
    return name.replace("%2F", "/").replace("%25", "%")


def pattern_path(p: ResourcePattern) -> str:
    root = ACL_ROOT if p.pattern_type == PatternType.LITERAL else ACL_EXTENDED_ROOT
    return f"{root}/{p.resource_type.title_name}/{_encode_name(p.name)}"


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    acls = [
        {
            "principal": e.principal,
            "permissionType": e.permission.title_name,
            "operation": e.operation.title_name,
            "host": e.host,
        }
        for e in sorted(entries, key=str)
    ]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(data: bytes) -> set[AccessControlEntry]:
    if not data:
        return set()
    doc = json.loads(data)
    return {
        AccessControlEntry(
            a["principal"],
            a["host"],
            AclOperation(AclOperation.from_name(a["operation"])),
            PermissionType(PermissionType.from_name(a["permissionType"])),
        )
        for a in doc.get("acls", [])
    }


def _change_data(p: ResourcePattern) -> tuple[str, bytes]:
    if p.pattern_type == PatternType.LITERAL:
        return ACL_CHANGES, f"{p.resource_type.title_name}:{p.name}".encode()
    doc = {
        "version": 1,
        "resourceType": p.resource_type.title_name,
        "name": p.name,
        "patternType": p.pattern_type.title_name,
    }
    return ACL_EXTENDED_CHANGES, json.dumps(doc, separators=(",", ":")).encode()


def decode_change(changes_path: str, data: bytes) -> ResourcePattern | None:
    """The pattern a notification names (None: unreadable, ignored)."""
    try:
        text = data.decode()
        if changes_path == ACL_CHANGES:
            kind, _, name = text.partition(":")
            return ResourcePattern(
                ResourceType(ResourceType.from_name(kind)), name, PatternType.LITERAL
            )
        doc = json.loads(text)
        return ResourcePattern(
            ResourceType(ResourceType.from_name(doc["resourceType"])),
            doc["name"],
            PatternType(PatternType.from_name(doc["patternType"])),
        )
    except (ValueError, KeyError, UnicodeDecodeError):
        return None


class AclZkStore:
    """Reads and writes ACL znodes and their change notifications."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    async def ensure_paths(self) -> None:
        for path in (ACL_CHANGES, ACL_EXTENDED_CHANGES):
            await self.store.ensure_path(path)
        for t in _STORED_TYPES:
            await self.store.ensure_path(f"{ACL_ROOT}/{t.title_name}")
            await self.store.ensure_path(f"{ACL_EXTENDED_ROOT}/{t.title_name}")

    async def read(self, p: ResourcePattern) -> tuple[set[AccessControlEntry], int | None]:
        """The pattern's ACLs and its znode version (None: no znode)."""
        try:
            data, stat = await self.store.get(pattern_path(p))
        except NoNodeError:
            return set(), None
        return decode_acls(data), stat.version

    async def load_all(self) -> dict[ResourcePattern, set[AccessControlEntry]]:
        out: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for root, pt in (
            (ACL_ROOT, PatternType.LITERAL),
            (ACL_EXTENDED_ROOT, PatternType.PREFIXED),
        ):
            for t in _STORED_TYPES:
                try:
                    names = await self.store.get_children(f"{root}/{t.title_name}")
                except NoNodeError:
                    continue
                for n in names:
                    p = ResourcePattern(t, _decode_name(n), pt)
                    entries, _ = await self.read(p)
                    if entries:
                        out[p] = entries
        return out

    async def update(
        self,
        p: ResourcePattern,
        add: set[AccessControlEntry],
        remove: set[AccessControlEntry],
    ) -> set[AccessControlEntry]:
        """Add/remove entries of one pattern (compare-and-set, retried); notify; the result."""
        path = pattern_path(p)
        while True:
            current, version = await self.read(p)
            new = (current | add) - remove
            if new == current:
                return new
            try:
                if version is None:
                    await self.store.create(path, encode_acls(new), makepath=True)
                elif new:
                    await self.store.set(path, encode_acls(new), version=version)
                else:
                    await self.store.delete(path, version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another broker changed it: read again
            break
        changes, data = _change_data(p)
        await self.store.create(f"{changes}/{CHANGE_PREFIX}", data, sequential=True, makepath=True)
        return new
