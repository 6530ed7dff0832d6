"""The load client: ``kl_loadgen`` (C, librdkafka), built on first use, or the Python fallback.

Every run is a separate process; its CPU time comes from ``wait4``'s rusage
(exact, all threads) and is reported next to the broker's.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness.brokers import CACHE

LOADGEN = Path(__file__).resolve().parents[1] / "loadgen"


@dataclass
class ClientRun:
    """One load-client process: its JSON line, CPU seconds and wall seconds."""

    data: dict[str, Any]
    cpu_s: float
    wall_s: float
    returncode: int
    stderr_tail: str = ""


class ClientError(RuntimeError):
    pass


@dataclass
class LoadClient:
    """How to start the load client; ``label`` names it in every table."""

    label: str
    argv: list[str]
    fallback: bool = False
    version: str = ""  # the "client" field of its JSON, e.g. "librdkafka 2.0.2"

    def describe(self) -> str:
        return self.label if self.fallback or not self.version else f"{self.label} ({self.version})"

    def run(
        self, mode: str, bootstrap: str, topic: str, timeout: float = 600.0, **opts: Any
    ) -> ClientRun:
        """Run ``mode`` (produce/consume/e2e) with kl_loadgen's flags given as keywords."""
        flags = {
            "partitions": "-P",
            "size": "-s",
            "count": "-n",
            "duration": "-d",
            "rate": "-r",
            "acks": "-a",
            "linger": "-l",
            "compression": "-z",
            "clients": "-C",
            "warmup": "-w",
        }
        cmd = [*self.argv, mode, "-b", bootstrap, "-t", topic, "-q"]
        for k, v in opts.items():
            if k == "props":
                for pk, pv in v.items():
                    cmd += ["-X", f"{pk}={pv}"]
            elif v is not None:
                cmd += [flags[k], str(v)]
        with tempfile.TemporaryFile("w+") as err:
            t0 = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
            deadline = t0 + timeout
            while True:
                pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() > deadline:
                    proc.kill()
                    pid, status, ru = os.wait4(proc.pid, 0)
                    break
                time.sleep(0.02)
            wall = time.perf_counter() - t0
            proc.returncode = os.waitstatus_to_exitcode(status)
            assert proc.stdout is not None
            out = proc.stdout.read()
            proc.stdout.close()
            err.seek(0)
            tail = err.read()[-1500:]
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        if not lines:
            raise ClientError(
                f"{self.label} {mode} printed no result (exit {proc.returncode}):\n{tail}"
            )
        return ClientRun(
            json.loads(lines[-1]), ru.ru_utime + ru.ru_stime, wall, proc.returncode, tail
        )


def _source_hash() -> str:
    h = hashlib.sha256()
    for name in ("kl_loadgen.c", "build.sh"):
        h.update((LOADGEN / name).read_bytes())
    return h.hexdigest()[:12]


def build(flavour: str) -> Path:
    """Build kl_loadgen against ``flavour`` (debian or npm) librdkafka, cached by source hash."""
    out = CACHE / f"kl_loadgen-{flavour}-{_source_hash()}"
    if out.exists():
        return out
    r = subprocess.run(
        ["bash", str(LOADGEN / "build.sh"), "--librdkafka", flavour, str(out)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0 or not out.exists():
        raise ClientError(f"building kl_loadgen ({flavour}) failed:\n{r.stderr[-1500:]}")
    return out


def c_client(flavour: str) -> LoadClient:
    binary = build(flavour)
    label = {
        "debian": "kl_loadgen (C) + Debian librdkafka",
        "npm": "kl_loadgen (C) + librdkafka from @confluentinc/kafka-javascript",
    }[flavour]
    return LoadClient(label, [str(binary)])


def python_client() -> LoadClient:
    import confluent_kafka

    return LoadClient(
        f"python client fallback (confluent-kafka {confluent_kafka.__version__}, librdkafka {confluent_kafka.libversion()[0]})",
        [sys.executable, "-m", "bench.harness.pyclient"],
        fallback=True,
    )


def probe(client: LoadClient, bootstrap: str) -> bool:
    """Can this client produce one record to this broker? (librdkafka 2.0 cannot talk to tansu.)

    Also records the client's version string on ``client``.
    """
    from bench.harness import admin

    topic = admin.unique("probe")
    try:
        admin.create_topic(bootstrap, topic, 1)
        r = client.run(
            "produce",
            bootstrap,
            topic,
            timeout=20,
            count=1,
            duration=10,
            size=16,
            props={"message.timeout.ms": 5000},
        )
    except (ClientError, RuntimeError):
        return False
    finally:
        admin.delete_topics(bootstrap, [topic])
    client.version = str(r.data.get("client", ""))
    return int(r.data.get("delivered", 0)) == 1


def resolve(kind: str, bootstraps: list[str]) -> tuple[LoadClient, list[str]]:
    """Pick the load client; returns it and notes on what was tried.

    ``auto``: kl_loadgen on Debian's librdkafka, else on librdkafka built from
    the npm package's sources (when a broker rejects the former), else the
    labelled Python fallback.
    """
    notes: list[str] = []
    order = {
        "auto": ["debian", "npm", "python"],
        "debian": ["debian"],
        "npm": ["npm"],
        "python": ["python"],
    }[kind]
    for flavour in order:
        try:
            client = python_client() if flavour == "python" else c_client(flavour)
        except (ClientError, ImportError) as e:
            notes.append(f"{flavour}: {e}".splitlines()[0])
            continue
        bad = [b for b in bootstraps if not probe(client, b)]
        if not bad:
            return client, notes
        notes.append(f"{client.label}: cannot produce to {', '.join(bad)}")
    raise ClientError("no load client works: " + "; ".join(notes))
