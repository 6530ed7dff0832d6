"""Consumer groups at 100 members: the consumer protocol (KIP-848) against the classic one.

    python bench/group_bench.py [--members 100] [--partitions 300] [--protocols consumer,classic]

Starts kafkalite as its own process (Kafka's defaults: the consumer protocol's
heartbeat interval is 5 s, the classic group's initial rebalance delay is 0 as
in the test fixtures) and, per protocol, with confluent-kafka (librdkafka):

- ``to stable``: from the first ``subscribe`` until the coordinator reports the
  group Stable with every member holding partitions (ConsumerGroupDescribe,
  DescribeGroups for classic), all members polled round-robin by one thread;
- ``moved``: one member closes; once the group is Stable again, how many of the
  partitions held by the *others* changed owner (the leaver's own partitions
  must move; a sticky protocol moves nothing else). Classic uses librdkafka's
  default assignors (``range,roundrobin``) and, as a second row,
  ``cooperative-sticky``.

One run, printed as a table; figures depend on the machine, never on a test.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer  # noqa: E402

from bench.harness.brokers import Kafkalite  # noqa: E402
from kafkalite.cli.wire_client import WireClient  # noqa: E402
from kafkalite.coordinator.group.consumer_protocol import assigned_partitions  # noqa: E402

Owners = dict[tuple[str, int], str]


def _owners(w: WireClient, group: str, classic: bool) -> tuple[str, int, Owners]:
    """(state, members, partition -> member id) as the coordinator reports them."""
    out: Owners = {}
    if classic:
        r = w.call(15, 5, {"groups": [group], "include_authorized_operations": False})
        g = r.groups[0]
        for m in g.members:
            for t, ps in (assigned_partitions(bytes(m.member_assignment)) or {}).items():
                for p in ps:
                    out[(t, p)] = m.member_id
        return g.group_state, len(g.members), out
    r = w.call(69, 0, {"group_ids": [group], "include_authorized_operations": False})
    g = r.groups[0]
    for m in g.members:
        for tp in m.assignment.topic_partitions:
            for p in tp.partitions:
                out[(tp.topic_name, p)] = m.member_id
    return g.group_state, len(g.members), out


def _run(bootstrap: str, topic: str, n: int, partitions: int, protocol: str, extra: dict) -> dict:
    classic = protocol != "consumer"
    group = f"bench-{protocol}-{uuid.uuid4().hex[:6]}"
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer" if not classic else "classic",
        "enable.auto.commit": False,
        **extra,
    }
    consumers = [Consumer(conf) for _ in range(n)]
    w = WireClient(bootstrap)
    w.call(10, 4, {"key_type": 0, "coordinator_keys": [group]})

    def wait_stable(members: int, limit: float = 300) -> tuple[float, Owners]:
        start = time.monotonic()
        last_check = 0.0
        while time.monotonic() - start < limit:
            for c in consumers:
                c.poll(0)
            now = time.monotonic()
            if now - last_check > 0.1:
                last_check = now
                state, count, owners = _owners(w, group, classic)
                holders = len(set(owners.values()))
                if (
                    state == "Stable"
                    and count == members
                    and len(owners) == partitions
                    and holders == min(members, partitions)
                ):
                    return now - start, owners
            time.sleep(0.005)
        raise RuntimeError(f"{protocol}: group not stable after {limit} s")

    try:
        for c in consumers:
            c.subscribe([topic])
        to_stable, before = wait_stable(n)
        leaver = consumers.pop()
        leaver.close()
        after_s, after = wait_stable(n - 1)
        left = set(before.values()) - set(after.values())
        moved_others = sum(1 for tp, m in before.items() if m not in left and after.get(tp) != m)
        return {
            "protocol": protocol
            + (f" ({extra['partition.assignment.strategy']})" if extra else ""),
            "to_stable_s": to_stable,
            "rebalance_s": after_s,
            "leaver_partitions": sum(1 for m in before.values() if m in left),
            "moved_others": moved_others,
        }
    finally:
        for c in consumers:
            c.close()
        w.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=300)
    ap.add_argument("--protocols", default="consumer,classic,classic-sticky")
    args = ap.parse_args(argv)
    broker = Kafkalite()
    broker.start()
    try:
        topic = f"bench-groups-{uuid.uuid4().hex[:6]}"
        w = WireClient(broker.bootstrap)
        r = w.call(
            19,
            7,
            {
                "topics": [
                    {
                        "name": topic,
                        "num_partitions": args.partitions,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout": 30000,
                "validate_only": False,
            },
        )
        assert not r.topics[0].error_code, r
        w.close()
        rows = []
        for p in args.protocols.split(","):
            extra = (
                {"partition.assignment.strategy": "cooperative-sticky"}
                if p == "classic-sticky"
                else {}
            )
            proto = "classic" if p.startswith("classic") else p
            print(f"running {p} ...", file=sys.stderr, flush=True)
            rows.append(_run(broker.bootstrap, topic, args.members, args.partitions, proto, extra))
        print(f"{args.members} members (confluent-kafka), {args.partitions} partitions, one run\n")
        print(
            "| protocol | to Stable | Stable again after one leaves | leaver's partitions | others' partitions moved |"
        )
        print("|---|---:|---:|---:|---:|")
        for r in rows:
            print(
                f"| {r['protocol']} | {r['to_stable_s']:.1f} s | {r['rebalance_s']:.1f} s | "
                f"{r['leaver_partitions']} | {r['moved_others']} |"
            )
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
