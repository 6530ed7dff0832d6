"""``kafkalite acls``: Kafka's ``kafka-acls.sh`` (add, remove, list ACLs).

The same flags (``--add``/``--remove``/``--list``, ``--allow-principal``,
``--deny-principal``, ``--allow-host``, ``--deny-host``, ``--operation``,
``--topic``/``--group``/``--cluster``/``--transactional-id``/``--user-principal``/
``--delegation-token``, ``--resource-pattern-type``, the ``--producer`` and
``--consumer`` conveniences, ``--force``) and the same output. It talks to the
broker through confluent-kafka's admin API; ``--command-config`` is a
properties file of librdkafka client settings (``security.protocol``,
``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``...).
confluent-kafka has no User or DelegationToken resource type, so ACLs on those
go over kafkalite's own wire client (PLAINTEXT).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from kafkalite.security.authorizer.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    InvalidAcl,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)

__all__ = ["add_arguments", "run"]

_OPS = [
    "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
    "AlterConfigs", "DescribeConfigs", "IdempotentWrite", "CreateTokens", "DescribeTokens", "All",
]  # fmt: skip


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--command-config", help="client properties (librdkafka names)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--add", action="store_true")
    what.add_argument("--remove", action="store_true")
    what.add_argument("--list", action="store_true")
    p.add_argument("--allow-principal", action="append", default=[])
    p.add_argument("--deny-principal", action="append", default=[])
    p.add_argument("--principal", action="append", default=[], help="--list: only these")
    p.add_argument("--allow-host", action="append", default=[])
    p.add_argument("--deny-host", action="append", default=[])
    p.add_argument("--operation", action="append", default=[], choices=_OPS)
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--transactional-id", action="append", default=[])
    p.add_argument("--user-principal", action="append", default=[])
    p.add_argument("--delegation-token", action="append", default=[])
    p.add_argument(
        "--resource-pattern-type",
        default=None,
        type=str.upper,
        choices=["LITERAL", "PREFIXED", "ANY", "MATCH"],
    )
    p.add_argument("--producer", action="store_true")
    p.add_argument("--consumer", action="store_true")
    p.add_argument("--idempotent", action="store_true")
    p.add_argument("--force", action="store_true")


class UsageError(Exception):
    pass


def _op(name: str) -> AclOperation:
    return AclOperation(AclOperation.from_name(name))


def _pattern_type(args: argparse.Namespace) -> PatternType:
    text = args.resource_pattern_type or "LITERAL"
    pt = PatternType(PatternType.from_name(text))
    if args.add and pt not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UsageError(
            f"A '--resource-pattern-type' value of '{text}' is not valid when adding acls."
        )
    return pt


def _resources(args: argparse.Namespace, pt: PatternType) -> list[ResourcePattern]:
    out = [ResourcePattern(ResourceType.TOPIC, t, pt) for t in args.topic]
    out += [ResourcePattern(ResourceType.GROUP, g, pt) for g in args.group]
    if args.cluster:
        out.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, pt))
    out += [ResourcePattern(ResourceType.TRANSACTIONAL_ID, t, pt) for t in args.transactional_id]
    out += [ResourcePattern(ResourceType.USER, u, pt) for u in args.user_principal]
    out += [ResourcePattern(ResourceType.DELEGATION_TOKEN, d, pt) for d in args.delegation_token]
    return out


def _entries(args: argparse.Namespace, ops: Sequence[AclOperation]) -> list[AccessControlEntry]:
    out: list[AccessControlEntry] = []
    for principals, hosts, perm in (
        (args.allow_principal, args.allow_host, PermissionType.ALLOW),
        (args.deny_principal, args.deny_host, PermissionType.DENY),
    ):
        for pr in principals:
            for host in hosts or ["*"]:
                out.extend(AccessControlEntry(pr, host, op, perm) for op in ops)
    return out


def _bindings(args: argparse.Namespace) -> dict[ResourcePattern, list[AccessControlEntry]]:
    """What --add/--remove name, per resource, with the --producer/--consumer sets."""
    pt = _pattern_type(args)
    out: dict[ResourcePattern, list[AccessControlEntry]] = {}

    def add(pattern: ResourcePattern, ops: Sequence[AclOperation]) -> None:
        out.setdefault(pattern, []).extend(_entries(args, ops))

    if args.producer or args.consumer:
        if not args.topic:
            raise UsageError("With --producer or --consumer you must specify a --topic")
        if args.consumer and not args.group:
            raise UsageError("With --consumer you must specify a --group")
        for t in args.topic:
            tp = ResourcePattern(ResourceType.TOPIC, t, pt)
            if args.producer:
                add(tp, [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE])
            if args.consumer:
                add(tp, [AclOperation.READ, AclOperation.DESCRIBE])
        if args.consumer:
            for g in args.group:
                add(ResourcePattern(ResourceType.GROUP, g, pt), [AclOperation.READ])
        if args.producer:
            for x in args.transactional_id:
                add(
                    ResourcePattern(ResourceType.TRANSACTIONAL_ID, x, pt),
                    [AclOperation.WRITE, AclOperation.DESCRIBE],
                )
            if args.idempotent:
                add(
                    ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL),
                    [AclOperation.IDEMPOTENT_WRITE],
                )
        return out
    ops = [_op(o) for o in args.operation] or [AclOperation.ALL]
    resources = _resources(args, pt)
    if not resources:
        raise UsageError(
            "You must specify one of: --topic, --cluster, --group, "
            "--transactional-id, --delegation-token, --user-principal"
        )
    for r in resources:
        add(r, ops)
    return out


# ---- the broker side: confluent-kafka, or the wire client for what it lacks -----------------
def _properties(path: str | None) -> dict[str, str]:
    if not path:
        return {}
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith(("#", "!")) and "=" in line:
                k, v = line.split("=", 1)
                out[k.strip()] = v.strip()
    return out


_CONFLUENT_TYPES = {
    ResourceType.ANY: "ANY",
    ResourceType.TOPIC: "TOPIC",
    ResourceType.GROUP: "GROUP",
    ResourceType.CLUSTER: "BROKER",
    ResourceType.TRANSACTIONAL_ID: "TRANSACTIONAL_ID",
}


class _Confluent:
    def __init__(self, bootstrap: str, props: dict[str, str]) -> None:
        try:
            from confluent_kafka import admin
        except ImportError:  # pragma: no cover - installed with kafkalite[test] / [spark]
            raise UsageError(
                "kafkalite acls needs confluent-kafka (pip install confluent-kafka)"
            ) from None
        self.m = admin
        self.client = admin.AdminClient({"bootstrap.servers": bootstrap, **props})

    def _binding(self, b: AclBinding) -> Any:
        m = self.m
        return m.AclBinding(
            m.ResourceType[_CONFLUENT_TYPES[b.pattern.resource_type]],
            b.pattern.name,
            m.ResourcePatternType(int(b.pattern.pattern_type)),
            b.entry.principal,
            b.entry.host,
            m.AclOperation(int(b.entry.operation)),
            m.AclPermissionType(int(b.entry.permission)),
        )

    def _filter(self, f: AclBindingFilter) -> Any:
        m = self.m
        return m.AclBindingFilter(
            m.ResourceType[_CONFLUENT_TYPES[f.resource_type]],
            f.name,
            m.ResourcePatternType(int(f.pattern_type)),
            f.principal,
            f.host,
            m.AclOperation(int(f.operation)),
            m.AclPermissionType(int(f.permission)),
        )

    @staticmethod
    def _ours(b: Any) -> AclBinding:
        return AclBinding(
            ResourcePattern(
                ResourceType(int(b.restype.value)),
                b.name,
                PatternType(int(b.resource_pattern_type.value)),
            ),
            AccessControlEntry(
                b.principal,
                b.host,
                AclOperation(int(b.operation.value)),
                PermissionType(int(b.permission_type.value)),
            ),
        )

    def create(self, bindings: list[AclBinding]) -> None:
        for f in self.client.create_acls([self._binding(b) for b in bindings]).values():
            f.result()

    def describe(self, f: AclBindingFilter) -> list[AclBinding]:
        return [self._ours(b) for b in self.client.describe_acls(self._filter(f)).result()]

    def delete(self, filters: list[AclBindingFilter]) -> list[AclBinding]:
        out = []
        for fut in self.client.delete_acls([self._filter(f) for f in filters]).values():
            out += [self._ours(b) for b in fut.result()]
        return out


class _Wire:
    """CreateAcls/DescribeAcls/DeleteAcls with kio (the User and DelegationToken types)."""

    def __init__(self, bootstrap: str) -> None:
        from kafkalite.cli.wire_client import WireClient

        self.c = WireClient(bootstrap)

    @staticmethod
    def _filter(f: AclBindingFilter) -> dict[str, Any]:
        return {
            "resource_type_filter": int(f.resource_type),
            "resource_name_filter": f.name,
            "pattern_type_filter": int(f.pattern_type),
            "principal_filter": f.principal,
            "host_filter": f.host,
            "operation": int(f.operation),
            "permission_type": int(f.permission),
        }

    @staticmethod
    def _check(code: int, message: str | None) -> None:
        if code:
            raise UsageError(f"error {code}: {message or ''}")

    def create(self, bindings: list[AclBinding]) -> None:
        r = self.c.call(30, 3, {"creations": [
            {"resource_type": int(b.pattern.resource_type), "resource_name": b.pattern.name,
             "resource_pattern_type": int(b.pattern.pattern_type), "principal": b.entry.principal,
             "host": b.entry.host, "operation": int(b.entry.operation),
             "permission_type": int(b.entry.permission)} for b in bindings]})  # fmt: skip
        for x in r.results:
            self._check(int(x.error_code), x.error_message)

    def describe(self, f: AclBindingFilter) -> list[AclBinding]:
        r = self.c.call(29, 3, self._filter(f))
        self._check(int(r.error_code), r.error_message)
        return [
            AclBinding(
                ResourcePattern(ResourceType(int(res.resource_type)), res.resource_name,
                                PatternType(int(res.pattern_type))),
                AccessControlEntry(a.principal, a.host, AclOperation(int(a.operation)),
                                   PermissionType(int(a.permission_type))),
            )
            for res in r.resources
            for a in res.acls
        ]  # fmt: skip

    def delete(self, filters: list[AclBindingFilter]) -> list[AclBinding]:
        r = self.c.call(31, 3, {"filters": [self._filter(f) for f in filters]})
        out = []
        for fr in r.filter_results:
            self._check(int(fr.error_code), fr.error_message)
            out += [
                AclBinding(
                    ResourcePattern(ResourceType(int(m.resource_type)), m.resource_name,
                                    PatternType(int(m.pattern_type))),
                    AccessControlEntry(m.principal, m.host, AclOperation(int(m.operation)),
                                       PermissionType(int(m.permission_type))),
                )
                for m in fr.matching_acls
            ]  # fmt: skip
        return out


def _backend(args: argparse.Namespace, types: set[ResourceType]) -> Any:
    if types & {ResourceType.USER, ResourceType.DELEGATION_TOKEN}:
        return _Wire(args.bootstrap_server)
    return _Confluent(args.bootstrap_server, _properties(args.command_config))


# ---- the commands ------------------------------------------------------------------------
def _print_current(pattern: ResourcePattern, entries: Sequence[AccessControlEntry]) -> None:
    print(f"Current ACLs for resource `{pattern}`: ")
    for e in sorted(entries, key=str):
        print(f" \t{e} ")
    print()


def _resource_filter(p: ResourcePattern, principal: str | None = None) -> AclBindingFilter:
    return AclBindingFilter(
        p.resource_type, p.name, p.pattern_type, principal, None,
        AclOperation.ANY, PermissionType.ANY,
    )  # fmt: skip


def _grouped(bindings: Sequence[AclBinding]) -> dict[ResourcePattern, list[AccessControlEntry]]:
    out: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        out.setdefault(b.pattern, []).append(b.entry)
    return out


def _add(args: argparse.Namespace) -> int:
    wanted = _bindings(args)
    if not any(wanted.values()):
        raise UsageError(
            "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."
        )
    backend = _backend(args, {p.resource_type for p in wanted})
    bindings = [AclBinding(p, e) for p, es in wanted.items() for e in es]
    for b in bindings:
        b.validate()
    for p, es in wanted.items():
        print(f"Adding ACLs for resource `{p}`: ")
        for e in es:
            print(f" \t{e} ")
        print()
    backend.create(bindings)
    for p in wanted:
        _print_current(p, [b.entry for b in backend.describe(_resource_filter(p))])
    return 0


def _remove(args: argparse.Namespace) -> int:
    wanted = _bindings(args)
    backend = _backend(args, {p.resource_type for p in wanted})
    filters: list[AclBindingFilter] = []
    for p, es in wanted.items():
        if es:
            filters += [
                AclBindingFilter(p.resource_type, p.name, p.pattern_type, e.principal, e.host,
                                 e.operation, e.permission)
                for e in es
            ]  # fmt: skip
        else:
            filters.append(_resource_filter(p))
        if not args.force:
            answer = input(
                f"Are you sure you want to delete all ACLs for resource filter `{p}`? (y/n)"
            )
            if not answer.strip().lower().startswith("y"):
                return 0
    for p in wanted:
        print(f"Removing ACLs for resource `{p}`: ")
        for e in wanted[p]:
            print(f" \t{e} ")
        print()
    removed = backend.delete(filters)
    for p in wanted:
        _print_current(p, [b.entry for b in backend.describe(_resource_filter(p))])
    return 0 if removed is not None else 1


def _list(args: argparse.Namespace) -> int:
    pt = (
        PatternType(PatternType.from_name(args.resource_pattern_type or "ANY"))
        if (args.resource_pattern_type)
        else PatternType.ANY
    )
    patterns = _resources(args, pt)
    principals = args.principal or [None]
    types = {p.resource_type for p in patterns}
    backend = _backend(args, types)
    found: list[AclBinding] = []
    targets = patterns or [ResourcePattern(ResourceType.ANY, "", PatternType.ANY)]
    for p in targets:
        for pr in principals:
            f = AclBindingFilter(
                p.resource_type, p.name or None, p.pattern_type, pr, None,
                AclOperation.ANY, PermissionType.ANY,
            )  # fmt: skip
            found += backend.describe(f)
    for p, es in sorted(_grouped(found).items(), key=lambda kv: str(kv[0])):
        _print_current(p, sorted(set(es), key=str))
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        if args.add:
            return _add(args)
        if args.remove:
            return _remove(args)
        return _list(args)
    except (UsageError, InvalidAcl) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # the client's errors (KafkaException): the tool's message
        print(f"Error while executing ACL command: {e}", file=sys.stderr)
        return 1
