"""bench/loadgen/build.sh: its OUTPUT argument is a path, never an option.

``build.sh --help`` once compiled the load client to ``./--help.tmp.<pid>``
(then ``mv`` read ``--help`` as its own option) and the binary got committed.
The script runs here with a stand-in compiler that only creates its ``-o``
file and a stand-in static librdkafka in the cache (the npm flavour), so no
real build, download or apt-get happens.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

BUILD_SH = Path(__file__).resolve().parents[2] / "bench" / "loadgen" / "build.sh"
NPM_VERSION = "1.10.1"


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cc = tmp_path / "fake-cc"
    cc.write_text(
        '#!/bin/sh\nwhile [ $# -gt 0 ]; do\n  [ "$1" = -o ] && { shift; : > "$1"; }\n'
        "  shift\ndone\n"
    )
    cc.chmod(0o755)
    cache = tmp_path / "cache"
    lib = cache / f"librdkafka-npm-{NPM_VERSION}" / "lib" / "librdkafka.a"
    lib.parent.mkdir(parents=True, exist_ok=True)
    lib.touch()
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "CC": str(cc),
        "KAFKALITE_BENCH_CACHE": str(cache),
        "KL_NPM_VERSION": NPM_VERSION,
        "KL_NO_APT": "1",
    }
    return subprocess.run(
        ["bash", str(BUILD_SH), *args], cwd=work, env=env, capture_output=True, text=True
    )


def _created(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "work").iterdir())


def test_build_script_help_prints_usage_and_builds_nothing(tmp_path: Path) -> None:
    r = _run(tmp_path, "--help")
    assert r.returncode == 0, r.stderr
    assert "bench/loadgen/build.sh [--librdkafka debian|npm] [OUTPUT]" in r.stdout
    assert _created(tmp_path) == []


def test_build_script_help_after_flavour_prints_usage_and_builds_nothing(tmp_path: Path) -> None:
    r = _run(tmp_path, "--librdkafka", "npm", "--help")
    assert r.returncode == 0, r.stderr
    assert "[OUTPUT]" in r.stdout
    assert _created(tmp_path) == []


def test_build_script_refuses_option_like_output_path(tmp_path: Path) -> None:
    r = _run(tmp_path, "--librdkafka", "npm", "-o")
    assert r.returncode == 2
    assert "refusing option-like OUTPUT '-o'" in r.stderr
    assert _created(tmp_path) == []


def test_build_script_refuses_a_second_output_path(tmp_path: Path) -> None:
    r = _run(tmp_path, "--librdkafka", "npm", "a", "b")
    assert r.returncode == 2
    assert "one OUTPUT path at most" in r.stderr
    assert _created(tmp_path) == []


def test_build_script_writes_the_output_path_and_no_temporary_file(tmp_path: Path) -> None:
    r = _run(tmp_path, "--librdkafka", "npm", "./-odd name")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "./-odd name"
    assert _created(tmp_path) == ["-odd name"]
