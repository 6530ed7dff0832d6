"""The fuzzer's own pieces, without a broker: frames are deterministic by seed, and the
length/count sites it mutates are found in a request of every API and version."""

from __future__ import annotations

import random

import pytest

from kafkalite.protocol import messages
from kafkalite.server.apis import build_broker_api_table
from kafkalite.testing.fuzz import ATTACKS, FrameAttack, FuzzTarget
from kafkalite.testing.fuzz.frame_attacks import Requests
from kafkalite.testing.fuzz.sites import find_sites


def _target() -> FuzzTarget:
    table = build_broker_api_table(None)
    apis = {k: (s.advertised_min_version or s.min_version, s.max_version) for k, s in table.items()}
    return FuzzTarget("127.0.0.1", 9, apis)


@pytest.mark.parametrize("name", [n for n, a in ATTACKS.items() if issubclass(a, FrameAttack)])
def test_frames_are_deterministic_for_a_seed(name):
    def first(n: int) -> list[bytes]:
        attack = ATTACKS[name]()
        assert isinstance(attack, FrameAttack)
        frames = attack.frames(random.Random("seed"), _target())
        return [next(frames).data for _ in range(n)]

    assert first(40) == first(40)


def test_sites_are_found_in_a_request_of_every_api_and_version():
    requests = Requests(random.Random(3), _target())
    assert len(requests.choices) > 150
    for key, version in requests.choices:
        cls = messages.request_type(key, version)
        for _ in range(3):
            body = messages.encode(requests.values.build(cls))
            sites = find_sites(cls, body)  # walks the whole body or raises
            flexible = messages.is_flexible_request(key, version)
            assert all(s.compact == flexible for s in sites)
