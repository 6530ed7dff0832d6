"""py-spy on the broker while a workload runs: where the broker's CPU goes.

``py-spy record --format raw`` writes collapsed stacks ("f1;f2;f3 N"); the
top frames are counted two ways: *self* (the innermost frame, where the time
is spent) and *total* (any frame on the stack, what the time is spent for).
"""

from __future__ import annotations

import collections
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


class Profiler:
    """``with Profiler(pid, out): run()`` records the broker for the duration."""

    def __init__(self, pid: int, out: Path, rate: int = 200) -> None:
        self.pid = pid
        self.out = out
        self.rate = rate
        self.proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def binary() -> str | None:
        cand = Path(sys.executable).with_name("py-spy")
        return str(cand) if cand.exists() else shutil.which("py-spy")

    def __enter__(self) -> Profiler:
        exe = self.binary()
        if exe is None:
            raise RuntimeError("py-spy not found (pip install py-spy)")
        self.proc = subprocess.Popen(
            [
                exe,
                "record",
                "-p",
                str(self.pid),
                "-o",
                str(self.out),
                "--format",
                "raw",
                "-r",
                str(self.rate),
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.3)  # let py-spy attach before the load starts
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _short(frame: str) -> str:
    """``func (path/to/kafkalite/x.py:12)`` → ``func (kafkalite/x.py:12)``."""
    name, _, loc = frame.partition(" (")
    loc = loc.rstrip(")")
    for marker in ("/kafkalite/", "/site-packages/", "/lib/python3"):
        if marker in loc:
            loc = loc[loc.index(marker) + 1 :]
            break
    return f"{name} ({loc})" if loc else name


_BOILERPLATE = ("<frozen runpy>", "asyncio/runners.py", "kafkalite/cli/server.py")


def top_frames(raws: list[Path], n: int = 15) -> str:
    """The ``n`` heaviest frames by self (per line) and by total (per function), as text.

    Total leaves out the frames every sample has (runpy, asyncio.run, the CLI);
    self time in ``Runner.run`` is the event loop's own C code (uvloop: polling,
    callbacks, socket calls made from C).
    """
    self_c: collections.Counter[str] = collections.Counter()
    total_c: collections.Counter[str] = collections.Counter()
    samples = 0
    lines = [ln for raw in raws if raw.exists() for ln in raw.read_text().splitlines()]
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        k = int(count)
        frames = [
            _short(f)
            for f in stack.split(";")
            if not f.startswith("process ") and not f.startswith("thread ")
        ]
        if not frames:
            continue
        samples += k
        self_c[frames[-1]] += k
        funcs = {f.rsplit(":", 1)[0] + ")" if ":" in f else f for f in frames}
        for f in funcs:
            if not any(b in f for b in _BOILERPLATE):
                total_c[f] += k
    if not samples:
        return "(no samples)"
    out = [f"{samples} samples", "", "self %  frame (line)"]
    out += [f"{100 * c / samples:5.1f}  {f}" for f, c in self_c.most_common(n)]
    out += ["", "total %  function"]
    out += [f"{100 * c / samples:6.1f}  {f}" for f, c in total_c.most_common(n)]
    return "\n".join(out)
