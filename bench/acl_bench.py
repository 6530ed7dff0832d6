"""Produce and consume throughput with and without the ACL authorizer.

    python bench/acl_bench.py [--records 200000] [--size 1024] [--acls 1000]

Two ``kafkalite-server`` processes, one after the other (2-core machine shared with
whatever else runs: one run, read the figures as such): without
``authorizer.class.name``, then with the ACL authorizer, ``--acls`` ACLs (the
bench principal's Write/Read on its topic and group among literal and prefixed
ACLs for other principals and topics) and no super user. Each run produces
``--records`` values with confluent-kafka (acks=1) and consumes them back.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from bench.quota_bench import _free_port  # noqa: E402
from kafkalite.cli.wire_client import WireClient  # noqa: E402

TOPIC = "acl-bench"


def _start(root: Path, extra: str) -> tuple[subprocess.Popen[str], str]:
    port = _free_port()
    cfg = root / "server.properties"
    cfg.write_text(
        f"listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={root / 'data'}\nbroker.id=0\n"
        "offsets.topic.replication.factor=1\nnum.partitions=1\n" + extra
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkalite.cli.server", str(cfg), "--log-level", "WARNING"],
        stdout=subprocess.PIPE,
        stderr=(root / "broker.err").open("w"),
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "ready on" not in line:
        raise RuntimeError(f"broker did not start: {line!r}")
    return proc, f"127.0.0.1:{port}"


def _acls(n: int) -> list[dict[str, object]]:
    def acl(rtype: int, name: str, pattern: int, who: str, op: int) -> dict[str, object]:
        return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern,
                "principal": who, "host": "*", "operation": op, "permission_type": 3}  # fmt: skip

    out = [
        acl(2, TOPIC, 3, "User:ANONYMOUS", 2),  # All on the topic (Create, Write, Read...)
        acl(3, "acl-bench-group", 3, "User:ANONYMOUS", 3),
        acl(4, "kafka-cluster", 3, "User:ANONYMOUS", 9),  # the broker's own requests
    ]
    i = 0
    while len(out) < n:
        out.append(acl(2, f"other-{i}", 3 if i % 5 else 4, f"User:u{i % 50}", 3 + i % 5))
        i += 1
    return out


def _run(bootstrap: str, records: int, size: int) -> tuple[float, float]:
    value = b"x" * size
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                  "queue.buffering.max.messages": 1_000_000})  # fmt: skip
    t0 = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(TOPIC, value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    produce_s = time.perf_counter() - t0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "acl-bench-group",
                  "enable.auto.commit": False, "fetch.max.bytes": 52428800})  # fmt: skip
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got, t0 = 0, time.perf_counter()
    while got < records:
        for m in c.consume(10000, 10):
            assert not m.error(), m.error()
            got += 1
    consume_s = time.perf_counter() - t0
    c.close()
    mb = records * size / 1e6
    return mb / produce_s, mb / consume_s


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--acls", type=int, default=1000)
    args = ap.parse_args()
    results = {}
    for name, extra in (
        ("no authorizer", ""),
        (f"authorizer, {args.acls} ACLs",
         "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"),
    ):  # fmt: skip
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            if extra:  # the ACLs first, through a broker that lets us write them
                proc, bs = _start(root, extra + "super.users=User:ANONYMOUS\n")
                c = WireClient(bs)
                r = c.call(30, 3, {"creations": _acls(args.acls)})
                assert all(x.error_code == 0 for x in r.results)
                c.close()
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
            proc, bs = _start(root, extra)
            try:
                c = WireClient(bs)
                r = c.call(19, 5, {"topics": [{"name": TOPIC, "num_partitions": 1,
                                                "replication_factor": 1, "assignments": [],
                                                "configs": []}], "timeout": 10000})  # fmt: skip
                assert r.topics[0].error_code == 0, r
                c.close()
                results[name] = _run(bs, args.records, args.size)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
        print(f"{name}: produce {results[name][0]:.1f} MB/s, consume {results[name][1]:.1f} MB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
