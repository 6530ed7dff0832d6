"""CPU time and memory of a process from /proc, and which process owns a port.

The harness reports client CPU next to broker CPU for every run, to show which
side was the bottleneck; on a 2-core machine the two compete for the same cores.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """On-CPU time of ``pid``'s threads, in seconds: the sum of their
    ``/proc/PID/task/TID/schedstat`` (nanoseconds, exact), or utime + stime (sampled at
    the clock tick, 10 ms: too coarse for a run of a second) where schedstat is missing.
    A thread that exited since the last reading no longer counts."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue  # the thread ended meanwhile
    except FileNotFoundError:
        pass
    if total:
        return total / 1e9
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state): utime and stime are fields 14 and 15
    return (int(fields[11]) + int(fields[12])) / _TICK


def system_busy_seconds() -> float:
    """CPU time all cores spent busy (not idle, not iowait) since boot, from /proc/stat.

    The busy time of the run minus the broker's and the client's is what
    other processes took: the noise of a shared machine, shown per run.
    """
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    # guest time is already counted in user/nice
    return (sum(fields[:8]) - idle) / _TICK


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def pid_listening_on(port: int) -> int | None:
    """The pid of the process listening on TCP ``port`` (same user), or None.

    Lets ``--bootstrap`` runs still report broker CPU when the broker runs
    on this machine.
    """
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(parts[9])
    if not inodes:
        return None
    wanted = {f"socket:[{i}]" for i in inodes}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in wanted:
                    return int(proc.name)
        except OSError:
            continue
    return None


def settle(max_wait_s: float = 20.0, busy_cores: float = 0.25) -> float:
    """Start a workload from a quiet machine: write back the dirty pages the last
    one left (gigabytes after the produce runs, which the kernel would otherwise
    flush during the next measurement) and wait until the cores are nearly idle.

    Returns the seconds waited. Applied the same way before every workload, for
    every broker.
    """
    t0 = time.monotonic()
    os.sync()
    while time.monotonic() - t0 < max_wait_s:
        b0 = system_busy_seconds()
        time.sleep(0.5)
        if (system_busy_seconds() - b0) / 0.5 < busy_cores:
            break
    return time.monotonic() - t0
