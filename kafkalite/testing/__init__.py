"""kafkalite as a test dependency: a real broker (or cluster) in your test process.

>>> from kafkalite.testing import broker, cluster
>>> with broker() as b:  # doctest: +SKIP
...     Producer({"bootstrap.servers": b.bootstrap_servers})
>>> with cluster(n=3) as c:  # doctest: +SKIP
...     c.crash(c.leader_of("orders", 0))

Names are imported lazily so that loading the pytest plugin (which imports this
package) stays cheap for suites that never start a broker.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

#: public name -> the module defining it
_EXPORTS = {
    "AsyncBroker": "kafkalite.testing.embedded_broker",
    "ThreadedBroker": "kafkalite.testing.embedded_broker",
    "broker": "kafkalite.testing.embedded_broker",
    "AsyncCluster": "kafkalite.testing.in_process_cluster",
    "ThreadedCluster": "kafkalite.testing.in_process_cluster",
    "cluster": "kafkalite.testing.in_process_cluster",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kafkalite.testing' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later look-ups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
