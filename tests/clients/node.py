"""Run a stock Node.js Kafka client (kafkajs, @platformatic/kafka) against a broker.

The clients are pinned in ``tests/node/package.json`` and installed by
``make install-test`` (``npm ci``); a test writes a small script and runs it
with ``node`` as a subprocess, reading one JSON document from its stdout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

NODE_DIR = Path(__file__).resolve().parent.parent / "node"
NODE_MODULES = NODE_DIR / "node_modules"

__all__ = ["NODE_DIR", "NodeScriptError", "run_node"]


class NodeScriptError(AssertionError):
    """The script exited non-zero; carries its stderr for the test report."""


def run_node(script: str, *, env: dict[str, str] | None = None, timeout: float = 60.0) -> Any:
    """Run ``script`` (CommonJS) with the pinned clients importable; return its JSON output.

    The script prints exactly one JSON document on stdout (``console.log(JSON.stringify(x))``)
    as its last line. A missing ``node`` or unset-up ``node_modules`` fails the test:
    ``make install-test`` installs both, and a skipped client test would hide that.
    """
    node = shutil.which("node")
    if node is None or not NODE_MODULES.is_dir():
        raise NodeScriptError("node or tests/node/node_modules missing: run `make install-test`")
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
