"""Every ```python block of docs/testing.md runs, so the documentation cannot rot.

Blocks defining ``test_*`` functions are pytest test modules: they run together in
one inner pytest session (a subprocess, through ``pytester``) that has only the
auto-loaded kafkalite plugin, pytest-asyncio in its default strict mode, and the
clients. Other blocks are scripts, each run as a test of that same session. The
inner session must pass every test it collects, and collect as many as the blocks
define.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(first line number, source) of each ```python block."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in _BLOCK.finditer(text)]


def _test_functions(source: str) -> list[str]:
    return [
        n.name
        for n in ast.parse(source).body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test_")
    ]


def test_the_doc_has_examples_for_every_client_and_feature():
    text = DOC.read_text()
    sources = "\n".join(src for _line, src in python_blocks(text))
    for needle in (
        "confluent_kafka",
        "from kafka import",
        "aiokafka",
        "async def shout_agent",  # the faust-style agent
        "kafka_cluster",
        "from kafkalite.testing import cluster",
        "kafka_faults",
        "kafka_broker_factory",
        "from kafkalite.testing import broker",
    ):
        assert needle in sources, needle
    assert "## Migrating from testcontainers" in text


def test_every_python_block_of_docs_testing_md_runs(pytester: pytest.Pytester):
    blocks = python_blocks(DOC.read_text())
    assert len(blocks) >= 14
    expected = 0
    for line, source in blocks:
        name = f"test_doc_line_{line}"
        tests = _test_functions(source)
        if tests:
            pytester.makepyfile(**{name: source})
            expected += len(tests)
        else:  # a script: run it as one test, reported under its line number
            pytester.makepyfile(
                **{
                    name: f"SOURCE = {source!r}\n\n"
                    "def test_script():\n"
                    f"    exec(compile(SOURCE, 'docs/testing.md:{line}', 'exec'), "
                    "{'__name__': '__main__'})\n"
                }
            )
            expected += 1
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rfEs", "--timeout=120")
    result.assert_outcomes(passed=expected)
