"""The API table: key, name, supported versions, handler.

ApiVersions is generated from this table, so the broker never advertises an
API or a version it does not handle. ``docs/compatibility.md`` is generated
from the very table a broker advertises (client APIs plus the inter-broker
controller APIs): ``python -m kafkalite.server.api_table > docs/compatibility.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: ``(request, version, error_code) -> response``: the response to ``request`` with
#: ``error_code`` in every error field (per partition, topic, group or resource, or
#: top level), echoing the request's names and ids, as Kafka's
#: ``AbstractRequest.getErrorResponse``. None: this request gets no response at all
#: (acks=0 Produce), so a failure can only be told by closing the connection.
ErrorResponseBuilder = Callable[[Any, int, int], dict[str, Any] | None]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Callable[[Any, Any], Any]
    #: finish before the next request on the connection is dispatched (admin APIs
    #: whose work happens after the handler returns)
    serial: bool = False
    notes: str = ""
    #: what ApiVersions says when it differs from min_version (see KAFKA-18659:
    #: Produce is advertised from v0 so librdkafka <= 2.11 keeps compressing)
    advertised_min_version: int | None = None
    #: sent between brokers (controller requests), not by clients
    inter_broker: bool = False
    #: ``(frame, body_offset, version) -> request`` replacing kio's decoder on a hot path
    decoder: Callable[[bytes, int, int], Any] | None = None
    #: the error response to a request of this API (every client API has one); used
    #: for a handler's unexpected errors (UNKNOWN_SERVER_ERROR) and by request interceptors
    error_response: ErrorResponseBuilder | None = None


def compatibility_markdown(table: dict[int, ApiSpec]) -> str:
    lines = [
        "# Supported Kafka APIs",
        "",
        "Generated from the broker's API table (`python -m kafkalite.server.api_table`).",
        "ApiVersions advertises exactly these ranges. APIs not listed are answered by",
        "closing the connection, as Apache Kafka does for an unknown api key.",
        "Rows marked *inter-broker* are the controller requests brokers send each other",
        "(Kafka's ZooKeeper-mode LeaderAndIsr, StopReplica, UpdateMetadata and",
        "ControlledShutdown, which Kafka 4 no longer has); clients never send them.",
        "",
        "| key | API | versions | used by | notes |",
        "|---:|---|---|---|---|",
    ]
    for s in sorted(table.values(), key=lambda s: s.key):
        adv = (
            ""
            if s.advertised_min_version is None
            else f" (advertised from v{s.advertised_min_version})"
        )
        who = "*inter-broker*" if s.inter_broker else "clients"
        lines.append(
            f"| {s.key} | {s.name} | {s.min_version}–{s.max_version}{adv} | {who} | {s.notes} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    from kafkalite.server.apis import build_broker_api_table

    print(compatibility_markdown(build_broker_api_table(None)), end="")
