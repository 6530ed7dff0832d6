from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kafkalite.testing.embedded_broker import AsyncBroker

#: short session timeouts are allowed so expiry tests take milliseconds
FAST = {"group.min.session.timeout.ms": 50}


@pytest.fixture
async def broker(tmp_path) -> AsyncIterator[AsyncBroker]:
    b = AsyncBroker(tmp_path, **FAST)
    await b.start()
    try:
        yield b
    finally:
        await b.stop()
