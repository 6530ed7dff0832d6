"""kafkalite as a test dependency: a real broker in your test process.

>>> from kafkalite.testing import broker
>>> with broker() as b:  # doctest: +SKIP
...     Producer({"bootstrap.servers": b.bootstrap_servers})

Names are imported lazily so that loading the pytest plugin stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AsyncBroker", "ThreadedBroker", "broker"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from kafkalite.testing import embedded

        return getattr(embedded, name)
    raise AttributeError(name)
