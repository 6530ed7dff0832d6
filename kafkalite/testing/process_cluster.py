"""A cluster of real ``kafkalite-server`` processes over one ZooKeeper.

:class:`ServerProcess` runs one broker process from a ``server.properties``
(restartable on the same port and data dir; ``kill9``, ``sigstop``/``sigcont``,
``stop`` with SIGTERM, which runs controlled shutdown). :class:`ProcessCluster`
runs n of them; the replication acceptance tests and ``bench/replication_bench.py``
use it, and so does the one-command start of ``config/cluster/``::

    python -m kafkalite.testing.process_cluster config/cluster

which starts a local Apache ZooKeeper (``kafkalite.testing.zookeeper``) unless
``--zookeeper host:port`` names a running one, then the brokers of every
``server-*.properties`` in the directory, and waits for Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["ProcessCluster", "ServerProcess", "free_port"]

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """One kafkalite-server process on a fixed port and data dir."""

    def __init__(
        self,
        broker_id: int,
        root: Path,
        zk_connect: str,
        overrides: Mapping[str, Any] | None = None,
        *,
        config_file: Path | None = None,
        port: int | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.port = port or free_port()
        self.dir = root / f"broker-{broker_id}"
        self.dir.mkdir(parents=True, exist_ok=True)
        if config_file is not None:
            self.cfg = config_file
        else:
            props = {
                "broker.id": broker_id,
                "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                "log.dirs": self.dir / "data",
                "zookeeper.connect": zk_connect,
                "zookeeper.session.timeout.ms": 6000,
                "default.replication.factor": 3,
                "min.insync.replicas": 2,
                "replica.fetch.backoff.ms": 200,
                "controlled.shutdown.retry.backoff.ms": 200,
                "kafkalite.log.fsync": "false",
                **(overrides or {}),
            }
            self.cfg = self.dir / "server.properties"
            # "{port}" in a value is this broker's port (e.g. a SASL_SSL-only listener)
            self.cfg.write_text(
                "".join(
                    f"{k}={str(v).replace('{port}', str(self.port))}\n" for k, v in props.items()
                )
            )
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout_s: float = 40.0) -> None:
        self.starts += 1
        out = self.dir / f"out-{self.starts}.log"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        with open(out, "wb") as f:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kafkalite.cli.server", str(self.cfg)],
                cwd=self.dir,
                env=env,
                stdout=f,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if b"ready on" in out.read_bytes():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"broker {self.broker_id} did not start:\n{out.read_text()[-3000:]}")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def sigstop(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def sigcont(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (controlled shutdown, then a clean stop); SIGKILL if it hangs."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class ProcessCluster:
    """``n`` broker processes (ids 1..n) over ``zk_connect`` (give it a chroot)."""

    def __init__(
        self, n: int, root: Path, zk_connect: str, overrides: Mapping[str, Any] | None = None
    ) -> None:
        self.zk_connect = zk_connect
        self.servers = {i: ServerProcess(i, root, zk_connect, overrides) for i in range(1, n + 1)}
        self._zk: Any = None

    def start(self) -> ProcessCluster:
        for s in self.servers.values():
            s.start()
        return self

    def stop(self) -> None:
        for s in self.servers.values():
            s.stop()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None

    def __enter__(self) -> ProcessCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(s.bootstrap for s in self.servers.values())

    def zk(self) -> Any:
        """A kazoo client inside the cluster's chroot (for reading partition states)."""
        if self._zk is None:
            from kazoo.client import KazooClient

            self._zk = KazooClient(hosts=self.zk_connect)
            self._zk.start()
        return self._zk

    def partition_state(self, topic: str, partition: int) -> dict[str, Any]:
        """The partition's state znode: leader, leader_epoch, isr, controller_epoch."""
        data, _ = self.zk().get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return dict(json.loads(data))

    def wait(self, pred: Any, timeout_s: float, what: str) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            v = pred()
            if v:
                return v
            time.sleep(0.05)
        raise AssertionError(f"{what} within {timeout_s}s")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description="Start a local ZooKeeper and the brokers of DIR/server-*.properties."
    )
    ap.add_argument("dir", type=Path, help="directory of server-<n>.properties files")
    ap.add_argument("--zookeeper", help="host:port of a running ZooKeeper (else start one)")
    args = ap.parse_args(argv)

    def interrupt(_sig: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    # Ctrl-C, and SIGTERM: stop the brokers (controlled shutdown) and ZooKeeper first; a
    # shell starts background jobs with SIGINT ignored, so the handler is set explicitly
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    zk_server = None
    if args.zookeeper is None:
        from kafkalite.testing.zookeeper import ZooKeeperServer

        # its data next to the brokers', so that a restart finds the same cluster
        zk_dir = (args.dir / "run" / "zookeeper").resolve()
        zk_dir.mkdir(parents=True, exist_ok=True)
        zk_server = ZooKeeperServer(port=2181, work_dir=zk_dir).start()
        print(f"ZooKeeper on {zk_server.connect_string}", flush=True)
    servers = []
    try:
        for i, cfg in enumerate(sorted(args.dir.glob("server-*.properties")), start=1):
            s = ServerProcess(i, args.dir / "run", "", config_file=cfg.resolve())
            s.dir = args.dir / "run" / cfg.stem
            s.dir.mkdir(parents=True, exist_ok=True)
            s.start()
            servers.append(s)
            print(f"{cfg.name}: started (pid {s.proc.pid if s.proc else '?'})", flush=True)
        print("cluster up; Ctrl-C stops it", flush=True)
        while all(s.running for s in servers):
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        for s in servers:
            s.stop()
        if zk_server is not None:
            zk_server.stop()


if __name__ == "__main__":
    main()
