"""A throw-away standalone Apache ZooKeeper for tests, from Debian's ``zookeeper`` package.

``zkServer.sh`` insists on /etc/zookeeper/conf, so the JVM is started directly::

    java -cp <conf dir>:/usr/share/java/zookeeper.jar \\
        org.apache.zookeeper.server.quorum.QuorumPeerMain <conf dir>/zoo.cfg

zookeeper.jar's manifest ``Class-Path`` already names its dependencies in
/usr/share/java (jute, netty, slf4j-api, jackson, jetty, ...). slf4j-simple is added
when present so the server's warnings land in ``<work dir>/zookeeper.log``.
A server answers in well under a second.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO

__all__ = ["ZooKeeperNotInstalledError", "ZooKeeperServer", "zookeeper_available"]

JAVA_DIR = Path("/usr/share/java")
ZOOKEEPER_JAR = JAVA_DIR / "zookeeper.jar"
SLF4J_SIMPLE_JAR = JAVA_DIR / "slf4j-simple.jar"
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

_RUNNING: set[ZooKeeperServer] = set()


class ZooKeeperNotInstalledError(RuntimeError):
    """Java or Debian's zookeeper package is missing."""


def _java() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def zookeeper_available() -> bool:
    """True when a server can be started here (java + the zookeeper jar)."""
    return _java() is not None and ZOOKEEPER_JAR.exists()


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Ask Linux to kill the JVM if the process that started it dies (no orphans)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class ZooKeeperServer:
    """A standalone ZooKeeper on a free loopback port with its own temp directory.

    ``stop()``/``kill()`` keep the data, so ``start()`` again restarts the same server
    on the same port (for connection-loss tests); ``cleanup()`` (or leaving the
    ``with`` block) removes the temporary directory.

    ``tick_time_ms`` is small so that short session timeouts are allowed (ZooKeeper
    clamps them to [2, 20] ticks unless min/maxSessionTimeout say otherwise) and
    expiry is detected promptly.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        work_dir: Path | str | None = None,
        tick_time_ms: int = 200,
        max_session_timeout_ms: int = 60000,
        extra_config: Mapping[str, str] | None = None,
        java: str | None = None,
    ) -> None:
        self.host = host
        self._fixed_port = port is not None
        self.port = port or 0
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir) if work_dir is not None else None
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.extra_config = dict(extra_config or {})
        self._java = java
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    # ---- properties

    @property
    def connect_string(self) -> str:
        """``host:port`` for kazoo / Kafka's ``zookeeper.connect`` (append a chroot)."""
        if not self.port:
            raise RuntimeError("ZooKeeperServer not started")
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Path:
        assert self.work_dir is not None
        return self.work_dir / "zookeeper.log"

    def classpath(self) -> str:
        """The exact classpath used: conf dir, zookeeper.jar (+ slf4j-simple if any)."""
        assert self.work_dir is not None
        parts = [str(self.work_dir / "conf"), str(ZOOKEEPER_JAR)]
        if SLF4J_SIMPLE_JAR.exists():
            parts.append(str(SLF4J_SIMPLE_JAR))
        return os.pathsep.join(parts)

    # ---- life cycle

    def start(self, timeout: float = 30.0) -> ZooKeeperServer:
        """Start the server and wait until it serves requests."""
        if self.running:
            return self
        java = self._java or _java()
        if java is None or not ZOOKEEPER_JAR.exists():
            raise ZooKeeperNotInstalledError(
                "Apache ZooKeeper is not available: need `java` on PATH and "
                f"{ZOOKEEPER_JAR} (Debian: `apt-get install zookeeper`)"
            )
        if self.work_dir is None:
            self.work_dir = Path(tempfile.mkdtemp(prefix="kafkalite-zk-"))
        attempts = 1 if self._fixed_port else 3
        for attempt in range(attempts):
            if not self.port or (attempt and not self._fixed_port):
                self.port = _free_port(self.host)
            self._launch(java)
            try:
                self._wait_ready(timeout)
                _RUNNING.add(self)
                return self
            except _PortTaken:
                self._reap()
                continue
        raise RuntimeError(f"ZooKeeper could not bind a port; see {self.log_path}")

    def _launch(self, java: str) -> None:
        assert self.work_dir is not None
        conf_dir = self.work_dir / "conf"
        data_dir = self.work_dir / "data"
        conf_dir.mkdir(parents=True, exist_ok=True)
        data_dir.mkdir(parents=True, exist_ok=True)
        config = {
            "tickTime": str(self.tick_time_ms),
            "dataDir": str(data_dir),
            "clientPort": str(self.port),
            "clientPortAddress": self.host,
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr,stat,mntr,cons,dump",
            "minSessionTimeout": str(2 * self.tick_time_ms),
            "maxSessionTimeout": str(self.max_session_timeout_ms),
            "maxClientCnxns": "0",
            "autopurge.purgeInterval": "0",
            **self.extra_config,
        }
        cfg = conf_dir / "zoo.cfg"
        cfg.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        cmd = [
            java,
            "-Xms16m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Xshare:auto",
            "-Djava.awt.headless=true",
            "-Dzookeeper.admin.enableServer=false",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            self.classpath(),
            MAIN_CLASS,
            str(cfg),
        ]
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child's lifetime
        self._log = log
        in_main = threading.current_thread() is threading.main_thread()
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.work_dir,
            start_new_session=True,
            # PDEATHSIG follows the forking *thread*; only safe from the main thread.
            preexec_fn=_die_with_parent if in_main else None,  # noqa: PLW1509
        )

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            proc = self._proc
            assert proc is not None
            if proc.poll() is not None:
                tail = self._log_tail()
                if "Address already in use" in tail and not self._fixed_port:
                    raise _PortTaken()
                raise RuntimeError(
                    f"ZooKeeper exited with {proc.returncode} during start-up:\n{tail}"
                )
            try:
                if "Mode:" in self.four_letter_word("srvr", timeout=0.5):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(
                    f"ZooKeeper did not answer within {timeout}s:\n{self._log_tail()}"
                )
            time.sleep(0.02)

    def four_letter_word(self, word: str, timeout: float = 2.0) -> str:
        """Send a 4lw command (ruok, srvr, stat, mntr, cons, dump) and return the reply."""
        with socket.create_connection((self.host, self.port), timeout=timeout) as s:
            s.sendall(word.encode("ascii"))
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", "replace")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM and wait (data is kept)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._reap()

    def kill(self) -> None:
        """SIGKILL, like a crashed server (data is kept)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        self._reap()

    def _reap(self) -> None:
        self._proc = None
        _RUNNING.discard(self)
        if self._log is not None:
            self._log.close()
            self._log = None

    def cleanup(self) -> None:
        """Stop and remove the temporary directory (if this object created it)."""
        self.stop()
        if self._own_dir and self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None

    def _log_tail(self, limit: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"ZooKeeperServer({self.host}:{self.port}, {state})"


class _PortTaken(Exception):
    pass


@atexit.register
def _kill_leftovers() -> None:
    for server in list(_RUNNING):
        with contextlib.suppress(Exception):
            server.kill()
