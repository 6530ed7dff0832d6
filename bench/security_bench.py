"""SASL's cost on a real broker process: PLAINTEXT vs SASL_PLAINTEXT/SCRAM-SHA-256.

    python bench/security_bench.py [--mb 200] [--rounds 3] [--acls N] [--connections 300]

One ``kafkalite-server`` process with two listeners, PLAINTEXT and SASL_PLAINTEXT
(SCRAM-SHA-256, a user created through AlterUserScramCredentials). Printed:

1. produce MB/s (confluent-kafka, 1 KiB values, acks=1, lz4 off) and consume MB/s
   (a fresh consumer reading the topic back) for each listener, ``--rounds`` times
   alternating the order, best and median; the SASL/PLAINTEXT ratio is the issue's
   "within 5%" goal. Authentication happens once per connection, so the steady state
   of both is the same request path; the difference is the per-request check.
2. connections/s with SCRAM-SHA-256 authentication: ``--connections`` sequential
   connect + SaslHandshake + the SCRAM exchange + one Metadata (kafkalite's own
   SCRAM client, so the figure is the broker's, not librdkafka's start-up), against
   the same on PLAINTEXT (connect + Metadata).

``--acls N`` runs the broker with the ACL authorizer (``authorizer.class.name``, and
``super.users=User:ANONYMOUS`` so the PLAINTEXT side and the admin client are super
users) and creates N ACLs through confluent-kafka's ``AdminClient.create_acls``: N
literal topic ALLOWs for ``User:bench`` on other topics (the ACL cache the SCRAM side is
checked against) plus the PREFIXED ``bench-`` topic Write/Read/Describe and group Read
ALLOWs it needs. So the SASL side pays authentication *and* authorization per request.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from kafkalite.protocol import messages  # noqa: E402
from kafkalite.protocol.sasl_client import SaslClientCredentials, open_connection  # noqa: E402

USER, PASSWORD = "bench", "bench-secret"
MiB = 1 << 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, root: Path, authorizer: bool = False) -> None:
        self.plain, self.sasl = _free_port(), _free_port()
        cfg = root / "server.properties"
        cfg.write_text(
            f"listeners=PLAINTEXT://127.0.0.1:{self.plain},SASL_PLAINTEXT://127.0.0.1:{self.sasl}\n"
            "inter.broker.listener.name=PLAINTEXT\n"
            "sasl.enabled.mechanisms=SCRAM-SHA-256\n"
            f"log.dirs={root / 'data'}\n"
            "broker.id=0\n"
            "offsets.topic.replication.factor=1\n"
            "kafkalite.log.fsync=false\n"
            + (
                "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"
                "super.users=User:ANONYMOUS\n"
                if authorizer
                else ""
            )
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkalite.cli.server", str(cfg), "--log-level", "WARNING"],
            stdout=subprocess.PIPE,
            stderr=(root / "broker.err").open("w"),
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "ready on" not in line:
            raise RuntimeError(f"broker did not start: {line!r}")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def client_conf(server: Server, sasl: bool) -> dict[str, Any]:
    if not sasl:
        return {"bootstrap.servers": f"127.0.0.1:{server.plain}"}
    return {
        "bootstrap.servers": f"127.0.0.1:{server.sasl}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": USER,
        "sasl.password": PASSWORD,
    }


def produce(conf: dict[str, Any], topic: str, mb: int) -> float:
    p = Producer({**conf, "acks": 1, "linger.ms": 5, "batch.size": 1 << 20})
    value = b"x" * 1024
    n = mb * 1024
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.001)
    assert p.flush(120) == 0
    return mb / (time.perf_counter() - t0)


def consume(conf: dict[str, Any], topic: str, mb: int) -> float:
    c = Consumer({**conf, "group.id": f"bench-{time.monotonic_ns()}", "fetch.max.bytes": 50 * MiB})
    c.assign([TopicPartition(topic, 0, 0)])
    want, got = mb * 1024, 0
    t0 = time.perf_counter()
    while got < want:
        for m in c.consume(1000, 5):
            if not m.error():
                got += 1
    el = time.perf_counter() - t0
    c.close()
    return mb / el


async def connections(port: int, n: int, sasl: bool) -> float:
    creds = SaslClientCredentials("SCRAM-SHA-256", USER, PASSWORD) if sasl else None
    cls = messages.request_type(3, 12)
    body = messages.encode(messages.build(cls, {"topics": [], "allow_auto_topic_creation": False}))
    header = b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x01b\x00"
    frame = len(header + body).to_bytes(4, "big") + header + body
    t0 = time.perf_counter()
    for _ in range(n):
        reader, writer = await open_connection("127.0.0.1", port, sasl=creds)
        writer.write(frame)
        size = int.from_bytes(await reader.readexactly(4), "big")
        await reader.readexactly(size)
        writer.close()
    return n / (time.perf_counter() - t0)


def create_acls(admin: AdminClient, n: int) -> str:
    if n <= 0:
        return "0 ACLs"
    principal = f"User:{USER}"
    acls = [
        AclBinding(
            ResourceType.TOPIC,
            f"acl-topic-{i}",
            ResourcePatternType.LITERAL,
            principal,
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        for i in range(n)
    ]
    needed = [
        (ResourceType.TOPIC, AclOperation.WRITE),
        (ResourceType.TOPIC, AclOperation.READ),
        (ResourceType.TOPIC, AclOperation.DESCRIBE),
        (ResourceType.GROUP, AclOperation.READ),
    ]
    acls += [
        AclBinding(
            rtype,
            "bench-",
            ResourcePatternType.PREFIXED,
            principal,
            "*",
            op,
            AclPermissionType.ALLOW,
        )
        for rtype, op in needed
    ]
    for f in admin.create_acls(acls).values():
        f.result(timeout=60)
    return f"{n} ACLs on other topics + {len(needed)} PREFIXED bench- ALLOWs (authorizer on)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--acls", type=int, default=0)
    ap.add_argument("--connections", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        server = Server(Path(d), authorizer=args.acls > 0)
        try:
            admin = AdminClient(client_conf(server, False))
            up = UserScramCredentialUpsertion(
                USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), PASSWORD.encode()
            )
            for f in admin.alter_user_scram_credentials([up]).values():
                f.result(timeout=30)
            print(f"ACLs: {create_acls(admin, args.acls)}")
            results: dict[str, dict[str, list[float]]] = {
                name: {"produce": [], "consume": []} for name in ("PLAINTEXT", "SASL_SCRAM")
            }
            for r in range(args.rounds):
                order = [False, True] if r % 2 == 0 else [True, False]
                for sasl in order:
                    name = "SASL_SCRAM" if sasl else "PLAINTEXT"
                    topic = f"bench-{name}-{r}"
                    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                    conf = client_conf(server, sasl)
                    results[name]["produce"].append(produce(conf, topic, args.mb))
                    results[name]["consume"].append(consume(conf, topic, args.mb))
            for what in ("produce", "consume"):
                p, s = results["PLAINTEXT"][what], results["SASL_SCRAM"][what]
                print(
                    f"{what:8s} MB/s  PLAINTEXT best {max(p):7.1f} median {statistics.median(p):7.1f}"
                    f" | SASL/SCRAM-SHA-256 best {max(s):7.1f} median {statistics.median(s):7.1f}"
                    f" | ratio (median) {statistics.median(s) / statistics.median(p):.3f}"
                )
            plain_cps = asyncio.run(connections(server.plain, args.connections, False))
            sasl_cps = asyncio.run(connections(server.sasl, args.connections, True))
            print(
                f"connections/s  PLAINTEXT {plain_cps:7.1f} | SCRAM-SHA-256 (4096 iterations) "
                f"{sasl_cps:7.1f}  ({args.connections} sequential, each with one Metadata)"
            )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
