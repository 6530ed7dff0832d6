"""The API table: key, name, supported versions, handler (rows: :class:`ApiSpec`).

ApiVersions is generated from this table, so the broker never advertises an
API or a version it does not handle. ``docs/compatibility.md`` is generated
from the very table a broker advertises (client APIs plus the inter-broker
controller APIs): ``python -m kafkalite.server.api_table > docs/compatibility.md``.
"""

from __future__ import annotations

from kafkalite.network.api_spec import ApiSpec

_KRAFT = "KRaft only: kafkalite has no controller quorum (a ZooKeeper-mode Kafka broker does not serve it either)"
#: why a Kafka API key is not served, for the keys the table lacks (Kafka 4.2's keys as
#: kio's schemas know them)
NOT_SERVED: dict[int, str] = {
    38: "not implemented: delegation tokens",
    39: "not implemented: delegation tokens",
    40: "not implemented: delegation tokens",
    41: "not implemented: delegation tokens",
    52: _KRAFT,
    53: _KRAFT,
    54: _KRAFT,
    55: "KRaft only: no quorum to describe; like a ZooKeeper-mode broker, not advertised",
    56: "inter-broker ISR changes go through ZooKeeper (Kafka's ZooKeeper mode), not AlterPartition",
    58: "KRaft only: forwarding to the controller quorum",
    59: _KRAFT,
    62: _KRAFT,
    63: _KRAFT,
    64: _KRAFT,
    67: "KRaft only: producer ids come from the metadata store's block (Kafka's ZooKeeper mode)",
    70: _KRAFT,
    73: _KRAFT,
    80: _KRAFT,
    81: _KRAFT,
    82: _KRAFT,
    88: "not implemented: streams groups (KIP-1071)",
    89: "not implemented: streams groups (KIP-1071)",
}


#: why a served API stops below Kafka's newest version
BELOW_NEWEST: dict[int, str] = {}


def not_served_markdown(table: dict[int, ApiSpec]) -> list[str]:
    """Every Kafka API key kio has schemas for that the table does not serve, with why."""
    from kio.schema.index import api_key_map, schema_name_map

    lines = [
        "",
        "## Kafka APIs not served",
        "",
        "Every other API key of Apache Kafka 4.2 (as kio's schemas define them), with",
        "its highest version and why kafkalite does not advertise it.",
        "",
        "| key | API | Kafka versions | status |",
        "|---:|---|---|---|",
    ]
    for key, name in sorted(api_key_map.items()):
        if key in table or key in (4, 5, 6, 7):
            continue
        versions = sorted(schema_name_map[name])
        title = "".join(w.title() for w in name.split("_"))
        lines.append(
            f"| {key} | {title} | {versions[0]}–{versions[-1]} | "
            f"{NOT_SERVED.get(key, 'not implemented')} |"
        )
    below = [
        (s, max(schema_name_map[api_key_map[s.key]]))
        for s in sorted(table.values(), key=lambda s: s.key)
        if s.key in api_key_map and s.max_version < max(schema_name_map[api_key_map[s.key]])
    ]
    if below:
        lines += [
            "",
            "## Served below Kafka's newest version",
            "",
            "| key | API | served up to (Kafka's newest) | why |",
            "|---:|---|---|---|",
        ]
        lines += [
            f"| {s.key} | {s.name} | v{s.max_version} (v{newest}) | "
            f"{BELOW_NEWEST.get(s.key, 'not yet')} |"
            for s, newest in below
        ]
    return lines


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
    lines += not_served_markdown(table)
    return "\n".join(lines + NODE_CLIENTS) + "\n"


#: what the suite runs the Node.js clients through (tests/clients/test_kafkajs.py,
#: test_platformatic_kafka.py), against a single broker and a 3-broker cluster
NODE_CLIENTS = [
    "",
    "## Node.js clients in the test suite",
    "",
    "Pinned in `tests/node/package.json` (`make install-test`), driven step by step from",
    "pytest through one long-lived `node` process per module (`tests/clients/node.py`).",
    "",
    "| client | covered | not covered |",
    "|---|---|---|",
    "| kafkajs 2.2.4 | create (and again: exists), metadata, create partitions, AlterConfigs "
    "(valid and INVALID_CONFIG), DescribeConfigs (topic, broker), delete topics; produce with "
    "keys, headers and timestamps in none, gzip, snappy and lz4 (snappy and lz4 codecs from "
    "@platformatic/wasm-utils), read back identical; consumer groups: two members rebalance, "
    "commit, a later member resumes; list/describe/delete groups; fetch and set committed "
    "offsets; delete records; offsets by timestamp; idempotent producer through an injected "
    "NOT_LEADER_OR_FOLLOWER and a lost Produce response (each record once); transactions "
    "(abort, commit, sendOffsets, read_committed); a consumer through a dropped Fetch, "
    "injected Fetch errors, a severed connection, a leader epoch bump and a leader move to "
    "another broker | zstd (Node 20's zlib has none); kafkajs has no OffsetDelete, "
    "IncrementalAlterConfigs or KIP-848 consumer |",
    "| @platformatic/kafka 1.35.0 | create (and again: exists), metadata, create partitions, "
    "IncrementalAlterConfigs, AlterConfigs, DescribeConfigs (topic, broker), delete topics; "
    "produce with keys, headers and timestamps in none, gzip, snappy and lz4, read back "
    "identical; classic and KIP-848 (`groupProtocol: consumer`) groups: two members split "
    "the partitions, commit, a later member resumes; list/describe/delete groups; list, "
    "alter and delete committed offsets; ListOffsets (earliest, latest, timestamp); delete "
    "records; DescribeLogDirs; idempotent producer through an injected error and a lost "
    "response; transactions (abort, commit, read_committed); a consumer through a dropped "
    "Fetch, injected Fetch errors, a severed connection and a leader epoch bump; a producer "
    "through a leader move | zstd (needs Node 22.15+; 2.x needs Node 22); a MessagesStream "
    "fetching while its leader moves to another broker retries the old broker only and "
    "fails (the client's behaviour against Kafka too) |",
]


if __name__ == "__main__":
    from kafkalite.server.apis import build_broker_api_table

    print(compatibility_markdown(build_broker_api_table(None)), end="")
