"""Kafka's ACL model: resource types, operations, patterns, bindings and filters.

The codes are Kafka's wire values (``ResourceType``, ``AclOperation``,
``PatternType``, ``AclPermissionType`` in ``org.apache.kafka.common``); the
names are those Kafka writes in the ACL znodes and prints in ``kafka-acls.sh``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kafkalite.common.principal import KafkaPrincipal

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AccessControlEntry",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "InvalidAcl",
    "PatternType",
    "PermissionType",
    "ResourcePattern",
    "ResourceType",
    "implied_allow",
    "operations_bitfield",
    "supported_operations",
]

#: the name of the one Cluster resource (Kafka's ``Resource.CLUSTER_NAME``)
CLUSTER_NAME = "kafka-cluster"
#: a LITERAL resource name that matches every name of its type
WILDCARD = "*"
#: an ACL principal that matches every principal
WILDCARD_PRINCIPAL = "User:*"


class InvalidAcl(ValueError):
    """A binding or filter Kafka refuses (INVALID_REQUEST)."""


class _Named(enum.IntEnum):
    @property
    def title_name(self) -> str:
        """Kafka's spelling: ``TransactionalId``, ``DescribeConfigs``, ``Allow``."""
        return "".join(p.capitalize() for p in self.name.split("_"))

    @classmethod
    def from_name(cls, text: str) -> _Named:
        key = text.replace("_", "").replace("-", "").lower()
        for m in cls:
            if m.name.replace("_", "").lower() == key:
                return m
        raise InvalidAcl(f"unknown {cls.__name__}: {text}")

    @classmethod
    def from_code(cls, code: int) -> _Named:
        try:
            return cls(code)
        except ValueError:
            return cls(0)  # UNKNOWN


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(_Named):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PatternType(_Named):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class PermissionType(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_O = AclOperation
#: Kafka's ``AclEntry.supportedOperations``: what each resource type can be granted
_SUPPORTED: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER}
        | {_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}
    ),
    ResourceType.GROUP: frozenset(
        {_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}
    ),
    ResourceType.CLUSTER: frozenset(
        {_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}
        | {_O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE}
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}

#: an ALLOW of any of these grants the key (Kafka's implied operations)
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    _O.DESCRIBE: frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER, _O.ALL}),
    _O.DESCRIBE_CONFIGS: frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.ALL}),
}


def supported_operations(rtype: ResourceType) -> frozenset[AclOperation]:
    return _SUPPORTED.get(rtype, frozenset())


def implied_allow(op: AclOperation) -> frozenset[AclOperation]:
    """The ALLOW operations that grant ``op`` (DENY is never implied: only ``op`` or ALL)."""
    return _IMPLIED_BY.get(op) or frozenset({op, _O.ALL})


def operations_bitfield(ops: frozenset[AclOperation] | set[AclOperation]) -> int:
    """Kafka's authorized-operations int32: bit ``op.code`` set per operation."""
    bits = 0
    for op in ops:
        bits |= 1 << int(op)
    return bits


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission.name})"
        )


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def validate(self) -> None:
        """Kafka's checks on CreateAcls (INVALID_REQUEST with its message)."""
        p, e = self.pattern, self.entry
        if p.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise InvalidAcl("Invalid resource type " + p.resource_type.name)
        if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"Invalid pattern type {p.pattern_type.name}")
        if not p.name:
            raise InvalidAcl("Resource name should not be empty")
        if p.pattern_type == PatternType.PREFIXED and p.name == WILDCARD:
            raise InvalidAcl("Prefixed ACLs cannot use the wildcard resource name")
        if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
            raise InvalidAcl("The only valid name for the CLUSTER resource is " + CLUSTER_NAME)
        if e.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise InvalidAcl("Invalid operation " + e.operation.name)
        if e.operation != AclOperation.ALL and e.operation not in supported_operations(
            p.resource_type
        ):
            raise InvalidAcl(
                f"ACL operation {e.operation.name} is not applicable to "
                f"resource type {p.resource_type.name}"
            )
        if e.permission not in (PermissionType.ALLOW, PermissionType.DENY):
            raise InvalidAcl("Invalid permission type " + e.permission.name)
        try:
            KafkaPrincipal.parse(e.principal)
        except ValueError:
            raise InvalidAcl(f"Invalid principal {e.principal}") from None
        if not e.host:
            raise InvalidAcl("Invalid host (empty)")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """DescribeAcls/DeleteAcls filters: None (null on the wire) or ANY match everything."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: PermissionType

    def validate(self) -> None:
        if self.resource_type == ResourceType.UNKNOWN:
            raise InvalidAcl("Invalid resource type UNKNOWN")
        if self.pattern_type == PatternType.UNKNOWN:
            raise InvalidAcl("Invalid pattern type UNKNOWN")
        if self.operation == AclOperation.UNKNOWN:
            raise InvalidAcl("Invalid operation UNKNOWN")
        if self.permission == PermissionType.UNKNOWN:
            raise InvalidAcl("Invalid permission type UNKNOWN")

    def matches_pattern(self, p: ResourcePattern) -> bool:
        """Kafka's ``ResourcePatternFilter.matches``, MATCH included (a name's literal,
        wildcard and prefixed patterns)."""
        if self.resource_type != ResourceType.ANY and self.resource_type != p.resource_type:
            return False
        pt = self.pattern_type
        if pt in (PatternType.LITERAL, PatternType.PREFIXED):
            return p.pattern_type == pt and (self.name is None or self.name == p.name)
        if pt == PatternType.ANY:
            return self.name is None or self.name == p.name
        if pt == PatternType.MATCH:
            if self.name is None:
                return True
            if p.pattern_type == PatternType.LITERAL:
                return p.name == self.name or p.name == WILDCARD
            return p.pattern_type == PatternType.PREFIXED and self.name.startswith(p.name)
        return False

    def matches_entry(self, e: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == e.principal)
            and (self.host is None or self.host == e.host)
            and (self.operation == AclOperation.ANY or self.operation == e.operation)
            and (self.permission == PermissionType.ANY or self.permission == e.permission)
        )

    def matches(self, b: AclBinding) -> bool:
        return self.matches_pattern(b.pattern) and self.matches_entry(b.entry)
