"""The tools where replicas matter, on the in-process 3-broker cluster: reassignment
(generate, execute with a throttle, verify clearing it, list), preferred leader election,
and topics' --under-replicated-partitions / --unavailable-partitions after a crash."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from kafkalite.cli.admin import main
from kafkalite.testing import cluster


@pytest.fixture
def three() -> Any:
    """A fresh cluster per test (starting one takes milliseconds): the tests crash brokers."""
    # a short replica.lag.time.max.ms: the ISR shrinks soon after a broker dies
    with cluster(3, **{"replica.lag.time.max.ms": 1500}) as c:
        yield c


def run(capsys: pytest.CaptureFixture[str], bs: str, tool: str, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = main([tool, "--bootstrap-server", bs, *args])
    return rc, capsys.readouterr().out


def partitions(out: str) -> list[list[str]]:
    """The partition lines' Topic, Partition, Leader and Replicas fields."""
    return [line.strip().split("\t")[:4] for line in out.splitlines() if line.startswith("\t")]


def test_reassign_generate_execute_verify_list(three, capsys, tmp_path):
    bs = three.bootstrap_servers
    three.create_topic("mv", partitions=2, replication_factor=2, assignments={0: [0, 1], 1: [1, 0]})
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": "mv"}], "version": 1}))
    rc, out = run(capsys, bs, "reassign-partitions", "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1,2")  # fmt: skip
    lines = out.splitlines()
    assert rc == 0 and lines[0] == "Current partition replica assignment"
    assert json.loads(lines[1]) == {
        "version": 1,
        "partitions": [
            {"topic": "mv", "partition": 0, "replicas": [0, 1], "log_dirs": ["any", "any"]},
            {"topic": "mv", "partition": 1, "replicas": [1, 0], "log_dirs": ["any", "any"]},
        ],
    }
    assert lines[2:4] == ["", "Proposed partition reassignment configuration"]
    proposed = json.loads(lines[4])
    assert all(set(p["replicas"]) == {1, 2} for p in proposed["partitions"])

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "mv", "partition": 0, "replicas": [2, 1]}]}))  # fmt: skip
    rc, out = run(capsys, bs, "reassign-partitions", "--execute", "--reassignment-json-file", str(plan), "--throttle", "50000000")  # fmt: skip
    assert rc == 0
    assert out.splitlines()[:5] == [
        "Current partition replica assignment",
        "",
        '{"version":1,"partitions":[{"topic":"mv","partition":0,"replicas":[0,1],"log_dirs":["any","any"]}]}',
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
    ]
    assert "The inter-broker throttle limit was set to 50000000 B/s" in out
    assert out.splitlines()[-1] == "Successfully started partition reassignment for mv-0"

    deadline = time.monotonic() + 30
    while True:
        rc, out = run(capsys, bs, "reassign-partitions", "--verify", "--reassignment-json-file", str(plan))  # fmt: skip
        assert rc == 0
        if "is completed" in out or time.monotonic() > deadline:
            break
        # in progress, or done on the controller while this broker's metadata still
        # shows the moving replica set (Kafka's tool prints the same in that window)
        assert (
            "Reassignment of partition mv-0 is still in progress." in out
            or "There is no active reassignment of partition mv-0, but replica set is" in out
        ), out
        time.sleep(0.3)
    assert out.splitlines() == [
        "Status of partition reassignment:",
        "Reassignment of partition mv-0 is completed.",
        "Clearing broker-level throttles on brokers 0,1,2",
        "Clearing topic-level throttles on topic mv",
    ]
    assert run(capsys, bs, "reassign-partitions", "--list") == (0, "No partition reassignments found.\n")  # fmt: skip
    rc, out = run(capsys, bs, "configs", "--entity-type", "topics", "--entity-name", "mv", "--describe")  # fmt: skip
    assert out == "Dynamic configs for topic mv are:\n"  # the throttle is gone
    rc, out = run(capsys, bs, "topics", "--describe", "--topic", "mv")
    assert partitions(out)[0] == ["Topic: mv", "Partition: 0", "Leader: 2", "Replicas: 2,1"]


def test_preferred_leader_election(three, capsys, tmp_path):
    """The preferred replica back after a restart but not leading; the election moves the
    leadership back to it."""
    bs = three.bootstrap_servers
    three.create_topic("pe", partitions=1, replication_factor=2, assignments={0: [1, 0]})
    deadline = time.monotonic() + 20
    three.restart(1)  # a clean stop: controlled shutdown hands the leadership to 0
    while three.leader_of("pe", 0) != 0:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    spec = tmp_path / "elect.json"
    spec.write_text(json.dumps({"partitions": [{"topic": "pe", "partition": 0}]}))
    while True:  # until broker 1 is back in the ISR: before, the election fails (exit 1)
        rc, out = run(capsys, bs, "leader-election", "--election-type", "preferred", "--path-to-json-file", str(spec))  # fmt: skip
        if rc == 0 or time.monotonic() > deadline:
            break
        assert out.startswith("Error completing leader election (PREFERRED) for partition: pe-0: ")
        time.sleep(0.2)
    assert (rc, out) == (0, "Successfully completed leader election (PREFERRED) for partitions pe-0\n")  # fmt: skip
    while three.leader_of("pe", 0) != 1:  # the new leader reaches every broker's cache
        assert time.monotonic() < deadline
        time.sleep(0.1)
    rc, out = run(capsys, bs, "leader-election", "--election-type", "preferred", "--topic", "pe", "--partition", "0")  # fmt: skip
    assert (rc, out) == (0, "Valid replica already elected for partitions pe-0\n")


def test_under_replicated_and_unavailable_partitions_after_a_crash(three, capsys):
    three.create_topic("urp", partitions=2, replication_factor=2, assignments={0: [0, 2], 1: [2, 0]})  # fmt: skip
    three.create_topic("solo", partitions=1, replication_factor=1, assignments={0: [2]})
    three.crash(2)
    _reports(three, capsys)


def _reports(three: Any, capsys: pytest.CaptureFixture[str]) -> None:
    bs = three.bootstrap_servers
    deadline = time.monotonic() + 20
    while True:
        rc, out = run(capsys, bs, "topics", "--describe", "--under-replicated-partitions")
        rows = partitions(out)
        if len([r for r in rows if r[0].startswith("Topic: urp")]) == 2 or time.monotonic() > deadline:  # fmt: skip
            break
        time.sleep(0.3)
    assert rc == 0 and not out.startswith("Topic:")  # partition lines only, as Kafka's report
    assert [r for r in rows if r[0] == "Topic: urp"] == [
        ["Topic: urp", "Partition: 0", "Leader: 0", "Replicas: 0,2"],
        ["Topic: urp", "Partition: 1", "Leader: 0", "Replicas: 2,0"],
    ]
    rc, out = run(capsys, bs, "topics", "--describe", "--unavailable-partitions")
    assert rc == 0
    assert [r[:3] for r in partitions(out)] == [["Topic: solo", "Partition: 0", "Leader: none"]]
