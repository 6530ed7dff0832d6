"""``kafkalite.testing`` is the public import path; its module names are not.

The package resolves its names lazily from a name -> module map, so a module
rename that misses the map only shows when a user imports the name.
"""

from __future__ import annotations

import kafkalite.testing as testing


def test_every_public_testing_name_resolves_to_the_module_defining_it() -> None:
    assert set(testing.__all__) == {
        "AsyncBroker",
        "AsyncCluster",
        "ThreadedBroker",
        "ThreadedCluster",
        "broker",
        "cluster",
    }
    for name in testing.__all__:
        obj = getattr(testing, name)
        assert obj.__module__ == testing._EXPORTS[name], name
        assert name in dir(testing)
