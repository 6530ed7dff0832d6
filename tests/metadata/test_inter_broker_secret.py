"""The cluster's inter-broker secret on the embedded store and a real ZooKeeper: created
once, the same for every session, also when the first ones race, and never weakened by a
znode someone edited."""

from __future__ import annotations

import asyncio

import pytest
from metadata_helpers import Backend

from kafkalite.metadata import MetadataStore
from kafkalite.metadata.inter_broker_secret import (
    INTER_BROKER_SECRET_PATH,
    SECRET_BYTES,
    InterBrokerSecret,
    get_or_create_inter_broker_secret,
)
from kafkalite.metadata.zk_data import MetadataFormatError


async def test_the_first_caller_creates_the_secret_and_later_ones_read_it(
    store: MetadataStore,
) -> None:
    assert await store.exists(INTER_BROKER_SECRET_PATH) is None
    key = await get_or_create_inter_broker_secret(store)
    assert len(key) == SECRET_BYTES and key != bytes(SECRET_BYTES)
    raw, _ = await store.get(INTER_BROKER_SECRET_PATH)
    assert InterBrokerSecret.decode(raw).key == key
    assert raw.decode().startswith('{"version": 1, "secret": "')
    assert await get_or_create_inter_broker_secret(store) == key


async def test_concurrent_first_callers_on_separate_sessions_agree(backend: Backend) -> None:
    sessions = [await backend.connect() for _ in range(6)]
    keys = await asyncio.gather(*(get_or_create_inter_broker_secret(s) for s in sessions))
    assert len(set(keys)) == 1
    raw, stat = await sessions[0].get(INTER_BROKER_SECRET_PATH)
    assert InterBrokerSecret.decode(raw).key == keys[0]
    assert stat.version == 0  # created once, never overwritten


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b'{"version": 1}',
        b'{"version": 1, "secret": "zz"}',
        b'{"version": 1, "secret": 7}',
        b'{"version": 1, "secret": "' + b"ab" * 16 + b'"}',  # 16 bytes, not 32
    ],
)
async def test_a_malformed_secret_znode_is_an_error_not_a_weaker_key(
    store: MetadataStore, data: bytes
) -> None:
    await store.create(INTER_BROKER_SECRET_PATH, data, makepath=True)
    with pytest.raises(MetadataFormatError):
        await get_or_create_inter_broker_secret(store)
