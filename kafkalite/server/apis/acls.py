"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31): the ACLs of the authorizer.

As Kafka's ``AclApis``: without an authorizer every answer is SECURITY_DISABLED;
CreateAcls and DeleteAcls need Alter on the cluster, DescribeAcls Describe
(CLUSTER_AUTHORIZATION_FAILED); a binding or filter Kafka cannot use is
INVALID_REQUEST, per creation or filter (top level for DescribeAcls).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.protocol.errors import ErrorCode
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

if TYPE_CHECKING:
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.security.authorizer.authorizer import AclAuthorizer
    from kafkalite.server.apis.request_types import (
        CreateAclsRequest,
        DeleteAclsRequest,
        DescribeAclsRequest,
    )
    from kafkalite.server.authorization import AuthHelper

SECURITY_DISABLED = int(ErrorCode.security_disabled)
INVALID_REQUEST = int(ErrorCode.invalid_request)
CLUSTER_AUTH = int(ErrorCode.cluster_authorization_failed)
_NO_AUTHORIZER = "No Authorizer is configured."
_NOT_AUTHORIZED = "Cluster authorization failed."


@dataclass(frozen=True, slots=True)
class AclDeps:
    authorizer: AclAuthorizer | None
    auth: AuthHelper


def _may(deps: AclDeps, ctx: RequestContext, op: AclOperation) -> bool:
    return deps.auth.allowed(ctx, op, ResourceType.CLUSTER, CLUSTER_NAME)


def _filter(f: Any) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType(ResourceType.from_code(int(f.resource_type_filter))),
        f.resource_name_filter,
        PatternType(PatternType.from_code(int(f.pattern_type_filter))),
        f.principal_filter,
        f.host_filter,
        AclOperation(AclOperation.from_code(int(f.operation))),
        PermissionType(PermissionType.from_code(int(f.permission_type))),
    )


# ---- DescribeAcls ----------------------------------------------------------------------
def handle_describe_acls(deps: AclDeps, ctx: RequestContext, req: DescribeAclsRequest) -> Any:
    a = deps.authorizer
    if a is None:
        return describe_acls_error_response(req, ctx.api_version, SECURITY_DISABLED, _NO_AUTHORIZER)
    if not _may(deps, ctx, AclOperation.DESCRIBE):
        return describe_acls_error_response(req, ctx.api_version, CLUSTER_AUTH, _NOT_AUTHORIZED)
    f = _filter(req)
    try:
        f.validate()
    except InvalidAcl as e:
        return describe_acls_error_response(req, ctx.api_version, INVALID_REQUEST, str(e))
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in a.describe_acls(f):
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    return {
        "throttle_time": 0,
        "error_code": 0,
        "error_message": None,
        "resources": [
            {
                "resource_type": int(p.resource_type),
                "resource_name": p.name,
                "pattern_type": int(p.pattern_type),
                "acls": [
                    {
                        "principal": e.principal,
                        "host": e.host,
                        "operation": int(e.operation),
                        "permission_type": int(e.permission),
                    }
                    for e in sorted(entries, key=str)
                ],
            }
            for p, entries in sorted(by_pattern.items(), key=lambda kv: str(kv[0]))
        ],
    }


def describe_acls_error_response(
    req: Any, version: int, code: int, message: str | None = None
) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": message, "resources": []}


# ---- CreateAcls ------------------------------------------------------------------------
async def handle_create_acls(deps: AclDeps, ctx: RequestContext, req: CreateAclsRequest) -> Any:
    a = deps.authorizer
    if a is None:
        return _create_results(req, SECURITY_DISABLED, _NO_AUTHORIZER)
    if not _may(deps, ctx, AclOperation.ALTER):
        return _create_results(req, CLUSTER_AUTH, _NOT_AUTHORIZED)
    results: list[dict[str, Any]] = []
    valid: list[AclBinding] = []
    for c in req.creations:
        try:
            b = AclBinding(
                ResourcePattern(
                    ResourceType(ResourceType.from_code(int(c.resource_type))),
                    c.resource_name,
                    PatternType(PatternType.from_code(int(c.resource_pattern_type))),
                ),
                AccessControlEntry(
                    c.principal,
                    c.host,
                    AclOperation(AclOperation.from_code(int(c.operation))),
                    PermissionType(PermissionType.from_code(int(c.permission_type))),
                ),
            )
            b.validate()
        except InvalidAcl as e:
            results.append({"error_code": INVALID_REQUEST, "error_message": str(e)})
            continue
        valid.append(b)
        results.append({"error_code": 0, "error_message": None})
    if valid:
        await a.create_acls(valid)
    return {"throttle_time": 0, "results": results}


def _create_results(req: Any, code: int, message: str | None) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "results": [{"error_code": code, "error_message": message} for _ in req.creations],
    }


def create_acls_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return _create_results(req, code, None)


# ---- DeleteAcls ------------------------------------------------------------------------
async def handle_delete_acls(deps: AclDeps, ctx: RequestContext, req: DeleteAclsRequest) -> Any:
    a = deps.authorizer
    if a is None:
        return _delete_results(req, SECURITY_DISABLED, _NO_AUTHORIZER)
    if not _may(deps, ctx, AclOperation.ALTER):
        return _delete_results(req, CLUSTER_AUTH, _NOT_AUTHORIZED)
    filters: list[AclBindingFilter | str] = []
    for raw in req.filters:
        f = _filter(raw)
        try:
            f.validate()
            filters.append(f)
        except InvalidAcl as e:
            filters.append(str(e))
    usable = [f for f in filters if isinstance(f, AclBindingFilter)]
    removed = iter(await a.delete_acls(usable) if usable else [])
    out = []
    for item in filters:
        if isinstance(item, str):
            out.append({"error_code": INVALID_REQUEST, "error_message": item, "matching_acls": []})
            continue
        out.append(
            {
                "error_code": 0,
                "error_message": None,
                "matching_acls": [
                    {
                        "error_code": 0,
                        "error_message": None,
                        "resource_type": int(b.pattern.resource_type),
                        "resource_name": b.pattern.name,
                        "pattern_type": int(b.pattern.pattern_type),
                        "principal": b.entry.principal,
                        "host": b.entry.host,
                        "operation": int(b.entry.operation),
                        "permission_type": int(b.entry.permission),
                    }
                    for b in next(removed)
                ],
            }
        )
    return {"throttle_time": 0, "filter_results": out}


def _delete_results(req: Any, code: int, message: str | None) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "filter_results": [
            {"error_code": code, "error_message": message, "matching_acls": []} for _ in req.filters
        ],
    }


def delete_acls_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return _delete_results(req, code, None)
