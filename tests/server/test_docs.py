"""docs/compatibility.md is generated from the API table the broker advertises,
never typed by hand."""

from pathlib import Path

from kio.schema.api_versions.v3.request import ApiVersionsRequest

from kafkalite.server.api_table import compatibility_markdown
from kafkalite.server.apis import build_broker_api_table
from tests.server.raw_client import RawClient

DOC = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"


def test_compatibility_doc_matches_the_api_table():
    assert DOC.read_text() == compatibility_markdown(build_broker_api_table(None)), (
        "regenerate with: python -m kafkalite.server.api_table > docs/compatibility.md"
    )


def test_doc_table_is_what_a_running_broker_advertises(kafka_bootstrap):
    """Every ApiVersions entry of a live broker is a row of the doc, and vice versa."""
    c = RawClient.to(kafka_bootstrap)
    try:
        resp = c.call(
            18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")
        )
    finally:
        c.close()
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [x.strip() for x in line.strip("|").split("|")]
        if len(cells) == 5 and cells[0].isdigit():
            lo, hi = cells[2].split(" ")[0].split("–")
            adv = cells[2].split("advertised from v")
            rows[int(cells[0])] = (int(adv[1].rstrip(")")) if len(adv) > 1 else int(lo), int(hi))
    advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert advertised == rows
    # the controller APIs are advertised and marked as inter-broker in the doc
    for key in (4, 5, 6, 7):
        assert key in advertised
    inter = [
        ln for ln in DOC.read_text().splitlines() if ln.startswith("|") and "*inter-broker*" in ln
    ]
    assert {int(ln.strip("|").split("|")[0]) for ln in inter} == {4, 5, 6, 7}
