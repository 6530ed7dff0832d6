"""UpdateFeatures (57): the finalized feature levels are those kafkalite implements.

Kafka 4's controller applies a set of feature updates all or nothing; kafkalite's
levels are fixed by its code (:mod:`kafkalite.server.features`), so an update to
the current level succeeds (a no-op, as in KRaft) and any other level is refused
with INVALID_UPDATE_VERSION, in the words Kafka uses for a level the controller
does not support.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalite.protocol.errors import ErrorCode
from kafkalite.server import features as ft

if TYPE_CHECKING:
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.server.apis.request_types import UpdateFeaturesRequest

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def handle_update_features(
    _deps: None, ctx: RequestContext, req: UpdateFeaturesRequest
) -> dict[str, Any]:
    code: int = ErrorCode.none
    message: str | None = None
    for u in req.feature_updates:
        code, message = _check(ctx.api_version, u)
        if code != ErrorCode.none:
            break
    return _response(req, ctx.api_version, code, message)


def _check(version: int, u: Any) -> tuple[int, str | None]:
    level = int(u.max_version_level)
    if version == 0:
        kind = SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE
    else:
        kind = int(u.upgrade_type)
    if not u.feature:
        return ErrorCode.invalid_request, "Feature name can not be empty."
    if kind not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return ErrorCode.invalid_request, "Received unknown upgrade type."
    f = ft.feature(u.feature)
    prefix = f"Invalid update version {level} for feature {u.feature}."
    if f is None or f.finalized is None:
        return ErrorCode.invalid_update_version, (
            f"{prefix} The broker does not support finalizing this feature."
        )
    if level == f.finalized:
        return ErrorCode.none, None
    if level < f.finalized and kind == UPGRADE:
        return ErrorCode.invalid_update_version, (
            f"{prefix} Can't downgrade the version of this feature without setting the "
            "upgrade type to either safe or unsafe downgrade."
        )
    if level > f.finalized and kind != UPGRADE:
        return ErrorCode.invalid_update_version, f"{prefix} Can't downgrade to a newer version."
    return ErrorCode.invalid_update_version, (
        f"{prefix} kafkalite implements {u.feature} at level {f.finalized} only."
    )


def _response(req: Any, version: int, code: int, message: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"throttle_time": 0, "error_code": code, "error_message": message}
    if version < 2:
        out["results"] = [
            {"feature": u.feature, "error_code": code, "error_message": message}
            for u in req.feature_updates
        ]
    return out


def update_features_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    """The top-level error, repeated per feature before v2 (``UpdateFeaturesResponse.createWithErrors``)."""
    return _response(req, version, code, None)
