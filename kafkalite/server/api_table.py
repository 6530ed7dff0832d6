"""The API table: key, name, supported versions, handler (rows: :class:`ApiSpec`).

ApiVersions is generated from this table, so the broker never advertises an
API or a version it does not handle. ``docs/compatibility.md`` is generated
from the very table a broker advertises (client APIs plus the inter-broker
controller APIs): ``python -m kafkalite.server.api_table > docs/compatibility.md``.
"""

from __future__ import annotations

from kafkalite.network.api_spec import ApiSpec


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
