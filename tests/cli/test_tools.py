"""``kafkalite <tool>`` against a live embedded broker, in-process through ``main(argv)``:
each tool's output in Kafka's format (docs/cli.md shows Kafka's side by side) and its
exit code. Two runs are real subprocesses (the console script's exit codes)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from kafkalite.cli.admin import main


@pytest.fixture
def cli(kafka_bootstrap: str, capsys: pytest.CaptureFixture[str]) -> Any:
    """``cli(tool, *args) -> (exit code, stdout, stderr)`` with --bootstrap-server."""

    def run(tool: str, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
        capsys.readouterr()
        old = sys.stdin
        if stdin is not None:
            sys.stdin = io.StringIO(stdin)
        try:
            rc = main([tool, "--bootstrap-server", kafka_bootstrap, *args])
        finally:
            sys.stdin = old
        out, err = capsys.readouterr()
        return rc, out, err

    return run


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def test_topics_create_alter_describe_reports_and_errors(cli):
    t = name("cli-topics")
    assert cli(
        "topics", "--create", "--topic", t, "--partitions", "2", "--config", "retention.ms=123456"
    )[:2] == (0, f"Created topic {t}.\n")
    assert cli("topics", "--alter", "--topic", t, "--partitions", "3")[0] == 0
    rc, out, err = cli("topics", "--alter", "--topic", t, "--partitions", "2")
    assert rc == 1
    assert err.strip().startswith("Error while executing topic command : ")
    assert "INVALID_PARTITIONS" in err and "currently has 3 partitions" in err

    rc, out, _ = cli("topics", "--describe", "--topic", t)
    lines = out.splitlines()
    assert rc == 0 and len(lines) == 4
    # TopicCommand's lines: the topic, then one per partition (ZooKeeper mode: no ELR)
    assert re.fullmatch(
        rf"Topic: {t}\tTopicId: [A-Za-z0-9_-]{{22}}\tPartitionCount: 3\tReplicationFactor: 1\t"
        r"Configs: (\S+,)?retention\.ms=123456(,\S+)?",
        lines[0],
    ), lines[0]
    assert lines[1:] == [
        f"\tTopic: {t}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: N/A\tLastKnownElr: N/A"
        for p in range(3)
    ]
    # --topic is a regular expression; --list prints names only
    rc, out, _ = cli("topics", "--list", "--topic", t[:-6] + ".*")
    assert rc == 0 and t in out.split()
    # one broker: nothing under-replicated or unavailable
    assert cli("topics", "--describe", "--under-replicated-partitions")[:2] == (0, "")
    assert cli("topics", "--describe", "--unavailable-partitions")[:2] == (0, "")
    # --topics-with-overrides: topic lines only, of topics with a non-default config
    rc, out, _ = cli("topics", "--describe", "--topics-with-overrides", "--topic", t)
    assert rc == 0 and out.count("\n") == 1 and out.startswith(f"Topic: {t}\t")
    rc, _, err = cli("topics", "--describe", "--topic", t + "-missing")
    assert rc == 1 and err == (
        f"Error while executing topic command : Topic '{t}-missing' does not exist as expected\n"
    )
    assert cli("topics", "--describe", "--topic", t + "-missing", "--if-exists")[0] == 0
    assert cli("topics", "--create", "--topic", t, "--if-not-exists")[0] == 0
    rc, _, err = cli("topics", "--create", "--topic", t)
    assert rc == 1 and "TOPIC_ALREADY_EXISTS" in err
    assert cli("topics", "--delete", "--topic", t)[0] == 0
    assert t not in cli("topics", "--list")[1].split()


def test_console_producer_and_consumer_keys_headers_partitions(cli):
    t = name("cli-console")
    assert cli("topics", "--create", "--topic", t, "--partitions", "3")[0] == 0
    rc, _, err = cli(
        "console-producer",
        "--topic",
        t,
        "--property",
        "parse.key=true",
        "key.separator=:",
        "parse.headers=true",
        "--partition",
        "1",
        stdin="h1:a,h2:b\tk1:v1\n\tk2:v2\n",
    )
    assert (rc, err) == (0, "")
    rc, out, err = cli(
        "console-consumer",
        "--topic",
        t,
        "--from-beginning",
        "--max-messages",
        "2",
        "--property",
        "print.key=true",
        "print.headers=true",
        "print.partition=true",
        "print.offset=true",
        "print.timestamp=true",
    )
    assert rc == 0 and err.strip() == "Processed a total of 2 messages"
    rows = [line.split("\t") for line in out.splitlines()]
    assert [r[1:] for r in rows] == [
        ["Partition:1", "Offset:0", "h1:a,h2:b", "k1", "v1"],
        ["Partition:1", "Offset:1", "NO_HEADERS", "k2", "v2"],
    ]
    assert all(re.fullmatch(r"CreateTime:\d{13}", r[0]) for r in rows)
    # a line without the key separator is an error, as in LineMessageReader
    rc, _, err = cli(
        "console-producer", "--topic", t, "--property", "parse.key=true", stdin="no-separator\n"
    )
    assert rc == 1 and "No key separator found on line number 1" in err
    # --partition with --offset, and --timeout-ms ends the run
    rc, out, _ = cli(
        "console-consumer", "--topic", t, "--partition", "1", "--offset", "1", "--timeout-ms", "500"
    )
    assert (rc, out) == (0, "v2\n")
    rc, _, err = cli("console-consumer", "--topic", t, "--offset", "1")
    assert rc == 2 and "partition is required" in err


def _wait(pred: Any, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.1)


def test_consumer_groups_describe_reset_delete(cli, kafka_bootstrap, tmp_path):
    t, g = name("cli-cg"), name("cli-group")
    assert cli("topics", "--create", "--topic", t, "--partitions", "2")[0] == 0
    p = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(10):
        p.produce(t, f"v{i}".encode(), partition=i % 2)
    p.flush(10)
    # a live member that has consumed and committed everything
    c = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": g,
            "client.id": "cli-member",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([t])
    seen = 0
    end = time.monotonic() + 30
    while seen < 10 and time.monotonic() < end:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            seen += 1
            c.commit(m, asynchronous=False)
    assert seen == 10
    try:
        rc, out, _ = cli("consumer-groups", "--describe", "--group", g)
        assert rc == 0
        lines = out.splitlines()
        assert lines[0] == ""  # every table starts with %n, as in ConsumerGroupCommand
        assert lines[1].split() == [
            "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
            "CONSUMER-ID", "HOST", "CLIENT-ID",
        ]  # fmt: skip
        rows = [line.split() for line in lines[2:]]
        assert [r[:6] for r in rows] == [[g, t, "0", "5", "5", "0"], [g, t, "1", "5", "5", "0"]]
        assert all(r[8] == "cli-member" and r[6] != "-" for r in rows)
        # the columns are where Kafka's %-Ns widths put them
        assert lines[1].index("TOPIC") == max(15, len(g)) + 1
        rc, out, _ = cli("consumer-groups", "--describe", "--group", g, "--members", "--verbose")
        assert rc == 0
        assert out.splitlines()[1].split() == [
            "GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT",
        ]  # fmt: skip
        assert out.splitlines()[2].split()[-2:] == ["2", f"{t}(0,1)"]
        rc, out, _ = cli("consumer-groups", "--describe", "--group", g, "--state")
        assert rc == 0
        assert out.splitlines()[1].split()[:2] == ["GROUP", "COORDINATOR"]
        assert out.splitlines()[2].split()[-3:] == ["range", "Stable", "1"]
        rc, out, _ = cli("consumer-groups", "--list", "--state", "--type")
        assert rc == 0 and [g, "Classic", "Stable"] in [line.split() for line in out.splitlines()]
        # offsets are only reset in an inactive group
        rc, _, err = cli("consumer-groups", "--reset-offsets", "--group", g, "--all-topics", "--to-earliest", "--execute")  # fmt: skip
        assert rc == 1
        assert err.strip() == (
            f"Error: Assignments can only be reset if the group '{g}' is inactive, but the "
            "current state is Stable."
        )
    finally:
        c.close()

    def reset(*how: str) -> list[list[str]]:
        rc, out, _ = cli("consumer-groups", "--reset-offsets", "--group", g, *how)
        assert rc == 0, out
        return [line.split() for line in out.splitlines() if line.startswith(g)]

    # a dry run by default (with Kafka's warning), --execute commits
    rc, out, _ = cli("consumer-groups", "--reset-offsets", "--group", g, "--topic", t, "--to-earliest")  # fmt: skip
    assert out.startswith("WARN: No action will be performed as the --execute option is missing.")
    assert reset("--topic", t, "--to-earliest", "--dry-run") == [[g, t, "0", "0"], [g, t, "1", "0"]]
    assert reset("--topic", f"{t}:1", "--to-offset", "3", "--execute") == [[g, t, "1", "3"]]
    assert reset("--all-topics", "--shift-by", "-1", "--execute") == [[g, t, "0", "4"], [g, t, "1", "2"]]  # fmt: skip
    assert reset("--topic", t, "--to-offset", "99", "--dry-run") == [[g, t, "0", "5"], [g, t, "1", "5"]]  # fmt: skip
    assert reset("--topic", t, "--to-datetime", "2000-01-01T00:00:00.000Z", "--dry-run") == [
        [g, t, "0", "0"],
        [g, t, "1", "0"],
    ]
    assert reset("--topic", t, "--by-duration", "PT0S", "--dry-run") == [[g, t, "0", "5"], [g, t, "1", "5"]]  # fmt: skip
    rc, out, _ = cli("consumer-groups", "--reset-offsets", "--group", g, "--all-topics", "--to-latest", "--export")  # fmt: skip
    assert (rc, out) == (0, f"{t},0,5\n{t},1,5\n")
    exported = tmp_path / "offsets.csv"
    exported.write_text(f"{t},1,1\n")
    assert reset("--from-file", str(exported), "--execute") == [[g, t, "1", "1"]]
    rc, out, err = cli("consumer-groups", "--describe", "--group", g)
    assert rc == 0 and f"Consumer group '{g}' has no active members." in err
    rows = [line.split() for line in out.splitlines() if line.startswith(g)]
    assert [r[2:] for r in rows] == [["0", "4", "5", "1", "-", "-", "-"], ["1", "1", "5", "4", "-", "-", "-"]]  # fmt: skip

    rc, out, _ = cli("consumer-groups", "--delete-offsets", "--group", g, "--topic", f"{t}:1")
    assert rc == 0
    assert out.splitlines()[0] == f"Request succeed for deleting offsets with topic {t} group {g}"
    assert out.splitlines()[3].split() == [t, "1", "Successful"]
    rows = [line.split() for line in cli("consumer-groups", "--describe", "--group", g)[1].splitlines() if line.startswith(g)]  # fmt: skip
    assert [r[2] for r in rows] == ["0"]
    rc, out, _ = cli("consumer-groups", "--delete", "--group", g)
    assert (rc, out) == (0, f"Deletion of requested consumer groups ('{g}') was successful.\n")
    rc, out, _ = cli("consumer-groups", "--describe", "--group", g)
    assert rc == 1 and out.strip() == f"Error: Consumer group '{g}' does not exist."
    rc, _, err = cli("consumer-groups", "--delete", "--group", g)
    assert rc == 1 and "GROUP_ID_NOT_FOUND" in err
    assert g not in cli("consumer-groups", "--list")[1].split()


def test_configs_brokers_defaults_and_groups(cli):
    def configs(*args: str) -> tuple[int, str, str]:
        return cli("configs", *args)

    t = name("cli-cfg")
    assert cli("topics", "--create", "--topic", t)[0] == 0
    assert configs("--entity-type", "topics", "--entity-name", t, "--alter", "--add-config", "retention.ms=5000,cleanup.policy=[delete,compact]")[:2] == (0, f"Completed updating config for topic {t}.\n")  # fmt: skip
    rc, out, _ = configs("--entity-type", "topics", "--entity-name", t, "--describe")
    assert rc == 0 and out.splitlines() == [
        f"Dynamic configs for topic {t} are:",
        "  cleanup.policy=delete,compact sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=delete,compact, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000}",
    ]
    rc, out, _ = configs("--topic", t, "--describe", "--all")
    assert out.splitlines()[0] == f"All configs for topic {t} are:" and len(out.splitlines()) > 20

    try:
        assert configs("--entity-type", "brokers", "--entity-name", "0", "--alter", "--add-config", "log.retention.ms=7200000")[:2] == (0, "Completed updating config for broker 0.\n")  # fmt: skip
        assert configs("--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "num.partitions=2")[:2] == (0, "Completed updating default config for brokers in the cluster.\n")  # fmt: skip
        rc, out, _ = configs("--entity-type", "brokers", "--describe")
        assert rc == 0 and out.splitlines() == [
            "Dynamic configs for broker 0 are:",
            "  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
            "log.retention.ms=7200000, DEFAULT_CONFIG:log.retention.hours=168}",
            "Default configs for brokers in the cluster are:",
            "  num.partitions=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
            "num.partitions=2}",
        ]
        rc, out, _ = configs("--broker", "0", "--describe", "--all")
        assert "  broker.id=0 sensitive=false synonyms={STATIC_BROKER_CONFIG:broker.id=0, DEFAULT_CONFIG:broker.id=-1}" in out.splitlines()  # fmt: skip
        rc, _, err = configs("--entity-type", "brokers", "--entity-name", "0", "--alter", "--add-config", "log.dirs=/tmp/x")  # fmt: skip
        assert rc == 1 and "Cannot update these configs dynamically: log.dirs" in err
    finally:
        assert configs("--entity-type", "brokers", "--entity-name", "0", "--alter", "--delete-config", "log.retention.ms")[0] == 0  # fmt: skip
        assert configs("--broker-defaults", "--alter", "--delete-config", "num.partitions")[0] == 0
    rc, out, _ = configs("--entity-type", "brokers", "--describe")
    assert out.splitlines() == [
        "Dynamic configs for broker 0 are:",
        "Default configs for brokers in the cluster are:",
    ]
    # GROUP config resources (KIP-848's consumer.session.timeout.ms, share.*)
    g = name("cli-cfg-group")
    assert configs("--entity-type", "groups", "--entity-name", g, "--alter", "--add-config", "consumer.session.timeout.ms=50000")[:2] == (0, f"Completed updating config for group {g}.\n")  # fmt: skip
    rc, out, _ = configs("--group", g, "--describe")
    assert rc == 0 and out.splitlines() == [
        f"Dynamic configs for group {g} are:",
        "  consumer.session.timeout.ms=50000 sensitive=false synonyms={GROUP_CONFIG:"
        "consumer.session.timeout.ms=50000, DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}",
    ]
    rc, _, err = configs("--group", g, "--alter", "--add-config", "consumer.session.timeout.ms=1")
    assert rc == 1 and err.startswith("Error: invalid_config: consumer.session.timeout.ms must be")
    rc, _, err = configs("--entity-type", "topics", "--entity-default", "--describe")
    assert rc == 2 and "--entity-default" in err


def test_offsets_delete_records_log_dirs_api_versions_election(cli, kafka_bootstrap, tmp_path):
    t = name("cli-offsets")
    assert cli("topics", "--create", "--topic", t, "--partitions", "2")[0] == 0
    p = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(6):
        p.produce(t, b"x" * 10, partition=0, timestamp=1_700_000_000_000 + i * 1000)
    p.flush(10)
    assert cli("get-offsets", "--topic", t)[:2] == (0, f"{t}:0:6\n{t}:1:0\n")
    assert cli("get-offsets", "--topic", t, "--time", "-2")[1] == f"{t}:0:0\n{t}:1:0\n"
    assert cli("get-offsets", "--topic-partitions", f"{t}:0", "--time", "1700000002500")[1] == f"{t}:0:3\n"  # fmt: skip
    assert cli("get-offsets", "--topic", t, "--partitions", "1", "--time", "max-timestamp")[1] == ""  # fmt: skip

    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"partitions": [{"topic": t, "partition": 0, "offset": 4}], "version": 1}))  # fmt: skip
    rc, out, _ = cli("delete-records", "--offset-json-file", str(spec))
    assert (rc, out) == (
        0,
        "Executing records delete operation\nRecords delete operation completed:\n"
        f"partition: {t}-0\tlow_watermark: 4\n",
    )
    assert cli("get-offsets", "--topic", t, "--time", "earliest")[1] == f"{t}:0:4\n{t}:1:0\n"
    spec.write_text(json.dumps({"partitions": [{"topic": t, "partition": 0, "offset": 60}]}))
    rc, out, _ = cli("delete-records", "--offset-json-file", str(spec))
    assert rc == 1 and f"partition: {t}-0\terror: OFFSET_OUT_OF_RANGE" in out

    rc, out, _ = cli("log-dirs", "--describe", "--topic-list", t)
    lines = out.splitlines()
    assert rc == 0 and lines[:2] == [
        "Querying brokers for log directories information",
        "Received log directory information from brokers 0",
    ]
    doc = json.loads(lines[2])
    assert doc["version"] == 1 and [b["broker"] for b in doc["brokers"]] == [0]
    (d,) = doc["brokers"][0]["logDirs"]
    assert d["error"] is None and d["logDir"]
    assert sorted(x["partition"] for x in d["partitions"]) == [f"{t}-0", f"{t}-1"]
    assert next(x for x in d["partitions"] if x["partition"] == f"{t}-0")["size"] > 0
    assert cli("log-dirs", "--describe", "--broker-list", "7")[0] == 1

    rc, out, _ = cli("broker-api-versions")
    lines = out.splitlines()
    assert rc == 0 and re.fullmatch(r"127\.0\.0\.1:\d+ \(id: 0 rack: null\) -> \(", lines[0])
    assert "\tProduce(0): 0 to 13 [usable: 13]," in lines
    assert "\tApiVersions(18): 0 to 4 [usable: 4]," in lines and lines[-1] == ")"

    rc, out, _ = cli("leader-election", "--election-type", "preferred", "--topic", t, "--partition", "0")  # fmt: skip
    assert (rc, out) == (0, f"Valid replica already elected for partitions {t}-0\n")
    rc, _, err = cli("leader-election", "--election-type", "preferred")
    assert rc == 2 and "--all-topic-partitions" in err


def test_perf_tests_print_kafkas_lines(cli):
    t = name("cli-perf")
    assert cli("topics", "--create", "--topic", t)[0] == 0
    rc, out, _ = cli("producer-perf-test", "--topic", t, "--num-records", "500", "--record-size", "100", "--throughput", "-1", "--producer-props", "acks=1", "linger.ms=1")  # fmt: skip
    assert rc == 0
    assert re.fullmatch(
        r"500 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
        r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.\n",
        out,
    ), out
    rc, out, _ = cli("consumer-perf-test", "--topic", t, "--messages", "500", "--timeout", "15000")
    lines = out.splitlines()
    assert rc == 0 and lines[0] == (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )
    fields = lines[1].split(", ")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}", fields[0])
    assert fields[2] == "0.0477" and fields[4] == "500"  # 500 x 100 bytes in MiB


def test_usage_errors_exit_2(cli):
    assert cli("topics", "--describe", "--list")[0] == 2
    assert cli("topics", "--alter", "--partitions", "9")[0] == 2  # never every topic
    assert cli("consumer-groups", "--describe")[0] == 2
    rc, _, err = cli("consumer-groups", "--reset-offsets", "--group", "g", "--all-topics")
    assert rc == 2 and "requires one of" in err
    assert main(["no-such-tool"]) == 2


def test_console_script_exit_codes_and_unreachable_broker(kafka_bootstrap):
    """The installed entry point: one line and exit 1 for a broker nobody listens on
    (within the probe's 3 s), exit 1 for an error from the broker."""
    exe = [sys.executable, "-m", "kafkalite.cli.admin"]
    r = subprocess.run(
        [*exe, "consumer-groups", "--bootstrap-server", "127.0.0.1:1", "--list"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == "Error: cannot connect to any broker at 127.0.0.1:1 (Connection refused)\n"
    r = subprocess.run(
        [*exe, "topics", "--bootstrap-server", kafka_bootstrap, "--describe", "--topic", "nope-x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1 and "Topic 'nope-x' does not exist as expected" in r.stderr
    assert "Traceback" not in r.stderr


def test_consumer_groups_describe_a_kip848_group(cli, kafka_bootstrap):
    """A group of the consumer protocol (KIP-848): the same tables, type Consumer, the
    server-side assignor as ASSIGNMENT-STRATEGY."""
    t, g = name("cli-848"), name("cli-848-group")
    assert cli("topics", "--create", "--topic", t, "--partitions", "2")[0] == 0
    p = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(4):
        p.produce(t, b"v", partition=i % 2)
    p.flush(10)
    c = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": g,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([t])
    try:
        seen, end = 0, time.monotonic() + 30
        while seen < 4 and time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                seen += 1
        assert seen == 4
        c.commit(asynchronous=False)
        rc, out, _ = cli("consumer-groups", "--describe", "--group", g, "--state")
        assert rc == 0 and out.splitlines()[2].split()[-3:] == ["uniform", "Stable", "1"]
        rc, out, _ = cli("consumer-groups", "--list", "--type", "consumer")
        assert rc == 0 and [g, "Consumer"] in [line.split() for line in out.splitlines()]
        rc, out, _ = cli("consumer-groups", "--describe", "--group", g)
        rows = [line.split() for line in out.splitlines() if line.startswith(g)]
        assert [r[2:6] for r in rows] == [["0", "2", "2", "0"], ["1", "2", "2", "0"]]
        assert len({r[6] for r in rows}) == 1 and rows[0][6] != "-"
    finally:
        c.close()
