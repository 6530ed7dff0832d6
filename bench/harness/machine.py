"""What the figures were measured on: printed with every table and kept in the docs."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return 0.0


def commit() -> str:
    """kafkalite's commit, with ``+dirty`` when kafkalite/ has uncommitted changes."""
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "kafkalite"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def describe() -> dict[str, str]:
    load = os.getloadavg()
    return {
        "CPU": _cpu_model(),
        "cores": str(os.cpu_count() or 0),
        "RAM": f"{_ram_gib():.1f} GiB",
        "kernel": platform.release(),
        "Python": sys.version.split()[0],
        "kafkalite commit": commit(),
        "load average at start": " ".join(f"{x:.2f}" for x in load),
    }
