"""KafkaBroker is the composition root (issue 14 item 2): nothing below it names it,
and the handlers' request types are kio's, generated from the API table."""

from __future__ import annotations

import ast
from pathlib import Path

import kafkalite
from kafkalite.server.apis import request_types_gen

ROOT = Path(kafkalite.__file__).parent
#: may import kafkalite.server.broker: the broker itself and the layers above it
ALLOWED = (
    "server/broker.py",
    "cli/",
    "testing/",
    "server/faults.py",
)  # faults: see issue 14 item 4


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_only_the_layers_above_the_broker_import_it():
    offenders = [
        str(p.relative_to(ROOT))
        for p in sorted(ROOT.rglob("*.py"))
        if not str(p.relative_to(ROOT)).startswith(ALLOWED)
        and "kafkalite.server.broker" in _imports(p)  # TYPE_CHECKING imports count too
    ]
    assert offenders == []


def test_the_coordinator_does_not_import_the_server():
    offenders = [
        str(p.relative_to(ROOT))
        for p in sorted((ROOT / "coordinator").rglob("*.py"))
        if any(n.startswith("kafkalite.server") for n in _imports(p))
    ]
    assert offenders == []


def test_request_types_match_the_api_table():
    assert request_types_gen.PATH.read_text() == request_types_gen.render(), (
        "regenerate with: python -m kafkalite.server.apis.request_types_gen"
    )
