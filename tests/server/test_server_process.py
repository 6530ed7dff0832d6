"""``kafkalite-server`` as a real OS process: start, serve, SIGTERM, restart."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


REPO = Path(__file__).resolve().parents[2]


def _start(cfg, cwd, *args):
    # run this checkout's kafkalite, whatever the working directory
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkalite.cli.server", str(cfg), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 30
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if "ready on" in line:
            return proc, lines
        if proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError("broker did not start:\n" + "".join(lines))


def test_server_process_serves_writes_pid_file_and_stops_cleanly_on_sigterm(tmp_path):
    port = _free_port()
    cfg = tmp_path / "server.yaml"
    cfg.write_text(
        f"listeners: PLAINTEXT://127.0.0.1:{port}\nlog.dirs: ./data\npid.file: ./kafkalite.pid\n"
        "num.partitions: 1\n"
    )
    proc, _ = _start(cfg, tmp_path)
    try:
        pid_file = tmp_path / "kafkalite.pid"
        assert int(pid_file.read_text()) == proc.pid
        bs = f"127.0.0.1:{port}"
        p = Producer({"bootstrap.servers": bs})
        for i in range(100):
            p.produce("proc-topic", f"m{i}".encode())
        assert p.flush(20) == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert not (tmp_path / "kafkalite.pid").exists()
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()

    proc, lines = _start(cfg, tmp_path)
    try:
        c = Consumer(
            {
                "bootstrap.servers": f"127.0.0.1:{port}",
                "group.id": "g",
                "enable.partition.eof": True,
            }
        )
        c.assign([TopicPartition("proc-topic", 0, 0)])
        got = []
        while True:
            m = c.poll(10)
            assert m is not None
            if m.error():
                break
            got.append(m.value())
        c.close()
        assert got == [f"m{i}".encode() for i in range(100)]
    finally:
        os.kill(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert "recovering" not in "".join(lines) + out  # clean shutdown: no recovery pass
