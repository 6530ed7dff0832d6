"""Every API the broker advertises, at every version it advertises, gets an answer.

A minimal request (empty lists, zero values) is built for each version with
kio's own schema and sent over TCP; the broker must reply with a decodable
response for that version and keep the connection open. This catches handlers
that assume a field only some versions have.
"""

from __future__ import annotations

import pytest

from kafkalite.protocol import messages
from kafkalite.server.apis import build_api_table
from tests.server.raw_client import RawClient

CASES = [
    (spec.key, v)
    for spec in sorted(build_api_table(None).values(), key=lambda s: s.key)
    for v in range(spec.min_version, spec.max_version + 1)
]


def _minimal(api_key: int, version: int):
    data = {}
    if api_key == 1:  # Fetch: no wait, so the sweep stays fast
        data = {"max_wait": 0, "min_bytes": 1, "session_epoch": -1}
    if api_key == 0:  # Produce
        data = {"acks": 1, "timeout": 1000}
    if api_key == 3 and version >= 1:  # Metadata: no topics rather than all
        data = {"topics": []}
    return messages.build(messages.request_type(api_key, version), data)


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=[f"key{k}-v{v}" for k, v in CASES])
def test_every_advertised_version_is_answered(kafka_bootstrap, api_key, version):
    c = RawClient.to(kafka_bootstrap)
    try:
        resp = c.call(api_key, version, _minimal(api_key, version))
        assert resp is not None
        # the connection is still usable afterwards
        assert (
            c.call(
                18,
                3,
                messages.build(
                    messages.request_type(18, 3),
                    {"client_software_name": "sweep", "client_software_version": "1"},
                ),
            ).error_code
            == 0
        )
    finally:
        c.close()
