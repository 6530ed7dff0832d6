"""Run a stock Node.js Kafka client (kafkajs, @platformatic/kafka) against a broker.

The clients are pinned in ``tests/node/package.json`` and installed by
``make install-test`` (``npm ci``); a test writes a small script and runs it
with ``node`` as a subprocess, reading one JSON document from its stdout.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.clients.workload import Got

NODE_DIR = Path(__file__).resolve().parent.parent / "node"
NODE_MODULES = NODE_DIR / "node_modules"

__all__ = [
    "NODE_DIR",
    "NodeScriptError",
    "NodeSession",
    "b64",
    "consumed",
    "run_node",
    "wait_for",
]


class NodeScriptError(AssertionError):
    """The script exited non-zero; carries its stderr for the test report."""


def _node() -> str:
    node = shutil.which("node")
    if node is None or not NODE_MODULES.is_dir():
        raise NodeScriptError("node or tests/node/node_modules missing: run `make install-test`")
    return node


def run_node(script: str, *, env: dict[str, str] | None = None, timeout: float = 60.0) -> Any:
    """Run ``script`` (CommonJS) with the pinned clients importable; return its JSON output.

    The script prints exactly one JSON document on stdout (``console.log(JSON.stringify(x))``)
    as its last line. A missing ``node`` or unset-up ``node_modules`` fails the test:
    ``make install-test`` installs both, and a skipped client test would hide that.
    """
    node = _node()
    full_env = {**os.environ, "NODE_PATH": str(NODE_MODULES), **(env or {})}
    proc = subprocess.run(
        [node, "-e", script],
        cwd=NODE_DIR,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise NodeScriptError(
            f"node exited {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\n"
            f"stderr:\n{proc.stderr[-4000:]}"
        )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if not lines:
        raise NodeScriptError(f"node printed nothing\nstderr:\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1])


class NodeSession:
    """One long-lived ``node`` process (``tests/node/driver.js``) running steps in turn.

    A step is the body of an async JS function of ``(ctx, require)``; ``ctx`` persists,
    so a client created in one step is still connected in the next, while the test
    injects faults or moves leaders between them. One process per test module also
    saves starting node and loading the clients for every script: measured on the
    2-core CI machine under load, a ``node -e`` that requires both clients takes
    about 2 s (node alone 0.4 s), a step in a running session milliseconds.
    """

    def __init__(self, *, env: dict[str, str] | None = None, step_timeout: float = 60.0) -> None:
        self.step_timeout = step_timeout
        self._ids = itertools.count(1)
        self._replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=200)
        self.proc = subprocess.Popen(
            [_node(), str(NODE_DIR / "driver.js")],
            cwd=NODE_DIR,
            env={**os.environ, "NODE_PATH": str(NODE_MODULES), **(env or {})},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self._replies.put(json.loads(line))
        self._replies.put(None)  # the process is gone

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line.rstrip("\n"))

    def stderr_tail(self, lines: int = 60) -> str:
        return "\n".join(list(self._stderr)[-lines:])

    def run(self, code: str, timeout: float | None = None) -> Any:
        """Run one step; return its (JSON) result, or raise with the JS error and stderr."""
        step = next(self._ids)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"id": step, "code": code}) + "\n")
        self.proc.stdin.flush()
        wait = self.step_timeout if timeout is None else timeout
        while True:
            try:
                reply = self._replies.get(timeout=wait)
            except queue.Empty:
                raise NodeScriptError(
                    f"node step {step} timed out after {wait}s\nstderr:\n{self.stderr_tail()}"
                ) from None
            if reply is None:
                self._replies.put(None)
                raise NodeScriptError(
                    f"node exited ({self.proc.poll()})\nstderr:\n{self.stderr_tail()}"
                )
            if reply["id"] != step:
                continue  # a reply to an earlier step that timed out
            if not reply["ok"]:
                raise NodeScriptError(f"{reply['error']}\nstderr:\n{self.stderr_tail()}")
            return reply["result"]

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def b64(b: bytes) -> str:
    """Bytes for a JS step (``Buffer.from(s, 'base64')``)."""
    return base64.b64encode(b).decode()


def consumed(rows: list[dict[str, Any]]) -> list[Got]:
    """The rows a ``ctx.collect`` consumer gathered (base64 fields) as workload records."""
    return [
        Got(
            r["partition"],
            r["offset"],
            base64.b64decode(r["key"]) if r["key"] is not None else None,
            base64.b64decode(r["value"]) if r["value"] is not None else None,
            [(k, base64.b64decode(v)) for k, v in r["headers"]],
            r["timestamp"],
        )
        for r in rows
    ]


def wait_for(pred: Callable[[], bool], timeout_s: float = 15.0) -> None:
    """Until ``pred()`` (a fault rule's hits): the client has sent what the rule waits for."""
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, "the client never sent the requests the rules wait for"
        time.sleep(0.02)
