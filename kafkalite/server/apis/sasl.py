"""SaslHandshake (17), SaslAuthenticate (36), DescribeUserScramCredentials (50) and
AlterUserScramCredentials (51).

The SASL exchange itself is the connection's :class:`SaslServerAuthenticator`
(``kafkalite.security.sasl``); these handlers carry its answers and what the
connection must do with them: set the principal, close after a failure, delay
that failure (``connection.failed.authentication.delay.ms``, with a timer, not a
task, so failed logins hold no place in the broker-wide request queue). On a
connection that is not SASL, or already authenticated, the two SASL requests are
answered ILLEGAL_SASL_STATE, as Kafka's ``KafkaApis``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkalite.common.principal import USER_TYPE, KafkaPrincipal
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.credentials import Deletion, ScramCredentialStore, Upsertion

if TYPE_CHECKING:
    from kafkalite.network.api_spec import RequestContext
    from kafkalite.server.apis.request_types import (
        AlterUserScramCredentialsRequest,
        DescribeUserScramCredentialsRequest,
        SaslAuthenticateRequest,
        SaslHandshakeRequest,
    )

log = logging.getLogger(__name__)

ILLEGAL_SASL_STATE = int(ErrorCode.illegal_sasl_state)


@dataclass(frozen=True, slots=True)
class SaslDeps:
    #: None on a broker built without a store (the API table's dry build)
    credential_store: ScramCredentialStore | None


def _later(ctx: RequestContext, delay_ms: int, response: dict[str, Any]) -> Any:
    if delay_ms <= 0:
        return response
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[dict[str, Any]] = loop.create_future()

    def done() -> None:
        if not fut.done():
            fut.set_result(response)

    loop.call_later(delay_ms / 1000, done)
    return fut


def handle_sasl_handshake(deps: SaslDeps, ctx: RequestContext, req: SaslHandshakeRequest) -> Any:
    conn = ctx.connection
    sasl = conn.sasl
    if sasl is None:
        return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": []}
    response, close = sasl.handshake(req.mechanism, ctx.api_version)
    if close:
        log.info(
            "closing connection from %s: SaslHandshake for mechanism %r refused (error %d)",
            conn.peer,
            req.mechanism,
            response["error_code"],
        )
        conn.close_after_response()
        return _later(ctx, sasl.context.config.failure_delay_ms, response)
    return response


def handle_sasl_authenticate(
    deps: SaslDeps, ctx: RequestContext, req: SaslAuthenticateRequest
) -> Any:
    conn = ctx.connection
    sasl = conn.sasl
    if sasl is None or (sasl.authenticated and not sasl.reauthenticating):
        return sasl_authenticate_error_response(
            req,
            ctx.api_version,
            ILLEGAL_SASL_STATE,
            "SaslAuthenticate request received after successful authentication",
        )
    response, failed = sasl.authenticate(ctx.api_version, bytes(req.auth_bytes))
    if failed:
        # the message is the mechanism's, which never holds a credential
        log.info("Failed authentication with %s (%s)", conn.peer[0], response["error_message"])
        conn.close_after_response()
        return _later(ctx, sasl.context.config.failure_delay_ms, response)
    if sasl.authenticated:
        conn.principal = KafkaPrincipal(USER_TYPE, str(sasl.user))
    return response


def sasl_handshake_error_response(req: Any, version: int, code: int) -> dict[str, Any]:
    return {"error_code": code, "mechanisms": []}


def sasl_authenticate_error_response(
    req: Any, version: int, code: int, message: str | None = None
) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "auth_bytes": b"", "session_lifetime": 0}


# ---- SCRAM credentials -----------------------------------------------------------
def handle_describe_user_scram_credentials(
    deps: SaslDeps, ctx: RequestContext, req: DescribeUserScramCredentialsRequest
) -> dict[str, Any]:
    store = deps.credential_store
    if store is None:
        return describe_user_scram_credentials_error_response(
            req, ctx.api_version, int(ErrorCode.unknown_server_error)
        )
    users = None if not req.users else [u.name for u in req.users]
    return {
        "throttle_time": 0,
        "error_code": 0,
        "error_message": None,
        "results": [
            {
                "user": name,
                "error_code": code,
                "error_message": message,
                "credential_infos": [{"mechanism": m, "iterations": i} for m, i in infos],
            }
            for name, code, message, infos in store.describe(users)
        ],
    }


async def handle_alter_user_scram_credentials(
    deps: SaslDeps, ctx: RequestContext, req: AlterUserScramCredentialsRequest
) -> dict[str, Any]:
    store = deps.credential_store
    if store is None:
        return alter_user_scram_credentials_error_response(
            req, ctx.api_version, int(ErrorCode.unknown_server_error)
        )
    results = await store.alter(
        [Deletion(d.name, int(d.mechanism)) for d in req.deletions],
        [
            Upsertion(
                u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password)
            )
            for u in req.upsertions
        ],
    )
    return {
        "throttle_time": 0,
        "results": [
            {"user": user, "error_code": code, "error_message": message}
            for user, code, message in results
        ],
    }


def describe_user_scram_credentials_error_response(
    req: Any, version: int, code: int
) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": None, "results": []}


def alter_user_scram_credentials_error_response(
    req: Any, version: int, code: int
) -> dict[str, Any]:
    users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
    return {
        "throttle_time": 0,
        "results": [{"user": u, "error_code": code, "error_message": None} for u in users],
    }
