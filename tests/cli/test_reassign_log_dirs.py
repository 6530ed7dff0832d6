"""``kafkalite reassign-partitions`` with ``log_dirs`` (AlterReplicaLogDirs, verified by
DescribeLogDirs) and ``--cancel`` (of a log-dir move and of a partition reassignment),
with the output of Kafka's ReassignPartitionsCommand."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from kafkalite.cli.admin import main
from kafkalite.testing import broker, cluster


def run(capsys: pytest.CaptureFixture[str], bs: str, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["reassign-partitions", "--bootstrap-server", bs, *args])
    return rc, capsys.readouterr().out


def _fill(bs: str, topic: str, n: int = 60) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for _ in range(n):  # a batch each: many segments, so a move has files to copy
        p.produce(topic, b"x" * 4000, partition=0)
        assert p.flush(30) == 0


def _dirs(capsys: pytest.CaptureFixture[str], bs: str, topic: str) -> dict[str, bool]:
    """log dir -> isFuture of the topic's partition 0, from ``log-dirs --describe``."""
    capsys.readouterr()
    assert main(["log-dirs", "--bootstrap-server", bs, "--describe", "--topic-list", topic]) == 0
    doc = json.loads(capsys.readouterr().out.splitlines()[-1])
    return {
        d["logDir"]: p["isFuture"]
        for b in doc["brokers"]
        for d in b["logDirs"]
        for p in d["partitions"]
    }


def _plan(path: Path, topic: str, replicas: list[int], dirs: list[str]) -> str:
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": topic, "partition": 0, "replicas": replicas, "log_dirs": dirs}
                ],
            }
        )
    )
    return str(path)


def test_move_between_log_dirs_verify_and_cancel(tmp_path: Path, capsys: Any) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    with broker(tmp_path / "b", **{"log.dirs": f"{d1},{d2}"}) as b:
        bs, bid = b.bootstrap_servers, b.kafka.config.broker_id
        b.create_topic("moves", config={"segment.bytes": "16384"})
        _fill(bs, "moves")
        (start,) = _dirs(capsys, bs, "moves")
        other = str(d2) if start == str(d1) else str(d1)

        plan = _plan(tmp_path / "move.json", "moves", [bid], [other])
        rc, out = run(capsys, bs, "--execute", "--reassignment-json-file", plan)
        assert rc == 0, out
        assert out.splitlines()[-2:] == [
            "Successfully started partition reassignment for moves-0",
            f"Successfully started moving log directory to {other} for replica moves-0 "
            f"with broker {bid} ",
        ]
        deadline = time.monotonic() + 30
        while True:
            rc, out = run(capsys, bs, "--verify", "--reassignment-json-file", plan)
            assert rc == 0
            if "completed successfully" in out or time.monotonic() > deadline:
                break
            assert f"Reassignment of replica moves-0-{bid} is still in progress." in out
            time.sleep(0.2)
        assert f"Reassignment of replica moves-0-{bid} completed successfully." in out
        assert _dirs(capsys, bs, "moves") == {other: False}

        # back to the first dir at 1 B/s: still copying when --cancel comes
        back = _plan(tmp_path / "back.json", "moves", [bid], [start])
        rc, out = run(capsys, bs, "--execute", "--reassignment-json-file", back,
                      "--replica-alter-log-dirs-throttle", "1")  # fmt: skip
        assert rc == 0, out
        assert "The replica-alter-dir throttle limit was set to 1 B/s" in out
        rc, out = run(capsys, bs, "--verify", "--reassignment-json-file", back)
        assert f"Reassignment of replica moves-0-{bid} is still in progress." in out
        assert _dirs(capsys, bs, "moves") == {other: False, start: True}

        rc, out = run(capsys, bs, "--cancel", "--reassignment-json-file", back)
        assert rc == 0, out
        assert out.splitlines() == [
            "None of the specified partition reassignments are active.",
            f"Successfully started moving log directory to {other} for replica moves-0 "
            f"with broker {bid} ",
            f"Clearing broker-level throttles on broker {bid}",
            "Clearing topic-level throttles on topic moves",
        ]
        rc, out = run(capsys, bs, "--verify", "--reassignment-json-file", back)
        assert (
            f"Partition moves-0 on broker {bid} is not being moved from log dir {other} "
            f"to {start}." in out
        )
        assert _dirs(capsys, bs, "moves") == {other: False}


def test_cancel_an_ongoing_partition_reassignment(tmp_path: Path, capsys: Any) -> None:
    with cluster(3) as c:
        bs = c.bootstrap_servers
        c.create_topic("slow", partitions=1, replication_factor=2, assignments={0: [0, 1]})
        _fill(bs, "slow", 30)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "slow", "partition": 0, "replicas": [2, 1]}]}))  # fmt: skip
        # 1 B/s: broker 2 cannot catch up, the reassignment stays in progress
        rc, out = run(capsys, bs, "--execute", "--reassignment-json-file", str(plan), "--throttle", "1")  # fmt: skip
        assert rc == 0, out
        rc, out = run(capsys, bs, "--list")
        assert out.startswith("Current partition reassignments:\nslow-0: replicas: ")
        rc, out = run(capsys, bs, "--cancel", "--reassignment-json-file", str(plan))
        assert rc == 0, out
        # Kafka's tool prints the second line without a line end
        assert out.splitlines() == [
            "Successfully cancelled partition reassignment for: slow-0",
            "None of the specified partition moves are active."
            "Clearing broker-level throttles on brokers 0,1,2",
            "Clearing topic-level throttles on topic slow",
        ]
        assert run(capsys, bs, "--list") == (0, "No partition reassignments found.\n")
        # nothing left to cancel
        rc, out = run(capsys, bs, "--cancel", "--reassignment-json-file", str(plan), "--preserve-throttles")  # fmt: skip
        assert (rc, out) == (
            0,
            "None of the specified partition reassignments are active.\n"
            "None of the specified partition moves are active.",
        )
