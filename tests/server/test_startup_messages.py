"""Issue 20, part 4: every start-up failure of ``kafkalite-server`` is one line on stderr
naming the key and the cause (no traceback); the start-up log has no noise on a new
data dir; ``make test``'s apt-get waits for another apt-get's lock."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from kafkalite.server.config import BrokerConfig, ConfigError
from tests.server.test_server_process import REPO

BASE = "broker.id: 0\noffsets.topic.replication.factor: 1\n"


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def _server() -> list[str]:
    """The ``kafkalite-server`` console script of this environment (else ``-m``)."""
    script = Path(sys.executable).parent / "kafkalite-server"
    return [str(script)] if script.exists() else [sys.executable, "-m", "kafkalite.cli.server"]


def _fails(tmp_path: Path, config: str) -> tuple[int, str]:
    cfg = tmp_path / "server.yaml"
    cfg.write_text(BASE + config)
    r = subprocess.run(
        [*_server(), str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=_env(),
    )
    assert r.returncode != 0
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr  # one line, no traceback, no log noise
    assert lines[0].startswith("kafkalite-server: "), r.stderr
    return r.returncode, lines[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_log_dir_that_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a directory\n")
    target = tmp_path / "afile" / "data"
    _, line = _fails(tmp_path, f"listeners: PLAINTEXT://127.0.0.1:0\nlog.dirs: {target}\n")
    assert (
        line
        == f"kafkalite-server: log.dirs: cannot create {target}: {tmp_path / 'afile'} is a file"
    )


def test_log_dirs_pointing_at_a_file(tmp_path: Path) -> None:
    f = tmp_path / "afile"
    f.write_text("not a directory\n")
    _, line = _fails(tmp_path, f"listeners: PLAINTEXT://127.0.0.1:0\nlog.dirs: {f}\n")
    assert line == f"kafkalite-server: log.dirs: {f} is a file, not a directory"


def test_a_port_in_use_is_found_before_anything_is_written(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        rc, line = _fails(tmp_path, f"listeners: PLAINTEXT://127.0.0.1:{port}\nlog.dirs: {data}\n")
    assert rc == 2
    assert line == (
        f"kafkalite-server: listeners: PLAINTEXT://127.0.0.1:{port}: port {port} is already"
        " in use (is another broker running?)"
    )
    assert not data.exists()  # nothing written: no log dir, no meta.properties


def test_a_metrics_port_in_use(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        _, line = _fails(
            tmp_path,
            f"listeners: PLAINTEXT://127.0.0.1:0\nlog.dirs: {data}\n"
            f"kafkalite.metrics.port: {port}\n",
        )
    assert line.startswith(f"kafkalite-server: kafkalite.metrics.port: http://127.0.0.1:{port}")
    assert "already in use" in line
    assert not data.exists()


def test_an_unknown_key_suggests_the_closest_known_one(tmp_path: Path) -> None:
    rc, line = _fails(
        tmp_path, f"listeners: PLAINTEXT://127.0.0.1:0\nlog.dirs: {tmp_path}/d\nnum.partition: 3\n"
    )
    assert rc == 2
    assert line == (
        "kafkalite-server: invalid config 'num.partition': unknown configuration key;"
        " did you mean `num.partitions`?"
    )
    # nothing close: no suggestion (the same ConfigError, checked without a process)
    with pytest.raises(ConfigError) as e:
        BrokerConfig({"zzz.qqq": 1})
    assert str(e.value) == "invalid config 'zzz.qqq': unknown configuration key"


def test_a_new_data_dir_starts_quietly_and_group_loads_are_summed_up(tmp_path: Path) -> None:
    """No "recovering unflushed segments" on a brand-new dir; the offsets topic's five
    partitions load with one summary line, not one line each."""
    port = _free_port()
    cfg = tmp_path / "server.yaml"
    cfg.write_text(
        BASE + f"listeners: PLAINTEXT://127.0.0.1:{port}\nlog.dirs: {tmp_path / 'data'}\n"
        "offsets.topic.num.partitions: 5\n"
    )
    err = tmp_path / "stderr.log"
    with err.open("w") as e:
        proc = subprocess.Popen(
            [*_server(), str(cfg)],
            cwd=tmp_path,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=e,
            text=True,
        )
    try:
        assert proc.stdout is not None
        assert "ready on" in proc.stdout.readline()
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", client_id="quiet")
        try:
            # FindCoordinator creates __consumer_offsets; the answer waits for its loads
            assert admin.list_group_offsets("quiet-group") == {"quiet-group": {}}
        finally:
            admin.close()
        deadline = time.monotonic() + 20
        while "groups from" not in err.read_text():
            assert time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        proc.stdout.close()  # type: ignore[union-attr]
    log = err.read_text()
    assert "recovering unflushed segments" not in log
    assert "Traceback" not in log
    loaded = re.findall(r"loaded \d+ groups from .*", log)
    assert loaded and all("__consumer_offsets partition" in x for x in loaded), loaded
    assert sum(int(re.search(r"from (\d+) ", x)[1]) for x in loaded) == 5  # type: ignore[index]
    assert len(loaded) < 5


def test_apt_get_waits_for_another_apt_get(tmp_path: Path) -> None:
    """.ci/apt-get-retry (Makefile system-deps, .ci/run) retries while the dpkg lock is
    held and passes any other failure through at once."""
    calls = tmp_path / "calls"
    fake = tmp_path / "apt-get"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {calls}\n'
        f"n=$(wc -l < {calls})\n"
        'if [ "$FAIL" = other ]; then echo "E: Unable to locate package nope" >&2; exit 100; fi\n'
        'if [ "$n" -le 2 ]; then\n'
        '  echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 7'
        ' (apt-get)" >&2; exit 100\n'
        "fi\n"
        "echo done\n"
    )
    fake.chmod(0o755)
    env = {**os.environ, "APT_GET": str(fake), "APT_RETRY_DELAY": "0"}
    script = REPO / ".ci" / "apt-get-retry"
    r = subprocess.run([str(script), "update", "-qq"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    assert calls.read_text().count("update -qq") == 3
    assert r.stderr.count("holds the lock; retrying") == 2
    calls.unlink()
    r = subprocess.run(
        [str(script), "install", "nope"], env={**env, "FAIL": "other"}, capture_output=True
    )
    assert r.returncode == 100
    assert calls.read_text().count("install nope") == 1
