"""docs/compatibility.md is generated from the API table, never typed by hand."""

from pathlib import Path

from kafkalite.server.api_table import compatibility_markdown
from kafkalite.server.apis import build_api_table


def test_compatibility_doc_matches_the_api_table():
    doc = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"
    assert doc.read_text() == compatibility_markdown(build_api_table(None)), (
        "regenerate with: python -m kafkalite.server.api_table > docs/compatibility.md"
    )
